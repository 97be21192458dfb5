//! FineWeb's quality filters (datatrove's Gopher repetition, Gopher quality, C4 quality
//! without the terminal-punctuation rule, FineWeb quality), compiled natively, over a JSONL
//! file, as the `datatrove_chain` stage runs them: a profiling and benchmarking harness.
//!
//!     cargo run --release -p curator-heuristics --example datatrove_chain -- FILE.jsonl
//!
//! Prints `documents kept seconds` (filtering time only: the file is parsed first).

use std::time::Instant;

mod support;

use curator_heuristics::datatrove::{AnyFilter, C4Quality, FineWebQuality, GopherQuality, GopherRepetition, run_chain};

fn main() {
    let docs = support::texts_from_arg("usage: datatrove_chain FILE.jsonl");
    // as the datatrove_chain stage runs them: words split once per document
    let chain = [
        AnyFilter::GopherRepetition(GopherRepetition::default()),
        AnyFilter::GopherQuality(GopherQuality::default()),
        AnyFilter::C4Quality(C4Quality { filter_no_terminal_punct: false, ..C4Quality::default() }),
        AnyFilter::FineWebQuality(FineWebQuality::default()),
    ];
    let t = Instant::now();
    let kept = docs.iter().filter(|d| run_chain(&chain, d).is_some()).count();
    println!("{} {kept} {:.3}", docs.len(), t.elapsed().as_secs_f64());
}
