//! Semantic dedup from embeddings the input already holds: JSONL arrays of numbers and
//! Parquet `FixedSizeList`/`List`/`LargeList` of float16, float32 and float64 all find the
//! same planted near-duplicates; a ragged, non-numeric or missing vector is an error naming
//! the file, the line or row (or the document) and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Float64Builder, LargeListBuilder, ListBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::DataType;

use crate::dedup::duplicates;
use crate::support::*;

const DIM: usize = 16;

/// (id, vector, planted: the id it nearly copies). 30 seeded random unit vectors and five
/// copies of some of them with a little noise (cosine ≈ 0.999 to their original).
fn fixture() -> Vec<(String, Vec<f32>, Option<String>)> {
    let mut next = noise(0x9e37_79b9_7f4a_7c15);
    let mut docs: Vec<(String, Vec<f32>, Option<String>)> =
        (0..30).map(|i| (format!("d{i:02}"), unit((0..DIM).map(|_| next()).collect()), None)).collect();
    for (k, of) in [3usize, 8, 14, 21, 27].into_iter().enumerate() {
        let copy: Vec<f32> = docs[of].1.iter().map(|x| x + 0.01 * next()).collect();
        docs.push((format!("c{k}"), copy, Some(docs[of].0.clone())));
    }
    docs
}

/// A seeded xorshift stream of values in [-0.5, 0.5).
pub(crate) fn noise(seed: u64) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

/// `v` scaled to unit length.
pub(crate) fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn planted(docs: &[(String, Vec<f32>, Option<String>)]) -> BTreeSet<BTreeSet<String>> {
    docs.iter().filter_map(|(id, _, of)| of.as_ref().map(|o| BTreeSet::from([id.clone(), o.clone()]))).collect()
}

fn pairs(dups: &BTreeMap<String, String>) -> BTreeSet<BTreeSet<String>> {
    dups.iter().map(|(r, k)| BTreeSet::from([r.clone(), k.clone()])).collect()
}

fn jsonl_line(id: &str, v: &[f32]) -> String {
    serde_json::json!({"id": id, "text": format!("document {id}"), "embedding": v}).to_string()
}

/// A Parquet file of `docs` with the embedding in `layout`.
fn write_parquet(path: &Path, docs: &[(String, Vec<f32>, Option<String>)], layout: &str) {
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(docs.iter().map(|d| d.0.clone())));
    let texts: ArrayRef = Arc::new(StringArray::from_iter_values(docs.iter().map(|d| format!("document {}", d.0))));
    let emb: ArrayRef = match layout {
        "fixed32" => {
            let mut b = FixedSizeListBuilder::new(Float32Builder::new(), DIM as i32);
            for d in docs {
                b.values().append_slice(&d.1);
                b.append(true);
            }
            Arc::new(b.finish())
        }
        "fixed64" => {
            let mut b = FixedSizeListBuilder::new(Float64Builder::new(), DIM as i32);
            for d in docs {
                d.1.iter().for_each(|x| b.values().append_value(*x as f64));
                b.append(true);
            }
            Arc::new(b.finish())
        }
        "list64" => {
            let mut b = ListBuilder::new(Float64Builder::new());
            for d in docs {
                d.1.iter().for_each(|x| b.values().append_value(*x as f64));
                b.append(true);
            }
            Arc::new(b.finish())
        }
        "large16" => {
            let mut b = LargeListBuilder::new(Float32Builder::new());
            for d in docs {
                b.values().append_slice(&d.1);
                b.append(true);
            }
            let list: ArrayRef = Arc::new(b.finish());
            arrow_cast::cast(&list, &DataType::new_large_list(DataType::Float16, true)).unwrap()
        }
        other => panic!("no layout {other}"),
    };
    let batch = RecordBatch::try_from_iter([("id", ids), ("text", texts), ("embedding", emb)]).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

fn run_dedup(dir: &Path) -> Run {
    write_pipeline(dir, "source: {path: in}\nbatch_size: 8\nstages:\n  - dedup: {method: semantic, n_clusters: 3}\nsink: {path: out}\n");
    host().current_dir(dir).args(["run", "pipeline.yaml"]).output().expect("cannot start curator-host").into()
}

/// `docs` as the input of a fresh directory: JSONL (two files) or one Parquet file.
fn input(layout: &str, docs: &[(String, Vec<f32>, Option<String>)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    if layout == "jsonl" {
        let lines: Vec<String> = docs.iter().map(|(id, v, _)| jsonl_line(id, v)).collect();
        let (a, b) = lines.split_at(lines.len() / 2);
        std::fs::write(dir.join("a.jsonl"), a.join("\n") + "\n").unwrap();
        std::fs::write(dir.join("b.jsonl"), b.join("\n") + "\n").unwrap();
    } else {
        write_parquet(&dir.join("a.parquet"), docs, layout);
    }
    tmp
}

#[test]
fn stored_vectors_in_every_layout_find_the_planted_duplicates() {
    let docs = fixture();
    let want_pairs = planted(&docs);
    let mut exact: Option<BTreeMap<String, String>> = None;
    for layout in ["jsonl", "fixed32", "fixed64", "list64", "large16"] {
        let tmp = input(layout, &docs);
        run_dedup(tmp.path()).ok();
        let dups = duplicates(&tmp.path().join("out"));
        assert_eq!(pairs(&dups), want_pairs, "{layout}");
        // The same float32 vectors (float16 aside, which rounds them): the same survivors.
        if layout != "large16" {
            match &exact {
                None => exact = Some(dups),
                Some(first) => assert_eq!(&dups, first, "{layout} differs from jsonl"),
            }
        }
        // The kept documents keep their vectors.
        let out: Vec<serde_json::Value> = std::fs::read_dir(tmp.path().join("out"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            .flat_map(|e| read_jsonl(&e.path()))
            .collect();
        assert_eq!(out.len(), docs.len() - want_pairs.len(), "{layout}");
        for d in &out {
            let id = d["id"].as_str().unwrap();
            let stored = &docs.iter().find(|x| x.0 == id).unwrap().1;
            let written: Vec<f32> = d["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            let tolerance = if layout == "large16" { 1e-3 } else { 0.0 };
            assert!(written.iter().zip(stored).all(|(a, b)| (a - b).abs() <= tolerance), "{layout} {id}: {written:?}");
        }
    }
}

#[test]
fn a_ragged_non_numeric_or_missing_vector_is_named() {
    let docs = fixture();
    let lines = |bad: &str| -> Vec<String> {
        let mut l: Vec<String> = docs.iter().take(6).map(|(id, v, _)| jsonl_line(id, v)).collect();
        l[2] = bad.to_string();
        l
    };
    let cases = [
        (jsonl_line("r", &docs[0].1[..DIM - 1]), vec!["a.jsonl:3", "field \"embedding\"", "15 numbers where earlier rows had 16"]),
        (
            r#"{"id": "s", "text": "t", "embedding": [0.5, "x"]}"#.to_string(),
            vec!["a.jsonl:3", "field \"embedding\"", "expected an array of numbers"],
        ),
        (r#"{"id": "m", "text": "no vector here"}"#.to_string(), vec!["document m", "has no \"embedding\""]),
    ];
    for (bad, expect) in cases {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("in")).unwrap();
        std::fs::write(tmp.path().join("in/a.jsonl"), lines(&bad).join("\n") + "\n").unwrap();
        let r = run_dedup(tmp.path());
        assert_ne!(r.code, 0, "{bad}");
        for e in expect {
            assert!(r.stderr.contains(e), "{e:?} not in:\n{}", r.stderr);
        }
    }
    // Parquet: a list one number short on row 4.
    let mut short = docs[..6].to_vec();
    short[4].1.pop();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("in")).unwrap();
    write_parquet(&tmp.path().join("in/a.parquet"), &short, "list64");
    let r = run_dedup(tmp.path());
    assert_ne!(r.code, 0);
    for e in ["a.parquet row 4", "field \"embedding\"", "15 numbers where earlier rows had 16"] {
        assert!(r.stderr.contains(e), "{e:?} not in:\n{}", r.stderr);
    }
}
