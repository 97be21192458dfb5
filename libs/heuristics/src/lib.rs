//! Document scores with the exact semantics of the tools users compare against.
//!
//! [`nemo`] mirrors NeMo Curator's heuristic filters (`nemo_curator.stages.text.filters.heuristic`,
//! version 1.4.0): same names, parameters, defaults, scores and keep decisions, checked
//! document by document against scores NeMo Curator itself produced
//! (`tests/parity/nemo_reference.jsonl`, made by `scripts/parity/make_reference.py`).
//! Python semantics are reproduced where they matter: lengths count code points, words come
//! from `str.split()` (Python's whitespace), `strip()` and `lower()` as Python's.
//!
//! Where NeMo Curator raises (a ratio over zero sentences or words, the longest word of an
//! empty text) we return a defined score instead (ratios: the one that drops the document,
//! as NeMo's other filters do for empty texts); `tests/parity/DISAGREEMENTS.md` lists them.

pub mod code;
pub mod datatrove;
pub mod en_words;
pub mod ftfy;
pub mod modifiers;
pub mod nemo;
pub mod nemotron_cc;
pub mod punctuation;
pub mod py;
pub mod rule_params;
pub mod sentencepiece;
pub mod tokenizer;
pub mod wordpiece;

/// One step of a fused chain's `filters` list, `{filter: <stage name>, <params>…}`: the stage
/// name and the remaining fields (the params, plus whatever the chain itself reads, such as
/// `score_field`). `example` names a stage for the error messages.
pub fn chain_step(value: &serde_json::Value, example: &str) -> Result<(String, serde_json::Map<String, serde_json::Value>), String> {
    let serde_json::Value::Object(map) = value else { return Err(format!("expected an object like {{filter: {example}}}, got {value}")) };
    let mut params = map.clone();
    match params.remove("filter") {
        Some(serde_json::Value::String(name)) => Ok((name, params)),
        Some(other) => Err(format!("`filter` must be a stage name, got {other}")),
        None => Err(format!("missing `filter` (the stage name, e.g. {example})")),
    }
}

/// Parse every step of a chain, reporting every bad one at once (each message names its
/// `filters[i]`), not only the first.
pub fn parse_steps<T>(
    filters: &[serde_json::Value],
    parse: impl Fn(usize, &serde_json::Value) -> Result<T, curator_sdk::StageError>,
) -> Result<Vec<T>, curator_sdk::StageError> {
    let mut steps = Vec::with_capacity(filters.len());
    let mut errors = Vec::new();
    for (i, v) in filters.iter().enumerate() {
        match parse(i, v) {
            Ok(s) => steps.push(s),
            Err(
                curator_sdk::StageError::InvalidParams(m) | curator_sdk::StageError::Failed(m) | curator_sdk::StageError::OutOfMemory(m),
            ) => errors.push(m),
        }
    }
    if errors.is_empty() { Ok(steps) } else { Err(curator_sdk::StageError::InvalidParams(errors.join("; "))) }
}

/// Declares a stage whose params are a NeMo heuristic's (same names, types, defaults and docs
/// as `curator_heuristics::nemo::$lib`, from one list: `nemo/params.rs`), with
/// `self.heuristic()` building the rule from them.
///
/// ```text
/// curator_heuristics::nemo_stage!(WordCountFilter,
///     /// Keeps documents whose word count lies in [min_words, max_words].
///     #[stage(name = "word_count_filter", cpus = 1.0, memory_mb = 256)]
///     pub struct WordCountFilterStage);
/// ```
#[macro_export]
macro_rules! nemo_stage {
    ($lib:ident, $($head:tt)*) => {
        $crate::__nemo_params!($lib, __nemo_stage ($lib, $($head)*));
    };
}

/// [`nemo_stage!`] for a `#[stage(..., score_filter)]` struct, with [`curator_sdk::Score`]
/// implemented by the heuristic's own score and keep rule (NeMo's `ScoreFilter`).
#[macro_export]
macro_rules! nemo_score_stage {
    ($lib:ident, $(#[$m:meta])* $vis:vis struct $stage:ident) => {
        $crate::nemo_stage!($lib, $(#[$m])* $vis struct $stage);
        $crate::score_stage!($stage,
            score(s, text) { $crate::nemo::Heuristic::score(&s.heuristic(), text) },
            keep(s, v) { $crate::nemo::Heuristic::keep(&s.heuristic(), v) });
    };
}

/// The stage struct of [`nemo_stage!`], from a heuristic's field list.
#[doc(hidden)]
#[macro_export]
macro_rules! __nemo_stage {
    (($lib:ident, $(#[$m:meta])* $vis:vis struct $stage:ident) { $( $(#[doc = $doc:literal])* $field:ident : $ty:ty $(= $default:tt)? ),* $(,)? }) => {
        $(#[$m])*
        $vis struct $stage {
            $( $(#[doc = $doc])* $(#[param(default = $default)])? pub $field: $ty, )*
        }

        impl $stage {
            /// The rule these params describe.
            fn heuristic(&self) -> $crate::nemo::$lib {
                $crate::nemo::$lib { $( $field: ::core::clone::Clone::clone(&self.$field), )* }
            }
        }
    };
}

/// Implements [`curator_sdk::Score`] for a `#[stage(..., score_filter)]` struct from a score
/// and a keep rule: `score_stage!(MyStage, score(s, text) { … }, keep(s, v) { v >= s.min })`.
#[macro_export]
macro_rules! score_stage {
    ($stage:ty, score($s:ident, $text:ident) $score:block, keep($k:ident, $v:ident) $keep:block) => {
        impl ::curator_sdk::Score for $stage {
            fn score(&self, doc: &::curator_sdk::Doc<'_>) -> f64 {
                let ($s, $text) = (self, doc.text());
                $score
            }
            fn keep(&self, $v: f64) -> bool {
                let $k = self;
                $keep
            }
            fn score_field(&self) -> Option<&str> {
                self.score_field.as_deref()
            }
            fn invert(&self) -> bool {
                self.invert
            }
            fn filter(&self) -> bool {
                self.filter
            }
        }
    };
}

/// A deterministic source of random test cases (a 64-bit linear congruential generator).
#[cfg(test)]
pub(crate) struct Lcg(pub u64);

#[cfg(test)]
impl Lcg {
    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize % n
    }

    /// A string of fewer than `max` characters drawn from `alphabet`.
    pub fn string(&mut self, alphabet: &[char], max: usize) -> String {
        let len = self.below(max);
        (0..len).map(|_| alphabet[self.below(alphabet.len())]).collect()
    }
}
