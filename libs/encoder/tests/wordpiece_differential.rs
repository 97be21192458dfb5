//! Our WordPiece (`curator_heuristics::wordpiece`) against Hugging Face `tokenizers`, id for
//! id: 13,500 real documents in 14 source-languages (`tests/parity/tokenizer_sample.jsonl.gz`,
//! made by `scripts/parity/make_tokenizer_sample.py`) plus adversarial texts, through every
//! BertNormalizer setting BERT-family models ship (uncased, cased, accents kept or stripped,
//! no cleaning), two vocabularies, with and without truncation.

use std::io::Read;
use std::path::{Path, PathBuf};

use curator_heuristics::wordpiece::{Scratch, WordPiece};
use serde_json::Value;
use tokenizers::{Tokenizer as HfTokenizer, TruncationParams};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sample() -> Vec<(String, String)> {
    let mut gz = Vec::new();
    std::fs::File::open(root().join("tests/parity/tokenizer_sample.jsonl.gz")).unwrap().read_to_end(&mut gz).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz.as_slice()).read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), v["text"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The traps of BERT normalization and WordPiece, by hand and then mixed at random.
fn adversarial() -> Vec<(String, String)> {
    let hand: Vec<String> = [
        "",
        " ",
        "\t\n\r",
        "a\x0bb\x0cc",
        "a\u{85}b",
        "zero\u{200b}width joiner\u{200d}s",
        "soft\u{ad}hyphen",
        "\u{feff}bom",
        "left\u{200e}to\u{200f}right",
        "nbsp\u{a0}here\u{3000}ideographic\u{2028}line\u{2029}para",
        "\0null\u{fffd}replaced",
        "private\u{e000}use\u{f8ff}",
        "Café naïve résumé Ångström",
        "e\u{301}\u{323} a\u{323}\u{302} a\u{302}\u{323}",
        "ΟΔΥΣΣΕΥΣ Σίσυφος",
        "İstanbul DİYARBAKIR ǅ ǈ",
        "ﬁne ﬂow ﬀ",
        "ＦＵＬＬ ｗｉｄｔｈ １２３",
        "한국어 텍스트 강",
        "中文字符和日本語の文章",
        "\u{2b81f}\u{2b820}\u{2b91f}\u{2b920}\u{2ceaf}\u{2ceb0}\u{3400}\u{4dbf}\u{f900}\u{2f800}",
        "हिन्दी में लिखा गया पाठ",
        "ภาษาไทย",
        "العربية مع التشكيل: كَتَبَ",
        "עִבְרִית",
        "😀 👍🏽 🥰 🫠 👨‍👩‍👧",
        "[SEP] [CLS]x[MASK]y [PAD][UNK]",
        "[sep] [ SEP ] [SEP",
        "$100 + 5% = ^_^ | ~ ` < > =",
        "¿¡«»„“”‘’‹›–—…·•†‡§¶",
        "U.S.A. e.g. i.e. don't can't",
        "http://example.com/a_b-c?d=e&f=g#h",
        "line one\nline two\r\nline three",
        "tabs\tand\tspaces   multiple",
        "\u{37e} \u{387} \u{1fef} \u{2000}\u{200a}",
        "Ⅻ ⅻ ① ² ½ ∞ ∑ √",
        "ÀÉÎÕÜ àéîõü Ç ç Ñ ñ Ø ø Æ æ Œ œ ß ẞ",
        "ﾊﾝｶｸ ｶﾀｶﾅ",
        "x\u{308}\u{301}\u{327}",
        "\u{301}leading mark",
        "ab\u{e0001}tag\u{e007f}",
        "\u{1d400}\u{1d41a} math bold",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "a".repeat(100),
        "a".repeat(101),
        format!("{} tail", "é".repeat(100)),
        format!("{} tail", "é".repeat(101)),
        "supercalifragilisticexpialidocious ".repeat(40),
        "antidisestablishmentarianism,".repeat(30),
        "word ".repeat(1000),
    ])
    .collect();
    let pool: Vec<char> = "aZ09 \t\n\r\x0b\x0c\u{85}\u{a0}\u{200b}\u{ad}\u{301}\u{323}\u{302}\u{308}éÉñßİıΣσς中日本한글ﬁ①²-_.,;:!?'\"()[]{}<>$%^&*+=|~`/\\@#…—“”«»¿¡😀\u{1f3fd}\u{200d}\u{fe0f}\u{e000}\u{2b820}\u{2b920}ـ\u{64e}ไ\u{e31}\u{94d}क"
        .chars()
        .collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let random = (0..1500).map(|_| {
        let len = (next() % 300) as usize;
        (0..len).map(|_| pool[(next() % pool.len() as u64) as usize]).collect::<String>()
    });
    hand.into_iter().chain(random).enumerate().map(|(i, t)| (format!("adversarial.{i}"), t)).collect()
}

/// `json` with its normalizer's fields replaced.
fn with_normalizer(json: &str, fields: &[(&str, Value)]) -> String {
    let mut v: Value = serde_json::from_str(json).unwrap();
    for (k, x) in fields {
        v["normalizer"][*k] = x.clone();
    }
    v.to_string()
}

fn compare(name: &str, json: &str, docs: &[(String, String)], max_tokens: Option<usize>) -> usize {
    let mut hf: HfTokenizer = json.parse().unwrap();
    hf.with_padding(None);
    hf.with_truncation(max_tokens.map(|m| TruncationParams { max_length: m, ..Default::default() })).unwrap();
    let texts: Vec<&str> = docs.iter().map(|(_, t)| t.as_str()).collect();
    let want = hf.encode_batch_fast(texts, true).unwrap();
    let ours = WordPiece::from_json(json).unwrap();
    let (mut scratch, mut ids, mut diffs) = (Scratch::default(), Vec::new(), Vec::new());
    for ((id, text), w) in docs.iter().zip(&want) {
        ours.encode(text, max_tokens, &mut scratch, &mut ids);
        if ids != w.get_ids() {
            let at = ids.iter().zip(w.get_ids()).position(|(a, b)| a != b).unwrap_or(ids.len().min(w.get_ids().len()));
            let tokens: Vec<String> = w.get_ids().iter().skip(at.saturating_sub(2)).take(5).filter_map(|&i| hf.id_to_token(i)).collect();
            diffs.push(format!("{id}: first difference at token {at} (tokenizers: {tokens:?}), lengths {} vs {}", w.len(), ids.len()));
        }
    }
    eprintln!("{name}, max_tokens {max_tokens:?}: {}/{} documents identical", docs.len() - diffs.len(), docs.len());
    for d in diffs.iter().take(10) {
        eprintln!("    {d}");
    }
    diffs.len()
}

#[test]
fn ids_are_those_of_hugging_face_tokenizers() {
    let docs: Vec<(String, String)> = sample().into_iter().chain(adversarial()).collect();
    assert!(docs.len() >= 15_000, "{} documents", docs.len());
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    let uncased = read("tests/parity/tokenizers/bert-uncased.json");
    let small = read("tests/parity/tokenizers/wordpiece.json");
    let (t, f, null) = (Value::Bool(true), Value::Bool(false), Value::Null);
    let configs = [
        ("bert uncased (all-MiniLM-L6-v2)", uncased.clone(), vec![None, Some(128), Some(512)]),
        ("cased", with_normalizer(&uncased, &[("lowercase", f.clone()), ("strip_accents", null.clone())]), vec![None]),
        ("lowercase, accents kept", with_normalizer(&uncased, &[("strip_accents", f.clone())]), vec![None]),
        ("cased, accents stripped", with_normalizer(&uncased, &[("lowercase", f.clone()), ("strip_accents", t)]), vec![None]),
        (
            "no cleaning, no CJK spacing",
            with_normalizer(&uncased, &[("clean_text", f.clone()), ("handle_chinese_chars", f.clone()), ("lowercase", f)]),
            vec![None, Some(64)],
        ),
        ("a 3,000-piece vocabulary", small, vec![None]),
    ];
    let mut failed = 0;
    for (name, json, limits) in &configs {
        for max in limits {
            failed += compare(name, json, &docs, *max);
        }
    }
    assert_eq!(failed, 0, "documents whose ids differ from tokenizers'");
}

#[test]
fn shapes_outside_the_family_are_refused() {
    let bpe = std::fs::read_to_string(root().join("tests/parity/tokenizers/bpe.json")).unwrap();
    assert!(WordPiece::from_json(&bpe).is_err());
    let uncased = std::fs::read_to_string(root().join("tests/parity/tokenizers/bert-uncased.json")).unwrap();
    let mut v: Value = serde_json::from_str(&uncased).unwrap();
    v["added_tokens"][0]["normalized"] = Value::Bool(true);
    let err = WordPiece::from_json(&v.to_string()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("normalized"), "{err}");
}
