//! Decode throughput and frame agreement, outside the pipeline (one process, N streams):
//!
//!   decode-bench --device cpu|gpu [--streams N] [--threads T] [--width W --height H]
//!                [--color rgb|gray] [--fps F] [--dump FILE] [--compare FILE] [--dump-frames K] VIDEO...
//!
//! Decodes every VIDEO on each of N concurrent streams (threads; on the GPU each has its own
//! NVDEC session) and prints frames decoded per second of wall time. `--dump` writes the first
//! stream's frames of the first video (raw, back to back; the first K with `--dump-frames`);
//! `--compare` reads such a dump (from the other device) and prints the PSNR of this run's
//! frames against it.

use std::time::Instant;

use curator_sdk::native::NativeStage;
use curator_sdk::{Batch, Column, Output};
use curator_video::frames;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut opt = |name: &str, default: &str| -> String {
        match args.iter().position(|a| a == name) {
            Some(i) if i + 1 < args.len() => {
                let v = args.remove(i + 1);
                args.remove(i);
                v
            }
            _ => default.to_string(),
        }
    };
    let device = opt("--device", "cpu");
    let streams: usize = opt("--streams", "1").parse().expect("--streams");
    let threads = opt("--threads", "4");
    let (width, height) = (opt("--width", "48"), opt("--height", "27"));
    let color = opt("--color", "rgb");
    let fps = opt("--fps", "0");
    let dump = opt("--dump", "");
    let compare = opt("--compare", "");
    let dump_frames: usize = opt("--dump-frames", "0").parse().expect("--dump-frames");
    let params = format!(
        r#"{{"device": "{device}", "threads": {threads}, "width": {width}, "height": {height}, "color": "{color}", "fps": {fps}}}"#
    );
    let videos = args;
    let started = Instant::now();
    let results: Vec<(usize, Option<Vec<u8>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..streams)
            .map(|k| {
                let (params, videos) = (params.clone(), videos.clone());
                s.spawn(move || {
                    let mut stage = NativeStage::new::<video_decode::VideoDecode>(&params).expect("setup");
                    let (mut n, mut first) = (0usize, None);
                    for (i, v) in videos.iter().enumerate() {
                        let batch = Batch { num_rows: 1, columns: vec![Column::utf8("text", [v.as_str()])] };
                        let Output::Columns(cols) = stage.process(batch).expect("decode") else { panic!("columns expected") };
                        let b = Batch { num_rows: 1, columns: cols };
                        let f = frames::from_batch(&b).expect("frames").remove(0);
                        n += f.len();
                        if k == 0 && i == 0 {
                            first = Some(f.data);
                        }
                    }
                    (n, first)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("stream")).collect()
    });
    let secs = started.elapsed().as_secs_f64();
    let total: usize = results.iter().map(|r| r.0).sum();
    println!(
        "device {device}: {total} frames ({width}x{height} {color}) in {secs:.2} s on {streams} streams: {:.0} frames/s",
        total as f64 / secs
    );
    let mut first = results.into_iter().next().and_then(|r| r.1).unwrap_or_default();
    let frame_bytes = width.parse::<usize>().unwrap_or(0) * height.parse::<usize>().unwrap_or(0) * if color == "gray" { 1 } else { 3 };
    if dump_frames > 0 {
        first.truncate(dump_frames * frame_bytes);
    }
    if !dump.is_empty() {
        std::fs::write(&dump, &first).expect("dump");
    }
    if !compare.is_empty() {
        let other = std::fs::read(&compare).expect("compare file");
        let n = other.len().min(first.len());
        let mse = other[..n].iter().zip(&first[..n]).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum::<f64>() / n.max(1) as f64;
        let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
        println!("vs {compare}: {} of {} bytes compared, PSNR {psnr:.2} dB", n, other.len().max(first.len()));
    }
}
