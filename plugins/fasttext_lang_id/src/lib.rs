//! NeMo Curator's `FastTextLangId` (and datatrove's `LanguageFilter` with the fastText
//! backend) as a stage: a fastText language model — typically lid.176 — read from the
//! directory the pipeline grants as `models`, run inside the sandbox. Writes the language and
//! its probability; keeps documents whose probability reaches `min_langid_score` and, when
//! `lang` is set, whose language matches (a language-only code such as `en` matches every
//! script of it, `eng_Latn` only itself; case is ignored), as NeMo does.

use curator_fasttext::Model;
use curator_sdk::prelude::*;

/// Identifies each document's language with a fastText model.
#[stage(name = "fasttext_lang_id", cpus = 1.0, memory_mb = 512, dir = "models")]
pub struct FastTextLangId {
    /// The model file as the stage sees it (inside the granted `models` directory).
    #[param(default = "/models/lid.176.ftz")]
    pub model_path: String,
    /// Smallest probability kept.
    #[param(default = 0.3, min = 0, max = 1)]
    pub min_langid_score: f64,
    /// Keep only this language (e.g. `en`); none: any language.
    pub lang: Option<String>,
    /// Column for the language code (the model's label without `__label__`).
    #[param(default = "language")]
    pub language_field: String,
    /// Column for the probability.
    #[param(default = "language_score")]
    pub score_field: String,
    #[state]
    model: Option<Model>,
}

impl Stage for FastTextLangId {
    fn init(&mut self) -> Result<(), StageError> {
        self.model = Some(load_granted("model_path", &self.model_path, "models", Model::load)?);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let model = self.model.as_ref().ok_or_else(|| StageError::Failed("the model is not loaded".into()))?;
        let wanted = self.lang.as_deref().map(str::to_lowercase);
        let (mut langs, mut scores, mut keep) = (Vec::with_capacity(batch.len()), Vec::with_capacity(batch.len()), Vec::new());
        batch.for_each_doc(|doc| {
            let text = doc.text().trim().replace('\n', " ");
            let (score, lang) = model.predict(&text, 1, 0.0).first().map_or((0.0, ""), |&(p, l)| (f64::from(p), l));
            let matches = wanted.as_deref().is_none_or(|w| {
                let l = lang.to_lowercase();
                if w.contains('_') { l == w } else { l.split('_').next() == Some(w) }
            });
            if score >= self.min_langid_score && matches {
                keep.push(doc.index() as u32);
            }
            langs.push(lang.to_string());
            scores.push(score);
            Ok::<_, StageError>(())
        })?;
        let columns =
            vec![Column::utf8(&self.language_field, langs.iter().map(String::as_str)), Column::float64(&self.score_field, &scores)];
        Ok(Output::Scored { columns, keep })
    }
}
