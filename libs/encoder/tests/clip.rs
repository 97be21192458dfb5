//! CLIP vision towers on the CPU against transformers' `CLIPVisionModelWithProjection`:
//! random-weight towers at real widths (`scripts/models/clip_models.py`: tiny, B/32's and
//! L/14's with two layers), the committed test images through our preprocessing, normalised
//! embeddings compared with `tests/parity/clip_reference.json` (made from Pillow's pixels: the
//! JPEGs' decode differs by a few levels on some pixels, the rest are the same bits).

mod common;

use curator_encoder::vision::VisionModel;
use curator_image::clip::Processor;

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * y).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn cpu_embeddings_equal_transformers() {
    let text = std::fs::read_to_string(common::root().join("tests/parity/clip_reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    let images = reference["images"].as_object().unwrap();
    for name in ["clip-tiny", "clip-b32-2l", "clip-l14-2l"] {
        let Some(dir) = common::model(name) else { continue };
        let model = VisionModel::load(&dir).unwrap();
        let processor = Processor::from_dir(&dir, model.config.image_size).unwrap();
        let mut pixels = Vec::new();
        let mut px = Vec::new();
        for file in images.keys() {
            let bytes = std::fs::read(common::root().join("tests/parity/images").join(file)).unwrap();
            processor.pixel_values_into(&curator_image::decode(&bytes).unwrap(), &mut px);
            pixels.extend_from_slice(&px);
        }
        let got = model.embed_cpu(&pixels, true);
        let dim = model.config.embed_dim();
        let (mut worst, mut worst_exact) = (1f64, 1f64);
        for ((file, want), row) in images.iter().zip(got.chunks_exact(dim)) {
            let want: Vec<f64> = want["embeddings"][name].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(want.len(), dim, "{name} {file}");
            let c = cosine(row, &want);
            worst = worst.min(c);
            if !file.ends_with(".jpg") {
                worst_exact = worst_exact.min(c);
            }
        }
        println!("{name}: worst cosine {worst:.7} (same pixels as Pillow: {worst_exact:.7})");
        assert!(worst >= 0.9999, "{name}: cosine {worst}");
        assert!(worst_exact >= 0.99999, "{name}: cosine {worst_exact} on images whose pixels are Pillow's");
    }
}

/// `embed_encoded` (what `image_embedder` calls) on the CPU is the processor's pixel values
/// through `embed_cpu`, image by image in order, and names the image that does not decode.
#[test]
fn embed_encoded_on_the_cpu_is_the_pixel_path() {
    let Some(dir) = common::model("clip-tiny") else { return };
    let model = VisionModel::load(&dir).unwrap();
    let processor = Processor::from_dir(&dir, model.config.image_size).unwrap();
    let folder = common::root().join("tests/parity/images");
    let mut names: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().map(|e| e.path()).collect();
    names.sort();
    let blobs: Vec<Vec<u8>> = names.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let views: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    let pixels_of = |bytes: &[u8], i: usize| processor.pixel_values_of(bytes).map_err(|e| format!("image {i}: {e}"));
    let cpu = |i: usize| pixels_of(views[i], i);
    let got = model.embed_encoded(&views, &processor, &cpu, true, 3).unwrap();
    let pixels: Vec<f32> = (0..views.len()).flat_map(|i| cpu(i).unwrap()).collect();
    assert_eq!(got, model.embed_cpu(&pixels, true));
    assert_eq!(model.jpeg_decoding(), "CPU");
    let mut broken = views.clone();
    broken[2] = b"\xFF\xD8\xFF not a JPEG";
    let cpu_broken = |i: usize| pixels_of(broken[i], i);
    let err = model.embed_encoded(&broken, &processor, &cpu_broken, true, 3).unwrap_err();
    assert!(err.to_string().starts_with("image 2:"), "{err}");
}

/// Planning's set-up check loads a tower from its weights file's header alone (the same
/// config), and the tower refuses to run.
#[test]
fn the_set_up_check_reads_the_header_alone() {
    let Some(dir) = common::model("clip-tiny") else { return };
    let opts = curator_encoder::vision::VisionOptions {
        device: curator_encoder::Device::Cpu,
        gpu_memory_bytes: None,
        kernel_cache: None,
        check_only: true,
    };
    let hollow = VisionModel::load_with(&dir, &opts).unwrap();
    let full = VisionModel::load(&dir).unwrap();
    assert_eq!(hollow.config.embed_dim(), full.config.embed_dim());
    assert_eq!(hollow.config.image_size, full.config.image_size);
    assert!(hollow.weights.layers.len() == full.weights.layers.len() && hollow.weights.class.is_empty());
    let pixels = vec![0f32; hollow.config.pixels()];
    assert!(matches!(hollow.embed(&pixels, true, 1), Err(curator_encoder::EncoderError::CheckOnly)));
    assert!(full.embed(&pixels, true, 1).is_ok());
}
