//! The GPU kernels' logic on CI, without a GPU. `tests/emulate/attention.cpp` compiles
//! `src/gpu/kernels.cu` as C++ over `tests/emulate/cuda.h` (CUDA's threads, warps and
//! `mma.m16n8k16` emulated on CPU threads) and runs the fused attention kernels, BERT's and
//! DeBERTa's with each of its position terms (and the variants that keep its content -> position
//! products from step to step, and make its position -> content ones once per block), against a
//! plain reference; `tests/emulate/norms.cpp` the layer-norm kernels; `tests/emulate/resize.cpp`
//! the image path's preprocessing kernels, whose patches must equal curator-image's CPU path bit
//! for bit. They catch what breaks the kernels' indexing (fragment layouts, distances, masks,
//! the position terms' scales, rows and widths); speed and the hardware's own rounding are the GPU machine's to check
//! (`scripts/models/gpu-deberta.sh parity`).

use std::path::Path;
use std::process::Command;

/// `tests/emulate/<source>` built into an executable (in a directory that lives as long as the
/// returned guard); `None` where no C++ compiler is found outside CI (the test is skipped).
fn build(source: &str) -> Option<Built> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let present = Command::new(&cxx).arg("--version").output().is_ok_and(|o| o.status.success());
    if !curator_test_support::require(present, format!("no C++ compiler ({cxx}) to build the kernel emulation")) {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join(source.trim_end_matches(".cpp"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/emulate").join(source);
    let built = Command::new(&cxx)
        .args(["-std=c++20", "-O2", "-pthread", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-Wno-sign-compare", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run the C++ compiler");
    assert!(built.status.success(), "building {source} failed:\n{}", String::from_utf8_lossy(&built.stderr));
    Some(Built { _dir: dir, exe })
}

/// An emulation executable and the directory it was built in.
struct Built {
    _dir: tempfile::TempDir,
    exe: std::path::PathBuf,
}

impl std::ops::Deref for Built {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.exe
    }
}

/// Run a self-checking emulation (`source` prints a line per case, ending in ` ok` or
/// ` FAILED`, and exits non-zero on a failure) and require `cases` cases, all within tolerance.
fn self_checked(source: &str, cases: usize, args: &[&Path]) {
    let Some(exe) = build(source) else { return };
    let run = Command::new(&*exe).args(args).output().expect("run the emulation");
    let report = String::from_utf8_lossy(&run.stdout);
    println!("{report}");
    assert!(run.status.success(), "{source}: a kernel differs from its reference:\n{report}{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(report.lines().filter(|l| l.ends_with(" ok")).count(), cases, "{source}: {cases} cases, each within tolerance:\n{report}");
}

#[test]
fn the_fused_attention_kernels_match_a_plain_reference_on_emulated_warps() {
    // The relative embeddings in the order the host uploads them: `fragment_order` of a row of
    // indices, for heads of 32 and of 64.
    let dir = tempfile::tempdir().expect("tempdir");
    let orders: Vec<String> = [32usize, 64]
        .iter()
        .map(|&dh| {
            let order = curator_encoder::gpu::fragment_order(&(0..dh).map(|i| i as f32).collect::<Vec<_>>());
            order.iter().map(|&i| (i as usize).to_string()).collect::<Vec<_>>().join(" ")
        })
        .collect();
    std::fs::write(dir.path().join("orders"), orders.join("\n")).expect("write the orders");
    self_checked("attention.cpp", 12, &[&dir.path().join("orders")]);
}

/// The layer-norm kernels (block and warp per row; the post-norm residual stream in f32 and the
/// pre-norm towers' fp16 add) against layer norm in double, at four widths from 128 to 1024.
#[test]
fn the_layer_norm_kernels_match_a_plain_reference_on_emulated_threads() {
    self_checked("norms.cpp", 4, &[]);
}

/// The GPU image path's preprocessing (`resize_rows`, `resize_patches`) on emulated threads, from
/// images and plans laid out by `vision::jpeg::prep_layout` as the device gets them, gives the patch
/// rows of curator-image's CPU path bit for bit (as fp16): the taps restricted to the crop, the
/// table, the patch order, the class token's row and the padding rows and columns.
#[test]
fn the_resize_kernels_give_the_cpu_plans_patches_bit_for_bit() {
    let Some(exe) = build("resize.cpp") else { return };
    let (side, patch) = (28usize, 14usize);
    let processor = curator_image::clip::Processor::clip(side);
    let table = processor.table();
    let grid = side / patch;
    let (tokens, rows_per_image, k) = (1 + grid * grid, 8usize, 3 * patch * patch + 12);
    let sizes = [(97usize, 61usize), (61, 97), (300, 40), (28, 28), (240, 135), (29, 300), (97, 61)];
    let mut rng = curator_test_support::Xorshift::new(11);
    let (mut raw, mut plans, mut expected) = (Vec::<u8>::new(), Vec::new(), Vec::<u16>::new());
    for &(w, h) in &sizes {
        let img = curator_image::Rgb8 { width: w, height: h, data: (0..w * h * 3).map(|_| rng.next_u64() as u8).collect() };
        let plan = processor.plan(w, h).expect("a plan");
        raw.extend(&img.data);
        // The CPU path's values ([3 × side × side]) as the tower's patch rows, in fp16.
        let mut px = Vec::new();
        plan.apply(&img, &table, &mut px);
        let mut rows = vec![0u16; rows_per_image * k];
        for p in 0..grid * grid {
            for col in 0..3 * patch * patch {
                let (c, rem) = (col / (patch * patch), col % (patch * patch));
                let (y, x) = ((p / grid) * patch + rem / patch, (p % grid) * patch + rem % patch);
                rows[(1 + p) * k + col] = half::f16::from_f32(px[c * side * side + y * side + x]).to_bits();
            }
        }
        expected.extend(rows);
        plans.push(plan);
    }
    // What the device gets: the production layout of descriptors and taps.
    let layout = curator_encoder::vision::jpeg::prep_layout(plans.iter().enumerate(), side).expect("plans of the crop's size");
    assert_eq!(layout.raw_bytes, raw.len());
    let (desc, coef, tmp_at) = (layout.desc, layout.coef, layout.tmp_bytes);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut input = Vec::new();
    let head = [sizes.len(), side, patch, rows_per_image, tokens, k, raw.len(), tmp_at, coef.len()];
    head.iter().for_each(|&v| input.extend((v as i64).to_le_bytes()));
    desc.iter().for_each(|v| input.extend(v.to_le_bytes()));
    coef.iter().for_each(|v| input.extend(v.to_le_bytes()));
    table.iter().for_each(|v| input.extend(v.to_le_bytes()));
    input.extend(&raw);
    std::fs::write(dir.path().join("in"), &input).expect("write the input");
    let run = Command::new(&*exe).arg(dir.path().join("in")).arg(dir.path().join("out")).output().expect("run the emulation");
    assert!(run.status.success(), "the emulation failed: {}", String::from_utf8_lossy(&run.stderr));
    let out = std::fs::read(dir.path().join("out")).expect("read the output");
    let got: Vec<u16> = out.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        let (image, row, col) = (i / (rows_per_image * k), i / k % rows_per_image, i % k);
        assert_eq!(g, e, "image {image} ({:?}), patch row {row}, column {col}", sizes[image]);
    }
}
