//! Token counts against Hugging Face `tokenizers` (tests/parity/tokenizer_reference.jsonl and
//! the two tokenizer.json files in tests/parity/tokenizers/, made by
//! scripts/parity/make_tokenizer_reference.py).

mod common;

use curator_heuristics::tokenizer::Tokenizer;

#[test]
fn token_counts_match_hugging_face_tokenizers() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let read = |p: &str| std::fs::read_to_string(format!("{root}{p}")).unwrap();
    let docs: Vec<serde_json::Value> = read("tests/parity/fixture.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let reference: Vec<serde_json::Value> =
        read("tests/parity/tokenizer_reference.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(docs.len(), reference.len());
    for kind in ["wordpiece", "bpe"] {
        let t = Tokenizer::from_json(&common::repo_file(&format!("tests/parity/tokenizers/{kind}.json"))).unwrap();
        let mut diffs = Vec::new();
        for (d, want) in docs.iter().zip(&reference) {
            let got = t.count(d["text"].as_str().unwrap());
            if Some(got as u64) != want[kind].as_u64() {
                diffs.push(format!("{}: tokenizers {}, ours {got}", d["id"], want[kind]));
            }
        }
        eprintln!("{kind}: {}/{} counts equal", docs.len() - diffs.len(), docs.len());
        for x in &diffs {
            eprintln!("    {x}");
        }
        assert!(diffs.is_empty(), "{kind} counts differ");
    }
}

#[test]
fn piece_counts_match_sentencepiece() {
    use curator_heuristics::sentencepiece::SentencePiece;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let docs = common::jsonl("tests/parity/fixture.jsonl");
    let reference = common::jsonl("tests/parity/sentencepiece_reference.jsonl");
    assert_eq!(docs.len(), reference.len());
    for kind in ["unigram", "bpe"] {
        let m = SentencePiece::load(&std::fs::read(format!("{root}tests/parity/tokenizers/sp_{kind}.model")).unwrap()).unwrap();
        let mut diffs = Vec::new();
        for (d, want) in docs.iter().zip(&reference) {
            let got = m.count_pieces(d["text"].as_str().unwrap());
            if Some(got as u64) != want[kind].as_u64() {
                diffs.push(format!("{}: sentencepiece {}, ours {got}", d["id"], want[kind]));
            }
        }
        eprintln!("sentencepiece {kind}: {}/{} counts equal", docs.len() - diffs.len(), docs.len());
        for x in diffs.iter().take(20) {
            eprintln!("    {x}");
        }
        assert!(diffs.is_empty(), "{kind} counts differ");
    }
}
