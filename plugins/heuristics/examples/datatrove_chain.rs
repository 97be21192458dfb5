//! FineWeb's quality filters (datatrove's Gopher repetition, Gopher quality, C4 quality
//! without the terminal-punctuation rule, FineWeb quality), compiled natively, over a JSONL
//! file: a profiling and benchmarking harness.
//!
//!     cargo run --release -p curator-heuristics --example datatrove_chain -- FILE.jsonl
//!
//! Prints `documents kept seconds` (filtering time only: the file is parsed first).

use std::time::Instant;

mod support;

use curator_heuristics::datatrove::{C4Quality, FineWebQuality, GopherQuality, GopherRepetition};

fn main() {
    let docs = support::texts_from_arg("usage: datatrove_chain FILE.jsonl");
    let (rep, qual, fw) = (GopherRepetition::default(), GopherQuality::default(), FineWebQuality::default());
    let c4 = C4Quality { filter_no_terminal_punct: false, ..C4Quality::default() };
    let t = Instant::now();
    let mut kept = 0;
    for d in &docs {
        if rep.check(d).is_err() || qual.check(d).is_err() {
            continue;
        }
        let Ok(text) = c4.apply(d) else { continue };
        kept += usize::from(fw.check(&text).is_ok());
    }
    println!("{} {kept} {:.3}", docs.len(), t.elapsed().as_secs_f64());
}
