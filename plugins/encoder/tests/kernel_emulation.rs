//! The GPU kernels' logic on CI, without a GPU: `tests/emulate/attention.cpp` compiles
//! `src/gpu/kernels.cu` as C++ over `tests/emulate/cuda.h` (CUDA's threads, warps and
//! `mma.m16n8k16` emulated on CPU threads) and runs the fused attention kernels, BERT's and
//! DeBERTa's with each of its position terms (and the variants that keep its content -> position
//! products from step to step, and make its position -> content ones once per block), against a
//! plain reference. It catches what
//! breaks the kernels' indexing (fragment layouts, distances, masks, the position terms'
//! scales); speed and the hardware's own rounding are the GPU machine's to check
//! (`scripts/models/gpu-deberta.sh parity`).

use std::path::Path;
use std::process::Command;

#[test]
fn the_fused_attention_kernels_match_a_plain_reference_on_emulated_warps() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let present = Command::new(&cxx).arg("--version").output().is_ok_and(|o| o.status.success());
    if !curator_test_support::require(present, format!("no C++ compiler ({cxx}) to build the kernel emulation")) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join("attention");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/emulate/attention.cpp");
    let built = Command::new(&cxx)
        .args(["-std=c++20", "-O2", "-pthread", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-Wno-sign-compare", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run the C++ compiler");
    assert!(built.status.success(), "building the emulation failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(&exe).output().expect("run the emulation");
    let report = String::from_utf8_lossy(&run.stdout);
    println!("{report}");
    assert!(run.status.success(), "a kernel differs from its reference:\n{report}{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(report.lines().filter(|l| l.ends_with(" ok")).count(), 12, "twelve cases, each within its tolerance:\n{report}");
}
