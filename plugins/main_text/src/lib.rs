//! `main_text`: a page's HTML (in `text`, as the `warc` source reads it) becomes its main
//! content: what is never content dropped by tag and by class/id/role, the article's element
//! found, link lists dropped, jusText as the fallback for pages with little left (the rules
//! in `curator_html::main_text`). A page with nothing left is dropped.

use curator_html::main_text::{MainTextParams, main_text};
use curator_html::stoplists::Stoplist;
use curator_sdk::prelude::*;

/// Keeps the main content of HTML pages.
#[stage(name = "main_text", cpus = 1.0, memory_mb = 512)]
pub struct MainText {
    /// Blocks with more of their characters in links than this are dropped (headings kept).
    #[param(default = 0.5, min = 0, max = 1)]
    pub max_link_density: f64,
    /// Under this many characters of main text, jusText's good paragraphs are used instead.
    #[param(default = 100)]
    pub min_chars: usize,
    /// jusText's stop-word list for that fallback, by language name (`English`, `German`, …).
    #[param(default = "English")]
    pub language: String,
    #[state]
    ready: Option<(Stoplist, MainTextParams)>,
}

impl Rewrite for MainText {
    fn init(&mut self) -> Result<(), StageError> {
        let stoplist = Stoplist::for_language(&self.language).ok_or_else(|| {
            let known: Vec<&str> = curator_html::stoplists::languages().collect();
            StageError::InvalidParams(format!(
                "language: no jusText stop-word list for {:?} (there are: {})",
                self.language,
                known.join(", ")
            ))
        })?;
        self.ready = Some((stoplist, MainTextParams { max_link_density: self.max_link_density, min_chars: self.min_chars }));
        Ok(())
    }

    fn rewrite<'a>(&self, doc: &Doc<'a>) -> Option<Cow<'a, str>> {
        let (stoplist, params) = self.ready.as_ref()?;
        let text = main_text(doc.text(), stoplist, params);
        (!text.is_empty()).then_some(Cow::Owned(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;

    #[test]
    fn keeps_the_article_and_drops_empty_pages() {
        let article = "The old harbour was built in the years after the great storm, when the town decided that it could no longer depend on the beach.";
        let page =
            format!("<body><nav><a href=/>Home</a></nav><main><h1>Harbour</h1><p>{article}</p></main><footer>(c) Town</footer></body>");
        let mut s = NativeStage::new::<MainText>("{}").unwrap();
        let out = s.run_texts(&[&page, "<body><nav><a href=/>Home</a></nav></body>"]).unwrap();
        assert_eq!(out, vec![format!("Harbour\n{article}")]);
        assert!(NativeStage::new::<MainText>(r#"{"language": "Klingon"}"#).is_err());
    }
}
