//! The `warc` source and the `justext` and `main_text` stages, end to end: a Common Crawl-shaped WARC (one gzip
//! member per record) read by the real binary, HTML turned into text, the records that are not
//! pages counted, a truncated member rejected with its offset and the documents before it kept;
//! WET files read as text.

use std::io::Write;
use std::path::Path;

use crate::support::*;

fn member(kind: &str, headers: &[(&str, &str)], block: &[u8]) -> Vec<u8> {
    let mut rec = format!("WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Date: 2024-05-01T10:00:00Z\r\n").into_bytes();
    for (n, v) in headers {
        rec.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    rec.extend_from_slice(format!("Content-Length: {}\r\n\r\n", block.len()).as_bytes());
    rec.extend_from_slice(block);
    rec.extend_from_slice(b"\r\n\r\n");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&rec).unwrap();
    e.finish().unwrap()
}

fn response(n: u32, url: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut http = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    http.extend_from_slice(body);
    let id = format!("<urn:uuid:00000000-0000-0000-0000-{n:012}>");
    member("response", &[("WARC-Target-URI", url), ("WARC-Record-ID", &id)], &http)
}

const ARTICLE: &str = "The old harbour was built in the years after the great storm, when the town decided that it could no longer depend on the beach for its boats. It took almost ten years to finish, and most of the stone came from the quarry on the hill above the church.";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><title>{title}</title><script>var a = 1;</script></head><body>\
         <div class=menu><a href=/>Home</a> | <a href=/news>News</a> | <a href=/about>About</a></div>\
         <h1>{title}</h1>{body}<div class=footer>Copyright &copy; 2024 The Town</div></body></html>"
    )
}

fn write(path: &Path, members: &[Vec<u8>]) -> Vec<u64> {
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for m in members {
        offsets.push(at);
        at += m.len() as u64;
    }
    std::fs::write(path, members.concat()).unwrap();
    offsets
}

#[test]
fn a_crawl_file_becomes_the_pages_main_text() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("crawl")).unwrap();
    let latin1 = page("Caf\u{e9}", &format!("<p>{ARTICLE} The caf\u{e9} on the quay is still open.</p>"));
    let latin1: Vec<u8> = latin1.chars().map(|c| c as u32 as u8).collect();
    let xhtml = format!(
        "<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><body><h2><a id=\"s1\"/>History</h2><p>{ARTICLE}</p></body></html>"
    );
    let good =
        response(1, "http://town.example/harbour", "text/html; charset=utf-8", page("Harbour", &format!("<p>{ARTICLE}</p>")).as_bytes());
    let members = vec![
        member("warcinfo", &[("WARC-Record-ID", "<urn:uuid:info>")], b"software: test\r\n"),
        member("request", &[("WARC-Target-URI", "http://town.example/harbour")], b"GET /harbour HTTP/1.1\r\n\r\n"),
        good,
        response(2, "http://town.example/cafe", "text/html; charset=iso-8859-1", &latin1),
        // Navigation only: jusText keeps nothing, so the page is dropped.
        response(3, "http://town.example/menu", "text/html", page("Menu", "").as_bytes()),
        response(4, "http://town.example/doc.pdf", "application/pdf", b"%PDF-1.4"),
        response(5, "http://town.example/x", "application/xhtml+xml", xhtml.as_bytes()),
        member("metadata", &[("WARC-Record-ID", "<urn:uuid:meta>")], b"fetchTimeMs: 12\r\n"),
        response(6, "http://town.example/late", "text/html", page("Late", &format!("<p>{ARTICLE}</p>")).as_bytes()),
    ];
    let mut cut = members.clone();
    let last = cut.len() - 1;
    let keep = cut[last].len() - 20;
    cut[last].truncate(keep);
    let offsets = write(&tmp.path().join("crawl/CC-MAIN-0001.warc.gz"), &cut);
    let yaml = "source:\n  path: crawl\nsink:\n  path: out\nstages:\n  - plugin: justext\n";
    let pipeline = write_pipeline(tmp.path(), yaml);
    let run = run_with_guests(&["run", pipeline.to_str().unwrap()]);
    run.ok();
    let docs = articles_only(&tmp.path().join("out/CC-MAIN-0001.warc.jsonl"));
    assert!(docs.iter().all(|d| !d["text"].as_str().unwrap().contains("Copyright")), "{docs:?}");
    assert!(docs[1]["text"].as_str().unwrap().contains("The café on the quay"), "{}", docs[1]["text"]);
    assert_eq!(docs[1]["charset"], "windows-1252");
    assert_eq!(docs[0]["url"], "http://town.example/harbour");
    assert_eq!(docs[0]["warc_record_id"], "<urn:uuid:00000000-0000-0000-0000-000000000001>");
    assert_eq!(docs[0]["source_id"], "CC-MAIN-0001.warc.gz");
    assert_eq!(docs[0]["warc_date"], "2024-05-01T10:00:00Z");
    // The XHTML page's heading is the one self-closed anchor away from its text: kept whole.
    assert!(docs[2]["text"].as_str().unwrap().starts_with("History\n\nThe old harbour"), "{}", docs[2]["text"]);
    // The truncated last member is rejected at its offset; the documents before it are kept.
    let rejected = read_jsonl(&tmp.path().join("out/_rejected/CC-MAIN-0001.warc.jsonl.jsonl"));
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0]["byte_offset"], offsets[last]);
    assert!(rejected[0]["reason"].as_str().unwrap().starts_with("truncated gzip member"), "{rejected:?}");

    // The same crawl through the second extractor: the same pages' articles, without the chrome.
    let yaml = "source:\n  path: crawl\nsink:\n  path: out-main\nstages:\n  - plugin: main_text\n";
    run_with_guests(&["run", write_pipeline(tmp.path(), yaml).to_str().unwrap()]).ok();
    articles_only(&tmp.path().join("out-main/CC-MAIN-0001.warc.jsonl"));
}

/// The documents of `out`: the three article pages (ids 1, 2 and 5), each with the article's
/// text and without the menu or the script.
fn articles_only(out: &Path) -> Vec<serde_json::Value> {
    let docs = read_jsonl(out);
    let ids: Vec<&str> = docs.iter().map(|d| d["id"].as_str().unwrap()).collect();
    let want = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002", "00000000-0000-0000-0000-000000000005"];
    assert_eq!(ids, want);
    for d in &docs {
        let text = d["text"].as_str().unwrap();
        assert!(
            text.contains("The old harbour was built") && !text.contains("Home") && !text.contains("var a"),
            "boilerplate kept: {text}"
        );
    }
    docs
}

#[test]
fn wet_files_are_read_as_text_and_a_non_warc_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let conversion = |n: u32, lang: &str, text: &str| {
        let id = format!("<urn:uuid:wet-{n}>");
        member(
            "conversion",
            &[
                ("WARC-Target-URI", "http://a.example/"),
                ("WARC-Record-ID", &id),
                ("WARC-Identified-Content-Language", lang),
                ("Content-Type", "text/plain"),
            ],
            text.as_bytes(),
        )
    };
    write(
        &tmp.path().join("x.warc.wet.gz"),
        &[member("warcinfo", &[], b"x"), conversion(1, "eng", "First page.\nSecond line."), conversion(2, "deu,eng", "Zweite Seite.")],
    );
    let pipeline = write_pipeline(tmp.path(), "source:\n  path: x.warc.wet.gz\nsink:\n  path: out\n");
    run_with_guests(&["run", pipeline.to_str().unwrap()]).ok();
    let docs = read_jsonl(&tmp.path().join("out/x.warc.wet.jsonl"));
    assert_eq!(docs.len(), 2);
    assert_eq!(
        (docs[0]["id"].as_str(), docs[0]["text"].as_str(), docs[0]["language"].as_str()),
        (Some("wet-1"), Some("First page.\nSecond line."), Some("eng"))
    );
    assert_eq!(docs[1]["language"], "deu,eng");
    // A file that is not WARC under a WARC name: rejected with the reason, the run goes on.
    std::fs::write(tmp.path().join("bad.warc"), b"{\"text\": \"jsonl\"}\n").unwrap();
    let pipeline = write_pipeline(tmp.path(), "source:\n  path: bad.warc\nsink:\n  path: out2\n");
    let run = run_with_guests(&["run", pipeline.to_str().unwrap()]);
    run.ok();
    let rejected = read_jsonl(&tmp.path().join("out2/_rejected/bad.warc.jsonl.jsonl"));
    assert!(rejected[0]["reason"].as_str().unwrap().contains("expected a WARC version line"), "{rejected:?}");
    assert!(run.stderr.contains("bad.warc: no document could be read from it"), "{}", run.stderr);
}

#[test]
fn a_crawl_is_read_from_object_storage() {
    if !needs(Need::MotoServer) {
        return;
    }
    let s3 = crate::s3::S3Server::start();
    s3.create_bucket("crawl");
    let pages: Vec<Vec<u8>> = (1..=3)
        .map(|n| response(n, &format!("http://town.example/{n}"), "text/html", page("Harbour", &format!("<p>{ARTICLE}</p>")).as_bytes()))
        .collect();
    s3.put_object("crawl", "segments/CC-MAIN-0001.warc.gz", &pages.concat());
    s3.put_object("crawl", "segments/notes.txt", b"not a crawl file");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let p = write_pipeline(
        tmp.path(),
        &format!("source:\n  path: s3://crawl/segments/\nsink:\n  path: {}\nstages:\n  - plugin: justext\n", out.display()),
    );
    s3.run(&p).ok();
    let docs = read_jsonl(&out.join("CC-MAIN-0001.warc.jsonl"));
    assert_eq!(docs.len(), 3);
    assert!(docs.iter().all(|d| d["text"].as_str().unwrap().starts_with("Harbour\n\nThe old harbour")), "{docs:?}");
    assert_eq!(docs[2]["url"], "http://town.example/3");
}

/// The extractors in the sandbox give their native build's text, page for page: the planted
/// parity pages and, where installed, Debian's HTML documentation (the guest build has code of
/// its own: the tokenizer's byte search runs on SIMD128 there).
#[test]
fn the_sandboxed_extractors_give_the_native_builds_text() {
    let tmp = tempfile::tempdir().unwrap();
    let planted = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/parity/justext_planted.jsonl")).unwrap();
    let mut pages: Vec<String> =
        planted.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["html"].as_str().unwrap().to_string()).collect();
    let docs = Path::new("/usr/share/doc/python3.11/html/library");
    if let Ok(entries) = std::fs::read_dir(docs) {
        let mut names: Vec<_> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "html")).collect();
        names.sort();
        pages.extend(names.iter().take(120).filter_map(|p| std::fs::read(p).ok()).map(|b| String::from_utf8_lossy(&b).into_owned()));
    }
    let mut input = String::new();
    for (i, html) in pages.iter().enumerate() {
        input.push_str(&serde_json::json!({"id": format!("p{i}"), "text": html}).to_string());
        input.push('\n');
    }
    std::fs::write(tmp.path().join("pages.jsonl"), input).unwrap();
    for stage in ["justext", "main_text"] {
        let yaml = format!("source:\n  path: pages.jsonl\nsink:\n  path: out-{stage}\nstages:\n  - plugin: {stage}\n");
        run_with_guests(&["run", write_pipeline(tmp.path(), &yaml).to_str().unwrap()]).ok();
        let got: std::collections::HashMap<String, String> = read_jsonl(&tmp.path().join(format!("out-{stage}/pages.jsonl")))
            .into_iter()
            .map(|d| (d["id"].as_str().unwrap().to_string(), d["text"].as_str().unwrap().to_string()))
            .collect();
        let english = curator_html::stoplists::Stoplist::for_language("English").unwrap();
        // The stages' defaults are the library's.
        let native = |html: &str| match stage {
            "justext" => curator_html::justext_text(html, &english, &curator_html::Params::default(), false),
            _ => curator_html::main_text::main_text(html, &english, &curator_html::main_text::MainTextParams::default()),
        };
        let mut kept = 0;
        for (i, html) in pages.iter().enumerate() {
            let want = Some(native(html)).filter(|t| !t.is_empty());
            assert_eq!(got.get(&format!("p{i}")), want.as_ref(), "{stage}, page {i}");
            kept += want.is_some() as usize;
        }
        assert_eq!(got.len(), kept, "{stage}");
        assert!(kept >= pages.len() / 3, "{stage} kept {kept} of {} pages", pages.len());
    }
}
