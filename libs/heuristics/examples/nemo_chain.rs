//! NeMo Curator's English heuristic chain, compiled natively, over a JSONL file: the baseline
//! for the same stages running as WASM plugins (scripts/bench-catalogue.py).
//!
//!     cargo run --release -p curator-heuristics --example nemo_chain -- FILE.jsonl
//!
//! Prints `documents kept seconds` (scoring time only: the file is parsed first).

use std::time::Instant;

mod support;

use curator_heuristics::nemo::*;

/// One filter of the chain: does it keep this document?
type Check = Box<dyn Fn(&mut View<'_>) -> bool>;

fn chain() -> Vec<Check> {
    fn f<H: Heuristic + 'static>(h: H) -> Check {
        Box::new(move |v| h.keep(h.score_view(v)))
    }
    let mut c = vec![
        f(NonAlphaNumericFilter::default()),
        f(SymbolsToWordsFilter::default()),
        f(NumbersFilter::default()),
        f(UrlsFilter::default()),
        f(WhiteSpaceFilter::default()),
        f(ParenthesesFilter::default()),
        f(BoilerPlateStringFilter::default()),
        f(RepeatedLinesFilter::default()),
        f(RepeatedParagraphsFilter::default()),
        f(RepeatedLinesByCharFilter::default()),
        f(RepeatedParagraphsByCharFilter::default()),
        f(WordCountFilter::default()),
        f(PunctuationFilter::default()),
        f(WordsWithoutAlphabetsFilter::default()),
        f(CommonEnglishWordsFilter::default()),
        f(MeanWordLengthFilter::default()),
        f(LongWordFilter::default()),
        f(EllipsisFilter::default()),
    ];
    for (n, r) in ENGLISH_TOP_NGRAMS {
        c.push(f(RepeatingTopNGramsFilter { n, max_repeating_ngram_ratio: r }));
    }
    for (n, r) in ENGLISH_DUPLICATE_NGRAMS {
        c.push(f(RepeatingDuplicateNGramsFilter { n, max_repeating_duplicate_ngram_ratio: r }));
    }
    c.push(f(BulletsFilter::default()));
    c
}

fn main() {
    let docs = support::texts_from_arg("usage: nemo_chain FILE.jsonl");
    let filters = chain();
    if std::env::var_os("PER_FILTER").is_some() {
        for (i, f) in filters.iter().enumerate() {
            let t = Instant::now();
            let k = docs.iter().filter(|d| f(&mut View::new(d))).count();
            eprintln!("filter {i}: {:.3}s ({k} kept)", t.elapsed().as_secs_f64());
        }
    }
    let t = Instant::now();
    // one view per document, shared by the chain's filters (as the heuristic_chain stage does)
    let kept = docs
        .iter()
        .filter(|d| {
            let mut v = View::new(d);
            filters.iter().all(|f| f(&mut v))
        })
        .count();
    println!("{} {kept} {:.3}", docs.len(), t.elapsed().as_secs_f64());
}
