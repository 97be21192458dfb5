//! The stage catalogue through the real binary: NeMo Curator's English chain as a preset gives
//! NeMo Curator's decisions; ScoreFilter semantics (score_field, invert, filter).

use std::collections::BTreeSet;

use crate::support::*;

fn reference() -> Vec<serde_json::Value> {
    std::fs::read_to_string(root().join("tests/parity/nemo_reference.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A NeMo English preset (`nemo-english-heuristics` or its `-stages` form) reading the parity
/// fixture into `out`.
fn preset_on(tmp: &std::path::Path, preset: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join(format!("examples/presets/{preset}.yaml"))).unwrap();
    let text = text
        .replace("path: ../quickstart/data", &format!("path: {}", root().join("tests/parity/fixture.jsonl").display()))
        .replace("path: ../../target/presets/nemo-english-stages", "path: out")
        .replace("path: ../../target/presets/nemo-english", "path: out");
    let p = tmp.join("preset.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The documents a NeMo English preset keeps from the parity fixture, in order.
fn preset_output(preset: &str) -> Vec<serde_json::Value> {
    let tmp = tempfile::tempdir().unwrap();
    run_with_guests(&["run", preset_on(tmp.path(), preset).to_str().unwrap()]).ok();
    read_jsonl(&tmp.path().join("out/fixture.jsonl"))
}

#[test]
fn nemo_english_preset_keeps_what_nemo_curator_keeps() {
    let out = preset_output("nemo-english-heuristics");
    // The same chain as 28 stages writes the same documents.
    assert_eq!(out, preset_output("nemo-english-heuristics-stages"), "heuristic_chain and the 28 stages differ");
    let kept: BTreeSet<String> = out.iter().map(|d| d["id"].as_str().unwrap().into()).collect();
    // NeMo's chain keeps a document when every filter keeps it. Left out: documents NeMo raises
    // on, and those where its RepeatingTopNGrams decision depends on the hash seed.
    let chain = ["(n=2)", "(n=3)", "(n=4)"];
    let thresholds = [0.2, 0.18, 0.16];
    let (mut compared, mut differ) = (0, Vec::new());
    for r in reference() {
        if r["errors"].as_object().is_some_and(|e| !e.is_empty()) {
            continue;
        }
        let seed_dependent = chain.iter().zip(thresholds).any(|(n, t)| {
            let c: Vec<f64> =
                r["candidates"][format!("RepeatingTopNGramsFilter{n}")].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            c.len() > 1 && c.iter().any(|s| *s <= t) && c.iter().any(|s| *s > t)
        });
        if seed_dependent {
            continue;
        }
        compared += 1;
        // The reference has every filter of the English chain with the chain's settings, plus
        // PornographicUrlsFilter, which the chain does not use.
        let nemo_keeps = r["keep"].as_object().unwrap().iter().all(|(k, v)| k == "PornographicUrlsFilter" || v.as_bool().unwrap());
        let id = r["id"].as_str().unwrap().to_string();
        if nemo_keeps != kept.contains(&id) {
            differ.push(id);
        }
    }
    assert!(compared >= 150, "only {compared} documents comparable");
    assert!(differ.is_empty(), "decisions differ from NeMo Curator's chain on {differ:?}");
}

#[test]
fn score_field_invert_and_filter_behave_as_nemo_score_filter() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/parity/fixture.jsonl");
    let stage = |out: &str, extra: &str| {
        let yaml = format!(
            "source:\n  path: {}\nsink:\n  path: {out}\nstages:\n  - plugin: numbers_filter\n    params: {{{extra}}}\n",
            fixture.display()
        );
        let p = tmp.path().join(format!("{out}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        run_with_guests(&["run", p.to_str().unwrap()]).ok();
        read_jsonl(&tmp.path().join(format!("{out}/fixture.jsonl")))
    };
    let reference = reference();
    let nemo_kept: BTreeSet<&str> =
        reference.iter().filter(|r| r["keep"]["NumbersFilter"].as_bool() == Some(true)).map(|r| r["id"].as_str().unwrap()).collect();
    let ids = |docs: &[serde_json::Value]| docs.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect::<BTreeSet<String>>();
    // Filter only.
    let kept = stage("filter", "");
    assert_eq!(ids(&kept), nemo_kept.iter().map(|s| s.to_string()).collect());
    // Score only: every document, with NeMo's score.
    let scored = stage("score", "score_field: numbers_ratio, filter: false");
    assert_eq!(scored.len(), reference.len());
    for (d, r) in scored.iter().zip(&reference) {
        let want = r["scores"]["NumbersFilter"].as_f64().unwrap();
        assert!((d["numbers_ratio"].as_f64().unwrap() - want).abs() < 1e-9, "{d}");
    }
    // Both, inverted: the complement, with scores.
    let inverted = stage("both", "score_field: numbers_ratio, invert: true");
    assert_eq!(inverted.len() + kept.len(), reference.len());
    assert!(inverted.iter().all(|d| !nemo_kept.contains(d["id"].as_str().unwrap()) && d["numbers_ratio"].as_f64().unwrap() > 0.15));
}

#[test]
fn heuristic_chain_writes_nemo_scores_and_names_a_bad_filter() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/parity/fixture.jsonl");
    let run = |name: &str, filters: &str| {
        let yaml = format!(
            "source:\n  path: {}\nsink:\n  path: {name}\nstages:\n  - plugin: heuristic_chain\n    params:\n      filters:\n{filters}",
            fixture.display()
        );
        let p = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        run_with_guests(&["run", p.to_str().unwrap()])
    };
    // Scores of kept documents are NeMo's; a filter that drops nothing (a word-count range
    // no document falls outside) still scores every document.
    run(
        "scored",
        "      - {filter: repeating_top_n_grams_filter, n: 3, max_repeating_ngram_ratio: 2.0, score_field: top3}\n\
         \x20     - {filter: numbers_filter, score_field: numbers}\n\
         \x20     - {filter: word_count_filter, min_words: 0, max_words: 1000000000, score_field: words}\n",
    )
    .ok();
    let scored = read_jsonl(&tmp.path().join("scored/fixture.jsonl"));
    let reference: std::collections::BTreeMap<String, serde_json::Value> =
        reference().into_iter().map(|r| (r["id"].as_str().unwrap().to_string(), r)).collect();
    let nemo_kept = reference.values().filter(|r| r["keep"]["NumbersFilter"].as_bool() == Some(true)).count();
    assert_eq!(scored.len(), nemo_kept);
    for d in &scored {
        let r = &reference[d["id"].as_str().unwrap()];
        assert!((d["numbers"].as_f64().unwrap() - r["scores"]["NumbersFilter"].as_f64().unwrap()).abs() < 1e-9, "{d}");
        assert_eq!(d["words"].as_f64(), r["scores"]["WordCountFilter"].as_f64(), "{d}");
        if r["candidates"]["RepeatingTopNGramsFilter(n=3)"].as_array().is_some_and(|c| c.len() == 1) {
            let want = r["scores"]["RepeatingTopNGramsFilter(n=3)"].as_f64().unwrap();
            assert!((d["top3"].as_f64().unwrap() - want).abs() < 1e-6, "{d}");
        }
    }
    let bad = run("bad", "      - {filter: numbers_filter}\n      - {filter: word_count_filter, min_wrds: 5}\n");
    assert_ne!(bad.code, 0);
    let err = &bad.stderr;
    assert!(err.contains("filters[1]") && err.contains("word_count_filter") && err.contains("min_wrds"), "{err}");
}

/// The FineWeb preset reading the parity fixture into `out`, its language stage annotating
/// only (`languages` emptied) when `annotate_only`.
fn fineweb_preset_on(tmp: &std::path::Path, annotate_only: bool) -> std::path::PathBuf {
    fineweb_file_on(tmp, "fineweb", annotate_only)
}

/// [`fineweb_preset_on`] for `preset` (`fineweb` or `fineweb-stages`).
fn fineweb_file_on(tmp: &std::path::Path, preset: &str, annotate_only: bool) -> std::path::PathBuf {
    let mut text = std::fs::read_to_string(root().join(format!("examples/presets/{preset}.yaml"))).unwrap();
    text = text
        .replace("path: ../quickstart/data", &format!("path: {}", root().join("tests/parity/fixture.jsonl").display()))
        .replace("path: ../../target/presets/fineweb-stages", "path: out")
        .replace("path: ../../target/presets/fineweb", "path: out");
    if annotate_only {
        assert!(text.contains("params: {languages: [en], min_score: 0.65}"));
        text = text.replace("params: {languages: [en], min_score: 0.65}", "params: {}");
    }
    let p = tmp.join("fineweb.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn fineweb_preset_keeps_and_rewrites_what_datatrove_does() {
    let tmp = tempfile::tempdir().unwrap();
    run_with_guests(&["run", fineweb_preset_on(tmp.path(), true).to_str().unwrap()]).ok();
    let out = read_jsonl(&tmp.path().join("out/fixture.jsonl"));
    let ours: std::collections::BTreeMap<String, serde_json::Value> =
        out.iter().map(|d| (d["id"].as_str().unwrap().to_string(), d.clone())).collect();
    let reference: Vec<serde_json::Value> = std::fs::read_to_string(root().join("tests/parity/datatrove_reference.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut kept = 0;
    for r in &reference {
        let id = r["id"].as_str().unwrap();
        let chain = &r["fineweb_chain"];
        match ours.get(id) {
            Some(d) => {
                assert_eq!(chain["keep"], true, "{id}: datatrove's chain drops it ({}), ours keeps it", chain["reason"]);
                assert_eq!(d["text"], chain["text"], "{id}: C4QualityFilter's rewritten text differs");
                assert!(d["language"].is_string() && d["language_score"].is_number(), "{d}");
                kept += 1;
            }
            None => assert_ne!(chain["keep"], true, "{id}: datatrove's chain keeps it, ours drops it"),
        }
    }
    assert!(kept >= 20, "only {kept} documents kept");
    // The same filters as five stages write the same documents.
    let tmp = tempfile::tempdir().unwrap();
    run_with_guests(&["run", fineweb_file_on(tmp.path(), "fineweb-stages", true).to_str().unwrap()]).ok();
    assert_eq!(read_jsonl(&tmp.path().join("out/fixture.jsonl")), out, "datatrove_chain and the five stages differ");

    // As shipped, the preset keeps English only.
    let tmp = tempfile::tempdir().unwrap();
    run_with_guests(&["run", fineweb_preset_on(tmp.path(), false).to_str().unwrap()]).ok();
    let english = read_jsonl(&tmp.path().join("out/fixture.jsonl"));
    assert!(!english.is_empty() && english.len() <= kept);
    assert!(english.iter().all(|d| d["language"] == "en" && d["language_score"].as_f64().unwrap() >= 0.65));
}

#[test]
fn language_id_runs_in_the_sandbox_and_keeps_chosen_languages() {
    let tmp = tempfile::tempdir().unwrap();
    // Two real documents per language from the test set.
    let mut texts = Vec::new();
    let mut want = Vec::new();
    let set = std::fs::read_to_string(root().join("tests/langid/testset.jsonl")).unwrap();
    for lang in ["en", "de", "ja", "ar", "uk"] {
        for d in set.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).filter(|d| d["lang"] == lang).take(2) {
            texts.push(d["text"].as_str().unwrap().to_string());
            want.push(lang);
        }
    }
    write_docs(&tmp.path().join("in.jsonl"), &texts);
    let pipeline = |out: &str, params: &str| {
        let yaml = format!("source:\n  path: in.jsonl\nsink:\n  path: {out}\nstages:\n  - plugin: language_id\n    params: {params}\n");
        let p = tmp.path().join(format!("{out}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        run_with_guests(&["run", p.to_str().unwrap()]).ok();
        read_jsonl(&tmp.path().join(format!("{out}/in.jsonl")))
    };
    let all = pipeline("all", "{}");
    assert_eq!(all.len(), texts.len());
    for (d, lang) in all.iter().zip(&want) {
        assert_eq!(d["language"], *lang, "{d}");
        assert!(d["language_score"].as_f64().unwrap() > 0.0);
    }
    let some = pipeline("some", "{languages: [de, jpn], language_field: lang}");
    let langs: Vec<&str> = some.iter().map(|d| d["lang"].as_str().unwrap()).collect();
    assert_eq!(langs, ["de", "de", "ja", "ja"]);
    // An unknown code is refused before any document is read.
    let tmp2 = tmp.path().join("bad.yaml");
    std::fs::write(
        &tmp2,
        "source:\n  path: in.jsonl\nsink:\n  path: bad\nstages:\n  - plugin: language_id\n    params: {languages: [english]}\n",
    )
    .unwrap();
    let run = run_with_guests(&["run", tmp2.to_str().unwrap()]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("unknown language code \"english\""), "{}", run.stderr);
}

#[test]
fn modifiers_through_the_binary_match_nemo_curator() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = root().join("tests/parity/modifier_cases.jsonl");
    let inputs = read_jsonl(&cases);
    let reference: Vec<serde_json::Value> = std::fs::read_to_string(root().join("tests/parity/modifier_reference.jsonl"))
        .unwrap()
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["id"].as_str().unwrap().starts_with('m'))
        .collect();
    assert_eq!(reference.len(), inputs.len());
    let configs = [
        ("boiler_plate_string_modifier", "{}", "BoilerPlateStringModifier"),
        (
            "line_remover",
            "{patterns: [Advertisement, Read more, Share this article, '']}",
            "LineRemover(patterns=['Advertisement', 'Read more', 'Share this article', ''])",
        ),
        ("markdown_remover", "{}", "MarkdownRemover"),
        ("newline_normalizer", "{}", "NewlineNormalizer"),
        ("quotation_remover", "{}", "QuotationRemover"),
        (
            "slicer",
            "{left: 'Introduction:', right: 'References:', include_left: false, include_right: false}",
            "Slicer(left='Introduction:', right='References:', include_left=False, include_right=False)",
        ),
        ("slicer", "{left: 10, right: -10}", "Slicer(left=10, right=-10)"),
        ("url_remover", "{}", "UrlRemover"),
        ("unicode_reformatter", "{}", "UnicodeReformatter"),
    ];
    for (i, (plugin, params, name)) in configs.iter().enumerate() {
        let yaml =
            format!("source:\n  path: {}\nsink:\n  path: out{i}\nstages:\n  - plugin: {plugin}\n    params: {params}\n", cases.display());
        let p = tmp.path().join(format!("m{i}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        run_with_guests(&["run", p.to_str().unwrap()]).ok();
        let out = read_jsonl(&tmp.path().join(format!("out{i}/modifier_cases.jsonl")));
        assert_eq!(out.len(), inputs.len(), "{name}");
        for ((got, input), want) in out.iter().zip(&inputs).zip(&reference) {
            let expected = want["changed"][*name].as_str().unwrap_or_else(|| input["text"].as_str().unwrap());
            assert_eq!(got["text"].as_str().unwrap(), expected, "{name} on {}", input["id"]);
        }
    }
}

/// Scores one stage writes (`score_field: s, filter: false`) on the code fixture, by id.
fn code_scores(tmp: &std::path::Path, plugin: &str, params: &str, extra: &str) -> std::collections::BTreeMap<String, f64> {
    let yaml = format!(
        "source:\n  path: {}\nsink:\n  path: out-{plugin}\nstages:\n  - plugin: {plugin}\n    params: {{score_field: s, filter: false{params}}}\n{extra}",
        root().join("tests/parity/code_fixture.jsonl").display()
    );
    let p = tmp.join(format!("{plugin}.yaml"));
    std::fs::write(&p, yaml).unwrap();
    run_with_guests(&["run", p.to_str().unwrap()]).ok();
    read_jsonl(&tmp.join(format!("out-{plugin}/code_fixture.jsonl")))
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_string(), d["s"].as_f64().unwrap()))
        .collect()
}

#[test]
fn code_filters_through_the_binary_score_as_nemo_curator() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = read_jsonl(&root().join("tests/parity/code_fixture.jsonl"));
    let reference = read_jsonl(&root().join("tests/parity/code_reference.jsonl"));
    let python = code_scores(tmp.path(), "python_comment_to_code_filter", "", "");
    let c = code_scores(tmp.path(), "general_comment_to_code_filter", ", language: text/x-c", "");
    let grant = format!("    grants:\n      meta: {}\n", root().join("tests/parity").display());
    let ext = code_scores(tmp.path(), "per_extension_filter", ", lang: python, metadata_file: /meta/nemo_code_meta.csv", &grant);
    let html = code_scores(tmp.path(), "html_boilerplate_filter", "", "");
    let mut compared = 0;
    for (doc, want) in fixture.iter().zip(&reference) {
        let id = doc["id"].as_str().unwrap();
        let close = |ours: f64, name: &str| {
            let theirs = want["scores"][name].as_f64().unwrap();
            assert!((ours - theirs).abs() < 1e-9, "{name} on {id}: ours {ours}, NeMo {theirs}");
        };
        close(html[id], "HTMLBoilerplateFilter");
        match doc["language"].as_str().unwrap() {
            "Python" => {
                close(python[id], "PythonCommentToCodeFilter");
                close(ext[id], "PerExtensionFilter");
                compared += 1;
            }
            "C" => close(c[id], "GeneralCommentToCodeFilter"),
            _ => {}
        }
    }
    assert!(compared >= 40);
}

#[test]
fn fasttext_stages_run_lid176_in_the_sandbox() {
    let tmp = tempfile::tempdir().unwrap();
    if !needs(Need::FastTextModel) {
        return;
    }
    let models = root().join("target/fasttext");
    let set: Vec<serde_json::Value> = read_jsonl(&root().join("tests/langid/testset.jsonl"));
    let reference: Vec<serde_json::Value> = read_jsonl(&root().join("tests/langid/fasttext_reference.jsonl"));
    // Every 30th document: all 15 languages, two each.
    let picked: Vec<usize> = (0..set.len()).step_by(30).collect();
    let texts: Vec<String> = picked.iter().map(|&i| set[i]["text"].as_str().unwrap().to_string()).collect();
    write_docs(&tmp.path().join("in.jsonl"), &texts);
    let run = |out: &str, plugin: &str, params: &str| {
        let yaml = format!(
            "source:\n  path: in.jsonl\nsink:\n  path: {out}\nstages:\n  - plugin: {plugin}\n    params: {params}\n    grants:\n      models: {}\n",
            models.display()
        );
        let p = tmp.path().join(format!("{out}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        run_with_guests(&["run", p.to_str().unwrap()]).ok();
        read_jsonl(&tmp.path().join(format!("{out}/in.jsonl")))
    };
    // Language ID: fastText's own label and probability for each document.
    let all = run("all", "fasttext_lang_id", "{}");
    assert_eq!(all.len(), picked.len());
    for (d, &i) in all.iter().zip(&picked) {
        assert_eq!(d["language"], reference[i]["labels"][0], "{}", set[i]["id"]);
        let want = reference[i]["probs"][0].as_f64().unwrap();
        assert!((d["language_score"].as_f64().unwrap() - want).abs() < 1e-6, "{d}");
    }
    let german = run("de", "fasttext_lang_id", "{lang: DE, min_langid_score: 0.5}");
    assert!(!german.is_empty() && german.iter().all(|d| d["language"] == "de"));
    // Quality filter, with lid.176 standing in for a quality model: the score is P(en), or
    // 1 - P(top label) for other languages.
    let scored =
        run("q", "fasttext_quality_filter", "{model_path: /models/lid.176.ftz, label: __label__en, score_field: q, filter: false}");
    for (d, &i) in scored.iter().zip(&picked) {
        let p = reference[i]["probs"][0].as_f64().unwrap();
        let want = if reference[i]["labels"][0] == "en" { p } else { 1.0 - p };
        assert!((d["q"].as_f64().unwrap() - want).abs() < 1e-6, "{d}");
    }
    // A missing model is refused before any document is read.
    let yaml = "source:\n  path: in.jsonl\nsink:\n  path: bad\nstages:\n  - plugin: fasttext_lang_id\n    params: {model_path: /models/nope.ftz}\n    grants:\n      models: .\n";
    std::fs::write(tmp.path().join("bad.yaml"), yaml).unwrap();
    let bad = run_with_guests(&["run", tmp.path().join("bad.yaml").to_str().unwrap()]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("/models/nope.ftz"), "{}", bad.stderr);
}

#[test]
fn histogram_filter_reads_the_granted_histograms() {
    let tmp = tempfile::tempdir().unwrap();
    let hists = tmp.path().join("hists/checkpoint/edunov/cc60_multilingual/clean_hists");
    std::fs::create_dir_all(&hists).unwrap();
    let latin: String = "abcdefghijklmnopqrstuvwxyz ,.".chars().map(|c| format!("{c}\n")).collect();
    std::fs::write(hists.join("en"), format!("{latin}]\nж\n")).unwrap();
    write_docs(&tmp.path().join("in.jsonl"), &["plain english text, mostly.".into(), "жжжж жжжж жжжж".into(), "ok then".into()]);
    let yaml = format!(
        "source:\n  path: in.jsonl\nsink:\n  path: out\nstages:\n  - plugin: histogram_filter\n    params: {{score_field: h}}\n    grants:\n      histograms: {}\n",
        tmp.path().join("hists").display()
    );
    std::fs::write(tmp.path().join("p.yaml"), yaml).unwrap();
    run_with_guests(&["run", tmp.path().join("p.yaml").to_str().unwrap()]).ok();
    let out = read_jsonl(&tmp.path().join("out/in.jsonl"));
    let texts: Vec<&str> = out.iter().map(|d| d["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["plain english text, mostly.", "ok then"]);
    assert!(out.iter().all(|d| d["h"] == 1.0));
}

#[test]
fn token_count_filter_counts_like_hugging_face_tokenizers() {
    let tmp = tempfile::tempdir().unwrap();
    let reference = read_jsonl(&root().join("tests/parity/tokenizer_reference.jsonl"));
    let yaml = format!(
        "source:\n  path: {}\nsink:\n  path: out\nstages:\n  - plugin: token_count_filter\n    params: {{tokenizer_file: /tokenizer/bpe.json, score_field: tokens, min_tokens: 100}}\n    grants:\n      tokenizer: {}\n",
        root().join("tests/parity/fixture.jsonl").display(),
        root().join("tests/parity/tokenizers").display()
    );
    std::fs::write(tmp.path().join("p.yaml"), yaml).unwrap();
    run_with_guests(&["run", tmp.path().join("p.yaml").to_str().unwrap()]).ok();
    let out = read_jsonl(&tmp.path().join("out/fixture.jsonl"));
    let want: Vec<(String, f64)> = reference
        .iter()
        .filter(|r| r["bpe"].as_u64().unwrap() >= 100)
        .map(|r| (r["id"].as_str().unwrap().to_string(), r["bpe"].as_f64().unwrap()))
        .collect();
    let got: Vec<(String, f64)> = out.iter().map(|d| (d["id"].as_str().unwrap().to_string(), d["tokens"].as_f64().unwrap())).collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

#[test]
fn tokenizer_fertility_filter_uses_a_sentencepiece_model() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = read_jsonl(&root().join("tests/parity/fixture.jsonl"));
    let reference = read_jsonl(&root().join("tests/parity/sentencepiece_reference.jsonl"));
    let yaml = format!(
        "source:\n  path: {}\nsink:\n  path: out\nstages:\n  - plugin: tokenizer_fertility_filter\n    params: {{path_to_tokenizer: /tokenizer/sp_unigram.model, score_field: f, filter: false}}\n    grants:\n      tokenizer: {}\n",
        root().join("tests/parity/fixture.jsonl").display(),
        root().join("tests/parity/tokenizers").display()
    );
    std::fs::write(tmp.path().join("p.yaml"), yaml).unwrap();
    run_with_guests(&["run", tmp.path().join("p.yaml").to_str().unwrap()]).ok();
    let out = read_jsonl(&tmp.path().join("out/fixture.jsonl"));
    assert_eq!(out.len(), fixture.len());
    for ((d, doc), want) in out.iter().zip(&fixture).zip(&reference) {
        let pieces = want["unigram"].as_f64().unwrap();
        let expected = if pieces == 0.0 { -1.0 } else { doc["text"].as_str().unwrap().chars().count() as f64 / pieces };
        assert!((d["f"].as_f64().unwrap() - expected).abs() < 1e-9, "{}", doc["id"]);
    }
}
