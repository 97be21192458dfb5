//! `justext`: a page's HTML (in `text`, as the `warc` source reads it) becomes its main text,
//! by jusText's paragraph classification with NeMo Curator's defaults; the good paragraphs
//! are joined by a blank line, and a page with none is dropped (as NeMo Curator drops it).
//! The rules live in `curator-html`, where the parity test against the Python package sees them.

use std::collections::HashMap;

use curator_html::stoplists::Stoplist;
use curator_html::{Params, classify::classify, justext_text, kept_text, language, paragraphs::paragraphs};
use curator_sdk::prelude::*;

/// Keeps the main text of HTML pages (jusText).
#[stage(name = "justext", cpus = 1.0, memory_mb = 512)]
pub struct Justext {
    /// jusText's stop-word list to use, by language name (`English`, `German`, …: 100 lists),
    /// or `auto`: each page's own, from the language its paragraphs are written in, as NeMo
    /// Curator picks it per page (Chinese, Japanese, Thai and Korean keep every paragraph; a
    /// page in a language with no list is dropped).
    #[param(default = "English")]
    pub language: String,
    /// Stop words of your own instead of a built-in list (empty: use `language`'s).
    #[param(default = [])]
    pub stop_words: Vec<String>,
    /// Paragraphs shorter than this (characters) are short (classified by their neighbours).
    #[param(default = 70)]
    pub length_low: usize,
    /// Paragraphs longer than this with enough stop words are good on their own.
    #[param(default = 200)]
    pub length_high: usize,
    /// Stop-word density at and above which a paragraph is near-good.
    #[param(default = 0.30, min = 0, max = 1)]
    pub stopwords_low: f64,
    /// Stop-word density at and above which a paragraph is good (when long).
    #[param(default = 0.32, min = 0, max = 1)]
    pub stopwords_high: f64,
    /// Paragraphs with more of their characters in links than this are bad.
    #[param(default = 0.2, min = 0, max = 1)]
    pub max_link_density: f64,
    /// Short headings within this many characters before good text are kept.
    #[param(default = 200)]
    pub max_heading_distance: usize,
    /// Treat headings like any other paragraph.
    #[param(default = false)]
    pub no_headings: bool,
    /// Keep every paragraph, boilerplate too (NeMo Curator does so for Thai, Chinese,
    /// Japanese and Korean, where stop-word density says little).
    #[param(default = false)]
    pub keep_boilerplate: bool,
    #[state]
    ready: Option<(Lists, Params)>,
}

/// The stop-word lists a stage classifies with: one, or (`language: auto`) every built-in
/// list, picked per page.
enum Lists {
    One(Stoplist),
    Auto(HashMap<&'static str, Stoplist>),
}

/// The value of `language` that picks each page's list.
const AUTO: &str = "auto";

impl Rewrite for Justext {
    fn init(&mut self) -> Result<(), StageError> {
        let lists = if !self.stop_words.is_empty() {
            Lists::One(Stoplist::from_words(self.stop_words.iter().map(String::as_str)))
        } else if self.language.eq_ignore_ascii_case(AUTO) {
            Lists::Auto(curator_html::stoplists::languages().filter_map(|l| Some((l, Stoplist::for_language(l)?))).collect())
        } else {
            Lists::One(Stoplist::for_language(&self.language).ok_or_else(|| {
                let known: Vec<&str> = curator_html::stoplists::languages().collect();
                StageError::InvalidParams(format!(
                    "language: no jusText stop-word list for {:?} (there are: {AUTO}, {})",
                    self.language,
                    known.join(", ")
                ))
            })?)
        };
        if self.length_low > self.length_high {
            return Err(StageError::InvalidParams(format!("length_low ({}) is over length_high ({})", self.length_low, self.length_high)));
        }
        if self.stopwords_low > self.stopwords_high {
            return Err(StageError::InvalidParams(format!(
                "stopwords_low ({}) is over stopwords_high ({})",
                self.stopwords_low, self.stopwords_high
            )));
        }
        let params = Params {
            length_low: self.length_low,
            length_high: self.length_high,
            stopwords_low: self.stopwords_low,
            stopwords_high: self.stopwords_high,
            max_link_density: self.max_link_density,
            max_heading_distance: self.max_heading_distance,
            no_headings: self.no_headings,
        };
        self.ready = Some((lists, params));
        Ok(())
    }

    fn rewrite<'a>(&self, doc: &Doc<'a>) -> Option<Cow<'a, str>> {
        let (lists, params) = self.ready.as_ref()?;
        let text = match lists {
            Lists::One(stoplist) => justext_text(doc.text(), stoplist, params, self.keep_boilerplate),
            Lists::Auto(by_name) => {
                let mut paragraphs = paragraphs(doc.text());
                let (stoplist, keep_all) = match language::choose(&paragraphs) {
                    language::Choice::List(name) => (by_name.get(name)?, self.keep_boilerplate),
                    language::Choice::KeepAll => (by_name.get("English")?, true),
                    language::Choice::Drop => return None,
                };
                classify(&mut paragraphs, stoplist, params);
                kept_text(&paragraphs, keep_all)
            }
        };
        (!text.is_empty()).then_some(Cow::Owned(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;

    const PAGE: &str = r#"<html><head><title>t</title><style>p{}</style></head><body>
        <div class="nav"><a href="/">Home</a> | <a href="/a">About</a> | <a href="/c">Contact</a></div>
        <p>The history of the town is long and it is one of the oldest in the region. It was founded by farmers who came from the north in search of land, and they built the first church and the market that are still there today.</p>
        <p>Copyright © 2024 Town Council</p></body></html>"#;

    #[test]
    fn keeps_the_article_and_drops_navigation_and_pages_without_text() {
        let mut s = NativeStage::new::<Justext>("{}").unwrap();
        let out = s.run_texts(&[PAGE, "<html><body><a href=x>only a link</a></body></html>"]).unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with("The history of the town") && out[0].ends_with("still there today."), "{out:?}");
    }

    #[test]
    fn bad_params_are_refused_at_setup() {
        let e = NativeStage::new::<Justext>(r#"{"language": "Klingon"}"#).err().unwrap().to_string();
        assert!(e.contains("Klingon") && e.contains("English"), "{e}");
        let e = NativeStage::new::<Justext>(r#"{"length_low": 300}"#).err().unwrap().to_string();
        assert!(e.contains("length_low"), "{e}");
        // Own stop words: German text kept with a German list of one's own.
        let mut s = NativeStage::new::<Justext>(r#"{"stop_words": ["der", "die", "und", "ist", "in", "es", "ein"]}"#).unwrap();
        let page = "<p>Die Geschichte der Stadt ist lang und es ist eine der ältesten in der Region, und die Bauern kamen aus dem Norden und bauten die erste Kirche und den Markt in der Mitte. Die Kirche und der Markt sind noch heute in der Mitte der Stadt.</p>";
        assert_eq!(s.run_texts(&[page]).unwrap().len(), 1);
    }

    #[test]
    fn auto_picks_each_pages_list_keeps_all_of_unspaced_scripts_and_drops_the_rest() {
        let de = "<html><body><div><a href=/>Start</a> | <a href=/k>Kontakt</a></div><p>Die Geschichte der Stadt ist lang, und sie ist eine der ältesten in der Region. Sie wurde von Bauern gegründet, die aus dem Norden kamen, um Land zu suchen, und sie bauten die erste Kirche und den Markt, die noch heute dort stehen.</p></body></html>";
        let ja = "<html><body><div><a href=/>ホーム</a></div><p>町の歴史は長く、この地域で最も古い町の一つです。北から土地を求めてやって来た農民によって築かれました。</p></body></html>";
        let am = "<html><body><p>የከተማዋ ታሪክ ረጅም ነው፤ በክልሉ ውስጥ ካሉት ጥንታዊ ከተሞች አንዷ ናት። ከሰሜን በመጡ ገበሬዎች ተመሠረተች። ከተማዋ ዛሬም ድረስ የቆመ የመጀመሪያ ቤተ ክርስቲያንና ገበያ አላት።</p></body></html>";
        let mut english = NativeStage::new::<Justext>("{}").unwrap();
        // With the English list, the German article has no stop words: nothing is kept.
        assert!(english.run_texts(&[de]).unwrap().is_empty());
        let mut auto = NativeStage::new::<Justext>(r#"{"language": "auto"}"#).unwrap();
        let out = auto.run_texts(&[PAGE, de, ja, am]).unwrap();
        assert_eq!(out.len(), 3, "{out:?}");
        assert!(out[0].starts_with("The history of the town"), "{out:?}");
        // German's own list keeps the article and drops the navigation.
        assert!(out[1].starts_with("Die Geschichte der Stadt") && !out[1].contains("Kontakt"), "{out:?}");
        // Japanese keeps every paragraph, navigation too (as NeMo Curator does).
        assert!(out[2].starts_with("ホーム") && out[2].contains("町の歴史"), "{out:?}");
    }
}
