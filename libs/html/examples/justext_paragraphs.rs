//! Print a page's jusText paragraphs, one JSON line each (class, heading, characters in
//! links, text), to see why a paragraph was kept or dropped:
//!
//!     cargo run --release -p curator-html --example justext_paragraphs -- page.html [Language]

use curator_html::stoplists::Stoplist;
use curator_html::{Params, justext};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: justext_paragraphs PAGE.html [LANGUAGE]");
        std::process::exit(2);
    };
    let language = args.next().unwrap_or_else(|| "English".into());
    let html = match std::fs::read(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let Some(stoplist) = Stoplist::for_language(&language) else {
        eprintln!("no stop-word list for {language:?}");
        std::process::exit(2);
    };
    for p in justext(&html, &stoplist, &Params::default()) {
        println!(
            "{}",
            serde_json::json!({"class": format!("{:?}", p.class), "cf": format!("{:?}", p.cf_class), "heading": p.heading, "links": p.chars_in_links, "text": p.text})
        );
    }
}
