//! Parity with NeMo Curator's document modifiers (and ftfy, behind UnicodeReformatter): every
//! configuration's output on the parity fixture and the crafted cases against what NeMo
//! Curator 1.4.0 / ftfy 6.3.1 produced (tests/parity/modifier_reference.jsonl).

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;

use curator_heuristics::ftfy::FixerConfig;
use curator_heuristics::modifiers::{self, Bound, Slicer};

fn run<'a>(name: &str, text: &'a str) -> Cow<'a, str> {
    let slicer = |left, right, include_left, include_right, strip| Slicer { left, right, include_left, include_right, strip };
    match name {
        "BoilerPlateStringModifier" => modifiers::boiler_plate_string(text, true),
        "BoilerPlateStringModifier(remove_if_at_top_or_bottom=False)" => modifiers::boiler_plate_string(text, false),
        "LineRemover(patterns=['Advertisement', 'Read more', 'Share this article', ''])" => {
            modifiers::line_remover(text, &["Advertisement".into(), "Read more".into(), "Share this article".into(), String::new()])
        }
        "MarkdownRemover" => modifiers::markdown_remover(text),
        "NewlineNormalizer" => modifiers::newline_normalizer(text),
        "QuotationRemover" => modifiers::quotation_remover(text),
        "Slicer(left='Introduction:', right='References:', include_left=False, include_right=False)" => {
            slicer(Bound::Text("Introduction:".into()), Bound::Text("References:".into()), false, false, true).apply(text)
        }
        "Slicer(left=10, right=-10)" => slicer(Bound::Index(10), Bound::Index(-10), true, true, true).apply(text),
        "Slicer(left=5, strip=False)" => slicer(Bound::Index(5), Bound::None, true, true, false).apply(text),
        "UrlRemover" => modifiers::url_remover(text),
        "UnicodeReformatter" => FixerConfig::default().fix(text),
        "UnicodeReformatter(normalization='NFC', uncurl_quotes=True, fix_line_breaks=True, fix_latin_ligatures=True, fix_character_width=True)" => {
            FixerConfig {
                normalization: Some("NFC".into()),
                uncurl_quotes: true,
                fix_line_breaks: true,
                fix_latin_ligatures: true,
                fix_character_width: true,
                ..FixerConfig::default()
            }
            .fix(text)
        }
        other => panic!("unknown modifier in the reference: {other}"),
    }
}

#[test]
fn outputs_match_nemo_curator_modifiers() {
    let mut docs = common::jsonl("tests/parity/fixture.jsonl");
    docs.extend(common::jsonl("tests/parity/modifier_cases.jsonl"));
    let reference = common::jsonl("tests/parity/modifier_reference.jsonl");
    assert_eq!(docs.len(), reference.len());
    let names: Vec<String> = reference
        .iter()
        .flat_map(|r| r["changed"].as_object().unwrap().keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut diffs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (doc, want) in docs.iter().zip(&reference) {
        assert_eq!(doc["id"], want["id"]);
        let (id, text) = (doc["id"].as_str().unwrap(), doc["text"].as_str().unwrap());
        for name in &names {
            let expected = want["changed"][name].as_str().unwrap_or(text);
            let got = run(name, text);
            if got != expected {
                diffs.entry(name).or_default().push(format!("{id}: NeMo {expected:?}\n              ours {got:?}"));
            }
        }
    }
    for name in &names {
        let d = diffs.get(name.as_str()).map_or(&[][..], Vec::as_slice);
        eprintln!("{name}: {}/{} equal", docs.len() - d.len(), docs.len());
        for x in d {
            eprintln!("    {x}");
        }
    }
    assert!(diffs.is_empty(), "outputs differ (listed above)");
}
