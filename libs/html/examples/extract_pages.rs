//! Extract many pages at once, for comparisons with other extractors: reads JSON lines
//! `{"name": …, "html": …}` on stdin, writes `{"name", "justext", "main_text"}` lines on
//! stdout (English stop words, default parameters; jusText's good paragraphs joined by a blank
//! line, as the `justext` stage writes them).
//!
//!     cargo run --release -p curator-html --example extract_pages < pages.jsonl

use std::io::{BufRead, Write};

use curator_html::main_text::{MainTextParams, main_text};
use curator_html::stoplists::Stoplist;
use curator_html::{Params, justext_text};

fn main() {
    let Some(english) = Stoplist::for_language("English") else { return };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let page: serde_json::Value =
            match line.map_err(|e| e.to_string()).and_then(|l| serde_json::from_str(&l).map_err(|e| e.to_string())) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("stdin line {}: {e}", i + 1);
                    std::process::exit(1);
                }
            };
        let html = page["html"].as_str().unwrap_or_default();
        let row = serde_json::json!({
            "name": page["name"],
            "justext": justext_text(html, &english, &Params::default(), false),
            "main_text": main_text(html, &english, &MainTextParams::default()),
        });
        if writeln!(out, "{row}").is_err() {
            return;
        }
    }
}
