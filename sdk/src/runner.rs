//! The stage traits and the adapters that turn each into a batch [`Runner`].

use std::borrow::Cow;
use std::marker::PhantomData;

use crate::batch::{Batch, BatchError, Column, Output};
use crate::doc::Doc;

/// Why a stage could not start or could not process a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageError {
    /// The params are unusable; says which and why.
    InvalidParams(String),
    /// Processing failed.
    Failed(String),
    /// The batch did not fit in memory (e.g. CUDA out of memory): the host retries it in
    /// halves, down to one document.
    OutOfMemory(String),
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StageError::InvalidParams(m) => write!(f, "invalid params: {m}"),
            StageError::Failed(m) => f.write_str(m),
            StageError::OutOfMemory(m) => write!(f, "out of memory: {m}"),
        }
    }
}

impl std::error::Error for StageError {}

impl From<BatchError> for StageError {
    fn from(e: BatchError) -> Self {
        StageError::Failed(e.to_string())
    }
}

/// Keeps or drops each document. Filters never change documents, and a chain of them
/// never copies text: the host receives only the indices kept.
pub trait Filter {
    /// Called once per instance after params are parsed (load models, compile patterns).
    fn init(&mut self) -> Result<(), StageError> {
        Ok(())
    }
    /// Whether to keep `doc`.
    fn keep(&self, doc: &Doc<'_>) -> bool;
}

/// Rewrites the text of each document. Return `Cow::Borrowed(doc.text())` to leave it as is.
pub trait Map {
    fn init(&mut self) -> Result<(), StageError> {
        Ok(())
    }
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str>;
}

/// Scores each document and keeps or drops it by its score, with NeMo Curator's ScoreFilter
/// semantics: a stage can write the score to a column (`score_field`), filter by it, or both.
/// Implement `score` and `keep`; expose the three choices as params (conventionally
/// `score_field: Option<String>`, `invert: bool`, `filter: bool` defaulting to true).
pub trait Score {
    fn init(&mut self) -> Result<(), StageError> {
        Ok(())
    }
    /// The document's score.
    fn score(&self, doc: &Doc<'_>) -> f64;
    /// Whether a score keeps the document (before `invert`).
    fn keep(&self, score: f64) -> bool;
    /// Column to write the score to (float64), if any.
    fn score_field(&self) -> Option<&str> {
        None
    }
    /// Keep what `keep` would drop and drop what it would keep.
    fn invert(&self) -> bool {
        false
    }
    /// Whether to drop documents at all (false: only write the score).
    fn filter(&self) -> bool {
        true
    }
}

/// Rewrites each document's text or drops the document, in one pass (datatrove's
/// C4QualityFilter keeps a document's good lines and drops documents with too few). Return
/// `None` to drop, `Some(Cow::Borrowed(doc.text()))` to keep as is.
pub trait Rewrite {
    fn init(&mut self) -> Result<(), StageError> {
        Ok(())
    }
    fn rewrite<'a>(&self, doc: &Doc<'a>) -> Option<Cow<'a, str>>;
}

/// A general batch transformation.
pub trait Stage {
    fn init(&mut self) -> Result<(), StageError> {
        Ok(())
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError>;
}

/// A stage instance as the host drives it.
pub trait Runner {
    fn init(&mut self) -> Result<(), StageError>;
    fn process(&mut self, batch: Batch) -> Result<Output, StageError>;
}

/// Implemented by the [`crate::stage`] attribute: the manifest and how to build an instance.
pub trait StageDef: Sized {
    /// The manifest JSON, identical to the `curator-manifest` custom section.
    const MANIFEST: &'static str;
    /// Parse params (JSON) and build an initialised instance.
    fn build(params_json: &str) -> Result<Box<dyn Runner>, StageError>;
}

struct ScoreRunner<T>(T);
struct FilterRunner<T>(T);
struct MapRunner<T>(T);
struct StageRunner<T>(T);
struct RewriteRunner<T>(T);

impl<T: Score> Runner for ScoreRunner<T> {
    fn init(&mut self) -> Result<(), StageError> {
        self.0.init()
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let (field, invert, filter) = (self.0.score_field().map(str::to_string), self.0.invert(), self.0.filter());
        let stage = &self.0;
        score_filter(&batch, field.as_deref(), filter, invert, |doc| {
            let s = stage.score(doc);
            Ok((s, stage.keep(s)))
        })
    }
}

/// NeMo Curator's ScoreFilter over a batch, for stages that score each document themselves
/// (a model, a per-document draw, another column): `score` gives a document's score and
/// whether the filter passes it; the scores go to `score_field` when given; `invert` flips
/// the decisions; with `filter` false every document is kept.
pub fn score_filter(
    batch: &Batch,
    score_field: Option<&str>,
    filter: bool,
    invert: bool,
    mut score: impl FnMut(&Doc<'_>) -> Result<(f64, bool), StageError>,
) -> Result<Output, StageError> {
    let mut keep = Vec::with_capacity(batch.len());
    let mut scores = Vec::with_capacity(if score_field.is_some() { batch.len() } else { 0 });
    batch.for_each_doc(|doc| {
        let (s, passes) = score(doc)?;
        if score_field.is_some() {
            scores.push(s);
        }
        if !filter || passes != invert {
            keep.push(doc.index() as u32);
        }
        Ok::<_, StageError>(())
    })?;
    Ok(match score_field {
        None => Output::Selection(keep),
        Some(name) if !filter => Output::Columns(vec![Column::float64(name, &scores)]),
        Some(name) => Output::Scored { columns: vec![Column::float64(name, &scores)], keep },
    })
}

/// Where a path inside a granted directory is. A sandboxed (WASM) stage sees the grant
/// `models` at `/models`, so `/models/x.bin` is already right; a native stage runs unsandboxed
/// in a worker, and the host tells it where each grant is, so `/models/x.bin` becomes
/// `<granted path>/x.bin`. Other paths are returned unchanged.
pub fn granted_path(path: &str) -> std::path::PathBuf {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(rest) = path.strip_prefix('/') {
        let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
        if let Some(host) = crate::context::context().dirs.get(name) {
            return std::path::Path::new(host).join(tail);
        }
    }
    std::path::PathBuf::from(path)
}

/// Read a file from a directory the pipeline granted (the stage's manifest requests it as
/// `grant`); the error names the param, the path and the grant.
pub fn read_granted(param: &str, path: &str, grant: &str) -> Result<Vec<u8>, StageError> {
    std::fs::read(granted_path(path))
        .map_err(|e| StageError::InvalidParams(format!("{param} {path}: {e} (grant its directory as `{grant}`)")))
}

/// [`read_granted`], then `parse` the bytes (a model, a tokenizer); a parse error names the file.
pub fn load_granted<T, E: std::fmt::Display>(
    param: &str,
    path: &str,
    grant: &str,
    parse: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<T, StageError> {
    parse(&read_granted(param, path, grant)?).map_err(|e| StageError::InvalidParams(format!("{path}: {e}")))
}

impl<T: Rewrite> Runner for RewriteRunner<T> {
    fn init(&mut self) -> Result<(), StageError> {
        self.0.init()
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let mut keep = Vec::with_capacity(batch.len());
        let mut text = Column::utf8("text", std::iter::empty());
        text.data.reserve(batch.column("text")?.data.len());
        batch.for_each_doc(|doc| {
            if let Some(t) = self.0.rewrite(doc) {
                text.data.extend_from_slice(t.as_bytes());
                keep.push(doc.index() as u32);
            }
            let end = u32::try_from(text.data.len()).map_err(|_| StageError::Failed("rewritten text column exceeds 4 GiB".into()))?;
            text.offsets.push(end);
            Ok::<_, StageError>(())
        })?;
        Ok(Output::Scored { columns: vec![text], keep })
    }
}

impl<T: Filter> Runner for FilterRunner<T> {
    fn init(&mut self) -> Result<(), StageError> {
        self.0.init()
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let mut keep = Vec::with_capacity(batch.len());
        batch.for_each_doc(|doc| {
            if self.0.keep(doc) {
                keep.push(doc.index() as u32);
            }
            Ok::<_, StageError>(())
        })?;
        Ok(Output::Selection(keep))
    }
}

impl<T: Map> Runner for MapRunner<T> {
    fn init(&mut self) -> Result<(), StageError> {
        self.0.init()
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let text = batch.column("text")?;
        let mut out = Column {
            name: "text".into(),
            ty: text.ty,
            validity: text.validity.clone(),
            offsets: Vec::with_capacity(batch.len() + 1),
            data: Vec::with_capacity(text.data.len()),
        };
        out.offsets.push(0);
        batch.for_each_doc(|doc| {
            out.data.extend_from_slice(self.0.map(doc).as_bytes());
            let end = u32::try_from(out.data.len()).map_err(|_| StageError::Failed("mapped text column exceeds 4 GiB".into()))?;
            out.offsets.push(end);
            Ok::<_, StageError>(())
        })?;
        Ok(Output::Columns(vec![out]))
    }
}

impl<T: Stage> Runner for StageRunner<T> {
    fn init(&mut self) -> Result<(), StageError> {
        self.0.init()
    }
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        self.0.process(batch)
    }
}

/// Picks the adapter for a concrete stage type at compile time ("autoref specialisation"):
/// `(&&&&Probe::<T>::new()).runner(t)` resolves to [`ViaScore`] if `T: Score`, else
/// [`ViaRewrite`] if `T: Rewrite`, else [`ViaFilter`] if `T: Filter`, else [`ViaMap`] if
/// `T: Map`, else [`ViaStage`].
pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    pub fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for Probe<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Probe<T> {}

pub trait ViaScore<T> {
    fn runner(self, stage: T) -> Box<dyn Runner>;
}
pub trait ViaRewrite<T> {
    fn runner(self, stage: T) -> Box<dyn Runner>;
}
pub trait ViaFilter<T> {
    fn runner(self, stage: T) -> Box<dyn Runner>;
}
pub trait ViaMap<T> {
    fn runner(self, stage: T) -> Box<dyn Runner>;
}
pub trait ViaStage<T> {
    fn runner(self, stage: T) -> Box<dyn Runner>;
}

impl<T: Score + 'static> ViaScore<T> for &&&&Probe<T> {
    fn runner(self, stage: T) -> Box<dyn Runner> {
        Box::new(ScoreRunner(stage))
    }
}
impl<T: Rewrite + 'static> ViaRewrite<T> for &&&Probe<T> {
    fn runner(self, stage: T) -> Box<dyn Runner> {
        Box::new(RewriteRunner(stage))
    }
}
impl<T: Filter + 'static> ViaFilter<T> for &&Probe<T> {
    fn runner(self, stage: T) -> Box<dyn Runner> {
        Box::new(FilterRunner(stage))
    }
}
impl<T: Map + 'static> ViaMap<T> for &Probe<T> {
    fn runner(self, stage: T) -> Box<dyn Runner> {
        Box::new(MapRunner(stage))
    }
}
impl<T: Stage + 'static> ViaStage<T> for Probe<T> {
    fn runner(self, stage: T) -> Box<dyn Runner> {
        Box::new(StageRunner(stage))
    }
}
