//! Reading Parquet on one core, ours beside pyarrow's `read_table`, on the same files
//! (written by pyarrow, Snappy and Zstd) in the same run.
//!
//! `cargo bench -p curator-host --bench parquet_read` prints a table of MB/s of file bytes.
//! Rounds alternate pyarrow and ours; each cell is the best of the round's repeats; the
//! range over rounds is printed, and the range of each round's ratio to that round's pyarrow. Timed on both sides: opening the file, decoding every column
//! into Arrow (pyarrow: `pq.read_table(path, use_threads=False)` with one CPU and one I/O
//! thread, timed inside Python, interpreter start excluded); ours also turns each batch into
//! the reader schema (`id`, `text`, `_meta` JSON), which is what a run pays. The "decode only"
//! row is the parquet crate's Arrow reader alone. Needs python3 with pyarrow (skips otherwise).
//! `CODECS=zstd` (or `snappy`) times one codec only. `PROFILE=N` skips the table and runs only
//! our reader N times on each file, then pyarrow's N times (in its own process), for
//! `perf record` (`perf report --sort comm,symbol` tells the two apart).

mod common;

use common::measure::{best_of, input};

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use curator_core::partition::Extent;
use curator_host::io::jsonl::ReadOptions;
use curator_host::io::parquet::ParquetReader;

const PYARROW: &str = r#"
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
pa.set_cpu_count(1)
pa.set_io_thread_count(1)
path, repeats = sys.argv[1], int(sys.argv[2])
best = float("inf")
for _ in range(repeats):
    t = time.perf_counter()
    table = pq.read_table(path, use_threads=False)
    best = min(best, time.perf_counter() - t)
    del table
print(best)
"#;

const WRITE: &str = r#"
import sys
import pyarrow.json as pj, pyarrow.parquet as pq
table = pj.read_json(sys.argv[1])
for codec, out in zip(["snappy", "zstd"], sys.argv[2:]):
    pq.write_table(table, out, compression=codec)
"#;

fn ours(path: &Path) {
    let mut r = ParquetReader::open(&input(path), Extent::Whole, ReadOptions::default(), 8192).expect("open");
    while let Some(b) = r.next_batch().expect("read") {
        std::hint::black_box(b.num_rows());
    }
}

fn decode_only(path: &Path) {
    let file = std::fs::File::open(path).expect("open");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("footer")
        .with_batch_size(8192)
        .build()
        .expect("reader");
    for b in reader {
        std::hint::black_box(b.expect("decode").num_rows());
    }
}

/// This process's minor page faults so far (fresh memory touched: each one a page the kernel
/// zeroes).
fn minor_faults() -> u64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0;
    if ok { usage.ru_minflt.max(0) as u64 } else { 0 }
}

fn pyarrow(path: &Path, repeats: usize) -> Option<Duration> {
    let out = Command::new("python3").args(["-c", PYARROW]).arg(path).arg(repeats.to_string()).output().ok()?;
    let secs: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some(Duration::from_secs_f64(secs))
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = common::corpus(192 << 20);
    let jsonl = dir.path().join("c.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&jsonl).expect("create"));
        for (i, d) in docs.iter().enumerate() {
            let doc = serde_json::json!({"id": format!("doc-{i}"), "text": d, "url": format!("https://example.com/{i}"), "score": i % 7});
            writeln!(f, "{doc}").expect("write");
        }
    }
    let files = [("Snappy", dir.path().join("snappy.parquet")), ("Zstd", dir.path().join("zstd.parquet"))];
    let wrote = Command::new("python3").args(["-c", WRITE]).arg(&jsonl).args(files.iter().map(|(_, p)| p)).status();
    if !wrote.is_ok_and(|s| s.success()) {
        println!("skipped: python3 with pyarrow is needed to write the files and time read_table (pip install pyarrow)");
        return;
    }
    let only = std::env::var("CODECS").unwrap_or_default();
    let chosen = || files.iter().filter(|(c, _)| only.is_empty() || only.split(',').any(|o| o.eq_ignore_ascii_case(c)));
    if let Some(n) = std::env::var("PROFILE").ok().and_then(|n| n.parse::<usize>().ok()) {
        for (codec, path) in chosen() {
            let faults = minor_faults();
            let best = best_of(n, || ours(path));
            println!("{codec}: our reader, {n} times: {best:?} at best, {} minor page faults a read", (minor_faults() - faults) / n as u64);
            println!("{codec}: pyarrow, {n} times: {:?} at best", pyarrow(path, n));
        }
        return;
    }
    let (rounds, repeats) = (5, 3);
    println!(
        "{} documents ({} MB of text) in 4 columns, written by pyarrow; one core; {rounds} alternating rounds, best of {repeats} each; ratios paired by round",
        docs.len(),
        (192 << 20) >> 20
    );
    println!("| {:<8} | {:>8} | {:<30} | {:>16} | {:>14} |", "codec", "file MB", "reader", "MB/s (range)", "vs pyarrow");
    println!("|{:-<10}|{:-<10}|{:-<32}|{:-<18}|{:-<16}|", "", "", "", "", "");
    for (codec, path) in chosen() {
        let mb = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64;
        let (mut base, mut full, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            if let Some(d) = pyarrow(path, repeats) {
                base.push(mb / d.as_secs_f64());
            }
            full.push(mb / best_of(repeats, || ours(path)).as_secs_f64());
            raw.push(mb / best_of(repeats, || decode_only(path)).as_secs_f64());
        }
        let range = |v: &[f64]| {
            let (lo, hi) = v.iter().fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            (lo, hi)
        };
        // Each round's ratio against the pyarrow run of the same round (the machine's noise
        // moves both sides of a round together).
        let paired = |v: &[f64]| -> Vec<f64> { v.iter().zip(&base).map(|(x, b)| x / b).collect() };
        for (name, v) in
            [("pyarrow read_table, 1 thread", &base), ("ours: into the reader schema", &full), ("ours: decode only (arrow-rs)", &raw)]
        {
            let (lo, hi) = range(v);
            let (rlo, rhi) = if base.len() == v.len() { range(&paired(v)) } else { (f64::NAN, f64::NAN) };
            println!("| {codec:<8} | {mb:>8.0} | {name:<30} | {:>7.0}–{:<7.0} | {:>6.2}–{:<5.2}x |", lo, hi, rlo, rhi);
        }
    }
}
