//! fastText inference for supervised models (`.bin` and quantized `.ftz`), written from the
//! file format and fastText's prediction rules, small enough to run inside a WASM stage.
//!
//! What is reproduced, because predictions depend on it: tokens split on fastText's six
//! whitespace bytes with an end-of-sentence token after the line (as `predict` does);
//! character n-grams of `<word>` hashed with FNV-1a over *signed* bytes; word n-grams hashed
//! from the words' 32-bit hashes sign-extended to 64 bits; pruned (quantized) models'
//! n-gram remapping; the hidden vector as the float mean of input rows; hierarchical
//! softmax (the Huffman tree built from label counts, depth-first search with
//! `log(p + 1e-5)` scores), softmax and one-vs-all outputs; probabilities as
//! `exp(score)`. `tests/parity.rs` checks labels and probabilities against fastText's own
//! Python binding on real text.

use std::collections::HashMap;

/// Why a model file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("not a fastText model (magic number {0:#x})")]
    Magic(u32),
    #[error("fastText model version {0} is not supported (11 or 12)")]
    Version(i32),
    #[error("the model file ends early (while reading {0})")]
    Truncated(&'static str),
    #[error("not a supervised model (model type {0}); only classifiers can predict labels")]
    NotSupervised(i32),
    #[error("unsupported loss {0} (hierarchical softmax, negative sampling, softmax and one-vs-all are)")]
    Loss(i32),
    #[error("inconsistent model: {0}")]
    Inconsistent(String),
}

const EOS: &str = "</s>";
const LABEL_PREFIX: &str = "__label__";

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ModelError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or(ModelError::Truncated(what))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, ModelError> {
        Ok(i32::from_le_bytes(self.take(4, what)?.try_into().map_err(|_| ModelError::Truncated(what))?))
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, ModelError> {
        Ok(i64::from_le_bytes(self.take(8, what)?.try_into().map_err(|_| ModelError::Truncated(what))?))
    }
    fn f64(&mut self, what: &'static str) -> Result<f64, ModelError> {
        Ok(f64::from_le_bytes(self.take(8, what)?.try_into().map_err(|_| ModelError::Truncated(what))?))
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, ModelError> {
        Ok(self.take(1, what)?[0])
    }
    fn f32s(&mut self, n: usize, what: &'static str) -> Result<Vec<f32>, ModelError> {
        let raw = self.take(n.checked_mul(4).ok_or(ModelError::Truncated(what))?, what)?;
        Ok(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// A product quantizer: `nsubq` sub-vectors, 256 centroids each.
struct Pq {
    nsubq: usize,
    dsub: usize,
    lastdsub: usize,
    centroids: Vec<f32>,
}

impl Pq {
    fn load(r: &mut Reader<'_>) -> Result<Pq, ModelError> {
        let dim = r.i32("quantizer")? as usize;
        let nsubq = r.i32("quantizer")? as usize;
        let dsub = r.i32("quantizer")? as usize;
        let lastdsub = r.i32("quantizer")? as usize;
        let centroids = r.f32s(dim * 256, "centroids")?;
        Ok(Pq { nsubq, dsub, lastdsub, centroids })
    }
    fn centroid(&self, m: usize, code: u8) -> &[f32] {
        let i = code as usize;
        if m == self.nsubq - 1 {
            let at = m * 256 * self.dsub + i * self.lastdsub;
            &self.centroids[at..at + self.lastdsub]
        } else {
            let at = (m * 256 + i) * self.dsub;
            &self.centroids[at..at + self.dsub]
        }
    }
}

enum Matrix {
    Dense { n: usize, data: Vec<f32> },
    Quant { codes: Vec<u8>, pq: Pq, norm: Option<(Vec<u8>, Pq)> },
}

impl Matrix {
    fn load_dense(r: &mut Reader<'_>) -> Result<Matrix, ModelError> {
        let m = r.i64("matrix")? as usize;
        let n = r.i64("matrix")? as usize;
        let data = r.f32s(m.checked_mul(n).ok_or(ModelError::Truncated("matrix"))?, "matrix")?;
        Ok(Matrix::Dense { n, data })
    }
    fn load_quant(r: &mut Reader<'_>) -> Result<Matrix, ModelError> {
        let qnorm = r.u8("quantized matrix")? != 0;
        let m = r.i64("quantized matrix")? as usize;
        let _n = r.i64("quantized matrix")?;
        let codesize = r.i32("quantized matrix")? as usize;
        let codes = r.take(codesize, "codes")?.to_vec();
        let pq = Pq::load(r)?;
        let norm = if qnorm { Some((r.take(m, "norm codes")?.to_vec(), Pq::load(r)?)) } else { None };
        Ok(Matrix::Quant { codes, pq, norm })
    }
    /// `x += row i` (fastText's `addRowToVector`).
    fn add_row(&self, x: &mut [f32], i: usize) {
        match self {
            Matrix::Dense { n, data } => {
                for (xj, &v) in x.iter_mut().zip(&data[i * n..(i + 1) * n]) {
                    *xj += v;
                }
            }
            Matrix::Quant { codes, pq, norm } => {
                let alpha = norm.as_ref().map_or(1.0, |(nc, npq)| npq.centroid(0, nc[i])[0]);
                let code = &codes[pq.nsubq * i..pq.nsubq * (i + 1)];
                for (m, &c) in code.iter().enumerate() {
                    let cent = pq.centroid(m, c);
                    for (k, &v) in cent.iter().enumerate() {
                        x[m * pq.dsub + k] += alpha * v;
                    }
                }
            }
        }
    }
    /// Row `i` · `x` (fastText's `dotRow`), accumulated in single precision.
    fn dot_row(&self, x: &[f32], i: usize) -> f32 {
        match self {
            Matrix::Dense { n, data } => {
                let mut d = 0f32;
                for (&a, &b) in data[i * n..(i + 1) * n].iter().zip(x) {
                    d += a * b;
                }
                d
            }
            Matrix::Quant { codes, pq, norm } => {
                let alpha = norm.as_ref().map_or(1.0, |(nc, npq)| npq.centroid(0, nc[i])[0]);
                let code = &codes[pq.nsubq * i..pq.nsubq * (i + 1)];
                let mut d = 0f32;
                for (m, &c) in code.iter().enumerate() {
                    let cent = pq.centroid(m, c);
                    for (k, &v) in cent.iter().enumerate() {
                        d += x[m * pq.dsub + k] * v;
                    }
                }
                d * alpha
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Loss {
    Hs,
    Ns,
    Softmax,
    Ova,
}

#[derive(Clone, Copy)]
struct Node {
    left: i32,
    right: i32,
    count: i64,
}

/// A supervised fastText model.
pub struct Model {
    dim: usize,
    word_ngrams: usize,
    loss: Loss,
    bucket: u32,
    minn: usize,
    maxn: usize,
    nwords: usize,
    /// Word ids by text, and each word's input rows (itself and its character n-grams).
    words: HashMap<String, usize>,
    subwords: Vec<Vec<u32>>,
    labels: Vec<String>,
    prune: Option<HashMap<i32, i32>>,
    input: Matrix,
    output: Matrix,
    tree: Vec<Node>,
}

/// `fastText`'s FNV-1a over signed bytes.
fn hash(s: &[u8]) -> u32 {
    let mut h: u32 = 2166136261;
    for &b in s {
        h ^= (b as i8) as i32 as u32;
        h = h.wrapping_mul(16777619);
    }
    h
}

impl Model {
    /// Parse a `.bin` or `.ftz` file's bytes.
    pub fn load(bytes: &[u8]) -> Result<Model, ModelError> {
        let mut r = Reader { b: bytes, at: 0 };
        let magic = r.i32("header")? as u32;
        if magic != 793712314 {
            return Err(ModelError::Magic(magic));
        }
        let version = r.i32("header")?;
        if version != 11 && version != 12 {
            return Err(ModelError::Version(version));
        }
        let dim = r.i32("args")? as usize;
        let _ws = r.i32("args")?;
        let _epoch = r.i32("args")?;
        let _min_count = r.i32("args")?;
        let _neg = r.i32("args")?;
        let word_ngrams = r.i32("args")?.max(1) as usize;
        let loss = match r.i32("args")? {
            1 => Loss::Hs,
            2 => Loss::Ns,
            3 => Loss::Softmax,
            4 => Loss::Ova,
            other => return Err(ModelError::Loss(other)),
        };
        let model = r.i32("args")?;
        if model != 3 {
            return Err(ModelError::NotSupervised(model));
        }
        let bucket = r.i32("args")?.max(0) as u32;
        let minn = r.i32("args")?.max(0) as usize;
        let mut maxn = r.i32("args")?.max(0) as usize;
        let _lr_update = r.i32("args")?;
        let _t = r.f64("args")?;
        if version == 11 {
            maxn = 0; // old supervised models have no character n-grams
        }
        // Dictionary
        let size = r.i32("dictionary")?.max(0) as usize;
        let nwords = r.i32("dictionary")?.max(0) as usize;
        let nlabels = r.i32("dictionary")?.max(0) as usize;
        let _ntokens = r.i64("dictionary")?;
        let prune_size = r.i64("dictionary")?;
        let mut entries: Vec<(String, i64, u8)> = Vec::with_capacity(size);
        for _ in 0..size {
            let rest = &r.b[r.at..];
            let len = rest.iter().position(|&b| b == 0).ok_or(ModelError::Truncated("dictionary word"))?;
            let word = String::from_utf8_lossy(&rest[..len]).into_owned();
            r.at += len + 1;
            let count = r.i64("dictionary entry")?;
            let kind = r.u8("dictionary entry")?;
            entries.push((word, count, kind));
        }
        if entries.iter().filter(|e| e.2 == 0).count() != nwords || entries.iter().filter(|e| e.2 == 1).count() != nlabels {
            return Err(ModelError::Inconsistent("word and label counts disagree with the entries".into()));
        }
        let prune = if prune_size >= 0 {
            let mut m = HashMap::with_capacity(prune_size as usize);
            for _ in 0..prune_size {
                let a = r.i32("prune index")?;
                let b = r.i32("prune index")?;
                m.insert(a, b);
            }
            Some(m)
        } else {
            None
        };
        let quant_input = r.u8("input flag")? != 0;
        if !quant_input && prune.is_some() {
            return Err(ModelError::Inconsistent("a pruned dictionary with a dense input matrix".into()));
        }
        let input = if quant_input { Matrix::load_quant(&mut r)? } else { Matrix::load_dense(&mut r)? };
        let qout = r.u8("output flag")? != 0;
        let output = if quant_input && qout { Matrix::load_quant(&mut r)? } else { Matrix::load_dense(&mut r)? };

        let mut m = Model {
            dim,
            word_ngrams,
            loss,
            bucket,
            minn,
            maxn,
            nwords,
            words: HashMap::with_capacity(nwords),
            subwords: Vec::with_capacity(nwords),
            labels: Vec::with_capacity(nlabels),
            prune,
            input,
            output,
            tree: Vec::new(),
        };
        let mut label_counts = Vec::with_capacity(nlabels);
        for (word, count, kind) in entries {
            if kind == 0 {
                let id = m.subwords.len();
                let mut rows = vec![id as u32];
                if word != EOS {
                    m.char_ngrams(&format!("<{word}>"), &mut rows);
                }
                m.subwords.push(rows);
                m.words.insert(word, id);
            } else {
                m.labels.push(word.strip_prefix(LABEL_PREFIX).unwrap_or(&word).to_string());
                label_counts.push(count);
            }
        }
        if m.loss == Loss::Hs {
            m.tree = huffman(&label_counts);
        }
        Ok(m)
    }

    /// The labels, without `__label__`, in the model's order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Input row of bucket `id` (after pruning), if it has one.
    fn push_hash(&self, rows: &mut Vec<u32>, id: i32) {
        match &self.prune {
            Some(p) if p.is_empty() => {}
            Some(p) => {
                if let Some(&to) = p.get(&id) {
                    rows.push((self.nwords as i64 + to as i64) as u32);
                }
            }
            None => rows.push((self.nwords as i64 + id as i64) as u32),
        }
    }

    /// Character n-grams (`minn..=maxn` code points) of `word` (already wrapped in `<` `>`).
    fn char_ngrams(&self, word: &str, rows: &mut Vec<u32>) {
        if self.maxn == 0 || self.bucket == 0 {
            return;
        }
        let b = word.as_bytes();
        for i in 0..b.len() {
            if b[i] & 0xC0 == 0x80 {
                continue;
            }
            let (mut j, mut n) = (i, 1);
            while j < b.len() && n <= self.maxn {
                j += 1;
                while j < b.len() && b[j] & 0xC0 == 0x80 {
                    j += 1;
                }
                if n >= self.minn && !(n == 1 && (i == 0 || j == b.len())) {
                    let h = hash(&b[i..j]) % self.bucket;
                    self.push_hash(rows, h as i32);
                }
                n += 1;
            }
        }
    }

    /// Input rows of one line of text, as fastText's `getLine` finds them.
    fn line_rows(&self, text: &str) -> Vec<u32> {
        let mut rows = Vec::new();
        let mut hashes: Vec<i32> = Vec::new();
        let is_space = |b: u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c | 0);
        let tokens = text.as_bytes().split(|&b| is_space(b)).filter(|t| !t.is_empty()).chain(std::iter::once(EOS.as_bytes()));
        for tok in tokens {
            let word = String::from_utf8_lossy(tok);
            let h = hash(tok);
            match self.words.get(word.as_ref()) {
                Some(&id) => {
                    rows.extend_from_slice(if self.maxn == 0 { &self.subwords[id][..1] } else { &self.subwords[id] });
                    hashes.push(h as i32);
                }
                None if word.starts_with(LABEL_PREFIX) => {}
                None => {
                    if word != EOS {
                        self.char_ngrams(&format!("<{word}>"), &mut rows);
                    }
                    hashes.push(h as i32);
                }
            }
        }
        // Word n-grams: the 32-bit hashes, sign-extended, combined.
        if self.bucket > 0 {
            for i in 0..hashes.len() {
                let mut h = hashes[i] as i64 as u64;
                for &next in hashes.iter().take((i + self.word_ngrams).min(hashes.len())).skip(i + 1) {
                    h = h.wrapping_mul(116049371).wrapping_add(next as i64 as u64);
                    self.push_hash(&mut rows, (h % self.bucket as u64) as i32);
                }
            }
        }
        rows
    }

    /// The `k` most likely labels of `text` (one line: newlines count as spaces, as callers
    /// replace them) with their probabilities, most likely first; `threshold` drops less
    /// likely ones. Empty when the text has no usable token.
    pub fn predict(&self, text: &str, k: usize, threshold: f32) -> Vec<(f32, &str)> {
        let rows = self.line_rows(text);
        if rows.is_empty() || k == 0 {
            return Vec::new();
        }
        let mut hidden = vec![0f32; self.dim];
        for &r in &rows {
            self.input.add_row(&mut hidden, r as usize);
        }
        let inv = (1.0f64 / rows.len() as f64) as f32;
        for h in &mut hidden {
            *h *= inv;
        }
        let mut best: Vec<(f32, usize)> = Vec::new();
        let std_log = |x: f32| ((x as f64) + 1e-5).ln() as f32;
        match self.loss {
            Loss::Hs => {
                let root = self.tree.len().saturating_sub(1);
                self.dfs(k, std_log(threshold), root, 0.0, &mut best, &hidden, &std_log);
            }
            Loss::Softmax => {
                let n = self.labels.len();
                let mut out: Vec<f32> = (0..n).map(|i| self.output.dot_row(&hidden, i)).collect();
                let max = out.iter().copied().fold(f32::MIN, f32::max);
                let mut z = 0f32;
                for o in &mut out {
                    *o = (*o - max).exp();
                    z += *o;
                }
                for (i, o) in out.iter().enumerate() {
                    consider(&mut best, k, threshold, o / z, i, &std_log);
                }
            }
            Loss::Ns | Loss::Ova => {
                for i in 0..self.labels.len() {
                    let p = sigmoid(self.output.dot_row(&hidden, i));
                    consider(&mut best, k, threshold, p, i, &std_log);
                }
            }
        }
        best.sort_by(|a, b| b.0.total_cmp(&a.0));
        best.into_iter().map(|(s, i)| ((s as f64).exp() as f32, self.labels[i].as_str())).collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn dfs(
        &self,
        k: usize,
        log_threshold: f32,
        node: usize,
        score: f32,
        best: &mut Vec<(f32, usize)>,
        hidden: &[f32],
        std_log: &impl Fn(f32) -> f32,
    ) {
        if score < log_threshold {
            return;
        }
        if best.len() == k && best.iter().all(|b| score < b.0) {
            return;
        }
        let osz = self.labels.len();
        let n = self.tree[node];
        if n.left == -1 && n.right == -1 {
            best.push((score, node));
            if best.len() > k {
                let worst = best.iter().enumerate().min_by(|a, b| a.1.0.total_cmp(&b.1.0)).map(|(i, _)| i).unwrap_or(0);
                best.swap_remove(worst);
            }
            return;
        }
        let f = sigmoid(self.output.dot_row(hidden, node - osz));
        self.dfs(k, log_threshold, n.left as usize, score + std_log(1.0 - f), best, hidden, std_log);
        self.dfs(k, log_threshold, n.right as usize, score + std_log(f), best, hidden, std_log);
    }
}

/// fastText's `1. / (1 + std::exp(-f))`: the exponential in single precision, the division
/// in double.
fn sigmoid(x: f32) -> f32 {
    let d = 1.0f32 + (-x).exp();
    (1.0f64 / d as f64) as f32
}

/// fastText's `findKBest` step for one label.
fn consider(best: &mut Vec<(f32, usize)>, k: usize, threshold: f32, p: f32, i: usize, std_log: &impl Fn(f32) -> f32) {
    if p < threshold {
        return;
    }
    let s = std_log(p);
    if best.len() == k && best.iter().all(|b| s < b.0) {
        return;
    }
    best.push((s, i));
    if best.len() > k {
        let worst = best.iter().enumerate().min_by(|a, b| a.1.0.total_cmp(&b.1.0)).map(|(j, _)| j).unwrap_or(0);
        best.swap_remove(worst);
    }
}

/// fastText's Huffman tree over label counts (labels are sorted by count, most frequent
/// first); leaves are `0..n`, the root is the last node.
fn huffman(counts: &[i64]) -> Vec<Node> {
    let n = counts.len();
    if n == 0 {
        return Vec::new();
    }
    let mut tree = vec![Node { left: -1, right: -1, count: 1_000_000_000_000_000 }; 2 * n - 1];
    for (t, &c) in tree.iter_mut().zip(counts) {
        t.count = c;
    }
    let (mut leaf, mut node) = (n as i64 - 1, n);
    for i in n..2 * n - 1 {
        let mut mini = [0usize; 2];
        for m in &mut mini {
            if leaf >= 0 && tree[leaf as usize].count < tree[node].count {
                *m = leaf as usize;
                leaf -= 1;
            } else {
                *m = node;
                node += 1;
            }
        }
        tree[i].left = mini[0] as i32;
        tree[i].right = mini[1] as i32;
        tree[i].count = tree[mini[0]].count + tree[mini[1]].count;
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny dense supervised model written in fastText's format: 2 labels, softmax.
    fn tiny(loss: i32) -> Vec<u8> {
        let mut b = Vec::new();
        let i32s = |b: &mut Vec<u8>, v: &[i32]| v.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
        i32s(&mut b, &[793712314, 12]);
        // dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate
        i32s(&mut b, &[2, 5, 5, 1, 5, 1, loss, 3, 0, 0, 0, 100]);
        b.extend_from_slice(&1e-4f64.to_le_bytes());
        // dictionary: 3 words (</s>, good, bad), 2 labels
        i32s(&mut b, &[5, 3, 2]);
        b.extend_from_slice(&10i64.to_le_bytes());
        b.extend_from_slice(&(-1i64).to_le_bytes());
        for (w, c, t) in [("</s>", 5i64, 0u8), ("good", 3, 0), ("bad", 2, 0), ("__label__pos", 6, 1), ("__label__neg", 4, 1)] {
            b.extend_from_slice(w.as_bytes());
            b.push(0);
            b.extend_from_slice(&c.to_le_bytes());
            b.push(t);
        }
        b.push(0); // dense input
        b.extend_from_slice(&3i64.to_le_bytes());
        b.extend_from_slice(&2i64.to_le_bytes());
        for v in [0.0f32, 0.0, 1.0, 0.0, 0.0, 1.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.push(0); // dense output
        b.extend_from_slice(&2i64.to_le_bytes());
        b.extend_from_slice(&2i64.to_le_bytes());
        for v in [2.0f32, -2.0, -2.0, 2.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn predicts_with_softmax_and_ova() {
        let m = Model::load(&tiny(3)).unwrap();
        assert_eq!(m.labels(), ["pos", "neg"]);
        // "good" + </s>: hidden = (0.5, 0); scores (1, -1) → softmax
        let p = m.predict("good", 2, 0.0);
        assert_eq!(p[0].1, "pos");
        let want = 1.0 / (1.0 + (-2.0f64).exp());
        assert!((p[0].0 as f64 - (want + 1e-5)).abs() < 1e-6, "{p:?}");
        assert_eq!(m.predict("bad bad", 1, 0.0)[0].1, "neg");
        let ova = Model::load(&tiny(4)).unwrap();
        assert_eq!(ova.predict("good", 1, 0.0)[0].1, "pos");
    }

    #[test]
    fn rejects_bad_files() {
        assert_eq!(Model::load(&[1, 2, 3]).err(), Some(ModelError::Truncated("header")));
        assert_eq!(Model::load(&[0u8; 8]).err(), Some(ModelError::Magic(0)));
        let mut t = tiny(3);
        t.truncate(t.len() - 3);
        assert_eq!(Model::load(&t).err(), Some(ModelError::Truncated("matrix")));
    }

    #[test]
    fn signed_byte_hash() {
        assert_eq!(hash(b""), 2166136261);
        assert_eq!(hash(b"a"), 0xe40c292c);
        // a byte over 0x7f is sign-extended before the xor
        assert_ne!(hash("é".as_bytes()), {
            let mut h: u32 = 2166136261;
            for &b in "é".as_bytes() {
                h = (h ^ b as u32).wrapping_mul(16777619);
            }
            h
        });
    }

    #[test]
    fn huffman_tree_merges_the_two_rarest() {
        let t = huffman(&[5, 3, 2]);
        assert_eq!((t[3].left, t[3].right), (2, 1));
        assert_eq!((t[4].left, t[4].right), (3, 0)); // ties go to the merged node
    }
}
