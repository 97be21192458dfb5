//! Deduplication steps: what a `- dedup:` entry of a pipeline file means, which document of
//! a duplicate group survives, and how much memory and disk each phase needs (the capacity
//! policy `curator-host plan` and `run` apply). Pure: no IO.
//!
//! A dedup step is a barrier. Everything before it streams into a spill of documents; the
//! step computes duplicate groups from it in phases; the documents then flow on from that
//! spill to the stages after it and to the sink.
//!
//! **Which document survives**: the first of its group in source order — inputs in listing
//! order (sorted paths), documents in file order. That order does not depend on how inputs
//! are partitioned, on the number of workers or on bands per iteration.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec_error::SpecError;

mod capacity;
mod semantic;
pub use capacity::*;
pub use semantic::*;

/// How documents are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DedupMethod {
    /// Identical text (a 128-bit hash of it).
    Exact,
    /// Near-identical text: MinHash signatures, LSH buckets, candidate pairs checked against
    /// their Jaccard similarity, connected components.
    Fuzzy,
    /// Near-identical meaning (NeMo Curator's SemDeDup): embeddings clustered with k-means;
    /// within a cluster, in keep order, a document whose cosine similarity to an earlier one
    /// is at least 1 − eps is a duplicate of it.
    Semantic,
}

/// The text hash of exact dedup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExactHash {
    /// xxh3-128 of the text's UTF-8 bytes.
    #[default]
    Xxh3,
    /// MD5 of the text's UTF-8 bytes (as NeMo Curator's exact dedup).
    Md5,
}

/// Where MinHash signatures are computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// On a GPU when this machine has one, else on the CPU (same signatures either way).
    #[default]
    Auto,
    Gpu,
    Cpu,
}

/// One `- dedup:` step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DedupSpec {
    pub method: DedupMethod,
    #[serde(default)]
    pub action: DedupAction,
    /// Exact: `xxh3` (default) or `md5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<ExactHash>,
    /// Fuzzy: characters per shingle (default 24, as NeMo Curator). Exclusive with `word_ngrams`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub char_ngrams: Option<usize>,
    /// Fuzzy: words per shingle (datatrove's mode: 5, with 14 bands × 8 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word_ngrams: Option<usize>,
    /// Fuzzy: LSH bands (default 20 for characters, 14 for words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_bands: Option<usize>,
    /// Fuzzy: MinHash values per band (default 13 for characters, 8 for words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhashes_per_band: Option<usize>,
    /// Fuzzy: seed of the hash family (default 42).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Accepted for NeMo Curator pipelines; shingles are always hashed to 64 bits here (the
    /// collision rate NeMo's `true` buys), so either value gives the same signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_64_bit_hash: Option<bool>,
    /// Fuzzy: bands bucketed per pass over the signatures (default: 5, lowered by the
    /// planner when 5 would not fit this machine's memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bands_per_iteration: Option<usize>,
    /// Fuzzy: candidate pairs whose true Jaccard similarity of shingle sets is below this
    /// are dropped before components are built (default 0.8; `0` keeps every LSH pair, as
    /// NeMo Curator does).
    #[serde(default = "default_jaccard")]
    pub jaccard_threshold: f64,
    /// Fuzzy: where signatures are computed (the `minhash` plugin): auto | gpu | cpu.
    #[serde(default)]
    pub device: Device,
    /// Hash partitions of the grouping and bucket spill files (default: as few as fit
    /// memory; more make the phases shardable across machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<usize>,
    /// Fuzzy: documents per batch sent to the `minhash` stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// Fuzzy: a fixed number of `minhash` workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_workers: Option<usize>,
    /// Semantic: k-means clusters (default: one per 1,000 documents, at least 1; NeMo asks
    /// for ≥ 1,000 on real corpora).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_clusters: Option<usize>,
    /// Semantic: k-means iterations at most (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iter: Option<usize>,
    /// Semantic: k-means stops when centroids move less than this × the data's variance
    /// (default 1e-4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
    /// Semantic: duplicates at cosine similarity ≥ 1 − eps (default 0.01); a list is reported
    /// together, its first value decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps: Option<Eps>,
    /// Semantic: hard (default) | easy | random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub which_to_keep: Option<KeepRule>,
    /// Semantic: share of the embeddings k-means is fitted on (default 1; every document is
    /// then assigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_fraction: Option<f64>,
    /// Semantic: the column holding each document's embedding (default `embedding`, what the
    /// `embedder` stage writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_field: Option<String>,
}

fn default_seed() -> u64 {
    42
}
fn default_jaccard() -> f64 {
    0.8
}

/// NeMo Curator's default bands per iteration.
pub const DEFAULT_BANDS_PER_ITERATION: usize = 5;

/// Fuzzy parameters with their defaults applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuzzyParams {
    /// Shingles: `Chars(n)` or `Words(n)`.
    pub shingle: Shingle,
    pub num_bands: usize,
    pub rows: usize,
    pub seed: u64,
    pub jaccard_threshold: f64,
}

/// What a shingle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shingle {
    Chars(usize),
    Words(usize),
}

impl FuzzyParams {
    pub fn num_hashes(&self) -> usize {
        self.num_bands * self.rows
    }
    /// Whether candidate pairs are checked against their Jaccard similarity, which needs each
    /// document's signature (and, where it leaves doubt, its text) after the LSH buckets.
    /// Without the check (`jaccard_threshold: 0`, NeMo Curator's behaviour) a document is
    /// known by its band keys alone.
    pub fn checks_pairs(&self) -> bool {
        self.jaccard_threshold > 0.0
    }
    /// The similarity at which a pair is caught with probability ½: (1/b)^(1/r).
    pub fn lsh_threshold(&self) -> f64 {
        (1.0 / self.num_bands as f64).powf(1.0 / self.rows as f64)
    }
}

impl DedupSpec {
    /// Whether the step's documents spill leaves the text behind and its output phase reads
    /// the source again (for the batches whose source columns no stage in front changed).
    /// The spill then keeps a key per document, computed as the documents are spilled:
    /// exact dedup's hash of the text, or fuzzy dedup's band keys when its pairs are not
    /// checked (`FuzzyParams::checks_pairs`). The text is moved once: read, hashed, and read
    /// again only for the output. Fuzzy dedup that checks its doubtful pairs on their text,
    /// and semantic dedup (it reads vectors from the spill), spill the whole batch.
    pub fn output_rereads_source(&self) -> bool {
        match self.method {
            DedupMethod::Exact => true,
            DedupMethod::Fuzzy => !self.fuzzy().checks_pairs(),
            DedupMethod::Semantic => false,
        }
    }

    /// The fuzzy parameters with defaults (NeMo's for characters, datatrove's for words).
    pub fn fuzzy(&self) -> FuzzyParams {
        let (shingle, bands, rows) = match self.word_ngrams {
            Some(w) => (Shingle::Words(w), 14, 8),
            None => (Shingle::Chars(self.char_ngrams.unwrap_or(24)), 20, 13),
        };
        FuzzyParams {
            shingle,
            num_bands: self.num_bands.unwrap_or(bands),
            rows: self.minhashes_per_band.unwrap_or(rows),
            seed: self.seed,
            jaccard_threshold: self.jaccard_threshold,
        }
    }

    /// The semantic parameters with defaults (NeMo Curator's).
    pub fn semantic(&self) -> SemanticParams {
        SemanticParams {
            n_clusters: self.n_clusters,
            max_iter: self.max_iter.unwrap_or(300),
            tol: self.tol.unwrap_or(1e-4),
            eps: self.eps.as_ref().map_or(vec![0.01], Eps::values),
            keep: self.which_to_keep.unwrap_or_default(),
            fit_fraction: self.fit_fraction.unwrap_or(1.0),
            seed: self.seed,
            embedding_field: self.embedding_field.clone().unwrap_or_else(|| "embedding".into()),
        }
    }

    /// The field the readers lift into a float32-vector column for this step: a semantic
    /// step's `embedding_field` (stored embeddings; a stage in front of the step that
    /// computes them replaces the column). Other methods read the text only.
    pub fn vector_field(&self) -> Option<String> {
        (self.method == DedupMethod::Semantic).then(|| self.semantic().embedding_field)
    }

    /// Every mistake in the step, with `at` (e.g. `stages[2].dedup`) as the path prefix.
    pub fn validate(&self, file: &str, at: &str) -> Vec<SpecError> {
        let mut errors = Vec::new();
        let mut err = |field: &str, msg: String| errors.push(SpecError::new(file, format!("{at}.{field}"), msg));
        let fuzzy_only: [(&str, bool); 8] = [
            ("char_ngrams", self.char_ngrams.is_some()),
            ("word_ngrams", self.word_ngrams.is_some()),
            ("num_bands", self.num_bands.is_some()),
            ("minhashes_per_band", self.minhashes_per_band.is_some()),
            ("bands_per_iteration", self.bands_per_iteration.is_some()),
            ("use_64_bit_hash", self.use_64_bit_hash.is_some()),
            ("batch_size", self.batch_size.is_some()),
            ("num_workers", self.num_workers.is_some()),
        ];
        let semantic_only: [(&str, bool); 7] = [
            ("n_clusters", self.n_clusters.is_some()),
            ("max_iter", self.max_iter.is_some()),
            ("tol", self.tol.is_some()),
            ("eps", self.eps.is_some()),
            ("which_to_keep", self.which_to_keep.is_some()),
            ("fit_fraction", self.fit_fraction.is_some()),
            ("embedding_field", self.embedding_field.is_some()),
        ];
        if self.method != DedupMethod::Semantic {
            for (field, set) in semantic_only {
                if set {
                    err(field, "applies to method: semantic only".into());
                }
            }
        }
        match self.method {
            DedupMethod::Semantic => {
                for (field, set) in fuzzy_only.into_iter().chain([("hash", self.hash.is_some())]) {
                    if set {
                        err(field, "does not apply to method: semantic".into());
                    }
                }
                let p = self.semantic();
                if p.n_clusters == Some(0) {
                    err("n_clusters", "must be > 0".into());
                }
                if p.max_iter == 0 {
                    err("max_iter", "must be > 0".into());
                }
                if p.tol.is_nan() || p.tol < 0.0 {
                    err("tol", format!("must be ≥ 0, found {}", p.tol));
                }
                if p.eps.is_empty() || p.eps.iter().any(|e| !(0.0..=1.0).contains(e)) {
                    err("eps", format!("must be between 0 and 1 (one value or a list), found {:?}", p.eps));
                }
                if p.fit_fraction.is_nan() || p.fit_fraction <= 0.0 || p.fit_fraction > 1.0 {
                    err("fit_fraction", format!("must be in (0, 1], found {}", p.fit_fraction));
                }
            }
            DedupMethod::Exact => {
                for (field, set) in fuzzy_only {
                    if set {
                        err(field, "applies to method: fuzzy only".into());
                    }
                }
            }
            DedupMethod::Fuzzy => {
                if self.hash.is_some() {
                    err("hash", "applies to method: exact only".into());
                }
                if self.char_ngrams.is_some() && self.word_ngrams.is_some() {
                    err("word_ngrams", "char_ngrams and word_ngrams are both set; set only one".into());
                }
                for (field, v, max) in [
                    ("char_ngrams", self.char_ngrams, 4096),
                    ("word_ngrams", self.word_ngrams, 64),
                    ("num_bands", self.num_bands, 512),
                    ("minhashes_per_band", self.minhashes_per_band, 64),
                    ("batch_size", self.batch_size, usize::MAX),
                    ("num_workers", self.num_workers, usize::MAX),
                ] {
                    if let Some(v) = v
                        && !(1..=max).contains(&v)
                    {
                        err(field, format!("must be between 1 and {max}, found {v}"));
                    }
                }
                let p = self.fuzzy();
                if p.num_hashes() > 4096 {
                    err("num_bands", format!("num_bands × minhashes_per_band = {} is over 4096 hashes", p.num_hashes()));
                }
                if let Some(b) = self.bands_per_iteration
                    && !(1..=p.num_bands).contains(&b)
                {
                    err("bands_per_iteration", format!("must be between 1 and num_bands ({}), found {b}", p.num_bands));
                }
                if !(0.0..=1.0).contains(&self.jaccard_threshold) {
                    err("jaccard_threshold", format!("must be between 0 and 1, found {}", self.jaccard_threshold));
                }
            }
        }
        if self.partitions == Some(0) {
            err("partitions", "must be > 0".into());
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> DedupSpec {
        let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_follow_nemo_and_datatrove() {
        let s = spec("method: fuzzy");
        let p = s.fuzzy();
        assert_eq!((p.shingle, p.num_bands, p.rows, p.seed), (Shingle::Chars(24), 20, 13, 42));
        assert!((p.lsh_threshold() - 0.794).abs() < 0.01);
        let w = spec("{method: fuzzy, word_ngrams: 5}").fuzzy();
        assert_eq!((w.shingle, w.num_bands, w.rows), (Shingle::Words(5), 14, 8));
        assert_eq!(s.action, DedupAction::Remove);
        assert_eq!(s.jaccard_threshold, 0.8);
    }

    #[test]
    fn the_text_is_spilled_only_for_steps_that_read_it_after_the_documents_phase() {
        for (yaml, rereads) in [
            ("method: exact", true),
            ("method: fuzzy", false),
            ("{method: fuzzy, jaccard_threshold: 0}", true),
            ("{method: fuzzy, word_ngrams: 5, jaccard_threshold: 0.0}", true),
            ("{method: semantic, n_clusters: 4}", false),
        ] {
            assert_eq!(spec(yaml).output_rereads_source(), rereads, "{yaml}");
        }
        // The plan's spill disk: 1 M documents of 2.7 KB.
        let corpus = Corpus { docs: 1_000_000, bytes: 2_700_000_000 };
        let disk = |yaml: &str| plan_dedup(&spec(yaml), corpus, 24 << 30).spill_bytes;
        assert!(disk("method: fuzzy") > corpus.bytes + 1_000_000 * 260 * 4, "the text and 260 hashes a document");
        // Without the pair check: an id, a row and 20 band keys a document, twice (spill, scan).
        assert!(disk("{method: fuzzy, jaccard_threshold: 0}") < 1_000_000 * 2 * (64 + 160) + 500_000_000);
        assert!(disk("method: exact") < corpus.bytes / 20);
        // Nor does it plan memory for the shingle sets of pairs it does not check.
        let components = |yaml: &str| plan_dedup(&spec(yaml), corpus, 24 << 30).phases[1].bytes;
        assert!(components("{method: fuzzy, jaccard_threshold: 0}") < 64 << 20);
        assert!(components("method: fuzzy") > 1 << 30);
    }

    #[test]
    fn validation_names_each_field() {
        let e = spec("{method: exact, num_bands: 4}").validate("p.yaml", "stages[1].dedup");
        assert_eq!(e[0].to_string(), "p.yaml: stages[1].dedup.num_bands: applies to method: fuzzy only");
        let e = spec("{method: fuzzy, char_ngrams: 5, word_ngrams: 5, bands_per_iteration: 30, jaccard_threshold: 2}")
            .validate("p.yaml", "stages[0].dedup");
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["stages[0].dedup.word_ngrams", "stages[0].dedup.bands_per_iteration", "stages[0].dedup.jaccard_threshold"]);
        assert!(spec("{method: fuzzy, hash: md5}").validate("p", "d")[0].message.contains("exact only"));
    }

    #[test]
    fn a_terabyte_on_24_gib_gets_one_to_three_bands_per_iteration() {
        let gib = 1u64 << 30;
        // Web text averages 2–4 KB per document (FineWeb ≈ 3 KB).
        for avg in [1_000u64, 2_000, 3_000, 4_000] {
            let corpus = Corpus { docs: (1u64 << 40) / avg, bytes: 1 << 40 };
            let plan = plan_dedup(&spec("method: fuzzy"), corpus, 24 * gib);
            assert!((1..=3).contains(&plan.bands_per_iteration), "{avg} B/doc: {plan:?}");
            assert!(plan.phases[0].bytes <= plan.budget_bytes, "{plan:?}");
        }
        // Small corpora keep NeMo's 5.
        let small = plan_dedup(&spec("method: fuzzy"), Corpus { docs: 1_000_000, bytes: 4 << 30 }, 24 * gib);
        assert_eq!((small.bands_per_iteration, small.iterations, small.partitions), (5, 4, 1));
    }

    #[test]
    fn semantic_defaults_validation_and_plan() {
        let s = spec("method: semantic");
        let p = s.semantic();
        assert_eq!((p.max_iter, p.tol, p.eps.clone(), p.keep, p.fit_fraction), (300, 1e-4, vec![0.01], KeepRule::Hard, 1.0));
        assert_eq!(p.embedding_field, "embedding");
        assert_eq!(s.vector_field().as_deref(), Some("embedding"));
        assert_eq!(spec("{method: semantic, embedding_field: vec}").vector_field().as_deref(), Some("vec"));
        assert_eq!(spec("method: exact").vector_field(), None);
        assert_eq!(p.clusters(1_000_000), 1000);
        assert_eq!(p.clusters(10), 1);
        assert_eq!(spec("{method: semantic, eps: [0.01, 0.05]}").semantic().eps, vec![0.01, 0.05]);
        let e = spec("{method: semantic, eps: 2, fit_fraction: 0, num_bands: 3}").validate("p.yaml", "stages[1].dedup");
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["stages[1].dedup.num_bands", "stages[1].dedup.eps", "stages[1].dedup.fit_fraction"]);
        assert!(spec("{method: fuzzy, n_clusters: 5}").validate("p", "d")[0].message.contains("semantic only"));
        // A million documents in 10 clusters: warned; in 1,000: the pairwise phase is small.
        let corpus = Corpus { docs: 1_000_000, bytes: 3 << 30 };
        let few = plan_dedup(&spec("{method: semantic, n_clusters: 10}"), corpus, 24 << 30);
        assert!(few.warnings[0].contains("1000 clusters"), "{:?}", few.warnings);
        let ok = plan_dedup(&spec("method: semantic"), corpus, 24 << 30);
        assert!(ok.warnings.is_empty() && ok.fits, "{ok:?}");
        assert!(ok.phases[1].bytes < few.phases[1].bytes);
        // Fitting on a sample takes less memory.
        let sample = plan_dedup(&spec("{method: semantic, fit_fraction: 0.1}"), corpus, 24 << 30);
        assert!(sample.phases[0].bytes < ok.phases[0].bytes);
    }

    #[test]
    fn a_setting_that_cannot_fit_is_reported() {
        let corpus = Corpus { docs: 1 << 30, bytes: 1 << 42 };
        let plan = plan_dedup(&spec("{method: fuzzy, bands_per_iteration: 20, partitions: 1}"), corpus, 8 << 30);
        assert!(!plan.fits);
        // Left to itself the planner partitions until a band fits.
        let plan = plan_dedup(&spec("method: fuzzy"), corpus, 8 << 30);
        assert_eq!(plan.bands_per_iteration, 1);
        assert!(plan.phases[0].bytes <= plan.budget_bytes, "{plan:?}");
        let exact = plan_dedup(&spec("method: exact"), corpus, 8 << 30);
        assert!(exact.partitions > 1 && exact.fits, "{exact:?}");
    }

    #[test]
    fn documents_are_kept_for_the_output_in_half_of_what_the_phases_leave() {
        let gib = 1u64 << 30;
        let small = plan_dedup(&spec("method: exact"), Corpus { docs: 100_000, bytes: 256 << 20 }, 24 * gib);
        assert_eq!(small.resident_bytes(), (small.budget_bytes - small.peak_bytes) / 2);
        assert!(small.resident_bytes() > 7 * gib, "{small:?}");
        // A plan that does not fit keeps nothing.
        let over =
            plan_dedup(&spec("{method: fuzzy, bands_per_iteration: 20, partitions: 1}"), Corpus { docs: 1 << 30, bytes: 1 << 42 }, 8 * gib);
        assert_eq!(over.resident_bytes(), 0);
    }
}
