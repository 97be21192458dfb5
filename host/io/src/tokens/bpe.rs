//! Byte-level BPE of our own (GPT-2, RoBERTa, GPT-NeoX style `tokenizer.json`s): ids equal
//! to the `tokenizers` crate's for the files it accepts ([`ByteBpe::from_json`] refuses the
//! rest, which then run on the crate), without the crate's allocations per word (a profile of
//! the crate on one core: 40 % in malloc and free).
//!
//! The text is cut at added tokens (leftmost-longest, those not `normalized` first, as
//! `AddedVocabulary` does), each stretch between them gets the prefix space if asked and is cut
//! into GPT-2's pieces (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
//! written out by hand), and each piece's bytes are merged by rank, through a cache of pieces
//! already seen. The post-processor's special tokens go around the whole (a template's, or none).
//! `tests/tokens_bpe.rs` compares the ids with the crate's on 13,500 real documents in 14
//! languages and on adversarial text.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;
use serde_json::Value;
use unicode_categories::UnicodeCategories;

use curator_sdk::text::gpt2_byte_chars as byte_chars;

/// Pieces cached before the cache is cleared (bounds memory on endless distinct words).
const CACHE_PIECES: usize = 1 << 18;

/// A byte-level BPE tokenizer.
pub struct ByteBpe {
    /// Each byte's id.
    byte_id: [u32; 256],
    /// (left id, right id) → (rank, merged id).
    merges: FxHashMap<u64, (u32, u32)>,
    /// The vocabulary by token text (for `ignore_merges`).
    vocab: Option<HashMap<String, u32>>,
    add_prefix_space: bool,
    /// Added tokens not `normalized` (first pass) and `normalized` (second pass), with their ids.
    added: [Option<(AhoCorasick, Vec<u32>)>; 2],
    /// Ids the post-processor puts before and after a document's.
    before: Vec<u32>,
    after: Vec<u32>,
}

/// The ids of pieces already seen, one per writer (no lock between them).
#[derive(Default)]
pub struct PieceCache(FxHashMap<Box<[u8]>, Box<[u32]>>);

/// Why a `tokenizer.json` is not one [`ByteBpe`] reproduces exactly.
fn no(why: impl Into<String>) -> String {
    why.into()
}

impl ByteBpe {
    /// The tokenizer, when the file is a byte-level BPE this implementation reproduces id for
    /// id; else why not (the `tokenizers` crate runs it then). `token_id` gives an added
    /// token's id as the crate assigned it on loading (the file's `id` is not what counts: the
    /// vocabulary's id of the same text, else the next free one).
    pub fn from_json(json: &str, token_id: &dyn Fn(&str) -> Option<u32>) -> Result<ByteBpe, String> {
        let v: Value = serde_json::from_str(json).map_err(|e| no(e.to_string()))?;
        let m = &v["model"];
        if m["type"] != "BPE" {
            return Err(no(format!("model {}", m["type"])));
        }
        for (key, ok) in [("dropout", Value::Null), ("continuing_subword_prefix", Value::Null), ("end_of_word_suffix", Value::Null)] {
            if m[key] != ok && m[key] != "" {
                return Err(no(format!("BPE {key} {}", m[key])));
            }
        }
        if m["byte_fallback"] == true {
            return Err(no("BPE byte_fallback"));
        }
        if !v["normalizer"].is_null() {
            return Err(no("a normalizer"));
        }
        let pre = &v["pre_tokenizer"];
        if pre["type"] != "ByteLevel" || pre["use_regex"] == false {
            return Err(no(format!("pre-tokenizer {}", pre["type"])));
        }
        let vocab: HashMap<String, u32> = m["vocab"]
            .as_object()
            .ok_or_else(|| no("BPE without a vocabulary"))?
            .iter()
            .map(|(k, id)| id.as_u64().map(|id| (k.clone(), id as u32)).ok_or_else(|| no(format!("vocabulary id {id}"))))
            .collect::<Result<_, _>>()?;
        let chars = byte_chars();
        let mut byte_id = [0u32; 256];
        for (b, c) in chars.iter().enumerate() {
            byte_id[b] = *vocab.get(&c.to_string()).ok_or_else(|| no(format!("byte {b:#04x} is not in the vocabulary")))?;
        }
        let mut merges = FxHashMap::default();
        for (rank, pair) in m["merges"].as_array().ok_or_else(|| no("BPE without merges"))?.iter().enumerate() {
            let (a, b) = match pair {
                Value::String(s) => s.split_once(' ').ok_or_else(|| no(format!("merge {s:?}")))?,
                Value::Array(p) => match (p.first().and_then(Value::as_str), p.get(1).and_then(Value::as_str)) {
                    (Some(a), Some(b)) => (a, b),
                    _ => return Err(no(format!("merge {pair}"))),
                },
                _ => return Err(no(format!("merge {pair}"))),
            };
            let id = |t: &str| vocab.get(t).copied().ok_or_else(|| no(format!("merge part {t:?} is not in the vocabulary")));
            let (ia, ib) = (id(a)?, id(b)?);
            let merged = id(&format!("{a}{b}"))?;
            // The crate keeps the last of two equal merges; a file with such is left to it.
            if merges.insert(key(ia, ib), (rank as u32, merged)).is_some() {
                return Err(no(format!("merge {a:?} {b:?} listed twice")));
            }
        }
        let mut passes: [Vec<(String, u32)>; 2] = [Vec::new(), Vec::new()];
        for t in v["added_tokens"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            if t["single_word"] == true || t["lstrip"] == true || t["rstrip"] == true {
                return Err(no(format!("added token {} with single_word, lstrip or rstrip", t["content"])));
            }
            let Some((content, id)) = t["content"].as_str().and_then(|c| Some((c, token_id(c)?))) else {
                return Err(no(format!("added token {t}")));
            };
            passes[usize::from(t["normalized"] == true)].push((content.to_string(), id));
        }
        let added = passes.map(|p| {
            (!p.is_empty()).then(|| {
                let (texts, ids): (Vec<String>, Vec<u32>) = p.into_iter().unzip();
                AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&texts).map(|ac| (ac, ids))
            })
        });
        let [a, b] = added;
        let added = [a.transpose().map_err(|e| no(e.to_string()))?, b.transpose().map_err(|e| no(e.to_string()))?];
        let (before, after) = post_processor(&v["post_processor"])?;
        Ok(ByteBpe {
            byte_id,
            merges,
            vocab: (m["ignore_merges"] == true).then_some(vocab),
            add_prefix_space: pre["add_prefix_space"] == true,
            added,
            before,
            after,
        })
    }

    /// The ids of `text` (with the post-processor's special tokens when `specials`), appended
    /// to `out`.
    pub fn encode(&self, text: &str, specials: bool, cache: &mut PieceCache, out: &mut Vec<u32>) {
        if specials {
            out.extend_from_slice(&self.before);
        }
        if cache.0.len() > CACHE_PIECES {
            cache.0.clear();
        }
        let mut ids = std::mem::take(out);
        self.split_added(text, 0, &mut |stretch: &str, ids: &mut Vec<u32>| self.encode_stretch(stretch, &mut cache.0, ids), &mut ids);
        *out = ids;
        if specials {
            out.extend_from_slice(&self.after);
        }
    }

    /// Cut `text` at the added tokens of pass `pass` (and then of the next), their ids to
    /// `out`, the stretches between them to `stretch`.
    fn split_added(&self, text: &str, pass: usize, stretch: &mut dyn FnMut(&str, &mut Vec<u32>), out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let Some((ac, ids)) = self.added.get(pass).and_then(Option::as_ref) else {
            if pass + 1 < self.added.len() {
                return self.split_added(text, pass + 1, stretch, out);
            }
            return stretch(text, out);
        };
        let mut at = 0;
        for m in ac.find_iter(text) {
            self.split_added(&text[at..m.start()], pass + 1, stretch, out);
            out.push(ids[m.pattern().as_usize()]);
            at = m.end();
        }
        self.split_added(&text[at..], pass + 1, stretch, out);
    }

    fn encode_stretch(&self, text: &str, cache: &mut FxHashMap<Box<[u8]>, Box<[u32]>>, out: &mut Vec<u32>) {
        let spaced;
        let text = if self.add_prefix_space && !text.starts_with(' ') {
            spaced = format!(" {text}");
            spaced.as_str()
        } else {
            text
        };
        for piece in Pieces::new(text) {
            let bytes = piece.as_bytes();
            if let Some(ids) = cache.get(bytes) {
                out.extend_from_slice(ids);
                continue;
            }
            let start = out.len();
            self.merge_piece(bytes, out);
            cache.insert(bytes.into(), out[start..].into());
        }
    }

    /// The ids of one piece's bytes, merged by rank (lowest first, leftmost among equals).
    fn merge_piece(&self, bytes: &[u8], out: &mut Vec<u32>) {
        if let Some(vocab) = &self.vocab {
            let chars = byte_chars();
            let text: String = bytes.iter().map(|&b| chars[b as usize]).collect();
            if let Some(&id) = vocab.get(&text) {
                out.push(id);
                return;
            }
        }
        let mut symbols: Vec<u32> = bytes.iter().map(|&b| self.byte_id[b as usize]).collect();
        loop {
            let mut best: Option<(u32, usize, u32)> = None;
            for i in 0..symbols.len().saturating_sub(1) {
                if let Some(&(rank, merged)) = self.merges.get(&key(symbols[i], symbols[i + 1]))
                    && best.is_none_or(|(r, _, _)| rank < r)
                {
                    best = Some((rank, i, merged));
                }
            }
            let Some((_, i, merged)) = best else { break };
            symbols[i] = merged;
            symbols.remove(i + 1);
        }
        out.extend_from_slice(&symbols);
    }
}

fn key(a: u32, b: u32) -> u64 {
    (a as u64) << 32 | b as u64
}

/// The ids a post-processor puts before and after a single sequence's.
fn post_processor(p: &Value) -> Result<(Vec<u32>, Vec<u32>), String> {
    match p["type"].as_str() {
        None | Some("ByteLevel") => Ok((Vec::new(), Vec::new())),
        Some("TemplateProcessing") => {
            let (mut before, mut after, mut seen) = (Vec::new(), Vec::new(), false);
            for piece in p["single"].as_array().ok_or_else(|| no("a template without `single`"))? {
                if piece.get("Sequence").is_some() {
                    seen = true;
                } else if let Some(name) = piece["SpecialToken"]["id"].as_str() {
                    let ids = p["special_tokens"][name]["ids"].as_array().ok_or_else(|| no(format!("template token {name}")))?;
                    let ids: Vec<u32> = ids.iter().filter_map(Value::as_u64).map(|i| i as u32).collect();
                    if seen { &mut after } else { &mut before }.extend(ids);
                } else {
                    return Err(no(format!("template piece {piece}")));
                }
            }
            Ok((before, after))
        }
        Some(other) => Err(no(format!("post-processor {other}"))),
    }
}

/// GPT-2's pieces of a text.
struct Pieces<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Pieces<'a> {
    fn new(text: &'a str) -> Pieces<'a> {
        Pieces { text, at: 0 }
    }
}

#[derive(PartialEq, Clone, Copy)]
enum Class {
    Letter,
    Number,
    Other,
    Space,
}

fn class(c: char) -> Class {
    if c.is_ascii() {
        return match c {
            'a'..='z' | 'A'..='Z' => Class::Letter,
            '0'..='9' => Class::Number,
            ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r' => Class::Space,
            _ => Class::Other,
        };
    }
    if c.is_whitespace() {
        Class::Space
    } else if c.is_letter() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Number
    } else {
        Class::Other
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = &self.text[self.at..];
        let mut chars = rest.char_indices();
        let (_, c) = chars.next()?;
        let start = self.at;
        let take = |len: usize, this: &mut Self| {
            this.at = start + len;
            Some(&this.text[start..start + len])
        };
        if c == '\'' {
            for suffix in ["s", "t", "re", "ve", "m", "ll", "d"] {
                if rest[1..].starts_with(suffix) {
                    return take(1 + suffix.len(), self);
                }
            }
        }
        // ` ?X+` for X letters, numbers or other (not space): the optional space, then the run.
        let (body_at, body) = if c == ' ' {
            match chars.next() {
                Some((i, b)) => (i, b),
                None => return take(1, self),
            }
        } else {
            (0, c)
        };
        let k = class(body);
        if k != Class::Space {
            let mut end = body_at + body.len_utf8();
            for (i, ch) in rest[end..].char_indices() {
                if class(ch) != k {
                    end += i;
                    return take(end, self);
                }
            }
            return take(rest.len(), self);
        }
        // A run of whitespace: all of it at the end of the text; else all but its last
        // character (`\s+(?!\S)`), or the one character when it is alone (`\s+`).
        let mut last = 0;
        let mut end = rest.len();
        for (i, ch) in rest.char_indices() {
            if class(ch) != Class::Space {
                end = i;
                break;
            }
            last = i;
        }
        if end == rest.len() || last == 0 {
            return take(end, self);
        }
        take(last, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adversarial text: every whitespace kind and run length, contractions in both cases,
    /// scripts, marks, numbers of all kinds, emoji, added tokens inside words and at the ends.
    fn adversarial() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            " ",
            "  ",
            "\n",
            " \n",
            "\n ",
            "a  b",
            "a \n\n b",
            "\t\tx",
            "x\u{a0}y",
            "x\u{3000}y\u{2028}z",
            "end   ",
            "it's I'M we'LL they're 'd ''s '",
            "don't",
            "Straße ÉCOLE ﬁ",
            "Привет, мир! Ёлка",
            "日本語のテキスト。漢字",
            "한국어 텍스트",
            "e\u{301}t\u{301}e\u{301}",
            "१२३ ٣٤٥ ⅷ ½ ²",
            "x123y 4.5e-6",
            "👍🏽👨‍👩‍👧 ok",
            "<|endoftext|>",
            "a<|endoftext|>b",
            " <|endoftext|> ",
            "<|endoftext|><|endoftext|>",
            "<|endof",
            "\u{0}\u{1}\u{7f}\u{80}",
            "🙂 ".repeat(50).as_str(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let pool: Vec<char> = " \n\t'aZé世😀1١,.ß-\u{301}\u{a0}".chars().collect();
        for _ in 0..2000 {
            let n = (rng % 40) as usize;
            let mut s = String::new();
            for _ in 0..n {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                s.push(pool[(rng % pool.len() as u64) as usize]);
            }
            texts.push(s);
        }
        texts
    }

    #[test]
    fn ids_equal_the_tokenizers_crates() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/parity/tokenizers/bpe.json");
        let json = std::fs::read_to_string(path).unwrap();
        let mut variants = vec![json.clone()];
        // With a prefix space, a template around the document and an added token that is
        // `normalized` (the second pass).
        let mut v: Value = serde_json::from_str(&json).unwrap();
        v["pre_tokenizer"]["add_prefix_space"] = true.into();
        v["post_processor"] = serde_json::json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}}});
        v["added_tokens"].as_array_mut().unwrap().push(serde_json::json!({"id": 5, "content": "é世", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}));
        variants.push(v.to_string());
        for json in variants {
            let theirs: tokenizers::Tokenizer = json.parse().unwrap();
            let ours = ByteBpe::from_json(&json, &|t| theirs.token_to_id(t)).unwrap();
            let mut cache = PieceCache::default();
            for text in adversarial() {
                let mut got = Vec::new();
                ours.encode(&text, true, &mut cache, &mut got);
                let want = theirs.encode_fast(text.as_str(), true).unwrap().get_ids().to_vec();
                assert_eq!(got, want, "{text:?}");
            }
        }
    }

    #[test]
    fn files_it_cannot_reproduce_are_left_to_the_crate() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/parity/tokenizers/");
        for (file, why) in [("deberta-v3-unigram.json", "model \"Unigram\""), ("wordpiece.json", "model \"WordPiece\"")] {
            let json = std::fs::read_to_string(format!("{path}{file}")).unwrap();
            assert_eq!(ByteBpe::from_json(&json, &|_| None).err().unwrap(), why);
        }
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(format!("{path}bpe.json")).unwrap()).unwrap();
        v["added_tokens"][0]["lstrip"] = true.into();
        assert!(ByteBpe::from_json(&v.to_string(), &|_| Some(0)).err().unwrap().contains("lstrip"));
    }

    #[test]
    fn gpt2_pieces() {
        let p: Vec<&str> = Pieces::new("Hello world's  fine,123 ok  ").collect();
        assert_eq!(p, ["Hello", " world", "'s", " ", " fine", ",", "123", " ok", "  "]);
        let p: Vec<&str> = Pieces::new("a \n\nb\tc  ").collect();
        assert_eq!(p, ["a", " \n", "\n", "b", "\t", "c", "  "]);
        let p: Vec<&str> = Pieces::new("Привет, 世界! x'S 42").collect();
        assert_eq!(p, ["Привет", ",", " 世界", "!", " x", "'", "S", " 42"]);
    }
}
