//! Time TransNetV2 on raw frames: `transnetv2-bench MODEL_DIR FRAMES.rgb [ROUNDS] [gpu [PER_PASS]]`.
//!
//! `FRAMES.rgb` is 48×27 RGB frames back to back (`ffmpeg -i v.mp4 -s 48x27 -pix_fmt rgb24 -f
//! rawvideo v.rgb`). Prints one line per round: frames, seconds (the prediction alone, the
//! model loaded before the clock), frames/s, and the sum of the single-frame probabilities (to
//! compare runs). `RAYON_NUM_THREADS` sets the cores; `gpu` runs the stacks on GPU 0, `PER_PASS`
//! windows at a time; `DUMP=FILE` writes the last round's probabilities (single-frame head, then
//! many-hot, f32 little-endian). Used by `scripts/bench-transnetv2.py`.

use std::path::Path;
use std::time::Instant;

use curator_shots::{FRAME_BYTES, TransNetV2, Windows};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: transnetv2-bench MODEL_DIR FRAMES.rgb [ROUNDS]");
        std::process::exit(2);
    }
    let mut net = TransNetV2::load(Path::new(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let on_gpu = args.get(4).is_some_and(|a| a == "gpu");
    if on_gpu {
        let per_pass = args.get(5).and_then(|p| p.parse().ok()).unwrap_or(16);
        let t = Instant::now();
        net.use_gpu(per_pass, None).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        println!("gpu opened in {:.3} s, {per_pass} windows a pass", t.elapsed().as_secs_f64());
    }
    let side = if on_gpu { "ours-gpu" } else { "ours" };
    let frames = std::fs::read(&args[2]).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args[2]);
        std::process::exit(1)
    });
    let rounds: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(1);
    for _ in 0..rounds {
        let t = Instant::now();
        let p = net.predict(&frames, Windows::Published).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1)
        });
        let s = t.elapsed().as_secs_f64();
        let n = frames.len() / FRAME_BYTES;
        if let Some(path) = std::env::var_os("DUMP") {
            let bytes: Vec<u8> = p.single.iter().chain(&p.many_hot).flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(&path, bytes).unwrap_or_else(|e| eprintln!("DUMP: {e}"));
        }
        println!("{side} frames {n} seconds {s:.3} fps {:.1} sum {:.6}", n as f64 / s, p.single.iter().map(|&v| v as f64).sum::<f64>());
    }
}
