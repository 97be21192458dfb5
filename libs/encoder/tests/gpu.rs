//! The GPU path against the CPU reference, on the card (the CPU path is itself checked
//! against transformers by `tests/deberta.rs` and `tests/clip.rs`): DeBERTa's logits on the
//! reference texts (embeddings, the disentangled fused attention, norms, the heads) and CLIP's
//! embeddings of the committed test images (patch embedding, pre-norm layers, the on-card
//! resize of decoded images). fp16 on the card against f32 on the host: logits within 2 % of
//! the largest, with the same argmax; embeddings at cosine ≥ 0.9999 from the same pixels, ≥ 0.995
//! from JPEGs decoded on the card. Without a GPU the test says it
//! skipped (`curator_gpu::testing::gpu_or_skip`); `scripts/gpu-checks.sh` runs it on the GPU
//! machine with `CURATOR_REQUIRE_GPU=1`.

mod common;

use curator_encoder::vision::{VisionModel, VisionOptions};
use curator_encoder::{Device, Encoder, Options};
use curator_gpu::CudaLib;
use curator_image::clip::Processor;

fn on_card() -> bool {
    curator_gpu::testing::gpu_or_skip("the encoder's GPU path", &[CudaLib::Nvrtc, CudaLib::Cublas]).is_some()
}

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |a, (i, &x)| if x > a.1 { (i, x) } else { a }).0
}

#[test]
fn deberta_logits_on_the_gpu_are_the_cpu_logits() {
    if !on_card() {
        return;
    }
    let text = std::fs::read_to_string(common::root().join("tests/parity/deberta_reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let texts: Vec<&str> = reference["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for name in ["deberta-tiny-hf", "deberta-tiny-nemo"] {
        let Some(dir) = common::model(name) else { continue };
        let load = |device| Encoder::load(&dir, &Options { device, token_budget: 8192, ..Options::default() }).unwrap();
        let (cpu, gpu) = (load(Device::Cpu), load(Device::Gpu));
        assert_eq!(gpu.device(), "gpu");
        let (want, got) = (cpu.logits(&texts, None).unwrap(), gpu.logits(&texts, None).unwrap());
        let n = cpu.outputs();
        let worst = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        for (i, (w, g)) in want.chunks_exact(n).zip(got.chunks_exact(n)).enumerate() {
            assert_eq!(argmax(w), argmax(g), "{name}: text {i}: {g:?} on the GPU, {w:?} on the CPU");
        }
        // fp16 rounding grows with the logits' size: the bound is relative to the largest.
        let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
        println!("{name}: {} texts, max |Δ| {worst:.2e} (largest logit {scale:.2})", texts.len());
        assert!(worst <= 0.02 * scale, "{name}: max |Δ| {worst} against logits up to {scale}");
    }
}

#[test]
fn clip_embeddings_on_the_gpu_are_the_cpu_embeddings() {
    if !on_card() {
        return;
    }
    // clip-tiny's heads of 16 dimensions are the CPU's alone; B/32's widths with two layers.
    let Some(dir) = common::model("clip-b32-2l") else { return };
    let cpu = VisionModel::load(&dir).unwrap();
    let opts = VisionOptions { device: Device::Gpu, gpu_memory_bytes: None, kernel_cache: None, check_only: false };
    let gpu = VisionModel::load_with(&dir, &opts).unwrap();
    assert_eq!(gpu.device(), "GPU");
    let processor = Processor::from_dir(&dir, cpu.config.image_size).unwrap();
    let folder = common::root().join("tests/parity/images");
    let mut names: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().map(|e| e.path()).collect();
    names.sort();
    let blobs: Vec<Vec<u8>> = names.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let views: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let pixels_of = |i: usize| processor.pixel_values_of(views[i]).map_err(|e| format!("image {i}: {e}"));
    let pixels: Vec<f32> = (0..views.len()).flat_map(|i| pixels_of(i).unwrap()).collect();
    let want = cpu.embed_cpu(&pixels, true);
    let dim = cpu.config.embed_dim();
    // The pixels through the tower, then the encoded images resized on the card.
    for (what, got) in
        [("pixels", gpu.embed(&pixels, true, 4).unwrap()), ("encoded", gpu.embed_encoded(&views, &processor, &pixels_of, true, 4).unwrap())]
    {
        let worst = want
            .chunks_exact(dim)
            .zip(got.chunks_exact(dim))
            .map(|(a, b)| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>())
            .fold(1f64, f64::min);
        println!("clip-b32-2l ({what}): {} images, worst cosine {worst:.6}", views.len());
        // The same pixels through the tower: fp16's rounding alone. Encoded images are decoded
        // by nvJPEG on the card, whose pixels differ from the CPU decoder's by a few levels
        // (as libjpeg's differ from Pillow's, tests/clip.rs), then resized there.
        let bound = if what == "pixels" { 0.9999 } else { 0.995 };
        assert!(worst >= bound, "clip-b32-2l ({what}): cosine {worst}");
    }
}
