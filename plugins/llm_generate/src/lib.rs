//! `llm_generate`: each document's prompt (a template over its fields) sent to the model
//! server the pipeline names in the stage's `service:`, the answer written to
//! `output_field` (`text` rewrites the document, NeMo Curator's rewriting stages; another
//! name keeps both, its generation stages). Requests run concurrently, as many as the
//! service keeps its batch full with (`curator_llm::Limit`), and every answer is kept in
//! the cache, so a resumed run or a retried batch asks nothing twice.
//!
//! A document whose request keeps failing gets the server's error in `_error`: the host
//! sends it to the dead letters (or stops the run) and keeps the others.

use curator_llm::presets::Preset;
use curator_llm::prompt::Template;
use curator_llm::{Chat, Client, Message};
use curator_sdk::prelude::*;

/// Generates text with a served model.
#[stage(
    name = "llm_generate",
    native,
    cpus = 1.0,
    memory_mb = 1024,
    inputs = ["*"],
    input_params = ["input_field"],
    outputs = ["generated", "llm_prompt_tokens", "llm_completion_tokens"],
    sums = ["llm_prompt_tokens", "llm_completion_tokens"],
    batch_size = 256
)]
pub struct LlmGenerate {
    /// One of NeMo Curator's generation tasks, its prompts word for word:
    /// `wikipedia_paraphrase`, `diverse_qa`, `distill`, `extract_knowledge`, `knowledge_list`
    /// (Nemotron-CC's), `multilingual_qa`, or `caption_enhancement` /
    /// `caption_enhancement_av_surveillance` (a `caption` stage's captions, `input_field:
    /// caption`). `prompt`, `system` and `output_field` override it.
    #[param(default = "", one_of = ["", "wikipedia_paraphrase", "diverse_qa", "distill", "extract_knowledge", "knowledge_list", "multilingual_qa", "caption_enhancement", "caption_enhancement_av_surveillance"])]
    pub preset: String,
    /// The field a preset's prompt puts in (NeMo's `input_field`).
    #[param(default = "text")]
    pub input_field: String,
    /// Languages a `{language}` in the prompt is drawn from, one per document (the
    /// `multilingual_qa` preset needs them).
    pub languages: Option<Vec<String>>,
    /// The user message: `{text}`, `{title}`, any string field of the document, `{language}`;
    /// `{{` and `}}` for braces. Empty: the preset's, or `{input_field}`.
    #[param(default = "")]
    pub prompt: String,
    /// A system message before it (empty: the preset's, if it has one).
    #[param(default = "")]
    pub system: String,
    /// The field the answer goes to (`text` rewrites the document). Empty: the preset's (NeMo's
    /// field names), or `generated`.
    #[param(default = "")]
    pub output_field: String,
    /// Strip leading and trailing whitespace from answers.
    #[param(default = true)]
    pub strip: bool,
    /// Most tokens an answer may have.
    #[param(default = 512, min = 1)]
    pub max_tokens: u32,
    /// Sampling temperature (negative: the server's default).
    #[param(default = -1.0)]
    pub temperature: f64,
    /// Nucleus sampling (negative: the server's default).
    #[param(default = -1.0)]
    pub top_p: f64,
    /// Sampling seed (negative: none).
    #[param(default = -1)]
    pub seed: i64,
    /// Seconds one request may take.
    #[param(default = 600.0, min = 1.0)]
    pub request_timeout_s: f64,
    /// Retries of a request after a 429, a 5xx or a time-out.
    #[param(default = 5, min = 0)]
    pub max_retries: u32,
    /// Seconds requests wait for a service none of whose replicas answers (one restarting).
    #[param(default = 900.0, min = 0.0)]
    pub wait_for_server_s: f64,
    /// Requests in flight at first; the limit then follows the server's latency.
    #[param(default = 8, min = 1)]
    pub initial_in_flight: usize,
    /// Requests in flight at most, per worker.
    #[param(default = 256, min = 1)]
    pub max_in_flight: usize,
    /// Keep answers in the host's cache directory (`llm/` in it), keyed by model and
    /// request, so a rerun does not ask again.
    #[param(default = true)]
    pub cache: bool,
    /// Add `llm_prompt_tokens` and `llm_completion_tokens` (the server's usage; a cached
    /// answer's as first counted).
    #[param(default = true)]
    pub usage_fields: bool,
    #[state]
    template: Option<Template>,
    #[state]
    task: Option<Preset>,
    #[state]
    client: Option<Client>,
}

impl LlmGenerate {
    fn settings(&self) -> curator_llm::stage::Settings {
        curator_llm::stage::Settings {
            request_timeout_s: self.request_timeout_s,
            max_retries: self.max_retries,
            wait_for_server_s: self.wait_for_server_s,
            initial_in_flight: self.initial_in_flight,
            max_in_flight: self.max_in_flight,
            cache: self.cache,
        }
    }

    fn chat(&self, user: String) -> Chat {
        let mut messages = Vec::with_capacity(2);
        if !self.system.is_empty() {
            messages.push(Message::new("system", self.system.clone()));
        }
        messages.push(Message::new("user", user));
        Chat {
            messages,
            max_tokens: Some(self.max_tokens),
            temperature: (self.temperature >= 0.0).then_some(self.temperature),
            top_p: (self.top_p >= 0.0).then_some(self.top_p),
            seed: u64::try_from(self.seed).ok(),
            extra: Default::default(),
        }
    }
}

impl Stage for LlmGenerate {
    fn init(&mut self) -> Result<(), StageError> {
        self.task = match self.preset.as_str() {
            "" => None,
            name => Some(Preset::parse(name).ok_or_else(|| StageError::InvalidParams(format!("preset: {name:?} is not a preset")))?),
        };
        if self.prompt.is_empty() {
            self.prompt = match self.task {
                Some(p) => p.template(&self.input_field),
                None => format!("{{{}}}", self.input_field),
            };
        }
        if self.system.is_empty() {
            self.system = self.task.and_then(Preset::system).unwrap_or_default().to_string();
        }
        if self.output_field.is_empty() {
            self.output_field = self.task.map_or("generated", Preset::output_field).to_string();
        }
        let template = Template::parse(&self.prompt).map_err(|e| StageError::InvalidParams(format!("prompt: {e}")))?;
        if template.fields().contains(&"language") && self.languages.as_ref().is_none_or(Vec::is_empty) {
            return Err(StageError::InvalidParams("the prompt has {language}: list the languages to draw from under languages".into()));
        }
        if self.output_field.starts_with('_') {
            return Err(StageError::InvalidParams(format!("output_field: {:?} is not a field a stage may write", self.output_field)));
        }
        self.template = Some(template);
        self.client = curator_llm::stage::connect("llm_generate", &self.settings())?;
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let (Some(template), Some(client)) = (&self.template, &self.client) else {
            return Err(StageError::Failed("llm_generate: not set up".into()));
        };
        let mut columns = Vec::new();
        for f in template.fields().into_iter().filter(|f| !(*f == "language" && self.languages.is_some())) {
            let c = batch.column(f).map_err(|_| StageError::Failed(format!("prompt names {{{f}}}, which these documents do not have")))?;
            columns.push((f, c.strings().map_err(|e| StageError::Failed(format!("prompt field {{{f}}}: {e}")))?));
        }
        let n = batch.len();
        let ids = batch.column("id").ok().and_then(|c| c.strings().ok());
        let chats: Vec<Chat> = (0..n)
            .map(|i| {
                let user = template.render(|f| match (f, &self.languages) {
                    ("language", Some(langs)) => language(langs, ids.as_ref().and_then(|c| c.get(i)).unwrap_or(""), i),
                    _ => columns.iter().find(|c| c.0 == f).and_then(|c| c.1.get(i)).unwrap_or(""),
                });
                self.chat(user)
            })
            .collect();
        let replies = client.chat_all(&chats);
        let mut texts: Vec<Cow<'_, str>> = Vec::with_capacity(n);
        let mut errors: Vec<Option<String>> = Vec::with_capacity(n);
        let (mut prompt_tokens, mut completion_tokens) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for r in &replies {
            match r {
                Ok(r) => {
                    let text = if self.strip { r.text.trim() } else { &r.text };
                    texts.push(match self.task {
                        Some(p) => p.clean(text),
                        None => Cow::Borrowed(text),
                    });
                    errors.push(None);
                    prompt_tokens.push(r.prompt_tokens as i64);
                    completion_tokens.push(r.completion_tokens as i64);
                }
                Err(e) => {
                    texts.push(Cow::Borrowed(""));
                    errors.push(Some(e.to_string()));
                    prompt_tokens.push(0);
                    completion_tokens.push(0);
                }
            }
        }
        let mut out = vec![Column::utf8(&self.output_field, texts.iter().map(|t| t.as_ref()))];
        if self.usage_fields {
            out.push(Column::int64("llm_prompt_tokens", &prompt_tokens));
            out.push(Column::int64("llm_completion_tokens", &completion_tokens));
        }
        out.extend(Column::row_errors(&errors));
        Ok(Output::Columns(out))
    }
}

impl Drop for LlmGenerate {
    /// What this worker's client did, for the run's log.
    fn drop(&mut self) {
        if let Some(c) = &self.client {
            curator_llm::stage::log_stats("llm_generate", c);
        }
    }
}

/// The language a document's `{language}` stands for: one of `languages`, drawn from its id
/// (its row without one), so every run asks the same (NeMo draws with `secrets.choice`).
fn language<'a>(languages: &'a [String], id: &str, row: usize) -> &'a str {
    let key = if id.is_empty() { row.to_string() } else { id.to_string() };
    let h = curator_sdk::shingle::shingle_hash(key.as_bytes());
    languages.get((h % languages.len().max(1) as u64) as usize).map_or("", String::as_str)
}
