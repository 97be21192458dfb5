//! InternVideo2's vision tower on the CPU against InternVideo2's own PyTorch code
//! (`tests/parity/internvideo2_reference.json`, written by
//! `scripts/models/internvideo2_reference.py` from OpenGVLab/InternVideo's `PretrainInternVideo2`
//! and `vision_proj`): a clip of real footage made into the input as NeMo Curator makes it (the
//! resized frames byte for byte against `cv2.resize`), then the embedding within cosine 0.9999
//! and 1e-4 per value, for a small tower and one of the 1B model's widths (two blocks instead of
//! forty). The published weights are gated, so both sides fill every tensor from its name by
//! the same counter-based rule (the JSON lists the tensors, their shapes and ranges).
//!
//! Needs `target/models/transnetv2/sample.mp4` (`python3 scripts/models/fetch.py`) and `ffmpeg`.

use std::path::{Path, PathBuf};
use std::process::Command;

use curator_encoder::video::{VideoModel, frames};
use curator_image::Rgb8;
use curator_test_support::{SeededTensor, require, write_seeded_safetensors};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A model directory with the tower's config and its seeded weights.
fn model_dir(tower: &Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), serde_json::to_string(&tower["config"]).unwrap()).unwrap();
    let tensors: Vec<SeededTensor> = tower["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| SeededTensor {
            name: t["name"].as_str().unwrap().to_string(),
            shape: t["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect(),
            centre: t["centre"].as_f64().unwrap(),
            scale: t["scale"].as_f64().unwrap(),
        })
        .collect();
    write_seeded_safetensors(&dir.path().join("model.safetensors"), &tensors).unwrap();
    dir
}

#[test]
fn embeddings_equal_internvideo2s_own_code_on_real_footage() {
    let sample = root().join("target/models/transnetv2/sample.mp4");
    if !require(sample.exists(), "target/models/transnetv2/sample.mp4 is missing: python3 scripts/models/fetch.py")
        || !require(Command::new("ffmpeg").arg("-version").output().is_ok(), "ffmpeg is not installed")
    {
        return;
    }
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("tests/parity/internvideo2_reference.json")).unwrap()).unwrap();
    let args: Vec<String> = reference["ffmpeg_prefix"]
        .as_array()
        .unwrap()
        .iter()
        .chain(reference["ffmpeg"].as_array().unwrap())
        .map(|a| a.as_str().unwrap().replace("{sample}", &sample.display().to_string()))
        .collect();
    let out = Command::new(&args[0]).args(&args[1..]).output().expect("ffmpeg runs");
    assert!(out.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        format!("{:x}", Sha256::digest(&out.stdout)),
        reference["frames_sha256"].as_str().unwrap(),
        "FFmpeg made other frames than the reference's (another FFmpeg version?), so the embeddings cannot be compared"
    );
    let (w, h) = (reference["frame_width"].as_u64().unwrap() as usize, reference["frame_height"].as_u64().unwrap() as usize);
    let clip: Vec<Rgb8> = out.stdout.chunks_exact(w * h * 3).map(|f| Rgb8 { width: w, height: h, data: f.to_vec() }).collect();
    assert_eq!(clip.len() as u64, reference["frames"].as_u64().unwrap());
    for tower in reference["towers"].as_array().unwrap() {
        let name = tower["name"].as_str().unwrap();
        let dir = model_dir(tower);
        let model = VideoModel::load(dir.path()).unwrap();
        let picked = frames::pick(clip.len(), model.config.num_frames).unwrap();
        let mut resized = Sha256::new();
        for &i in &picked {
            resized.update(&frames::resized(&model.config, &clip[i]).data);
        }
        assert_eq!(
            format!("{:x}", resized.finalize()),
            tower["resized_sha256"].as_str().unwrap(),
            "{name}: the resized frames differ from cv2.resize's"
        );
        let pixels = frames::pixels(&model.config, &clip).unwrap();
        let sum: f64 = pixels.iter().map(|&v| f64::from(v)).sum();
        let want_sum = tower["pixels_sum"].as_f64().unwrap();
        assert!((sum - want_sum).abs() <= 1e-6 * want_sum.abs().max(1.0) * 10.0, "{name}: pixel sum {sum} vs {want_sum}");
        let ours = model.embed(&pixels, 8).unwrap();
        let theirs: Vec<f32> = tower["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_eq!(ours.len(), theirs.len(), "{name}: embedding width");
        let cosine: f32 = ours.iter().zip(&theirs).map(|(a, b)| a * b).sum();
        let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("{name}: cosine {cosine:.7}, largest difference {worst:.2e} ({})", model.config.describe());
        assert!(cosine >= 0.9999, "{name}: cosine {cosine} to InternVideo2's embedding");
        assert!(worst <= 1e-4, "{name}: a value differs by {worst} from InternVideo2's");
    }
}

#[test]
fn a_missing_or_misshapen_tensor_is_refused_naming_the_file_and_the_tensor() {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("tests/parity/internvideo2_reference.json")).unwrap()).unwrap();
    let mut tower = reference["towers"][0].clone();
    tower["tensors"].as_array_mut().unwrap().retain(|t| t["name"] != "vision_encoder.blocks.1.ls2.gamma");
    let dir = model_dir(&tower);
    let err = VideoModel::check(dir.path()).err().expect("refused").to_string();
    assert!(err.contains("model.safetensors") && err.contains("blocks.1.ls2.gamma"), "{err}");
    let mut tower = reference["towers"][0].clone();
    tower["config"]["num_frames"] = 8.into();
    let err = VideoModel::check(model_dir(&tower).path()).err().expect("refused").to_string();
    assert!(err.contains("pos_embed") && err.contains("shape"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = VideoModel::check(empty.path()).err().expect("refused").to_string();
    assert!(err.contains("config.json"), "{err}");
}
