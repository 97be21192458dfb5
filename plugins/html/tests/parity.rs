//! jusText parity: our paragraphs and classes against the Python `justext` package (the
//! library NeMo Curator's Common Crawl extraction calls) on Debian's HTML documentation and on
//! planted pages, both in `tests/parity/justext_reference.jsonl` (written by
//! `scripts/parity/make_justext_reference.py`). A page counts when it has as many paragraphs
//! and its kept paragraphs are the same texts in the same order; at least 99 % must.

use std::collections::HashMap;

use curator_html::stoplists::Stoplist;
use curator_html::{Class, Params, justext};
use sha2::{Digest, Sha256};

fn jsonl(path: &str) -> Vec<serde_json::Value> {
    let full = concat!(env!("CARGO_MANIFEST_DIR"), "/../../").to_string() + path;
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split('\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// FNV-1a 64 of the text's UTF-8 bytes, as the reference script hashes kept paragraphs.
fn fnv(s: &str) -> String {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

/// Where the reference's page names are found: Debian's documentation (else the planted file).
const ROOTS: &[(&str, &str)] =
    &[("python3.11-doc/", "/usr/share/doc/python3.11/html/"), ("debian-reference/", "/usr/share/debian-reference/")];

/// A reference page's HTML: `Err` when this machine lacks it or holds another version of it.
fn page(name: &str, sha256: &str, planted: &HashMap<String, String>) -> Result<String, ()> {
    if let Some(h) = planted.get(name) {
        return Ok(h.clone());
    }
    let (prefix, dir) = ROOTS.iter().find(|(p, _)| name.starts_with(p)).ok_or(())?;
    let bytes = std::fs::read(format!("{dir}{}", &name[prefix.len()..])).map_err(|_| ())?;
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if digest != sha256 {
        return Err(());
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[test]
fn kept_paragraphs_equal_pythons_on_at_least_99_percent_of_pages() {
    let reference = jsonl("tests/parity/justext_reference.jsonl");
    let planted: HashMap<String, String> = jsonl("tests/parity/justext_planted.jsonl")
        .into_iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["html"].as_str().unwrap().to_string()))
        .collect();
    let installed = ROOTS.iter().all(|(_, dir)| std::path::Path::new(dir).is_dir());
    let debian =
        curator_test_support::require(installed, "Debian's HTML docs are not installed (apt-get install python3-doc debian-reference-en)");
    let stoplist = Stoplist::for_language("English").unwrap();
    let (mut compared, mut same, mut missing) = (0usize, 0usize, 0usize);
    let mut differ = Vec::new();
    for r in &reference {
        let name = r["page"].as_str().unwrap();
        if !debian && !planted.contains_key(name) {
            continue;
        }
        let Ok(html) = page(name, r["sha256"].as_str().unwrap(), &planted) else {
            missing += 1;
            continue;
        };
        let ours = justext(&html, &stoplist, &Params::default());
        let kept: Vec<String> = ours.iter().filter(|p| p.class == Class::Good).map(|p| fnv(&p.text)).collect();
        let theirs: Vec<&str> = r["kept"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        compared += 1;
        if kept == theirs && ours.len() as u64 == r["paragraphs"].as_u64().unwrap() {
            same += 1;
            continue;
        }
        let only_ours = ours.iter().find(|p| p.class == Class::Good && !theirs.contains(&fnv(&p.text).as_str()));
        differ.push(format!(
            "{name}: {} paragraphs ({} in the reference), {} kept ({} in the reference); first kept here only: {:?}",
            ours.len(),
            r["paragraphs"],
            kept.len(),
            theirs.len(),
            only_ours.map(|p| p.text.chars().take(120).collect::<String>()),
        ));
    }
    eprintln!("justext parity: {same} of {compared} pages identical ({missing} reference pages missing or changed here)");
    for d in &differ {
        eprintln!("  differs: {d}");
    }
    assert!(compared >= 80, "only {compared} pages compared");
    assert!(missing * 10 <= reference.len(), "{missing} of the reference's pages are missing or changed here: regenerate it");
    assert!(same * 100 >= compared * 99, "{same} of {compared} pages identical (goal 99 %):\n{}", differ.join("\n"));
}
