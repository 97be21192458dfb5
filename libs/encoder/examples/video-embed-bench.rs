//! Times the video tower: `video-embed-bench MODEL_DIR PIXELS [ROUNDS] [cpu|gpu] [PER_PASS]`,
//! where PIXELS is raw little-endian f32 clips (`[n × frames × 3 × size × size]`, as
//! `scripts/bench-internvideo2.py` writes them). Prints each round's seconds (the model loaded
//! and, on the GPU, one warm-up pass run before the clock) and the embeddings' first values;
//! with `CHECK=N` also the GPU's largest difference and least cosine to the CPU path on the
//! first N clips, and with `DUMP=FILE` the last round's embeddings as raw f32.

use std::time::Instant;

use curator_encoder::Device;
use curator_encoder::video::VideoModel;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: video-embed-bench MODEL_DIR PIXELS [ROUNDS] [cpu|gpu] [PER_PASS]".into());
    }
    let rounds: usize = args.get(3).map(|r| r.parse()).transpose()?.unwrap_or(3);
    let device: Device = args.get(4).map(|d| d.parse()).transpose()?.unwrap_or(Device::Cpu);
    let per_pass: usize = args.get(5).map(|r| r.parse()).transpose()?.unwrap_or(8);
    let t = Instant::now();
    let model = VideoModel::load_on(std::path::Path::new(&args[1]), device, None)?;
    println!("loaded on the {} in {:.2} s: {}", model.device(), t.elapsed().as_secs_f64(), model.config.describe());
    let bytes = std::fs::read(&args[2])?;
    let pixels: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let per = model.config.pixels();
    let clips = pixels.len() / per;
    if model.device() == "gpu" {
        model.embed(&pixels[..per], per_pass)?;
    }
    let mut last = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        last = model.embed(&pixels, per_pass)?;
        let s = t.elapsed().as_secs_f64();
        let first: Vec<String> = last.iter().take(4).map(|v| format!("{v:.6}")).collect();
        println!("round {round}: {clips} clips in {s:.3} s ({:.3} clips/s); embedding[0][:4] {}", clips as f64 / s, first.join(" "));
    }
    if let Ok(path) = std::env::var("DUMP") {
        std::fs::write(path, last.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
    }
    if let Some(n) = std::env::var("CHECK").ok().and_then(|v| v.parse::<usize>().ok()) {
        let n = n.min(clips);
        let reference = model.embed_cpu(&pixels[..n * per]);
        let dim = model.config.proj_dim;
        let (mut worst, mut least) = (0f32, 1f32);
        for (a, b) in last.chunks_exact(dim).zip(reference.chunks_exact(dim)) {
            worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(worst, f32::max);
            least = least.min(a.iter().zip(b).map(|(x, y)| x * y).sum());
        }
        println!("check against the CPU path, {n} clips: largest difference {worst:.2e}, least cosine {least:.7}");
    }
    Ok(())
}
