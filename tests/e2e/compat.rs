//! Files as pyarrow, polars and DuckDB write them (every Parquet codec and string layout,
//! compressed and odd JSONL) through the real binary, read back by the same tools, every
//! field compared: `scripts/compat/matrix.py`.

use crate::support::*;

#[test]
fn files_from_pyarrow_polars_and_duckdb_round_trip_through_the_host() {
    if !needs(Need::DataFrameTools) {
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(root().join("scripts/compat/matrix.py"))
        .args(["--host", env!("CARGO_BIN_EXE_curator-host")])
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}\n{}", String::from_utf8_lossy(&out.stderr));
    // Every case ran: the matrix prints one line per case and a count.
    assert!(report.contains("34 passed, 0 failed"), "{report}");
}
