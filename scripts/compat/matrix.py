#!/usr/bin/env python3
"""Compatibility matrix: files as pyarrow, polars and DuckDB write them, through curator-host,
read back by the same three tools, every field compared.

    python3 scripts/compat/matrix.py --host target/release/curator-host [--work DIR] [--docs N]

Inputs (one set of documents, written every way below):
  * Parquet by pyarrow, polars and DuckDB in every codec each writes (Snappy, LZ4/LZ4_RAW,
    Brotli, Zstd, Gzip, none); the text column also as large_string, string_view and
    dictionary; a Hugging Face layout (data/train-0000X-of-00002.parquet) read as a folder.
  * JSONL plain, gzip, zstd, bzip2, xz and LZ4 frames (by extension), the same bytes under a
    plain .jsonl name (by magic bytes), with a UTF-8 byte-order mark and CRLF line ends.

Every input runs twice through `curator-host run` with no stage: to a Parquet sink and to a
JSONL sink. Each output is read by pyarrow, polars and DuckDB and compared with the source
documents field by field (Parquet sinks: also each passed-through column's type). Prints one
line per case and `N passed, N failed`; exits 1 on any failure.

Columns: id (int64), text (unicode, newlines, emoji), score (float64), f32 (float32), n32
(int32), ok (bool), tags (list<string>), info (struct<source: string, rank: int32>), ts
(timestamp[us, UTC]), day (date32), price (decimal128(12, 2)), attrs (map<string, int32>;
pyarrow only: polars has no maps) and nulls scattered through all but text.
"""
import argparse
import bz2
import datetime as dt
import decimal
import gzip
import json
import lzma
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as paj
import pyarrow.parquet as pq

UTC = dt.timezone.utc


def documents(n):
    texts = ["plain ascii text", "héllo wörld — ünïcödé", "日本語のテキスト", "emoji 🙂🚀 and a\nnewline", "tab\tand \"quotes\" \\ back"]
    rows = []
    for i in range(n):
        rows.append({
            "id": i,
            "text": f"{texts[i % len(texts)]} #{i}",
            "score": None if i % 11 == 3 else i * 0.25 - 3.5,
            "f32": None if i % 13 == 5 else [0.1, 1.5, -2.25, 3.3][i % 4],
            "n32": None if i % 7 == 6 else (i * 7919) % 100000 - 50000,
            "ok": None if i % 9 == 8 else i % 2 == 0,
            "tags": None if i % 10 == 9 else [f"t{j}" for j in range(i % 4)],
            "info": None if i % 12 == 11 else {"source": f"s{i % 3}", "rank": i},
            "ts": None if i % 8 == 7 else dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i * 3601, microseconds=i * 17),
            "day": None if i % 6 == 5 else dt.date(2023, 12, 31) + dt.timedelta(days=i),
            "price": None if i % 5 == 4 else decimal.Decimal(i * 1234567 - 500000).scaleb(-2),
            "attrs": None if i % 4 == 3 else {f"k{j}": j * i for j in range(i % 3)},
        })
    return rows


SCHEMA = pa.schema([
    ("id", pa.int64()), ("text", pa.string()), ("score", pa.float64()), ("f32", pa.float32()),
    ("n32", pa.int32()), ("ok", pa.bool_()), ("tags", pa.list_(pa.string())),
    ("info", pa.struct([("source", pa.string()), ("rank", pa.int32())])),
    ("ts", pa.timestamp("us", tz="UTC")), ("day", pa.date32()), ("price", pa.decimal128(12, 2)),
    ("attrs", pa.map_(pa.string(), pa.int32())),
])


def table(docs, schema=SCHEMA):
    rows = [{k: (list(v.items()) if k == "attrs" and v is not None else v) for k, v in d.items()} for d in docs]
    return pa.Table.from_pylist(rows, schema=schema)


# ---- comparing values -------------------------------------------------------------------

def norm(v, field):
    """A value in a canonical Python form for comparison, whatever tool read it."""
    if v is None:
        return None
    t = field
    if t == "ts":
        if isinstance(v, str):
            v = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        if isinstance(v, (int, float)):
            return None
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.astimezone(UTC)
    if t == "day":
        if isinstance(v, str):
            return dt.date.fromisoformat(v)
        if isinstance(v, dt.datetime):
            return v.date()
        return v
    if t == "price":
        return decimal.Decimal(str(v)).quantize(decimal.Decimal("0.01"))
    if t == "f32":
        return struct.unpack("f", struct.pack("f", float(v)))[0]
    if t == "attrs":
        if isinstance(v, list):  # pyarrow and DuckDB give maps as (key, value) pairs or dicts
            out = {}
            for kv in v:
                if isinstance(kv, dict):
                    out[kv["key"]] = kv["value"]
                else:
                    out[kv[0]] = kv[1]
            return out
        if isinstance(v, dict):  # a map written to JSON is an object; readers may add null keys
            return {k: x for k, x in v.items() if x is not None}
        return v
    if t == "info" and isinstance(v, dict):
        return {"source": v.get("source"), "rank": v.get("rank")}
    if t == "tags":
        return list(v)
    if t in ("id", "n32"):
        return int(v)
    if t == "score":
        return float(v)
    return v


def compare(want_docs, got_rows, fields, case, tool):
    """Errors (strings) where `got_rows` (dicts) differ from the source documents, by id."""
    errors = []
    by_id = {}
    for r in got_rows:
        by_id[int(r["id"])] = r
    if len(by_id) != len(want_docs) or len(got_rows) != len(want_docs):
        return [f"{case} / {tool}: {len(got_rows)} rows ({len(by_id)} ids), want {len(want_docs)}"]
    for d in want_docs:
        g = by_id[d["id"]]
        for f in fields:
            a, b = norm(d.get(f), f), norm(g.get(f), f)
            if f == "attrs" and a == {} and b is None:
                b = {}  # an empty map may read back as an empty object or as nothing
            if f == "attrs" and b == {} and a is None:
                a = {}
            equal = a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-6))
            if not equal:
                errors.append(f"{case} / {tool}: doc {d['id']} field {f}: want {a!r}, got {b!r}")
                if len(errors) > 5:
                    return errors
    return errors


def read_parquet_three_ways(path):
    files = sorted(str(p) for p in Path(path).rglob("*.parquet") if "_" not in p.parts[-2][:1])
    out = {}
    out["pyarrow"] = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    out["polars"] = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed").to_dicts()
    out["duckdb"] = duckdb.sql(f"SELECT * FROM read_parquet({files!r}, union_by_name=true)").arrow().read_all().to_pylist()
    return out, files


def read_jsonl_three_ways(path):
    files = sorted(str(p) for p in Path(path).rglob("*.jsonl") if not p.name.startswith("_") and "_rejected" not in str(p))
    out = {}
    out["pyarrow"] = pa.concat_tables([paj.read_json(f) for f in files], promote_options="permissive").to_pylist()
    out["polars"] = pl.concat([pl.read_ndjson(f, infer_schema_length=None) for f in files], how="diagonal_relaxed").to_dicts()
    out["duckdb"] = duckdb.sql(f"SELECT * FROM read_json({files!r}, format='newline_delimited', union_by_name=true)").arrow().read_all().to_pylist()
    return out


# ---- writing inputs ---------------------------------------------------------------------

def parquet_inputs(root, docs):
    """{case name: (path, fields the writer kept, source schema or None)}."""
    cases = {}
    t = table(docs)
    fields = [f.name for f in SCHEMA]
    for codec in ["snappy", "lz4", "brotli", "zstd", "gzip", "none"]:
        p = root / f"pyarrow-{codec}" / "part.parquet"
        p.parent.mkdir(parents=True)
        pq.write_table(t, p, compression=codec)
        cases[f"parquet pyarrow {codec}"] = (p.parent, fields, t.schema)
    for name, ty in [("large_string", pa.large_string()), ("string_view", pa.string_view()), ("dictionary", pa.dictionary(pa.int32(), pa.string()))]:
        p = root / f"pyarrow-text-{name}" / "part.parquet"
        p.parent.mkdir(parents=True)
        tt = t.set_column(1, pa.field("text", ty), pc.cast(t["text"], ty))
        pq.write_table(tt, p)
        cases[f"parquet pyarrow text as {name}"] = (p.parent, fields, t.schema)
    no_map = [f for f in fields if f != "attrs"]
    pdf = pl.from_arrow(t.drop_columns(["attrs"]))
    for codec in ["snappy", "lz4", "brotli", "zstd", "gzip", "uncompressed"]:
        p = root / f"polars-{codec}" / "part.parquet"
        p.parent.mkdir(parents=True)
        pdf.write_parquet(p, compression=codec)
        cases[f"parquet polars {codec}"] = (p.parent, no_map, pq.read_schema(p))
    con = duckdb.connect()
    con.register("docs", t)
    for codec in ["snappy", "lz4", "brotli", "zstd", "gzip", "uncompressed"]:
        p = root / f"duckdb-{codec}" / "part.parquet"
        p.parent.mkdir(parents=True)
        con.execute(f"COPY (SELECT * FROM docs ORDER BY id) TO '{p}' (FORMAT parquet, COMPRESSION '{codec}')")
        cases[f"parquet duckdb {codec}"] = (p.parent, fields, pq.read_schema(p))
    # Hugging Face's layout: a folder of shards.
    hf = root / "hf" / "data"
    hf.mkdir(parents=True)
    half = len(docs) // 2
    pq.write_table(t.slice(0, half), hf / "train-00000-of-00002.parquet")
    pq.write_table(t.slice(half), hf / "train-00001-of-00002.parquet")
    cases["parquet hugging face folder"] = (root / "hf", fields, t.schema)
    return cases


def json_doc(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, dt.datetime):
            v = v.isoformat().replace("+00:00", "Z")
        elif isinstance(v, dt.date):
            v = v.isoformat()
        elif isinstance(v, decimal.Decimal):
            v = str(v)
        if v is not None:
            out[k] = v
    return out


def jsonl_inputs(root, docs):
    raw = "".join(json.dumps(json_doc(d), ensure_ascii=False) + "\n" for d in docs).encode()
    fields = [f.name for f in SCHEMA]
    encoders = {
        "": lambda b: b, ".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
        # pyarrow's "lz4" codec writes LZ4 frames; its "zstd" codec, zstd frames.
        ".lz4": lambda b: pa.compress(b, codec="lz4", asbytes=True),
        ".zst": lambda b: pa.compress(b, codec="zstd", asbytes=True),
    }
    cases = {}
    for ext, enc in encoders.items():
        for named in ([True, False] if ext else [True]):
            name = f"jsonl{ext or ' plain'}" + ("" if named else " under a plain name")
            d = root / name.replace(" ", "-").replace(".", "")
            d.mkdir(parents=True)
            (d / (f"docs.jsonl{ext}" if named else "docs.jsonl")).write_bytes(enc(raw))
            cases[name] = (d, fields, None)
    d = root / "jsonl-bom-crlf"
    d.mkdir()
    (d / "docs.jsonl").write_bytes(b"\xef\xbb\xbf" + raw.replace(b"\n", b"\r\n"))
    cases["jsonl with BOM and CRLF"] = (d, fields, None)
    return cases


# ---- running ----------------------------------------------------------------------------

def run_host(host, src, out, fmt, work):
    pipeline = work / f"pipeline-{out.name}.yaml"
    pipeline.write_text(json.dumps({
        "source": {"path": str(src)},
        "sink": {"path": str(out), "format": fmt},
    }))
    r = subprocess.run([host, "run", str(pipeline)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"curator-host failed ({r.returncode}):\n{r.stderr[-3000:]}")
    warnings = [l for l in r.stderr.splitlines() if " WARN " in l or "warning" in l.lower()]
    return warnings


def check_types(files, source_schema, fields, case):
    """A Parquet sink keeps a Parquet source's column types."""
    errors = []
    if source_schema is None:
        return errors
    for f in files:
        got = pq.read_schema(f)
        for name in fields:
            if name in ("text",) or name not in source_schema.names:
                continue
            want_t = source_schema.field(name).type
            if name not in got.names:
                errors.append(f"{case}: column {name} missing from {f}")
            elif got.field(name).type != want_t:
                errors.append(f"{case}: column {name} is {got.field(name).type}, the source's {want_t}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--work", help="keep inputs and outputs here (default: a temporary folder)")
    ap.add_argument("--docs", type=int, default=60)
    args = ap.parse_args()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="compat-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    docs = documents(args.docs)
    cases = {**parquet_inputs(work / "in", docs), **jsonl_inputs(work / "in", docs)}
    passed = failed = 0
    for i, (case, (src, fields, schema)) in enumerate(cases.items()):
        errors = []
        try:
            for fmt in ["parquet", "jsonl"]:
                out = work / "out" / f"{i:02d}-{fmt}"
                warnings = run_host(args.host, src, out, fmt, work)
                errors += [f"{case} -> {fmt}: the run warned: {w}" for w in warnings]
                if fmt == "parquet":
                    got, files = read_parquet_three_ways(out)
                    errors += check_types(files, schema, fields, f"{case} -> parquet")
                else:
                    got = read_jsonl_three_ways(out)
                for tool, rows in got.items():
                    errors += compare(docs, rows, fields, f"{case} -> {fmt}", tool)
        except Exception as e:  # a failed run or an unreadable output is this case's failure
            errors.append(f"{case}: {type(e).__name__}: {e}")
        if errors:
            failed += 1
            print(f"FAIL {case}")
            for e in errors[:8]:
                print(f"     {e}")
        else:
            passed += 1
            print(f"ok   {case}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
