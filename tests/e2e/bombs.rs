//! Inputs built to exhaust memory: a gzip member that expands 1000× into one endless line,
//! and a plain line far over `max_line_bytes`. Each is rejected by name, the documents around
//! it are kept, and the run's peak memory stays near `max_line_bytes`, not the input's size.

use std::io::Write;

use crate::support::*;

fn peak_rss_mib(stdout: &str) -> f64 {
    let at = stdout.find("peak RSS ").expect("the run reports its peak RSS");
    stdout[at + 9..].split_whitespace().next().and_then(|n| n.parse().ok()).expect("a number of MiB")
}

#[test]
fn compression_bombs_and_endless_lines_are_rejected_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // 512 MiB of 'a' without a newline between two documents: gzip members (which the reader
    // concatenates) of 1 MiB each, compressed once (~1 kB each).
    {
        let member = |bytes: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(bytes).unwrap();
            gz.finish().unwrap()
        };
        let mut f = std::io::BufWriter::new(std::fs::File::create(input.join("bomb.jsonl.gz")).unwrap());
        f.write_all(&member(b"{\"id\": \"before\", \"text\": \"first document\"}\n{\"text\": \"")).unwrap();
        let filler = member(&vec![b'a'; 1 << 20]);
        for _ in 0..512 {
            f.write_all(&filler).unwrap();
        }
        f.write_all(&member(b"\"}\n{\"id\": \"after\", \"text\": \"last document\"}\n")).unwrap();
    }
    let compressed = std::fs::metadata(input.join("bomb.jsonl.gz")).unwrap().len();
    assert!(compressed < 1 << 20, "{compressed} bytes: not a 500x bomb");
    // A plain file with a 96 MiB line.
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(input.join("long.jsonl")).unwrap());
        f.write_all(b"{\"id\": \"short\", \"text\": \"a short one\"}\n{\"text\": \"").unwrap();
        let chunk = vec![b'b'; 1 << 20];
        for _ in 0..96 {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"\"}\n").unwrap();
    }
    let p = write_pipeline(tmp.path(), "source:\n  path: in\n  max_line_bytes: 16MB\nsink:\n  path: out\n");
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    run.ok();
    let ids =
        |f: &str| read_jsonl(&tmp.path().join("out").join(f)).iter().map(|d| d["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(ids("bomb.jsonl"), vec!["before", "after"]);
    assert_eq!(ids("long.jsonl"), vec!["short"]);
    let mut rejected = read_jsonl(&tmp.path().join("out/_rejected/bomb.jsonl.jsonl"));
    rejected.extend(read_jsonl(&tmp.path().join("out/_rejected/long.jsonl.jsonl")));
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    for r in &rejected {
        assert!(r["reason"].as_str().unwrap().starts_with("line longer than max_line_bytes"), "{r}");
        assert_eq!(r["line"], 2);
        assert!(r["excerpt"].as_str().unwrap().len() <= 200);
    }
    let peak = peak_rss_mib(&run.stdout);
    eprintln!("512 MiB bomb ({} kB compressed) and a 96 MiB line: peak RSS {peak} MiB", compressed / 1024);
    assert!(peak < 200.0, "peak RSS {peak} MiB for a 16 MB line limit");
}
