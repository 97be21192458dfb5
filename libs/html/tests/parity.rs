//! jusText parity: our paragraphs and classes against the Python `justext` package (the
//! library NeMo Curator's Common Crawl extraction calls) on Debian's HTML documentation and on
//! the planted pages (`tests/parity/justext_planted.jsonl`). The reference is made at test
//! time, by `scripts/parity/make_justext_reference.py` (jusText 3.0.2 and lxml 6.1.3 from PyPI,
//! in a venv under `target/`), from the pages this machine has: whatever version of Debian's
//! packages holds them, both sides read the same bytes. A page counts when it has as many
//! paragraphs and its kept paragraphs are the same texts in the same order; at least 99 % must.

use std::collections::HashMap;
use std::path::Path;

use curator_html::stoplists::Stoplist;
use curator_html::{Class, Params, justext};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split('\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// FNV-1a 64 of the text's UTF-8 bytes, as the reference script hashes kept paragraphs.
fn fnv(s: &str) -> String {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

/// Where the script finds Debian's pages (the Python manual, the Debian Reference).
const DEBIAN_DOCS: &[&str] = &["/usr/share/doc/python3.11/html", "/usr/share/debian-reference"];

/// Runs the reference script; its output, or `None` (said on the terminal) where this machine
/// cannot (no python3, or no PyPI to fill the venv from).
fn reference() -> Option<Vec<serde_json::Value>> {
    let out = Path::new(ROOT).join(format!("target/tmp/justext_reference.{}.jsonl", std::process::id()));
    let run =
        std::process::Command::new("python3").arg(Path::new(ROOT).join("scripts/parity/make_justext_reference.py")).arg(&out).output();
    let made = run.as_ref().is_ok_and(|r| r.status.success());
    let why = match &run {
        Ok(r) => format!("make_justext_reference.py failed: {}", String::from_utf8_lossy(&r.stderr)),
        Err(e) => format!("cannot run python3: {e}"),
    };
    if !curator_test_support::require(made, &why) {
        return None;
    }
    let reference = jsonl(&out);
    std::fs::remove_file(&out).ok();
    Some(reference)
}

#[test]
fn kept_paragraphs_equal_pythons_on_at_least_99_percent_of_pages() {
    let installed = DEBIAN_DOCS.iter().all(|dir| Path::new(dir).is_dir());
    let debian =
        curator_test_support::require(installed, "Debian's HTML docs are not installed (apt-get install python3-doc debian-reference-en)");
    let Some(reference) = reference() else { return };
    let planted: HashMap<String, String> = jsonl(&Path::new(ROOT).join("tests/parity/justext_planted.jsonl"))
        .into_iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["html"].as_str().unwrap().to_string()))
        .collect();
    let stoplist = Stoplist::for_language("English").unwrap();
    let (mut compared, mut real, mut same) = (0usize, 0usize, 0usize);
    let mut differ = Vec::new();
    for r in &reference {
        let name = r["page"].as_str().unwrap();
        let html = match r["path"].as_str() {
            Some(path) => {
                real += 1;
                String::from_utf8_lossy(&std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))).into_owned()
            }
            None => planted.get(name).unwrap_or_else(|| panic!("{name}: neither a file nor a planted page")).clone(),
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
    eprintln!("justext parity: {same} of {compared} pages identical ({real} of Debian's, {} planted)", compared - real);
    for d in differ.iter().take(20) {
        eprintln!("  differs: {d}");
    }
    assert!(compared - real >= 80, "only {} planted pages compared", compared - real);
    assert!(!debian || real >= 500, "only {real} of Debian's pages compared (the Python manual alone has ~530)");
    assert!(same * 100 >= compared * 99, "{same} of {compared} pages identical (goal 99 %):\n{}", differ.join("\n"));
}
