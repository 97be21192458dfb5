//! Embeds every stop-word list in `stoplists/` (one `<Language>.txt` each), so the stage
//! that uses this crate is one file: writes `$OUT_DIR/stoplists.rs`, a sorted
//! `&[(language, words)]` of `include_str!`s.

use std::fmt::Write;

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stoplists");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("libs/html/stoplists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".txt").map(str::to_string))
        .collect();
    names.sort();
    let mut out = String::from("&[\n");
    for n in &names {
        let path = dir.join(format!("{n}.txt"));
        writeln!(out, "    ({n:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    out.push(']');
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("stoplists.rs");
    std::fs::write(dest, out).unwrap();
}
