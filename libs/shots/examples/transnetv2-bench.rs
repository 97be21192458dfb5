//! Time TransNetV2 on raw frames: `transnetv2-bench MODEL_DIR FRAMES.rgb [ROUNDS]`.
//!
//! `FRAMES.rgb` is 48×27 RGB frames back to back (`ffmpeg -i v.mp4 -s 48x27 -pix_fmt rgb24 -f
//! rawvideo v.rgb`). Prints one line per round: frames, seconds (the prediction alone, the
//! model loaded before the clock), frames/s, and the sum of the single-frame probabilities (to
//! compare runs). `RAYON_NUM_THREADS` sets the cores. Used by `scripts/bench-transnetv2.sh`.

use std::path::Path;
use std::time::Instant;

use curator_shots::{FRAME_BYTES, TransNetV2, Windows};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: transnetv2-bench MODEL_DIR FRAMES.rgb [ROUNDS]");
        std::process::exit(2);
    }
    let net = TransNetV2::load(Path::new(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
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
        println!("ours frames {n} seconds {s:.3} fps {:.1} sum {:.6}", n as f64 / s, p.single.iter().map(|&v| v as f64).sum::<f64>());
    }
}
