//! Pages per second of each step of HTML extraction on one core, natively: the HTML parse
//! alone, jusText's paragraphs, the whole of `justext` and `main_text`. The pages are Debian's
//! HTML documentation (`apt-get install python3-doc debian-reference-en`), or the HTML files
//! under `CURATOR_BENCH_HTML` when set.
//!
//!     cargo bench -p curator-html --bench extract

use std::path::{Path, PathBuf};
use std::time::Instant;

use curator_html::main_text::{MainTextParams, main_text};
use curator_html::stoplists::Stoplist;
use curator_html::{Params, justext};

/// A step's name, and the step over one page (its result, kept so the work is not optimised away).
type Step<'a> = (&'static str, Box<dyn Fn(&str) -> usize + 'a>);

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            html_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "html" || e == "htm") {
            out.push(p);
        }
    }
}

fn main() {
    let roots: Vec<PathBuf> = match std::env::var_os("CURATOR_BENCH_HTML") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec!["/usr/share/doc/python3.11/html".into(), "/usr/share/debian-reference".into()],
    };
    let mut files = Vec::new();
    for r in &roots {
        html_files(r, &mut files);
    }
    let pages: Vec<String> = files.iter().filter_map(|f| std::fs::read(f).ok()).map(|b| String::from_utf8_lossy(&b).into_owned()).collect();
    if pages.is_empty() {
        eprintln!("no HTML pages under {roots:?}: apt-get install python3-doc debian-reference-en, or set CURATOR_BENCH_HTML");
        return;
    }
    let bytes: usize = pages.iter().map(|p| p.len()).sum();
    let Some(stoplist) = Stoplist::for_language("English") else { return };
    let english = &stoplist;
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    println!("{} pages, {:.1} MB; best of {rounds} rounds, one core", pages.len(), bytes as f64 / 1e6);
    let steps: Vec<Step<'_>> = vec![
        ("parse", Box::new(|h: &str| curator_html::dom::Dom::parse(h).len())),
        ("paragraphs", Box::new(|h: &str| curator_html::paragraphs::paragraphs(h).len())),
        ("justext", Box::new(move |h: &str| justext(h, english, &Params::default()).len())),
        ("main_text", Box::new(move |h: &str| main_text(h, english, &MainTextParams::default()).len())),
    ];
    for (name, f) in &steps {
        let mut best = f64::MAX;
        let mut sink = 0usize;
        for _ in 0..rounds {
            let t = Instant::now();
            for p in &pages {
                sink = sink.wrapping_add(f(p));
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{name:<11} {:>8.0} pages/s {:>7.1} MB/s   ({sink})", pages.len() as f64 / best, bytes as f64 / 1e6 / best);
    }
}
