//! Piece counts from a SentencePiece `.model` file, for NeMo Curator's
//! TokenizerFertilityFilter (`len(text) / len(encode_as_pieces(text))`). Our own reader of the
//! model's protobuf and our own encoders, following SentencePiece's rules: the normalizer's
//! whitespace handling (leading/trailing/extra spaces removed, a dummy prefix, spaces as
//! `▁`), unigram Viterbi with the unknown-piece penalty, BPE merges by piece score (leftmost
//! first on ties), runs of unknown pieces counted as one, byte fallback. Normalization rules
//! other than `identity` are approximated with Unicode NFKC (SentencePiece's `nmt_nfkc`
//! is NFKC plus a few extra mappings). Checked against the `sentencepiece` package in
//! `tests/tokenizer_parity.rs`.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;

/// Why a model file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SentencePieceError {
    #[error("not a SentencePiece model: {0}")]
    Format(&'static str),
    #[error("unsupported SentencePiece model type {0} (unigram and BPE are supported)")]
    ModelType(u64),
}

#[derive(Clone, Copy, PartialEq)]
enum PieceType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

/// A SentencePiece model.
pub struct SentencePiece {
    bpe: bool,
    byte_fallback: bool,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    nfkc: bool,
    /// Pieces that can be matched: text → (score, is user-defined).
    pieces: HashMap<String, (f32, bool)>,
    max_piece_bytes: usize,
    min_score: f32,
    max_score: f32,
}

/// A protobuf field: number, wire type, payload (length-delimited), value (varint, fixed32).
type Field<'a> = (u64, u64, &'a [u8], u64);

struct Pb<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Pb<'a> {
    fn varint(&mut self) -> Result<u64, SentencePieceError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at).ok_or(SentencePieceError::Format("truncated varint"))?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(SentencePieceError::Format("varint too long"))
    }
    /// The next field: (number, wire type, payload for length-delimited, value for varint /
    /// fixed32).
    fn field(&mut self) -> Result<Option<Field<'a>>, SentencePieceError> {
        if self.at >= self.b.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => Ok(Some((num, wire, &[], self.varint()?))),
            1 => {
                self.at += 8;
                Ok(Some((num, wire, &[], 0)))
            }
            2 => {
                let len = self.varint()? as usize;
                let end = self.at.checked_add(len).filter(|&e| e <= self.b.len()).ok_or(SentencePieceError::Format("truncated field"))?;
                let s = &self.b[self.at..end];
                self.at = end;
                Ok(Some((num, wire, s, 0)))
            }
            5 => {
                let raw = self.b.get(self.at..self.at + 4).ok_or(SentencePieceError::Format("truncated fixed32"))?;
                self.at += 4;
                Ok(Some((num, wire, &[], u64::from(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]])))))
            }
            _ => Err(SentencePieceError::Format("unknown wire type")),
        }
    }
}

impl SentencePiece {
    /// Parse a `.model` file's bytes.
    pub fn load(bytes: &[u8]) -> Result<SentencePiece, SentencePieceError> {
        let mut m = Pb { b: bytes, at: 0 };
        let mut raw_pieces: Vec<(String, f32, PieceType)> = Vec::new();
        let (mut model_type, mut byte_fallback) = (1u64, false);
        let (mut name, mut add_dummy_prefix, mut remove_extra, mut escape) = (String::from("nmt_nfkc"), true, true, true);
        while let Some((num, _, payload, _)) = m.field()? {
            match num {
                1 => {
                    let mut p = Pb { b: payload, at: 0 };
                    let (mut text, mut score, mut kind) = (String::new(), 0f32, PieceType::Normal);
                    while let Some((n, _, s, v)) = p.field()? {
                        match n {
                            1 => text = String::from_utf8_lossy(s).into_owned(),
                            2 => score = f32::from_bits(v as u32),
                            3 => {
                                kind = match v {
                                    2 => PieceType::Unknown,
                                    3 => PieceType::Control,
                                    4 => PieceType::UserDefined,
                                    5 => PieceType::Unused,
                                    6 => PieceType::Byte,
                                    _ => PieceType::Normal,
                                }
                            }
                            _ => {}
                        }
                    }
                    raw_pieces.push((text, score, kind));
                }
                2 => {
                    let mut t = Pb { b: payload, at: 0 };
                    while let Some((n, _, _, v)) = t.field()? {
                        match n {
                            3 => model_type = v,
                            35 => byte_fallback = v != 0,
                            _ => {}
                        }
                    }
                }
                3 => {
                    let mut t = Pb { b: payload, at: 0 };
                    while let Some((n, _, s, v)) = t.field()? {
                        match n {
                            1 => name = String::from_utf8_lossy(s).into_owned(),
                            3 => add_dummy_prefix = v != 0,
                            4 => remove_extra = v != 0,
                            5 => escape = v != 0,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if raw_pieces.is_empty() {
            return Err(SentencePieceError::Format("no pieces"));
        }
        if model_type != 1 && model_type != 2 {
            return Err(SentencePieceError::ModelType(model_type));
        }
        let (mut min_score, mut max_score) = (f32::MAX, f32::MIN);
        let mut pieces = HashMap::new();
        for (text, score, kind) in raw_pieces {
            if kind == PieceType::Normal {
                min_score = min_score.min(score);
                max_score = max_score.max(score);
            }
            if matches!(kind, PieceType::Normal | PieceType::UserDefined) {
                pieces.insert(text, (score, kind == PieceType::UserDefined));
            }
        }
        let max_piece_bytes = pieces.keys().map(String::len).max().unwrap_or(1);
        Ok(SentencePiece {
            bpe: model_type == 2,
            byte_fallback,
            add_dummy_prefix,
            remove_extra_whitespaces: remove_extra,
            escape_whitespaces: escape,
            nfkc: name != "identity",
            pieces,
            max_piece_bytes,
            min_score,
            max_score,
        })
    }

    fn normalize(&self, text: &str) -> String {
        let text: String = if self.nfkc { text.nfkc().collect() } else { text.to_string() };
        let space = if self.escape_whitespaces { "\u{2581}" } else { " " };
        let mut out = String::with_capacity(text.len() + 3);
        let body = if self.remove_extra_whitespaces { text.trim_start_matches(' ') } else { text.as_str() };
        if self.add_dummy_prefix && !body.is_empty() {
            out.push_str(space);
        }
        let mut prev_space = self.remove_extra_whitespaces;
        for c in body.chars() {
            if c == ' ' {
                if !(prev_space && self.remove_extra_whitespaces) {
                    out.push_str(space);
                }
                prev_space = true;
            } else {
                out.push(c);
                prev_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        out
    }

    /// `len(encode_as_pieces(text))`.
    pub fn count_pieces(&self, text: &str) -> usize {
        let norm = self.normalize(text);
        let units: Vec<(Option<f32>, usize)> = if self.bpe { self.bpe_units(&norm) } else { self.unigram_units(&norm) };
        // (None, bytes) = an unknown piece: byte fallback counts its bytes; otherwise runs of
        // unknown pieces merge into one.
        let mut n = 0;
        let mut prev_unknown = false;
        for (score, bytes) in units {
            match score {
                Some(_) => {
                    n += 1;
                    prev_unknown = false;
                }
                None if self.byte_fallback => n += bytes,
                None => {
                    if !prev_unknown {
                        n += 1;
                    }
                    prev_unknown = true;
                }
            }
        }
        n
    }

    /// Unigram Viterbi: the best-scoring segmentation (SentencePiece's optimized encoder).
    fn unigram_units(&self, s: &str) -> Vec<(Option<f32>, usize)> {
        let size = s.len();
        let unk = self.min_score - 10.0;
        // per end byte: (best score, start, known?)
        let mut best: Vec<Option<(f32, usize, bool)>> = vec![None; size + 1];
        best[0] = Some((0.0, 0, true));
        let mut start = 0;
        while start < size {
            let here = best[start].map_or(0.0, |b| b.0);
            let mblen = s[start..].chars().next().map_or(1, char::len_utf8);
            let mut single = false;
            let mut end = start;
            for c in s[start..].chars() {
                end += c.len_utf8();
                if end - start > self.max_piece_bytes {
                    break;
                }
                if let Some(&(score, user)) = self.pieces.get(&s[start..end]) {
                    let score = if user { (end - start) as f32 * self.max_score - 0.1 } else { score };
                    let cand = here + score;
                    if best[end].is_none_or(|b| cand > b.0) {
                        best[end] = Some((cand, start, true));
                    }
                    single |= end - start == mblen;
                }
            }
            if !single {
                let cand = here + unk;
                let end = start + mblen;
                if best[end].is_none_or(|b| cand > b.0) {
                    best[end] = Some((cand, start, false));
                }
            }
            start += mblen;
        }
        let mut out = Vec::new();
        let mut end = size;
        while end > 0 {
            let Some((_, st, known)) = best[end] else { break };
            out.push((known.then_some(0.0), end - st));
            end = st;
        }
        out.reverse();
        out
    }

    /// BPE: per whitespace-led word, merge the adjacent pair whose union is the
    /// highest-scoring piece (leftmost on ties) until none is.
    fn bpe_units(&self, s: &str) -> Vec<(Option<f32>, usize)> {
        let mut out = Vec::new();
        let mut words: Vec<&str> = Vec::new();
        let mut start = 0;
        for (i, c) in s.char_indices() {
            if c == '\u{2581}' && i > start {
                words.push(&s[start..i]);
                start = i;
            }
        }
        if start < s.len() {
            words.push(&s[start..]);
        }
        for w in words {
            let mut sym: Vec<&str> = w.char_indices().map(|(i, c)| &w[i..i + c.len_utf8()]).collect();
            loop {
                let mut best: Option<(f32, usize)> = None;
                for i in 0..sym.len().saturating_sub(1) {
                    let joined_len = sym[i].len() + sym[i + 1].len();
                    let at = sym[i].as_ptr() as usize - w.as_ptr() as usize;
                    if let Some(&(score, _)) = self.pieces.get(&w[at..at + joined_len])
                        && best.is_none_or(|b| score > b.0)
                    {
                        best = Some((score, i));
                    }
                }
                let Some((_, i)) = best else { break };
                let at = sym[i].as_ptr() as usize - w.as_ptr() as usize;
                sym[i] = &w[at..at + sym[i].len() + sym[i + 1].len()];
                sym.remove(i + 1);
            }
            out.extend(sym.iter().map(|p| (self.pieces.get(*p).map(|x| x.0), p.len())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(bpe: bool, pieces: &[(&str, f32)]) -> SentencePiece {
        SentencePiece {
            bpe,
            byte_fallback: false,
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
            nfkc: false,
            pieces: pieces.iter().map(|(p, s)| (p.to_string(), (*s, false))).collect(),
            max_piece_bytes: pieces.iter().map(|p| p.0.len()).max().unwrap_or(1),
            min_score: pieces.iter().map(|p| p.1).fold(f32::MAX, f32::min),
            max_score: 0.0,
        }
    }

    #[test]
    fn normalizes_whitespace_like_sentencepiece() {
        let m = model(false, &[("a", -1.0)]);
        assert_eq!(m.normalize("  a  b "), "▁a▁b");
        assert_eq!(m.normalize(""), "");
    }

    #[test]
    fn unigram_prefers_the_best_path_and_merges_unknowns() {
        let m = model(false, &[("▁", -1.0), ("▁ab", -2.0), ("a", -3.0), ("b", -3.0), ("c", -3.0)]);
        assert_eq!(m.count_pieces("ab"), 1); // ▁ab beats ▁ + a + b
        assert_eq!(m.count_pieces("ab xyz"), 3); // ▁ab, ▁, one merged unknown run
    }

    #[test]
    fn bpe_merges_by_score() {
        let m = model(true, &[("▁", -5.0), ("a", -5.0), ("b", -5.0), ("ab", -1.0), ("▁ab", -2.0)]);
        assert_eq!(m.count_pieces("ab"), 1);
        assert_eq!(m.count_pieces("abab"), 2); // ▁ab + ab
    }
}
