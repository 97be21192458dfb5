//! The book in `docs/` hangs together: every page is in `SUMMARY.md`, every page is reachable
//! from the README, and every relative link of the README and the book points at a file that
//! exists. (`mdbook build docs` renders it; CI runs that too.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use curator_house::repo_root;

/// The relative link targets of a Markdown text (`[text](target)`, anchors and URLs left out).
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(k) = rest.find("](") {
            let after = &rest[k + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split('#').next().unwrap_or("").trim();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
            rest = &after[end..];
        }
    }
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_page_is_in_the_summary_and_reachable_from_the_readme_and_every_link_resolves() {
    let root = repo_root();
    let src = root.join("docs/src");
    let pages: BTreeSet<PathBuf> = std::fs::read_dir(&src)
        .expect("docs/src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && !p.ends_with("SUMMARY.md"))
        .collect();
    assert!(pages.len() >= 5, "docs/src holds only {} pages", pages.len());
    let mut problems = Vec::new();
    let summary: BTreeSet<PathBuf> = relative_links(&read(&src.join("SUMMARY.md"))).iter().map(|l| src.join(l)).collect();
    for p in &pages {
        if !summary.contains(p) {
            problems.push(format!("{} is not in docs/src/SUMMARY.md", p.display()));
        }
    }
    // Reachable: from the README, following links through the book.
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut todo = vec![root.join("README.md")];
    while let Some(file) = todo.pop() {
        let text = read(&file);
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for link in relative_links(&text) {
            let target = dir.join(&link);
            if !target.exists() {
                problems.push(format!("{}: link {link:?} points at nothing", file.display()));
                continue;
            }
            let target = target.canonicalize().unwrap_or(target);
            if target.starts_with(src.canonicalize().unwrap_or(src.clone()))
                && target.extension().is_some_and(|x| x == "md")
                && seen.insert(target.clone())
            {
                todo.push(target);
            }
        }
    }
    for p in &pages {
        let p = p.canonicalize().unwrap_or(p.clone());
        if !seen.contains(&p) && !p.ends_with("README.md") {
            problems.push(format!("{} cannot be reached from README.md", p.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn links_are_read_from_text_not_code() {
    let text = "see [a](a.md#x) and [b](https://x.y) [c](../c.h)\n```\n[d](d.md)\n```\n";
    assert_eq!(relative_links(text), vec!["a.md", "../c.h"]);
}
