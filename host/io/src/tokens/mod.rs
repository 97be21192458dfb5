//! Tokenized sinks: each kept document becomes the token ids of a granted `tokenizer.json`,
//! written in a training framework's own format — Megatron-LM's indexed dataset
//! ([`megatron`]: `.bin` + `.idx`, and [`megatron::merge`] to join prefixes) and datatrove's
//! token files ([`datatrove`]: `.ds` + `.ds.index`). What the two share is here: the
//! tokenizer, loaded once per process at planning ([`Tokenizer::load`], which also refuses a
//! missing file, an unknown end-of-document token or a width the vocabulary does not fit),
//! and the ids' bytes on disk ([`put_ids`]).
//!
//! Ids are the `tokenizers` crate's (Hugging Face's own Rust library, which
//! `transformers`' fast tokenizers, Megatron's `HuggingFaceTokenizer` and datatrove all call), so
//! they are the ids those tools write for the same `tokenizer.json`.

pub mod bpe;
pub mod datatrove;
pub mod loss;
pub mod megatron;
pub mod numpy_rng;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::{Array, RecordBatch, StringArray};
use curator_core::io_spec::{TokenDtype, TokensSpec};

use crate::IoError;

/// A problem with a sink's `tokens:` settings, found at planning: the field (below `sink.`)
/// and what is wrong.
pub type Problem = (&'static str, String);

/// How the ids of a document are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// With the tokenizer's post-processor (its BOS/EOS template), as `tokenizer(text)` does
    /// in `transformers`: Megatron's `HuggingFaceTokenizer.tokenize`.
    PostProcessor,
    /// The model's tokens only, then `eos` appended: datatrove's `DocumentTokenizer` with an
    /// `eos_token` (it replaces the post-processor with `$A <EOS>`).
    ThenEos(u32),
}

/// A loaded `tokenizer.json` and what the sink needs to know of it.
pub struct Tokenizer {
    /// Our byte-level BPE, when it reproduces this file id for id ([`bpe::ByteBpe::from_json`]).
    fast: Result<bpe::ByteBpe, String>,
    inner: tokenizers::Tokenizer,
    /// The same without a post-processor (for [`Specials::ThenEos`]).
    bare: tokenizers::Tokenizer,
    /// Tokens in the vocabulary, added tokens included (`len(tokenizer)` in `transformers`).
    pub vocab: usize,
    /// `tokenizer_config.json`'s `eos_token`, when the directory has one.
    pub config_eos: Option<String>,
    /// The file it was read from.
    pub path: PathBuf,
}

/// The tokenizers this process loaded, by path: planning loads each once and every
/// partition's writer shares it.
fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Tokenizer>>> {
    static CACHE: std::sync::OnceLock<Mutex<HashMap<PathBuf, Arc<Tokenizer>>>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

impl Tokenizer {
    /// The tokenizer at `path`: a directory holding `tokenizer.json`, or the file itself.
    pub fn load(path: &Path) -> Result<Arc<Tokenizer>, String> {
        if let Some(t) = cache().lock().map_err(|_| "tokenizer cache poisoned".to_string())?.get(path) {
            return Ok(t.clone());
        }
        let (file, dir) = if path.is_dir() {
            (path.join("tokenizer.json"), path.to_path_buf())
        } else {
            (path.to_path_buf(), path.parent().map(Path::to_path_buf).unwrap_or_default())
        };
        let json = std::fs::read_to_string(&file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound if path.is_dir() => format!("{} holds no tokenizer.json", path.display()),
            _ => format!("{}: {e}", file.display()),
        })?;
        let mut inner: tokenizers::Tokenizer =
            json.parse().map_err(|e: tokenizers::Error| format!("{}: not a tokenizer.json: {e}", file.display()))?;
        // `transformers` encodes without the file's truncation and padding unless asked.
        inner.with_truncation(None).map_err(|e| format!("{}: {e}", file.display()))?;
        inner.with_padding(None);
        let mut bare = inner.clone();
        bare.with_post_processor(None::<tokenizers::PostProcessorWrapper>);
        let config_eos = read_config_eos(&dir.join("tokenizer_config.json"))?;
        let vocab = inner.get_vocab_size(true);
        let fast = if std::env::var_os("CURATOR_TOKENIZERS_CRATE").is_some() {
            Err("CURATOR_TOKENIZERS_CRATE is set".into())
        } else {
            bpe::ByteBpe::from_json(&json, &|t| inner.token_to_id(t))
        };
        let t = Arc::new(Tokenizer { fast, inner, bare, vocab, config_eos, path: file });
        tracing::info!("tokenizer {}: {}", t.path.display(), t.describe());
        if let Ok(mut c) = cache().lock() {
            c.insert(path.to_path_buf(), t.clone());
        }
        Ok(t)
    }

    /// A copy of the `tokenizers` tokenizer making `specials`' ids as datatrove's does (with an
    /// end-of-document token: its `$A <EOS>` template), to encode with character offsets for
    /// loss masks ([`loss`]).
    pub fn with_offsets(&self, specials: Specials) -> Result<tokenizers::Tokenizer, String> {
        match specials {
            Specials::PostProcessor => Ok(self.inner.clone()),
            Specials::ThenEos(eos) => {
                let template = tokenizers::processors::template::TemplateProcessing::builder()
                    .try_single("$A <EOS>")
                    .map_err(|e| e.to_string())?
                    .special_tokens(vec![("<EOS>", eos)])
                    .build()
                    .map_err(|e| e.to_string())?;
                let mut t = self.bare.clone();
                t.with_post_processor(Some(template));
                Ok(t)
            }
        }
    }

    /// The id of the token `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.inner.token_to_id(text)
    }

    /// Which implementation runs, and why.
    pub fn describe(&self) -> String {
        match &self.fast {
            Ok(_) => "curator's byte-level BPE (id-exact with the tokenizers crate)".into(),
            Err(why) => format!("the tokenizers crate ({why})"),
        }
    }

    /// The ids of `text`, appended to `out`.
    pub fn encode_into(&self, text: &str, specials: Specials, cache: &mut bpe::PieceCache, out: &mut Vec<u32>) -> Result<(), String> {
        if let Ok(fast) = &self.fast {
            match specials {
                Specials::PostProcessor => fast.encode(text, true, cache, out),
                Specials::ThenEos(eos) => {
                    fast.encode(text, false, cache, out);
                    out.push(eos);
                }
            }
            return Ok(());
        }
        match specials {
            Specials::PostProcessor => {
                let e = self.inner.encode_fast(text, true).map_err(|e| e.to_string())?;
                out.extend_from_slice(e.get_ids());
            }
            Specials::ThenEos(eos) => {
                let e = self.bare.encode_fast(text, true).map_err(|e| e.to_string())?;
                out.extend_from_slice(e.get_ids());
                out.push(eos);
            }
        }
        Ok(())
    }
}

/// `eos_token` of a `tokenizer_config.json` (a string, or `{"content": …}` in older files);
/// `None` when there is no such file or field.
fn read_config_eos(path: &Path) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(match &v["eos_token"] {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content").and_then(|c| c.as_str()).map(str::to_string),
        _ => None,
    })
}

/// What a tokenized sink resolved at planning.
pub struct Setup {
    pub tokenizer: Arc<Tokenizer>,
    pub dtype: TokenDtype,
    pub specials: Specials,
    /// Megatron: the end-of-document id appended to each non-empty document.
    pub eod: Option<u32>,
}

/// How a tokenized format resolves its settings.
pub(crate) type SetupFn = fn(&mut curator_core::pipeline::SinkSpec, &Path) -> Result<Setup, Vec<Problem>>;

/// [`crate::format::SinkFormat::prepare`] of a tokenized format: never compressed (`why`),
/// and its settings resolved by `setup`; every problem at once.
pub(crate) fn prepare(
    sink: &mut curator_core::pipeline::SinkSpec,
    base: &Path,
    why_uncompressed: &str,
    setup: SetupFn,
) -> Result<(), Vec<Problem>> {
    let mut problems = Vec::new();
    if sink.compression.is_some_and(|c| c != curator_core::pipeline::Compression::None) {
        problems.push(("compression", why_uncompressed.to_string()));
    }
    if let Err(more) = setup(sink, base) {
        problems.extend(more);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// What `docs` documents like `sample` would make: the sample's token ids per document (the
/// end-of-document token counted where the format appends one) times `docs`, at the setup's
/// width, plus `index_bytes_per_doc` of index per document. `None` when the setup fails or
/// the sample is empty.
pub(crate) fn estimate(
    sink: &curator_core::pipeline::SinkSpec,
    setup: SetupFn,
    sample: &dyn Fn() -> Vec<String>,
    docs: u64,
    index_bytes_per_doc: u64,
) -> Option<crate::format::OutputEstimate> {
    let s = setup(&mut sink.clone(), Path::new("/")).ok()?;
    let sample = sample();
    if sample.is_empty() {
        return None;
    }
    let (mut cache, mut ids, mut tokens) = (bpe::PieceCache::default(), Vec::new(), 0u64);
    for text in &sample {
        ids.clear();
        s.tokenizer.encode_into(text, s.specials, &mut cache, &mut ids).ok()?;
        // Megatron appends its end-of-document token to a non-empty document.
        let eod = !ids.is_empty() && s.eod.is_some();
        tokens += ids.len() as u64 + eod as u64;
    }
    let tokens = (tokens as f64 / sample.len() as f64 * docs as f64).round() as u64;
    Some(crate::format::OutputEstimate { tokens, bytes: tokens * s.dtype.size() as u64 + docs * index_bytes_per_doc })
}

/// The settings of a partition's writer. Planning resolved the paths and checked them, so a
/// failure here is a file changed since: named as a failed write of `loc`.
pub(crate) fn writer_setup(loc: &crate::Loc, sink: &curator_core::pipeline::SinkSpec, setup: SetupFn) -> Result<Setup, IoError> {
    let mut sink = sink.clone();
    setup(&mut sink, Path::new("/")).map_err(|p| IoError::Write {
        path: loc.display(),
        source: std::io::Error::other(p.into_iter().map(|(f, m)| format!("sink.{f}: {m}")).collect::<Vec<_>>().join("; ")),
    })
}

/// The sink's `tokens:` block, its tokenizer path made absolute (against `base`) in place.
pub(crate) fn tokens_of<'a>(
    tokens: &'a mut Option<Box<TokensSpec>>,
    format: &str,
    base: &Path,
) -> Result<&'a mut TokensSpec, Vec<Problem>> {
    let Some(t) = tokens.as_mut() else {
        return Err(vec![("tokens", format!("format {format} needs `tokens: {{tokenizer: DIR}}` (a directory holding tokenizer.json)"))]);
    };
    let p = Path::new(&t.tokenizer);
    if !p.is_absolute() {
        let joined = base.join(p);
        t.tokenizer = std::path::absolute(&joined).unwrap_or(joined).to_string_lossy().into_owned();
    }
    Ok(t)
}

/// The end-of-document token's id: `eos_token` if named, else the tokenizer config's.
pub(crate) fn eos_id(t: &Tokenizer, spec: &TokensSpec, required_by: &str) -> Result<Option<u32>, Problem> {
    let name = match (&spec.eos_token, &t.config_eos) {
        (Some(n), _) => n,
        (None, Some(n)) => n,
        (None, None) => {
            return Err((
                "tokens.eos_token",
                format!("{required_by}, and {} has no tokenizer_config.json naming an eos_token: name it here", t.path.display()),
            ));
        }
    };
    t.token_id(name).map(Some).ok_or_else(|| ("tokens.eos_token", format!("{name:?} is not a token of {}", t.path.display())))
}

/// The width named, or `default`; refused when the vocabulary does not fit it or the format
/// cannot store it.
pub(crate) fn dtype(t: &Tokenizer, spec: &TokensSpec, default: TokenDtype, allowed: &[TokenDtype]) -> Result<TokenDtype, Problem> {
    let d = spec.dtype.unwrap_or(default);
    if !allowed.contains(&d) {
        let names: Vec<_> = allowed.iter().map(|d| d.name()).collect();
        return Err(("tokens.dtype", format!("{} is not a width of this format ({})", d.name(), names.join(", "))));
    }
    if !d.fits(t.vocab) {
        return Err(("tokens.dtype", format!("{} has {} tokens: their ids do not fit {}", t.path.display(), t.vocab, d.name())));
    }
    Ok(d)
}

/// The text column of a batch written by a tokenized sink.
pub(crate) fn texts<'a>(batch: &'a RecordBatch, at: &str) -> Result<&'a StringArray, IoError> {
    crate::records::string_column(batch, crate::TEXT).ok_or_else(|| IoError::Field {
        at: at.to_string(),
        field: crate::TEXT.into(),
        message: "a tokenized sink needs the documents' text as UTF-8".into(),
    })
}

/// Whether row `i` has text (a null text is tokenized as an empty one).
pub(crate) fn text(a: &StringArray, i: usize) -> &str {
    if a.is_null(i) { "" } else { a.value(i) }
}

/// `ids` as little-endian `dtype`s, appended to `out` (planning checked that they fit).
pub fn put_ids(ids: &[u32], dtype: TokenDtype, out: &mut Vec<u8>) {
    match dtype {
        TokenDtype::Uint16 => out.extend(ids.iter().flat_map(|&i| (i as u16).to_le_bytes())),
        TokenDtype::Int32 | TokenDtype::Uint32 => out.extend(ids.iter().flat_map(|&i| i.to_le_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_little_endian_at_the_width() {
        let mut out = Vec::new();
        put_ids(&[1, 258, 65535], TokenDtype::Uint16, &mut out);
        assert_eq!(out, [1, 0, 2, 1, 255, 255]);
        out.clear();
        put_ids(&[70000], TokenDtype::Int32, &mut out);
        assert_eq!(out, 70000u32.to_le_bytes());
    }

    #[test]
    fn a_vocabulary_fits_a_width_when_its_last_id_does() {
        assert!(TokenDtype::Uint16.fits(65536));
        assert!(!TokenDtype::Uint16.fits(65537));
        assert!(TokenDtype::Int32.fits(200_000));
    }
}
