//! Images end to end: WebDataset shards made here from the committed test images
//! (`tests/parity/images/`), read by the real binary, written back sample by sample; samples
//! that are not images, have none or are cut short go to `_rejected/` with their offsets; then
//! NeMo Curator's image pipeline (CLIP embeddings, the aesthetic and NSFW filters) on the CPU
//! with random-weight models whose scores `tests/parity/clip_reference.json` holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::*;

/// `(path, bytes)` members of a tar file, in order.
fn members(path: &Path) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut archive = tar::Archive::new(std::fs::File::open(path).unwrap());
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (e.path().unwrap().to_string_lossy().into_owned(), data)
        })
        .collect()
}

fn tar_of(path: &Path, members: &[(String, Vec<u8>)]) -> Vec<u64> {
    let mut b = tar::Builder::new(Vec::new());
    let mut offsets = Vec::new();
    for (name, data) in members {
        offsets.push(b.get_ref().len() as u64);
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    std::fs::write(path, b.into_inner().unwrap()).unwrap();
    offsets
}

fn images() -> BTreeMap<String, Vec<u8>> {
    let dir = root().join("tests/parity/images");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// A shard of every test image as a sample (`s/NNNN.<ext>`, `.json`, `.txt`, a `.cls` on
/// some), plus the defective samples; returns the good samples' keys by image name and the
/// defective samples' header offsets.
fn shard(path: &Path) -> (BTreeMap<String, String>, Vec<u64>) {
    let mut m = Vec::new();
    let mut keys = BTreeMap::new();
    for (i, (name, data)) in images().into_iter().enumerate() {
        let key = format!("s/{i:04}");
        let ext = name.rsplit('.').next().unwrap();
        m.push((format!("{key}.{ext}"), data));
        m.push((format!("{key}.json"), format!("{{\"url\": \"http://img.example/{name}\", \"width\": {i}}}").into_bytes()));
        m.push((format!("{key}.txt"), format!("a picture called {name}").into_bytes()));
        if i % 3 == 0 {
            m.push((format!("{key}.cls"), format!("{i}").into_bytes()));
        }
        keys.insert(name, key);
    }
    m.push(("s/README".into(), b"no extension: skipped".to_vec()));
    let defects = [
        ("s/9001.json", b"{\"url\": \"no image here\"}".to_vec()),
        ("s/9002.jpg", b"<html>not found</html>".to_vec()),
        ("s/9003.png", images()["small-120x90.png"][..4000].to_vec()),
    ];
    let first = m.len();
    m.extend(defects.iter().map(|(n, d)| (n.to_string(), d.clone())));
    let offsets = tar_of(path, &m);
    (keys, offsets[first..].to_vec())
}

/// A temporary directory holding `shards/00000.tar` (see [`shard`]), the good samples' keys by
/// image name, and the defective samples' offsets.
fn with_shard() -> (tempfile::TempDir, BTreeMap<String, String>, Vec<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("shards")).unwrap();
    let (keys, offsets) = shard(&tmp.path().join("shards/00000.tar"));
    (tmp, keys, offsets)
}

fn rejects(out: &Path) -> Vec<serde_json::Value> {
    let dir = out.join("_rejected");
    std::fs::read_dir(&dir).unwrap().flatten().flat_map(|e| read_jsonl(&e.path())).collect()
}

#[test]
fn webdataset_samples_round_trip_member_for_member_and_defects_are_rejected() {
    let (tmp, keys, defect_offsets) = with_shard();
    // A second shard cut short inside its third image: its first two samples are kept.
    let whole = tmp.path().join("whole.tar");
    let first = members(&tmp.path().join("shards/00000.tar"));
    let offsets = tar_of(&whole, &first[..9]);
    let bytes = std::fs::read(&whole).unwrap();
    let cut_at = offsets[7] as usize + 512 + first[7].1.len() / 2;
    std::fs::write(tmp.path().join("shards/00001.tar"), &bytes[..cut_at]).unwrap();

    let yaml = "source: {path: shards}\nsink: {path: out, format: webdataset}\n";
    let run = run_with_guests(&["run", write_pipeline(tmp.path(), yaml).to_str().unwrap()]);
    run.ok();
    let input = members(&tmp.path().join("shards/00000.tar"));
    let output = members(&tmp.path().join("out/00000.tar"));
    let good: Vec<&(String, Vec<u8>)> = input.iter().filter(|(n, _)| !n.starts_with("s/900") && n != "s/README").collect();
    assert_eq!(output.len(), good.len());
    for ((a, x), (b, y)) in output.iter().zip(good) {
        assert_eq!((a, x), (b, y), "member {b} differs");
    }
    assert_eq!(output.iter().filter(|(n, _)| n.ends_with(".json")).count(), keys.len());

    let rejected = rejects(&tmp.path().join("out"));
    let mut reasons: Vec<(u64, String)> =
        rejected.iter().map(|r| (r["byte_offset"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_string())).collect();
    reasons.sort();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    let shard0: Vec<&(u64, String)> = reasons.iter().filter(|(o, _)| defect_offsets.contains(o)).collect();
    assert_eq!(shard0.len(), 3, "{reasons:?} vs offsets {defect_offsets:?}");
    assert!(shard0[0].1.contains("no image member"), "{shard0:?}");
    assert!(shard0[1].1.contains("s/9002.jpg: not an image"), "{shard0:?}");
    assert!(shard0[2].1.contains("s/9003.png: the png image is cut short"), "{shard0:?}");
    let cut = rejected
        .iter()
        .find(|r| r["source"].as_str().unwrap().ends_with("00001.tar"))
        .unwrap_or_else(|| panic!("the cut shard is named: {rejected:?}"));
    assert!(cut["reason"].as_str().unwrap().contains("the shard is cut short"), "{cut}");
    assert_eq!(cut["byte_offset"], offsets[7], "{cut}");
    assert_eq!(members(&tmp.path().join("out/00001.tar")).len(), 7, "the two whole samples before the cut are kept");

    // The same samples to JSONL: metadata as fields, the caption as text, no packed members.
    let yaml = "source: {path: shards, format: webdataset}\nsink: {path: out-jsonl}\n";
    run_with_guests(&["run", write_pipeline(tmp.path(), yaml).to_str().unwrap()]).ok();
    let docs = read_jsonl(&tmp.path().join("out-jsonl/00000.jsonl"));
    assert_eq!(docs.len(), keys.len());
    let d = docs.iter().find(|d| d["id"] == keys["scene-333x250.png"]).unwrap();
    assert_eq!(d["text"], "a picture called scene-333x250.png");
    assert_eq!(d["url"], "http://img.example/scene-333x250.png");
    assert_eq!(d["__url__"].as_str().unwrap(), tmp.path().join("shards/00000.tar").display().to_string());
    assert!(d.get("_sample").is_none() && d.get("image").is_some());
}

/// transformers' embeddings and the heads' scores of the test images
/// (`tests/parity/clip_reference.json`).
fn clip_reference() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("tests/parity/clip_reference.json")).unwrap()).unwrap()
}

/// Runs `dir/pipeline.yaml` (written from `yaml`) with the image plugin and the guests; it
/// must succeed.
fn run_images(dir: &Path, yaml: &str) {
    write_pipeline(dir, yaml);
    let run: Run = host()
        .current_dir(dir)
        .args(["run", "pipeline.yaml", "--plugins"])
        .arg(plugins())
        .arg("--plugins")
        .arg(guests_dir())
        .output()
        .unwrap()
        .into();
    run.ok();
}

/// The native image plugin, copied into its directory once per test process (a copy over a
/// library another test's worker has mapped would crash that worker).
fn plugins() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| native_plugins_dir("image-plugins", &["image_embedder", "clip_aesthetic_filter"]))
}

#[test]
fn clip_embeddings_and_nemos_filters_keep_what_the_reference_keeps() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let (tmp, keys, _) = with_shard();
    let reference = clip_reference();
    let scores = |name: &str, head: &str| reference["images"][name]["scores"][head].as_f64().unwrap();
    // Thresholds in the widest gap between the reference's scores among a few positions, so
    // that each filter drops some images and the JPEGs' slightly different pixels (zune-jpeg
    // vs libjpeg-turbo: scores within 1e-3) cannot move an image across.
    let threshold = |head: &str, positions: std::ops::Range<usize>| {
        let mut s: Vec<f64> = keys.keys().map(|n| scores(n, head)).collect();
        s.sort_by(f64::total_cmp);
        let i = positions.max_by(|&a, &b| (s[a + 1] - s[a]).total_cmp(&(s[b + 1] - s[b]))).unwrap();
        assert!(s[i + 1] - s[i] > 4e-3, "{head}: no clear gap in {s:?}");
        (s[i] + s[i + 1]) / 2.0
    };
    let aes_threshold = threshold("aesthetic", 1..4);
    let nsfw_threshold = threshold("nsfw", 4..7);
    let models = root().join("target/models");
    let yaml = format!(
        // The embeddings under a column of the pipeline's naming: the filters' `embedding_field`
        // (an `input_params` param) is what gets that column to them.
        "source: {{path: shards}}\nstages:\n  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu, embedding_field: clip}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {m}}}\n  - plugin: aesthetic_filter\n    params: {{model: /models/aesthetic-head, score_threshold: {aes_threshold}, embedding_field: clip}}\n    grants: {{models: {m}}}\n  - plugin: nsfw_filter\n    params: {{model: /models/nsfw-head, score_threshold: {nsfw_threshold}, embedding_field: clip}}\n    grants: {{models: {m}}}\nsink: {{path: out, format: webdataset}}\n",
        m = models.display()
    );
    run_images(tmp.path(), &yaml);
    let out = members(&tmp.path().join("out/00000.tar"));
    let input: BTreeMap<String, Vec<u8>> = members(&tmp.path().join("shards/00000.tar")).into_iter().collect();
    let mut kept = Vec::new();
    for (name, key) in &keys {
        let (a, n) = (scores(name, "aesthetic"), scores(name, "nsfw"));
        let should = a >= aes_threshold && n < nsfw_threshold;
        let json = out.iter().find(|(p, _)| p == &format!("{key}.json"));
        assert_eq!(json.is_some(), should, "{name}: aesthetic {a} (≥ {aes_threshold}?), nsfw {n} (< {nsfw_threshold}?)");
        let Some((_, json)) = json else { continue };
        kept.push(name.clone());
        let meta: serde_json::Value = serde_json::from_slice(json).unwrap();
        assert_eq!(meta["url"], format!("http://img.example/{name}"), "the original fields are kept");
        // Pillow's pixels: the same scores; the JPEGs: within 1e-3.
        let tol = if name.ends_with(".jpg") { 1e-3 } else { 1e-5 };
        assert!((meta["aesthetic_score"].as_f64().unwrap() - a).abs() < tol, "{name}: {meta}");
        assert!((meta["nsfw_score"].as_f64().unwrap() - n).abs() < tol, "{name}: {meta}");
        assert!(meta.get("clip").is_none(), "vectors are members of their own");
        let npy = &out.iter().find(|(p, _)| p == &format!("{key}.clip.npy")).expect("the embedding as .npy").1;
        assert!(npy.starts_with(b"\x93NUMPY\x01\x00") && (npy.len() - 768 * 4) % 64 == 0, "{} bytes", npy.len());
        let image = out
            .iter()
            .find(|(p, _)| p.starts_with(&format!("{key}.")) && !p.ends_with(".json") && !p.ends_with(".txt") && !p.ends_with(".cls"))
            .unwrap();
        assert_eq!(&image.1, &input[&image.0], "{name}: the image is written as it was read");
    }
    assert!((2..=6).contains(&kept.len()), "{kept:?}");
}

#[test]
fn image_dedup_removes_the_planted_near_copies_and_nothing_else() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("shards")).unwrap();
    let reference = clip_reference();
    let planted = reference["planted"].as_object().unwrap();
    // The planted copies (a re-encode, a PNG saved as JPEG, a 2 % crop) sit at cosine ≥ 0.96 to
    // their originals through this tower, every other pair ≤ 0.76: eps 0.1 separates them.
    let mut samples = Vec::new();
    let mut names = Vec::new();
    for (dir, files) in [("images", images().into_iter().collect::<Vec<_>>()), ("images-planted", Vec::new())] {
        let files = if dir == "images" {
            files
        } else {
            planted.keys().map(|n| (n.clone(), std::fs::read(root().join("tests/parity").join(dir).join(n)).unwrap())).collect()
        };
        for (name, data) in files {
            let key = format!("{:04}", names.len());
            samples.push((format!("{key}.{}", name.rsplit('.').next().unwrap()), data));
            samples.push((format!("{key}.json"), serde_json::json!({"name": name}).to_string().into_bytes()));
            names.push(name);
        }
    }
    tar_of(&tmp.path().join("shards/00000.tar"), &samples);
    let yaml = format!(
        "source: {{path: shards}}\nstages:\n  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\n  - dedup: {{method: semantic, embedding_field: image_embedding, n_clusters: 2, eps: 0.1}}\nsink: {{path: out, format: webdataset}}\n",
        root().join("target/models").display()
    );
    write_pipeline(tmp.path(), &yaml);
    let run: Run = host().current_dir(tmp.path()).args(["run", "pipeline.yaml", "--plugins"]).arg(plugins()).output().unwrap().into();
    run.ok();
    let kept: Vec<String> = members(&tmp.path().join("out/00000.tar"))
        .iter()
        .filter(|(p, _)| p.ends_with(".json"))
        .map(|(_, d)| serde_json::from_slice::<serde_json::Value>(d).unwrap()["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kept.len(), names.len() - planted.len(), "{kept:?}");
    for (copy, info) in planted {
        let original = info["copy_of"].as_str().unwrap();
        let both = [copy.as_str(), original].iter().filter(|n| kept.iter().any(|k| k == *n)).count();
        assert_eq!(both, 1, "one of {copy} and {original} is kept: {kept:?}");
    }
}

/// The JSON documents of a JSONL output directory, by id.
fn jsonl_docs(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut docs = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "jsonl")) {
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            docs.insert(doc["id"].as_str().unwrap().to_string(), doc);
        }
    }
    docs
}

fn vector(doc: &serde_json::Value, field: &str) -> Vec<f64> {
    doc[field].as_array().unwrap_or_else(|| panic!("{field} in {doc}")).iter().map(|x| x.as_f64().unwrap()).collect()
}

/// NeMo Curator's workflow of computing embeddings once and filtering later, and image
/// datasets kept in Parquet: embeddings stored by one pipeline (Parquet `FixedSizeList`) reach
/// the aesthetic filter of a second as vectors, and images stored as bytes (the first run's
/// binary column, or Hugging Face's `{bytes, path}` image struct) reach the embedder, which
/// gives the same embeddings as from the WebDataset shards.
#[test]
fn embeddings_and_images_stored_in_parquet_serve_a_second_pipeline() {
    use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray, StructArray};
    use arrow_schema::{DataType, Field};
    use std::sync::Arc;
    if !needs(Need::EncoderModels) {
        return;
    }
    let (tmp, keys, _) = with_shard();
    let reference = clip_reference();
    let m = root().join("target/models");
    let embedder = |field: &str| {
        format!(
            "  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu, embedding_field: {field}}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\n",
            m.display()
        )
    };
    let run = |yaml: String| run_images(tmp.path(), &yaml);
    // 1. Embed once, store as Parquet.
    run(format!("source: {{path: shards}}\nstages:\n{}sink: {{path: stored, format: parquet}}\n", embedder("clip")));
    // 2. From the stored file: the aesthetic filter on the stored embeddings, and the embedder
    //    again on the stored image bytes.
    run(format!(
        "source: {{path: stored}}\nstages:\n  - plugin: aesthetic_filter\n    params: {{model: /models/aesthetic-head, score_threshold: -100, embedding_field: clip}}\n    grants: {{models: {}}}\n{}sink: {{path: second, format: jsonl}}\n",
        m.display(),
        embedder("again")
    ));
    let second = jsonl_docs(&tmp.path().join("second"));
    assert_eq!(second.len(), keys.len(), "{:?}", second.keys());
    let mut by_name = BTreeMap::new();
    for (name, key) in &keys {
        let doc = &second[key];
        let (clip, again) = (vector(doc, "clip"), vector(doc, "again"));
        assert_eq!(clip.len(), 768, "{name}");
        assert!(clip.iter().zip(&again).all(|(a, b)| (a - b).abs() < 1e-6), "{name}: the stored bytes embed as the shard's did");
        let want = reference["images"][name]["scores"]["aesthetic"].as_f64().unwrap();
        let tol = if name.ends_with(".jpg") { 1e-3 } else { 1e-5 };
        assert!((doc["aesthetic_score"].as_f64().unwrap() - want).abs() < tol, "{name}: {doc}");
        by_name.insert(name.clone(), clip);
    }
    // 3. Hugging Face's layout: an `image` struct of bytes and path, beside an id and a label,
    //    and no text column (read with empty texts).
    let names: Vec<&String> = keys.keys().collect();
    let all = images();
    let bytes: ArrayRef = Arc::new(BinaryArray::from_iter_values(names.iter().map(|n| all[*n].as_slice())));
    let paths: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter().map(|n| n.as_str())));
    let image: ArrayRef = Arc::new(StructArray::from(vec![
        (Arc::new(Field::new("bytes", DataType::Binary, true)), bytes),
        (Arc::new(Field::new("path", DataType::Utf8, true)), paths),
    ]));
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(names.iter().map(|n| format!("hf-{n}"))));
    let labels: ArrayRef = Arc::new(arrow_array::Int64Array::from_iter_values((0..names.len() as i64).map(|i| i % 3)));
    let batch = RecordBatch::try_from_iter([("id", ids), ("label", labels), ("image", image)]).unwrap();
    std::fs::create_dir(tmp.path().join("hf")).unwrap();
    write_parquet(&tmp.path().join("hf/train-00000-of-00001.parquet"), &batch);
    run(format!("source: {{path: hf}}\nstages:\n{}sink: {{path: third, format: jsonl}}\n", embedder("clip")));
    let third = jsonl_docs(&tmp.path().join("third"));
    assert_eq!(third.len(), names.len());
    for (i, name) in names.iter().enumerate() {
        let doc = &third[&format!("hf-{name}")];
        let got = vector(doc, "clip");
        assert!(got.iter().zip(&by_name[*name]).all(|(a, b)| (a - b).abs() < 1e-6), "{name}: Hugging Face's image struct");
        assert_eq!((doc["text"].as_str(), doc["label"].as_i64()), (Some(""), Some(i as i64 % 3)), "{doc}");
    }
    // Without an image column, a Parquet file without its text column is still refused.
    let plain = RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["a"])) as ArrayRef)]).unwrap();
    std::fs::create_dir(tmp.path().join("plain")).unwrap();
    write_parquet(&tmp.path().join("plain/ids.parquet"), &plain);
    std::fs::write(tmp.path().join("plain.yaml"), "source: {path: plain}\nsink: {path: fourth, format: jsonl}\n").unwrap();
    let r: Run = host().current_dir(tmp.path()).args(["run", "plain.yaml"]).output().unwrap().into();
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("plain/ids.parquet") && r.stderr.contains("\"text\"") && r.stderr.contains("no such column"), "{}", r.stderr);
}

/// Two workers of the image embedder on one (CPU) device give every image the embedding one
/// worker gives it: batches of 2 images, so both workers embed some.
#[test]
fn two_image_embedder_workers_embed_as_one_does() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let (tmp, keys, _) = with_shard();
    let m = root().join("target/models");
    let run = |workers: usize| {
        let out = format!("out-{workers}");
        run_images(
            tmp.path(),
            &format!(
                "source: {{path: shards}}\nbatch_size: 2\nstages:\n  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    num_workers: {workers}\n    grants: {{models: {}}}\nsink: {{path: {out}, format: jsonl}}\n",
                m.display()
            ),
        );
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path().join(&out).join("_summary.json")).unwrap()).unwrap();
        assert_eq!(summary["stages"][0]["workers"], workers, "{summary}");
        jsonl_docs(&tmp.path().join(out))
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.len(), keys.len());
    for key in keys.values() {
        assert_eq!(vector(&one[key], "image_embedding"), vector(&two[key], "image_embedding"), "{key}");
    }
}

/// Embeddings stored as JSONL arrays reach the aesthetic filter as vectors; one cut short is
/// refused naming the file, the field and its row.
#[test]
fn jsonl_embeddings_reach_a_stage_and_a_short_one_is_named() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("in")).unwrap();
    let line =
        |i: usize, dim: usize| serde_json::json!({"id": format!("d{i}"), "text": "t", "clip": vec![0.01 * i as f32; dim]}).to_string();
    let good: Vec<String> = (0..4).map(|i| line(i, 768)).collect();
    std::fs::write(tmp.path().join("in/good.jsonl"), good.join("\n") + "\n").unwrap();
    let bad: Vec<String> = (0..4).map(|i| line(i, if i == 2 { 767 } else { 768 })).collect();
    std::fs::write(tmp.path().join("in/bad.jsonl"), bad.join("\n") + "\n").unwrap();
    let yaml = format!(
        "source: {{path: in}}\nstages:\n  - plugin: aesthetic_filter\n    params: {{model: /models/aesthetic-head, score_threshold: -100, embedding_field: clip}}\n    grants: {{models: {}}}\nsink: {{path: out, format: jsonl}}\n",
        root().join("target/models").display()
    );
    write_pipeline(tmp.path(), &yaml);
    let run: Run = host().current_dir(tmp.path()).args(["run", "pipeline.yaml", "--plugins"]).arg(guests_dir()).output().unwrap().into();
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("bad.jsonl") && run.stderr.contains(r#"field "clip" of row 2"#), "{}", run.stderr);
    assert!(run.stderr.contains("767 numbers where earlier rows had 768"), "{}", run.stderr);
    // The good file's documents were scored (as vectors, not refused as text).
    std::fs::remove_file(tmp.path().join("in/bad.jsonl")).unwrap();
    let run: Run = host().current_dir(tmp.path()).args(["run", "pipeline.yaml", "--plugins"]).arg(guests_dir()).output().unwrap().into();
    run.ok();
    let docs = jsonl_docs(&tmp.path().join("out"));
    assert_eq!(docs.len(), 4);
    assert!(docs.values().all(|d| d["aesthetic_score"].as_f64().is_some()), "{docs:?}");
}

/// A folder of images (img2dataset's `files` layout): one document per image, with the
/// caption and metadata of the files beside it; a partition's images go to the stage in
/// batches that span the files (one partition, one output file); a file that is not an image
/// is rejected by name; and the kept images go back out as WebDataset samples with their
/// captions.
#[test]
fn a_folder_of_images_is_a_source() {
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("photos/00000");
    std::fs::create_dir_all(&dir).unwrap();
    let all = images();
    let mut names = BTreeMap::new();
    for (i, (name, bytes)) in all.iter().enumerate() {
        let key = format!("{i:09}");
        let ext = name.rsplit_once('.').unwrap().1;
        std::fs::write(dir.join(format!("{key}.{ext}")), bytes).unwrap();
        std::fs::write(dir.join(format!("{key}.txt")), format!("a picture called {name}")).unwrap();
        std::fs::write(dir.join(format!("{key}.json")), format!("{{\"source_name\": \"{name}\"}}")).unwrap();
        names.insert(format!("00000/{key}"), name.clone());
    }
    std::fs::write(dir.join("999999999.jpg"), "a text file under an image's name").unwrap();
    let reference = clip_reference();
    let m = root().join("target/models");
    let stage = format!(
        "  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n    grants: {{models: {}}}\n",
        m.display()
    );
    run_images(tmp.path(), &format!("source: {{path: photos, format: images}}\nstages:\n{stage}sink: {{path: out, format: jsonl}}\n"));
    let outputs = files_with_ext(&tmp.path().join("out"), "jsonl");
    assert_eq!(outputs.len(), 1, "one partition of {} files: {outputs:?}", all.len() + 1);
    let docs = jsonl_docs(&tmp.path().join("out"));
    assert_eq!(docs.len(), all.len(), "{:?}", docs.keys());
    for (id, name) in &names {
        let doc = &docs[id];
        assert_eq!(
            (doc["text"].as_str(), doc["source_name"].as_str()),
            (Some(format!("a picture called {name}").as_str()), Some(name.as_str()))
        );
        let got = vector(doc, "image_embedding");
        let want: Vec<f64> =
            reference["images"][name]["embeddings"]["clip-l14-2l"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(cosine(&got, &want) >= 0.9999, "{name}: cosine {}", cosine(&got, &want));
    }
    let rejected = rejects(&tmp.path().join("out"));
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(rejected[0]["source"].as_str().unwrap().ends_with("photos/00000/999999999.jpg"), "{}", rejected[0]);
    assert!(rejected[0]["reason"].as_str().unwrap().contains("not an image"), "{}", rejected[0]);

    // Back out as WebDataset samples: each image with its caption and metadata, as they were.
    write_pipeline(tmp.path(), "source: {path: photos, format: images}\nsink: {path: shards, format: webdataset}\n");
    run_with_guests(&["run", tmp.path().join("pipeline.yaml").to_str().unwrap()]).ok();
    let tars = files_with_ext(&tmp.path().join("shards"), "tar");
    assert_eq!(tars.len(), 1);
    let written: BTreeMap<String, Vec<u8>> = members(&tars[0]).into_iter().collect();
    assert_eq!(written.len(), 3 * all.len(), "{:?}", written.keys());
    for (i, (name, bytes)) in all.iter().enumerate() {
        let ext = name.rsplit_once('.').unwrap().1;
        assert_eq!(&written[&format!("00000/{i:09}.{ext}")], bytes, "{name}");
        assert_eq!(written[&format!("00000/{i:09}.txt")], format!("a picture called {name}").into_bytes());
    }
    // Without `format: images` the folder's .json files are read as JSONL: each one's warning
    // says what to set.
    write_pipeline(tmp.path(), "source: {path: photos}\nsink: {path: as-jsonl}\n");
    let r = run_with_guests(&["run", tmp.path().join("pipeline.yaml").to_str().unwrap()]);
    assert!(r.stderr.contains("it sits beside an image of its name") && r.stderr.contains("`format: images`"), "{}", r.stderr);
    // A folder of images alone is no input, and the error says what to set.
    std::fs::create_dir(tmp.path().join("only-images")).unwrap();
    for (name, bytes) in all.iter().take(2) {
        std::fs::write(tmp.path().join("only-images").join(name), bytes).unwrap();
    }
    write_pipeline(tmp.path(), "source: {path: only-images}\nsink: {path: nothing}\n");
    let r = run_with_guests(&["run", tmp.path().join("pipeline.yaml").to_str().unwrap()]);
    assert!(
        r.code != 0 && r.stderr.contains("no input files found") && r.stderr.contains("set the source's `format: images`"),
        "{}",
        r.stderr
    );
}

/// The files of `dir` whose extension is `ext`.
fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == ext)).collect()
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>() / (a.iter().map(|x| x * x).sum::<f64>() * b.iter().map(|y| y * y).sum::<f64>()).sqrt()
}

/// `batch` as a Parquet file at `path`.
fn write_parquet(path: &Path, batch: &arrow_array::RecordBatch) {
    let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// An uncompressed 24-bit BMP of `rgb` (`w` × `h`, rows top to bottom).
fn bmp(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    let row = (3 * w).div_ceil(4) * 4;
    let size = 54 + row * h;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(b"BM");
    for v in [size as u32, 0, 54, 40, w as u32, h as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&24u16.to_le_bytes());
    for v in [0u32, (row * h) as u32, 2835, 2835, 0, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for y in (0..h).rev() {
        for x in 0..w {
            let p = &rgb[3 * (y * w + x)..3 * (y * w + x) + 3];
            out.extend_from_slice(&[p[2], p[1], p[0]]);
        }
        out.resize(out.len() + row - 3 * w, 0);
    }
    out
}

/// NeMo's `ClipAestheticFilterStage` over clips' frames (here from Parquet, as `video_decode`
/// would give them): frames sampled at 1 fps score as the same pixels do through
/// `image_embedder` + `aesthetic_filter`, a clip's score is its frames' minimum, a clip
/// without frames scores −1, the clip embedding is its frames' mean, and the threshold drops.
#[test]
fn clip_aesthetic_filter_scores_clips_as_the_image_path_scores_their_frames() {
    use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;
    if !needs(Need::EncoderModels) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (w, h) = (96usize, 64usize);
    let pattern = |k: usize| -> Vec<u8> {
        (0..w * h)
            .flat_map(|p| {
                let (x, y) = (p % w, p / w);
                [((x * (3 + k)) % 256) as u8, ((y * (5 + 2 * k) + 40 * k) % 256) as u8, (((x ^ y) * (k + 1)) % 256) as u8]
            })
            .collect()
    };
    let frames: Vec<Vec<u8>> = (0..3).map(pattern).collect();
    // 1. The frames as images, through the image path.
    std::fs::create_dir(tmp.path().join("stills")).unwrap();
    for (k, f) in frames.iter().enumerate() {
        std::fs::write(tmp.path().join(format!("stills/{k}.bmp")), bmp(w, h, f)).unwrap();
    }
    let m = root().join("target/models");
    let grant = format!("    grants: {{models: {}}}\n", m.display());
    run_images(
        tmp.path(),
        &format!(
            "source: {{path: stills, format: images}}\nstages:\n  - plugin: image_embedder\n    params: {{model: /models/clip-l14-2l, device: cpu}}\n    resources: {{gpu_memory_gb: 0}}\n{grant}  - plugin: aesthetic_filter\n    params: {{model: /models/aesthetic-head, score_threshold: -100}}\n{grant}sink: {{path: stills-out, format: jsonl}}\n"
        ),
    );
    let stills = jsonl_docs(&tmp.path().join("stills-out"));
    let score = |k: usize| stills[&k.to_string()]["aesthetic_score"].as_f64().unwrap();
    let emb = |k: usize| vector(&stills[&k.to_string()], "image_embedding");
    // 2. Clips of those frames: A A A at 0, 0.5, 1 s (1 fps samples the first and last); B at
    //    0 s then C at 0.6 and 1.2 s (samples B and the C at 1.2); and a clip without frames.
    let clips: [(&str, Vec<(usize, f64)>); 3] =
        [("clip-a", vec![(0, 0.0), (0, 0.5), (0, 1.0)]), ("clip-bc", vec![(1, 0.0), (2, 0.6), (2, 1.2)]), ("clip-none", vec![])];
    let data: Vec<Vec<u8>> = clips.iter().map(|(_, fs)| fs.iter().flat_map(|(k, _)| frames[*k].clone()).collect()).collect();
    let times: Vec<Vec<u8>> = clips.iter().map(|(_, fs)| fs.iter().flat_map(|(_, t)| t.to_le_bytes()).collect()).collect();
    let int = |v: i64| Arc::new(Int64Array::from(vec![v; 3])) as ArrayRef;
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(StringArray::from_iter_values(clips.iter().map(|(id, _)| *id))) as ArrayRef),
        ("frames", Arc::new(BinaryArray::from_iter_values(data.iter().map(Vec::as_slice))) as ArrayRef),
        ("frame_times", Arc::new(BinaryArray::from_iter_values(times.iter().map(Vec::as_slice))) as ArrayRef),
        ("frame_width", int(w as i64)),
        ("frame_height", int(h as i64)),
        ("frame_channels", int(3)),
    ])
    .unwrap();
    std::fs::create_dir(tmp.path().join("clips")).unwrap();
    write_parquet(&tmp.path().join("clips/clips.parquet"), &batch);
    let filter = |threshold: f64, filter: bool, out: &str| {
        run_images(
            tmp.path(),
            &format!(
                "source: {{path: clips}}\nstages:\n  - plugin: clip_aesthetic_filter\n    params: {{model: /models/clip-l14-2l, head: /models/aesthetic-head, device: cpu, score_threshold: {threshold}, filter: {filter}, embedding_field: clip_embedding}}\n    resources: {{gpu_memory_gb: 0}}\n{grant}sink: {{path: {out}, format: jsonl}}\n"
            ),
        );
        jsonl_docs(&tmp.path().join(out))
    };
    let all = filter(0.0, false, "scored");
    assert_eq!(all.len(), 3);
    let got = |id: &str| all[id]["aesthetic_score"].as_f64().unwrap();
    assert!((got("clip-a") - score(0)).abs() < 1e-5, "{} vs {}", got("clip-a"), score(0));
    assert!((got("clip-bc") - score(1).min(score(2))).abs() < 1e-5, "{} vs min({}, {})", got("clip-bc"), score(1), score(2));
    assert_eq!(got("clip-none"), -1.0);
    assert!(cosine(&vector(&all["clip-a"], "clip_embedding"), &emb(0)) > 0.99999);
    let mean: Vec<f64> = emb(1).iter().zip(emb(2)).map(|(b, c)| b + c).collect();
    assert!(cosine(&vector(&all["clip-bc"], "clip_embedding"), &mean) > 0.99999);
    // The threshold between the two clips' scores keeps the higher one only.
    let (a, bc) = (got("clip-a"), got("clip-bc"));
    assert!((a - bc).abs() > 1e-4, "the patterns score apart: {a} {bc}");
    let kept = filter((a + bc) / 2.0, true, "kept");
    assert_eq!(kept.keys().collect::<Vec<_>>(), vec![if a > bc { "clip-a" } else { "clip-bc" }]);
}
