//! A CLIP vision tower on a device, for a GPU machine: parity of the GPU path against the CPU
//! f32 path (itself equal to transformers, `tests/clip.rs`) on the committed test images, then
//! the speed of the embeddings and of decoding. Prints one JSON object.
//!
//!     clip-check MODEL_DIR --images DIR [--device gpu|cpu] [--count N] [--batch B] [--rounds R]
//!                [--decode DIR] [--decode-copies K] [--pixels FILE]
//!
//! Speed: N images' pixel values (the test images' in turn, the same as
//! `scripts/models/clip_bench.py` builds for PyTorch), embedded in passes of B, R rounds; the
//! clock includes cutting patches on the host, the upload, the forward pass and the copy back.
//! `--decode DIR`: every image file in DIR, K times over, decoded and preprocessed (resize,
//! crop, normalise) on all cores (rayon), timed.
//! `--pixels FILE` (with `--decode`, on the GPU): the same photos as another decoder made their
//! pixel values (little-endian f32, `[n × 3 × S × S]`, the files in name order: NeMo's GPU path,
//! `scripts/models/torch_gpu_pixels.py`), through the same tower: embeddings against ours.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use curator_encoder::Device;
use curator_encoder::vision::{VisionModel, VisionOptions};
use curator_image::clip::Processor;
use rayon::prelude::*;
use serde_json::json;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let n = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

fn files(dir: &str) -> Result<Vec<PathBuf>, std::io::Error> {
    let mut f: Vec<PathBuf> = std::fs::read_dir(dir)?.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    f.sort();
    Ok(f)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(images)) = (args.get(1).filter(|a| !a.starts_with("--")).map(PathBuf::from), arg(&args, "--images")) else {
        eprintln!("usage: clip-check MODEL_DIR --images DIR [--device gpu|cpu] [--count N] [--batch B] [--rounds R] [--decode DIR]");
        std::process::exit(2);
    };
    let num = |name: &str, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(arg(&args, name).map(|v| v.parse()).transpose()?.unwrap_or(default))
    };
    let device: Device = arg(&args, "--device").unwrap_or_else(|| "gpu".into()).parse()?;
    let (count, batch, rounds) = (num("--count", 4096)?, num("--batch", 256)?, num("--rounds", 3)?);
    let t = Instant::now();
    let model = VisionModel::load_with(&dir, &VisionOptions { device, gpu_memory_bytes: None, kernel_cache: None, check_only: false })?;
    let processor = Processor::from_dir(&dir, model.config.image_size)?;
    let mut report = json!({"model": dir.display().to_string(), "tower": model.config.describe(), "device": model.device(),
        "load_s": t.elapsed().as_secs_f64(), "batch": batch});

    // Parity: the device's embeddings against the CPU f32 path's, on the test images.
    let per = model.config.pixels();
    let mut pixels = Vec::new();
    let names = files(&images)?;
    for f in &names {
        pixels.extend(processor.pixel_values_of(&std::fs::read(f)?)?);
    }
    let dim = model.config.embed_dim();
    let got = model.embed(&pixels, true, batch)?;
    let want = model.embed_cpu(&pixels, true);
    let cos: Vec<f64> = got.chunks_exact(dim).zip(want.chunks_exact(dim)).map(|(a, b)| cosine(a, b)).collect();
    report["parity_vs_cpu_f32"] = json!({"images": names.len(), "min_cosine": cos.iter().copied().fold(1.0, f64::min),
        "mean_cosine": cos.iter().sum::<f64>() / cos.len().max(1) as f64});
    if let Some(reference) = arg(&args, "--reference") {
        versus_reference(&model, &processor, &dir, &images, &reference, batch, &mut report)?;
    }

    // Speed: the test images' pixel values in turn, `count` of them.
    let all: Vec<f32> = (0..count).flat_map(|i| pixels[(i % names.len()) * per..(i % names.len() + 1) * per].iter().copied()).collect();
    let _ = model.embed(&all[..per * batch.min(count)], true, batch)?; // warm-up
    let mut secs = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let e = model.embed(&all, true, batch)?;
        secs.push(t.elapsed().as_secs_f64());
        assert_eq!(e.len(), count * dim);
    }
    let best = secs.iter().copied().fold(f64::MAX, f64::min);
    report["embed"] = json!({"images": count, "seconds": secs, "images_per_s_best": count as f64 / best});

    let profile = model.profile();
    if !profile.is_empty() {
        report["profile_ms"] = json!(profile.into_iter().collect::<std::collections::BTreeMap<_, _>>());
    }
    if let Some(decode) = arg(&args, "--decode") {
        let copies = num("--decode-copies", 4)?;
        let blobs: Vec<Vec<u8>> = files(&decode)?.iter().map(std::fs::read).collect::<Result<_, _>>()?;
        let jobs: Vec<&Vec<u8>> = (0..copies).flat_map(|_| blobs.iter()).collect();
        let t = Instant::now();
        let done: usize = jobs
            .par_iter()
            .map_init(Vec::new, |px, b| {
                curator_image::decode(b).map(|img| {
                    processor.pixel_values_into(&img, px);
                    1
                })
            })
            .collect::<Result<Vec<usize>, _>>()?
            .into_iter()
            .sum();
        let s = t.elapsed().as_secs_f64();
        report["decode"] = json!({"images": done, "threads": rayon::current_num_threads(), "seconds": s, "images_per_s": done as f64 / s});
        if model.device() == "GPU" {
            let pixels = arg(&args, "--pixels").map(PathBuf::from);
            gpu_decode(&model, &processor, (&blobs, &jobs), pixels.as_deref(), batch, &mut report)?;
        }
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// The test images through `embed_encoded` (on the GPU: the JPEGs decoded by nvJPEG) against
/// transformers' embeddings of Pillow's pixels (`--reference`, `tests/parity/clip_reference.json`;
/// the model's directory name picks its column): the GPU path's parity end to end.
fn versus_reference(
    model: &VisionModel,
    processor: &Processor,
    dir: &std::path::Path,
    images: &str,
    reference: &str,
    batch: usize,
    report: &mut serde_json::Value,
) -> Result<(), Box<dyn std::error::Error>> {
    let reference: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reference)?)?;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(refs) = reference["images"].as_object() else { return Ok(()) };
    let (mut files, mut blobs) = (Vec::new(), Vec::new());
    for (file, r) in refs {
        if r["embeddings"][&name].is_array() {
            files.push(file.clone());
            blobs.push(std::fs::read(std::path::Path::new(images).join(file))?);
        }
    }
    if files.is_empty() {
        return Ok(());
    }
    let views: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let cpu = |i: usize| processor.pixel_values_of(views[i]).map_err(|e| e.to_string());
    let got = model.embed_encoded(&views, processor, &cpu, true, batch)?;
    let dim = model.config.embed_dim();
    let mut per_file = serde_json::Map::new();
    let (mut worst, mut worst_jpeg) = (1f64, 1f64);
    for (file, row) in files.iter().zip(got.chunks_exact(dim)) {
        let want: Vec<f32> =
            refs[file]["embeddings"][&name].as_array().into_iter().flatten().filter_map(|v| v.as_f64()).map(|v| v as f32).collect();
        let c = cosine(row, &want);
        worst = worst.min(c);
        if file.ends_with(".jpg") {
            worst_jpeg = worst_jpeg.min(c);
        }
        per_file.insert(file.clone(), json!(c));
    }
    report["parity_vs_transformers"] =
        json!({"decoder": model.jpeg_decoding(), "min_cosine": worst, "min_cosine_jpeg": worst_jpeg, "per_image": per_file});
    Ok(())
}

/// The same photos decoded and preprocessed on the GPU (nvJPEG + the resize kernels): their
/// embeddings against the ones from host-made pixel values through the same tower, the
/// preprocessing alone timed, then decode + embed timed.
fn gpu_decode(
    model: &VisionModel,
    processor: &Processor,
    (blobs, jobs): (&[Vec<u8>], &[&Vec<u8>]),
    pixels: Option<&std::path::Path>,
    batch: usize,
    report: &mut serde_json::Value,
) -> Result<(), Box<dyn std::error::Error>> {
    let cpu = |bytes: &[u8]| processor.pixel_values_of(bytes).map_err(|e| e.to_string());
    let distinct: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let host: Vec<f32> = distinct.iter().map(|b| cpu(b)).collect::<Result<Vec<_>, _>>()?.concat();
    let want = model.embed(&host, true, batch)?;
    let fallback = |i: usize| cpu(distinct[i]);
    let got = model.embed_encoded(&distinct, processor, &fallback, true, batch)?;
    let dim = model.config.embed_dim();
    let cos: Vec<f64> = got.chunks_exact(dim).zip(want.chunks_exact(dim)).map(|(a, b)| cosine(a, b)).collect();
    let worst = |cos: &[f64]| cos.iter().copied().fold(1.0, f64::min);
    report["gpu_decode_parity"] = json!({"decoder": model.jpeg_decoding(), "images": cos.len(),
        "min_cosine_vs_host_pixels": worst(&cos)});
    if let Some(path) = pixels {
        let raw = std::fs::read(path)?;
        let other: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if other.len() != host.len() {
            return Err(format!("{}: {} values, the photos' pixels are {}", path.display(), other.len(), host.len()).into());
        }
        let theirs = model.embed(&other, true, batch)?;
        let vs = |a: &[f32]| -> Vec<f64> { a.chunks_exact(dim).zip(theirs.chunks_exact(dim)).map(|(x, y)| cosine(x, y)).collect() };
        report["gpu_decode_parity"]["min_cosine_ours_gpu_vs_their_pixels"] = json!(worst(&vs(&got)));
        report["gpu_decode_parity"]["min_cosine_host_pixels_vs_their_pixels"] = json!(worst(&vs(&want)));
    }
    let all: Vec<&[u8]> = jobs.iter().map(|b| b.as_slice()).collect();
    let fallback = |i: usize| cpu(all[i]);
    model.prepare_encoded(&all[..batch.min(all.len())], processor, &fallback, batch)?; // warm-up
    let mut prep = Vec::new();
    let mut full = Vec::new();
    // Per step, milliseconds (host and device) of each kind of call (with CURATOR_ENCODER_PROFILE).
    let (mut prep_ms, mut full_ms) = (BTreeMap::new(), BTreeMap::new());
    let add = |to: &mut BTreeMap<String, f64>, before: &BTreeMap<String, f64>| {
        for (k, v) in model.profile() {
            *to.entry(k.clone()).or_default() += v - before.get(&k).copied().unwrap_or(0.0);
        }
    };
    for _ in 0..2 {
        let before: BTreeMap<String, f64> = model.profile().into_iter().collect();
        let t = Instant::now();
        model.prepare_encoded(&all, processor, &fallback, batch)?;
        prep.push(t.elapsed().as_secs_f64());
        add(&mut prep_ms, &before);
        let before: BTreeMap<String, f64> = model.profile().into_iter().collect();
        let t = Instant::now();
        let e = model.embed_encoded(&all, processor, &fallback, true, batch)?;
        full.push(t.elapsed().as_secs_f64());
        add(&mut full_ms, &before);
        assert_eq!(e.len(), all.len() * dim);
    }
    let rate = |v: &[f64]| all.len() as f64 / v.iter().copied().fold(f64::MAX, f64::min);
    report["gpu_decode"] = json!({"images": all.len(), "preprocess_seconds": prep, "preprocess_images_per_s": rate(&prep),
        "decode_and_embed_seconds": full, "decode_and_embed_images_per_s": rate(&full)});
    if !full_ms.is_empty() {
        report["gpu_decode"]["profile_ms"] = json!({"preprocess": prep_ms, "decode_and_embed": full_ms});
    }
    Ok(())
}
