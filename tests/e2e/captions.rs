//! Video captions end to end: `video_decode` → `clip_split` → `caption` (NeMo's windows and
//! frames, sent to a served model) → `llm_generate` with NeMo's caption-enhancement prompt →
//! `clip_preview` (WebP), through the real binary on FFmpeg-made videos. The model server is
//! `servers/vlm_recorder.py`, a real HTTP server the host starts as a service, which answers
//! with what it was shown (how many frames, of what size) and records every request: the
//! test checks what a vision model would get, not what it would say (CI has no such model;
//! the GPU run with vLLM is in docs/src/served-models.md).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::*;

fn plugins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| native_plugins_dir("caption-plugins", &["video_decode", "caption", "llm_generate", "clip_preview"]))
}

fn pipeline(dir: &Path, log: &Path, caption_params: &str) -> PathBuf {
    let server = root().join("tests/e2e/servers/vlm_recorder.py");
    let videos = crate::video::videos();
    write_pipeline(
        dir,
        &format!(
            r#"services:
  vlm:
    command: ["python3", "{}", "{{port}}", "{}"]
    resources: {{cpus: 1}}
    startup_timeout_s: 60
source: {{path: {}, format: video, file_extensions: [.mp4]}}
stages:
  - plugin: video_decode
    params: {{device: cpu, fps: 0, width: 64, height: 48}}
    resources: {{gpu_memory_gb: 0}}
  - plugin: clip_split
    params: {{method: fixed, clip_len_s: 10, stride_s: 10, min_clip_s: 0.5}}
  - plugin: caption
    service: vlm
    params: {{{caption_params}}}
  - plugin: llm_generate
    service: vlm
    params: {{preset: caption_enhancement, input_field: caption}}
  - plugin: clip_preview
    grants: {{previews: {{path: previews, writable: true}}}}
sink: {{path: out, mode: overwrite}}
"#,
            server.display(),
            log.display(),
            videos.display(),
        ),
    )
}

fn run(p: &Path, cache: &Path) -> Run {
    host()
        .env("CURATOR_CACHE_DIR", cache)
        .arg("run")
        .arg(p)
        .arg("--plugins")
        .arg(guests_dir())
        .arg("--plugins")
        .arg(plugins())
        .output()
        .expect("cannot start curator-host")
        .into()
}

fn requests(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Every output row, by clip and window.
fn windows(out: &Path) -> Vec<serde_json::Value> {
    let mut rows = crate::video::rows(out);
    rows.sort_by_key(|r| (r["id"].as_str().unwrap_or_default().to_string(), r["window_index"].as_i64()));
    rows
}

#[test]
fn clips_are_captioned_window_by_window_enhanced_and_previewed() {
    if !needs(Need::Ffmpeg) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let p = pipeline(dir.path(), &log, "window_size: 64, remainder_threshold: 32");
    let r = run(&p, &dir.path().join("cache"));
    r.ok();
    let rows = windows(&dir.path().join("out"));
    // scenes.mp4 (11 s at 30 fps) → clips of 300 and 30 frames; still.mp4 (4 s) → 120 frames.
    // Windows of 64, a remainder of ≥ 32 its own: 300 → 0-63 … 192-255, 256-299 (5); 30 → one;
    // 120 → 0-63, 64-119 (2).
    let spans: Vec<(i64, i64)> =
        rows.iter().map(|w| (w["window_start_frame"].as_i64().unwrap(), w["window_end_frame"].as_i64().unwrap())).collect();
    assert_eq!(spans, [(0, 63), (64, 127), (128, 191), (192, 255), (256, 299), (0, 29), (0, 63), (64, 119)], "{rows:#?}");
    for w in &rows {
        // 64 frames at 30 fps sampled at 2 fps: 4.3 → 4 (NeMo's smallest); 44 → 4; 30 → 4.
        // Each 64 × 48 frame sized as Qwen-VL sizes it: up to 128 × 28 × 28 pixels → 392 × 280.
        let caption = w["caption"].as_str().unwrap();
        assert!(caption.starts_with("4 frames 392x280 #"), "{w}");
        assert_eq!(w["enhanced_caption"].as_str().unwrap(), format!("enhanced: {caption}"), "{w}");
        assert_eq!(w["llm_completion_tokens"], 3);
        assert!(w.get("frames").is_none(), "frame columns are not written");
        assert!(w["window_end_s"].as_f64().unwrap() > w["window_start_s"].as_f64().unwrap());
        // A preview per window: an animated WebP at 1 fps, 240 px high.
        let webp = std::fs::read(w["preview_path"].as_str().unwrap()).unwrap();
        assert_eq!((&webp[..4], &webp[8..12]), (&b"RIFF"[..], &b"WEBP"[..]));
        let frames = webp.windows(4).filter(|c| c == b"ANMF").count();
        let (start, end) = (w["window_start_s"].as_f64().unwrap(), w["window_end_s"].as_f64().unwrap());
        if w["video_id"] == "still.mp4" || start >= 8.0 {
            // A still card, scenes.mp4's grey stretch: libwebp merges identical frames into one,
            // and one frame is written as a still WebP.
            assert!(frames == 0 && webp.windows(4).any(|c| c == b"VP8 "), "{w}");
        } else {
            assert_eq!(frames, (end - start).floor() as usize + 1, "{w}");
        }
    }
    assert!(temp_leftovers(&dir.path().join("previews")).is_empty());

    // What the server was sent: per window one video part (4 JPEG frames) then NeMo's default
    // prompt, with NeMo's sampling; per caption NeMo's enhancement system prompt and the caption.
    let sent = requests(&log);
    let (videos, texts): (Vec<_>, Vec<_>) = sent.iter().partition(|q| q["frames"].as_u64().unwrap() > 0);
    // Each distinct request asked once: the still card's two windows show identical frames,
    // so one request (and one caption, one enhancement) serves both, from the cache.
    let distinct: std::collections::BTreeSet<&str> = rows.iter().map(|w| w["caption"].as_str().unwrap()).collect();
    assert_eq!(distinct.len(), 7, "{distinct:?}");
    assert_eq!((videos.len(), texts.len()), (7, 7));
    for q in &videos {
        assert_eq!(q["parts"], serde_json::json!(["video_url", "text"]));
        assert_eq!(q["texts"][0].as_str().unwrap().trim(), "Elaborate on the visual and narrative elements of the video in detail.");
        assert_eq!((q["max_tokens"].as_u64(), q["temperature"].as_f64(), q["top_p"].as_f64()), (Some(512), Some(0.1), Some(0.001)));
        assert_eq!(q["repetition_penalty"].as_f64(), Some(1.05));
    }
    for q in &texts {
        assert_eq!(q["roles"], serde_json::json!(["system", "user"]));
        assert!(q["texts"][0].as_str().unwrap().contains("You are a chatbot that enhances video caption inputs"));
    }
    // The run's usage totals are the server's (10 a frame and 1, 3 an answer).
    assert!(r.stdout.contains("caption: llm_completion_tokens 24, llm_prompt_tokens 328"), "{}", r.stdout);

    // A rerun asks nothing again: every answer is in the cache.
    run(&p, &dir.path().join("cache")).ok();
    assert_eq!(requests(&log).len(), 14);
    assert_eq!(windows(&dir.path().join("out")).len(), 8);
}

#[test]
fn frames_go_as_images_when_asked_and_a_bad_variant_is_a_planning_error() {
    if !needs(Need::Ffmpeg) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let p = pipeline(dir.path(), &log, "frames_as: images, prompt_text: \"What happens?\", window_size: 400");
    run(&p, &dir.path().join("cache")).ok();
    let sent = requests(&log);
    let shown: Vec<&serde_json::Value> = sent.iter().filter(|q| q["frames"].as_u64().unwrap() > 0).collect();
    // One window a clip (all ≤ 400 frames): 300 frames at 30 fps → 20; 120 → 8; 30 → 4.
    let mut counts: Vec<u64> = shown.iter().map(|q| q["frames"].as_u64().unwrap()).collect();
    counts.sort();
    assert_eq!(counts, [4, 8, 20]);
    for q in &shown {
        let n = q["frames"].as_u64().unwrap() as usize;
        assert_eq!(q["parts"].as_array().unwrap().len(), n + 1);
        assert!(q["parts"].as_array().unwrap()[..n].iter().all(|p| p == "image_url"));
        assert_eq!(q["texts"], serde_json::json!(["What happens?"]));
    }

    let bad = std::fs::read_to_string(&p).unwrap().replace("frames_as: images", "frames_as: gif");
    std::fs::write(&p, bad).unwrap();
    let r = run(&p, &dir.path().join("cache"));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("frames_as"), "{}", r.stderr);
}

#[test]
fn clips_too_short_for_a_window_are_dropped_and_counted_or_kept_uncaptioned() {
    if !needs(Need::Ffmpeg) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let p = pipeline(dir.path(), &log, "window_size: 64");
    // Clips of 0.08 s: 3 frames at 30 fps, one fewer than a window needs.
    let short = std::fs::read_to_string(&p).unwrap().replace(
        "{method: fixed, clip_len_s: 10, stride_s: 10, min_clip_s: 0.5}",
        "{method: fixed, clip_len_s: 0.08, stride_s: 2, min_clip_s: 0.05}",
    );
    std::fs::write(&p, &short).unwrap();
    let r = run(&p, &dir.path().join("cache"));
    r.ok();
    assert!(r.stderr.contains("clip(s) of fewer than 4 frames have no window: dropped"), "{}", r.stderr);
    assert!(windows(&dir.path().join("out")).is_empty());
    assert!(requests(&log).is_empty(), "nothing asked");

    std::fs::write(&p, short.replace("window_size: 64", "window_size: 64, drop_short: false")).unwrap();
    let r = run(&p, &dir.path().join("cache"));
    r.ok();
    let rows = windows(&dir.path().join("out"));
    // scenes.mp4: clips at 0, 2, … 10 s (6); still.mp4: 0 and 2 s (2).
    assert_eq!(rows.len(), 8, "{rows:#?}");
    assert!(rows.iter().all(|w| w["window_index"] == -1 && w["caption"] == "" && w["preview_path"] == ""), "{rows:#?}");
    // The enhancement is asked for each empty caption (once: the cache), the captioner never.
    assert!(requests(&log).iter().all(|q| q["frames"] == 0));
}

#[test]
fn the_shipped_caption_example_runs_with_its_services_swapped_for_the_recorder() {
    if !needs(Need::Ffmpeg) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let shipped = std::fs::read_to_string(root().join("examples/video/caption.yaml")).unwrap();
    // Its two vLLM services become the recorder (no GPU here); everything else as shipped.
    let (head, rest) = shipped.split_once("services:\n").unwrap();
    let (_, tail) = rest.split_once("source:\n").unwrap();
    let server = root().join("tests/e2e/servers/vlm_recorder.py");
    let service =
        format!("    command: [\"python3\", \"{}\", \"{{port}}\", \"{}\"]\n    resources: {{cpus: 1}}\n", server.display(), log.display());
    let yaml = format!("{head}services:\n  vlm:\n{service}  writer:\n{service}source:\n{tail}")
        .replace("  path: videos\n", &format!("  path: {}\n", crate::video::videos().display()))
        .replace("params: {device: auto,", "resources: {gpu_memory_gb: 0}\n    params: {device: cpu,");
    let p = write_pipeline(dir.path(), &yaml);
    run(&p, &dir.path().join("cache")).ok();
    let rows = windows(&dir.path().join("out/captions"));
    // 10 s clips at 30 fps (the last second of scenes.mp4 is under clip_split's 2 s), decoded
    // whole: scenes.mp4 → 300 frames (one window: the 44 past 256 are under 128), still.mp4 →
    // 120. At 2 fps: 20 and 8 frames, sent at 448 × 252.
    let captions: Vec<&str> = rows.iter().map(|w| w["caption"].as_str().unwrap()).collect();
    assert_eq!(captions.len(), 2, "{rows:#?}");
    for (c, n) in captions.iter().zip(["20", "8"]) {
        assert!(c.starts_with(&format!("{n} frames 448x252 #")), "{c}");
    }
    assert!(rows.iter().all(|w| w["enhanced_caption"].as_str().unwrap().starts_with("enhanced: ")));
    assert!(rows.iter().all(|w| std::path::Path::new(w["preview_path"].as_str().unwrap()).starts_with(dir.path().join("out/previews"))));
}
