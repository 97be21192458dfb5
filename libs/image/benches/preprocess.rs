//! CLIP's preprocessing on one core: JPEG decode, then resize + centre crop + normalise, ours
//! beside Pillow's (the library transformers' `CLIPImageProcessor` resizes with) on the same
//! files in the same run.
//!
//! `cargo bench -p curator-image --bench preprocess` prints a table of milliseconds per image.
//! The photos are 1920 × 1080 JPEGs (quality 90, 4:2:0) made here: a gradient, shapes and
//! noise, `PHOTOS` of them (default 16); `DIR=path` times the JPEGs of a folder instead (e.g.
//! `scripts/models/clip_bench.py --make-photos`). Times are paired: one Python process (Pillow
//! and NumPy) is kept alive, and each pair is one pass of Pillow over every photo, timed inside
//! Python, then one of ours; the table gives medians and the median ratio of the pairs with its
//! quartiles (`PAIRS`, default 9). Rows: the decode alone (ours: zune-jpeg through the `image`
//! crate; Pillow: libjpeg-turbo), the resize alone (ours: the windowed horizontal pass, and the
//! tap-by-tap pass it replaced, in the same run; Pillow: `Image.resize(…, BICUBIC)` to the
//! shortest edge then the crop, as `CLIPImageProcessor` resizes the whole image first), and the
//! two together with the normalisation (Pillow: NumPy's rescale and mean/std as transformers
//! computes them). Pillow is skipped when python3 cannot import PIL and numpy.

use std::process::Command;
use std::time::{Duration, Instant};

use curator_image::Rgb8;
use curator_image::clip::Processor;
use curator_test_support::{PythonServer, quartiles};

const PILLOW: &str = r#"
import sys, time, io
import numpy as np
from PIL import Image
MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)
blobs = [open(p, "rb").read() for p in sys.argv[1:]]
def decode(b):
    im = Image.open(io.BytesIO(b)); im.load()
    return im.convert("RGB")
decoded = [decode(b) for b in blobs]
def resize(im, size=224):
    w, h = im.size
    nw, nh = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    im = im.resize((nw, nh), Image.BICUBIC)
    left, top = (nw - size) // 2, (nh - size) // 2
    return im.crop((left, top, left + size, top + size))
def normalise(im):
    x = np.asarray(im).astype(np.float64) * (1 / 255)
    return ((x.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)
steps = {"decode": lambda: [decode(b) for b in blobs],
         "resize": lambda: [resize(im) for im in decoded],
         "all": lambda: [normalise(resize(decode(b))) for b in blobs]}
for line in sys.stdin:
    t = time.perf_counter()
    steps[line.strip()]()
    print(time.perf_counter() - t, flush=True)
"#;

/// A photo-like 1920 × 1080 image: a gradient, rectangles, noise (deterministic per `seed`).
fn photo(seed: u32) -> Vec<u8> {
    let (w, h) = (1920u32, 1080u32);
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    };
    let (a, b) = ([next() as u8, next() as u8, next() as u8], [next() as u8, next() as u8, next() as u8]);
    let mut img = image::RgbImage::from_fn(w, h, |x, y| {
        let t = (x as f32 / w as f32 + y as f32 / h as f32) / 2.0;
        image::Rgb(std::array::from_fn(|c| (f32::from(a[c]) * (1.0 - t) + f32::from(b[c]) * t) as u8))
    });
    for _ in 0..40 {
        let (x0, y0) = (next() % w, next() % h);
        let (x1, y1) = ((x0 + 20 + next() % (w / 3)).min(w), (y0 + 20 + next() % (h / 3)).min(h));
        let fill = [next() as u8, next() as u8, next() as u8];
        for y in y0..y1 {
            for x in x0..x1 {
                img.put_pixel(x, y, image::Rgb(fill));
            }
        }
    }
    for p in img.pixels_mut() {
        for c in p.0.iter_mut() {
            *c = c.saturating_add((next() % 24) as u8).saturating_sub(12);
        }
    }
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90).encode_image(&img).expect("encode");
    out
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let files: Vec<std::path::PathBuf> = match std::env::var_os("DIR") {
        Some(dir) => {
            let mut f: Vec<_> = std::fs::read_dir(&dir)
                .expect("DIR")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg")))
                .collect();
            f.sort();
            f
        }
        None => {
            let n: u32 = std::env::var("PHOTOS").ok().and_then(|n| n.parse().ok()).unwrap_or(16);
            (0..n)
                .map(|i| {
                    let path = tmp.path().join(format!("photo-{i:03}.jpg"));
                    std::fs::write(&path, photo(i)).expect("write");
                    path
                })
                .collect()
        }
    };
    let blobs: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).expect("read")).collect();
    let decoded: Vec<Rgb8> = blobs.iter().map(|b| curator_image::decode(b).expect("decode")).collect();
    let processor = Processor::clip(224);
    let table = processor.table();
    let plans: Vec<_> = decoded.iter().map(|img| processor.plan(img.width, img.height).expect("a plan")).collect();
    let (w, h) = (decoded[0].width, decoded[0].height);
    let pairs: usize = std::env::var("PAIRS").ok().and_then(|n| n.parse().ok()).unwrap_or(9).max(1);
    let per = |d: Duration| d.as_secs_f64() * 1e3 / blobs.len() as f64;

    let decode = || decoded_all(&blobs);
    let windows = || {
        let mut out = Vec::new();
        for (img, plan) in decoded.iter().zip(&plans) {
            plan.apply(img, &table, &mut out);
            std::hint::black_box(&out);
        }
    };
    let taps = || {
        for (img, plan) in decoded.iter().zip(&plans) {
            let mut tmp = vec![0u8; plan.rows * plan.out_width * 3];
            plan.horizontal_taps(img, &mut tmp);
            std::hint::black_box(&tmp);
        }
    };
    let horizontal = || {
        for (img, plan) in decoded.iter().zip(&plans) {
            std::hint::black_box(plan.horizontal_pass(img));
        }
    };
    let all = || {
        for b in &blobs {
            std::hint::black_box(processor.pixel_values_of(b).expect("preprocess"));
        }
    };
    type Row<'a> = (&'a str, Option<&'a str>, &'a dyn Fn());
    let rows: [Row; 5] = [
        ("decode (zune-jpeg; Pillow: libjpeg-turbo)", Some("decode"), &decode),
        ("resize + crop + normalise (windows)", Some("resize"), &windows),
        ("horizontal pass: windows", None, &horizontal),
        ("horizontal pass: tap by tap (before)", None, &taps),
        ("decode + resize + crop + normalise", Some("all"), &all),
    ];
    let pillow_ok = Command::new("python3").args(["-c", "import PIL, numpy"]).output().is_ok_and(|o| o.status.success());
    let args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    let mut pillow = if pillow_ok { PythonServer::start(PILLOW, &args) } else { None };
    if pillow.is_none() {
        println!("Pillow skipped: python3 cannot import PIL and numpy (pip install pillow numpy)");
    }
    println!(
        "{} JPEGs of {w} x {h} ({} KB on average) to CLIP's 224 x 224 input, one core; {pairs} pairs (Pillow, then ours) per row, interleaved; ms per image, medians; ratio: Pillow / ours, median of the pairs [quartiles]",
        blobs.len(),
        blobs.iter().map(Vec::len).sum::<usize>() / blobs.len() / 1024
    );
    let mut out = comfy_table::Table::new();
    out.load_style(comfy_table::presets::ASCII_MARKDOWN).set_header(["step", "ours ms", "Pillow ms", "Pillow / ours"]);
    for (name, step, run) in rows {
        run();
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..pairs {
            let base = match (step, pillow.as_mut()) {
                (Some(s), Some(p)) => p.time(s),
                _ => None,
            };
            let own = timed(run);
            ours.push(per(own));
            if let Some(base) = base {
                theirs.push(per(base));
                ratios.push(base.as_secs_f64() / own.as_secs_f64());
            }
        }
        let (pillow_ms, ratio) = if ratios.is_empty() {
            ("–".to_string(), "–".to_string())
        } else {
            let (lo, mid, hi) = quartiles(&mut ratios);
            (format!("{:.2}", quartiles(&mut theirs).1), format!("{mid:.2}x [{lo:.2}–{hi:.2}]"))
        };
        out.add_row([name.to_string(), format!("{:.2}", quartiles(&mut ours).1), pillow_ms, ratio]);
    }
    println!("{out}");
}

fn decoded_all(blobs: &[Vec<u8>]) {
    for b in blobs {
        std::hint::black_box(curator_image::decode(b).expect("decode"));
    }
}
