//! Reader and writer throughput on one core, beside baselines measured in the same run.
//!
//! `cargo bench -p curator-host --bench io_throughput` prints a table. MB/s are of
//! uncompressed JSONL text, so rows compare directly.

mod common;

use common::measure::{best_of, input};

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use curator_core::partition::Extent;
use curator_core::pipeline::Compression;
use curator_host::io::Loc;
use curator_host::io::jsonl::{JsonlReader, JsonlWriter};
use curator_host::io::parquet::{ParquetReader, ParquetWriter};
use curator_host::io::records::ReadOptions;
use curator_host::io::writer::OutputWriter;

fn read_jsonl(path: &Path) -> u64 {
    let mut r = JsonlReader::open(&input(path), Extent::Whole, ReadOptions::default()).expect("open");
    let mut n = 0;
    while let Some(b) = r.next_batch(1000).expect("read") {
        n += b.num_rows() as u64;
    }
    n
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = common::corpus(256 << 20);
    let plain = dir.path().join("c.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&plain).expect("create"));
        for (i, d) in docs.iter().enumerate() {
            writeln!(
                f,
                "{}",
                serde_json::json!({"id": format!("doc-{i}"), "text": d, "url": format!("https://example.com/{i}"), "score": i % 7})
            )
            .expect("write");
        }
    }
    let raw = std::fs::read(&plain).expect("read");
    let mb = raw.len() as f64 / (1 << 20) as f64;
    let zst = dir.path().join("c.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&raw[..], 3).expect("zstd")).expect("write zst");
    let gz = dir.path().join("c.jsonl.gz");
    {
        let mut e = flate2::write::GzEncoder::new(std::fs::File::create(&gz).expect("create"), flate2::Compression::default());
        e.write_all(&raw).expect("gzip");
        e.finish().expect("gzip");
    }
    let pq = dir.path().join("c.parquet");
    {
        let mut r = JsonlReader::open(&input(&plain), Extent::Whole, ReadOptions::default()).expect("open");
        let mut w: Box<dyn OutputWriter> =
            Box::new(ParquetWriter::create(&Loc::Local(pq.clone()), Compression::Zstd, Default::default(), 65536, "text").expect("pq"));
        while let Some(b) = r.next_batch(8192).expect("read") {
            w.write_batch(&b).expect("write");
        }
        w.finish().expect("finish");
    }
    drop(raw);
    let runs = 3;

    // Baselines: raw zstd decode, and counting lines of the plain file (what `wc -l` does).
    let zstd_decode = best_of(runs, || {
        let d = zstd::stream::read::Decoder::new(std::fs::File::open(&zst).expect("open")).expect("decoder");
        std::hint::black_box(count_lines(d));
    });
    let wc_l = best_of(runs, || {
        let bytes = std::fs::read(&plain).expect("read");
        std::hint::black_box(memchr_count(&bytes));
    });
    let parse_plain = best_of(runs, || {
        std::hint::black_box(read_jsonl(&plain));
    });
    let parse_zst = best_of(runs, || {
        std::hint::black_box(read_jsonl(&zst));
    });
    let parse_gz = best_of(runs, || {
        std::hint::black_box(read_jsonl(&gz));
    });
    let gzip_decode = best_of(runs, || {
        let d = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(std::fs::File::open(&gz).expect("open")));
        std::hint::black_box(count_lines(d));
    });
    // Writers alone, from batches already in memory.
    let batches = {
        let mut r = JsonlReader::open(&input(&plain), Extent::Whole, ReadOptions::default()).expect("open");
        let mut v = Vec::new();
        while let Some(b) = r.next_batch(1000).expect("read") {
            v.push(b);
        }
        v
    };
    let write_with = |path: &Path, make: &dyn Fn(&Loc) -> Box<dyn OutputWriter>| {
        best_of(runs, || {
            let mut w = make(&Loc::Local(path.to_path_buf()));
            for b in &batches {
                w.write_batch(b).expect("write");
            }
            w.finish().expect("finish");
        })
    };
    let out_w = dir.path().join("w.jsonl.zst");
    let write_zst =
        write_with(&out_w, &|l| Box::new(JsonlWriter::create(l, Compression::Zstd, Default::default(), "text").expect("create")));
    let write_zst_mt = write_with(&out_w, &|l| {
        Box::new(
            JsonlWriter::create(l, Compression::Zstd, Default::default(), "text")
                .and_then(|w| w.with_compression_workers(2))
                .expect("create"),
        )
    });
    let out_wp = dir.path().join("w.parquet");
    let write_pq =
        write_with(&out_wp, &|l| Box::new(ParquetWriter::create(l, Compression::Zstd, Default::default(), 65536, "text").expect("create")));
    let zstd_encode = best_of(runs, || {
        std::hint::black_box(zstd::encode_all(std::fs::File::open(&plain).expect("open"), 3).expect("zstd").len());
    });
    let out = dir.path().join("out.jsonl.zst");
    let roundtrip_zst = best_of(runs, || {
        let mut r = JsonlReader::open(&input(&zst), Extent::Whole, ReadOptions::default()).expect("open");
        let mut w: Box<dyn OutputWriter> =
            Box::new(JsonlWriter::create(&Loc::Local(out.clone()), Compression::Zstd, Default::default(), "text").expect("create"));
        while let Some(b) = r.next_batch(1000).expect("read") {
            w.write_batch(&b).expect("write");
        }
        w.finish().expect("finish");
    });
    let parse_pq = best_of(runs, || {
        let mut r = ParquetReader::open(&input(&pq), Extent::Whole, ReadOptions::default(), 8192).expect("open");
        while let Some(b) = r.next_batch().expect("read") {
            std::hint::black_box(b.num_rows());
        }
    });
    let out_pq = dir.path().join("out.parquet");
    let roundtrip_pq = best_of(runs, || {
        let mut r = ParquetReader::open(&input(&pq), Extent::Whole, ReadOptions::default(), 8192).expect("open");
        let mut w: Box<dyn OutputWriter> = Box::new(
            ParquetWriter::create(&Loc::Local(out_pq.clone()), Compression::Zstd, Default::default(), 65536, "text").expect("create"),
        );
        while let Some(b) = r.next_batch().expect("read") {
            w.write_batch(&b).expect("write");
        }
        w.finish().expect("finish");
    });

    let rate = |d: Duration| mb / d.as_secs_f64();
    println!(
        "{} documents, {:.0} MB of JSONL (zstd {:.0} MB, parquet {:.0} MB); one thread, best of {runs}",
        docs.len(),
        mb,
        std::fs::metadata(&zst).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64,
        std::fs::metadata(&pq).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64
    );
    println!("| {:<52} | {:>10} | {:>12} |", "measurement (MB/s of uncompressed JSONL, one core)", "MB/s", "vs baseline");
    println!("|{:-<54}|{:-<12}|{:-<14}|", "", "", "");
    let row = |name: &str, d: Duration, base: Duration| {
        println!("| {name:<52} | {:>10.0} | {:>11.2}x |", rate(d), base.as_secs_f64() / d.as_secs_f64())
    };
    row("baseline: count lines of plain file (wc -l)", wc_l, wc_l);
    row("baseline: zstd decode + count lines (zstd -dc | wc -l)", zstd_decode, zstd_decode);
    row("JSONL plain: read + parse into Arrow", parse_plain, wc_l);
    row("baseline: gzip decode + count lines (zcat | wc -l)", gzip_decode, gzip_decode);
    row("baseline: zstd -3 compress of the plain file", zstd_encode, zstd_encode);
    row("JSONL.zst: decode + parse into Arrow", parse_zst, zstd_decode);
    row("JSONL.gz: decode + parse into Arrow", parse_gz, gzip_decode);
    row("write JSONL.zst from Arrow (writer thread only)", write_zst, zstd_encode);
    row("write JSONL.zst from Arrow (+2 zstd workers)", write_zst_mt, zstd_encode);
    row("write Parquet (zstd) from Arrow", write_pq, zstd_encode);
    row("JSONL.zst -> JSONL.zst: decode + parse + encode + write", roundtrip_zst, zstd_decode);
    row("Parquet (zstd): read into Arrow reader schema", parse_pq, zstd_decode);
    row("Parquet -> Parquet: read + write (zstd)", roundtrip_pq, zstd_decode);
}

/// Lines of a decoded stream, read in 1 MiB chunks (the decode baselines).
fn count_lines(mut d: impl Read) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0usize;
    loop {
        let n = d.read(&mut buf).expect("read");
        if n == 0 {
            return lines;
        }
        lines += memchr_count(&buf[..n]);
    }
}

fn memchr_count(b: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', b).count()
}
