//! Reading Parquet on one core, ours beside pyarrow's `read_table`, on the same files
//! (written by pyarrow, Snappy and Zstd) in the same run.
//!
//! `cargo bench -p curator-host --bench parquet_read` prints a table of MB/s of file bytes.
//! This machine's speed drifts within seconds, so reads are paired one for one: pyarrow runs
//! in one Python process kept alive for the whole bench, and each pair is one pyarrow read
//! then one of ours, a few hundred milliseconds apart. The ratio of each pair is taken, and
//! the table gives the median ratio with its quartiles (`PAIRS`, default 25, pairs per
//! codec and reader). Timed on both sides: opening the file, decoding every column into
//! Arrow (pyarrow: `pq.read_table(path, use_threads=False)` with one CPU and one I/O thread,
//! timed inside Python, interpreter start excluded); ours also turns each batch into the
//! reader schema (`id`, `text`, `_meta` JSON), which is what a run pays. The "decode only"
//! row is the parquet crate's Arrow reader alone. Needs python3 with pyarrow (skips
//! otherwise). `CODECS=zstd` (or `snappy`) times one codec only. `PROFILE=N` skips the table
//! and runs only our reader N times on each file, then pyarrow's N times (in its own
//! process), for `perf record` (`perf report --sort comm,symbol` tells the two apart).

mod common;

use common::measure::{best_of, input};
use curator_test_support::{PythonServer, quartiles};

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use curator_core::partition::Extent;
use curator_host::io::parquet::ParquetReader;
use curator_host::io::records::ReadOptions;

const PYARROW: &str = r#"
import sys, time
import pyarrow as pa, pyarrow.parquet as pq
pa.set_cpu_count(1)
pa.set_io_thread_count(1)
def once(path):
    t = time.perf_counter()
    table = pq.read_table(path, use_threads=False)
    took = time.perf_counter() - t
    del table
    return took
if len(sys.argv) > 1:
    print(min(once(sys.argv[1]) for _ in range(int(sys.argv[2]))))
else:
    # Served: one path a line in, its read's seconds a line out.
    for line in sys.stdin:
        print(once(line.strip()), flush=True)
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
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given, which lives across the call.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0;
    if ok { usage.ru_minflt.max(0) as u64 } else { 0 }
}

fn pyarrow(path: &Path, repeats: usize) -> Option<Duration> {
    let out = Command::new("python3").args(["-c", PYARROW]).arg(path).arg(repeats.to_string()).output().ok()?;
    let secs: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some(Duration::from_secs_f64(secs))
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = std::time::Instant::now();
    f();
    t.elapsed()
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
    let pairs: usize = std::env::var("PAIRS").ok().and_then(|n| n.parse().ok()).unwrap_or(25).max(1);
    let Some(mut py) = PythonServer::start(PYARROW, &[]) else {
        println!("skipped: python3 could not be started");
        return;
    };
    println!(
        "{} documents ({} MB of text) in 4 columns, written by pyarrow; one core; {pairs} pairs of reads (pyarrow, then ours) per row, interleaved; median ratio of the pairs [quartiles]",
        docs.len(),
        (192 << 20) >> 20
    );
    println!(
        "| {:<8} | {:>7} | {:<30} | {:>14} | {:>14} | {:>22} |",
        "codec", "file MB", "reader", "ours MB/s", "pyarrow MB/s", "ours / pyarrow"
    );
    println!("|{:-<10}|{:-<9}|{:-<32}|{:-<16}|{:-<16}|{:-<24}|", "", "", "", "", "", "");
    type Reader = (&'static str, fn(&Path));
    let readers: [Reader; 2] = [("ours: into the reader schema", ours), ("ours: decode only (arrow-rs)", decode_only)];
    for (codec, path) in chosen() {
        let mb = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64;
        // One untimed read each: the file in the page cache, both sides' code paged in.
        let _ = py.time(&path.display().to_string());
        readers.iter().for_each(|(_, read)| read(path));
        for (name, read) in readers {
            let (mut ratios, mut theirs, mut us) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..pairs {
                let Some(base) = py.time(&path.display().to_string()) else { break };
                let own = timed(|| read(path));
                ratios.push(base.as_secs_f64() / own.as_secs_f64());
                theirs.push(mb / base.as_secs_f64());
                us.push(mb / own.as_secs_f64());
            }
            let (lo, mid, hi) = quartiles(&mut ratios);
            let (_, theirs, _) = quartiles(&mut theirs);
            let (_, us, _) = quartiles(&mut us);
            println!("| {codec:<8} | {mb:>7.0} | {name:<30} | {us:>14.0} | {theirs:>14.0} | {mid:>6.2}x [{lo:.2}–{hi:.2}] |");
        }
    }
}
