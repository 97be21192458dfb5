//! The Rust stage crate `new stage` writes: Cargo.toml, the build config, `src/lib.rs` with a
//! unit test, and its README.

use super::{Kind, Project, SAMPLE, Sdk, camel, pipeline_yaml};

pub(super) fn project(name: &str, ident: &str, kind: Kind, native: bool, sdk: &Sdk) -> Project {
    let (build, artifact, plugins) = if native {
        ("cargo build --release".to_string(), format!("target/release/lib{ident}.so"), "target/release")
    } else {
        (
            "cargo build --profile guest --target wasm32-wasip2".to_string(),
            format!("target/wasm32-wasip2/guest/{ident}.wasm"),
            "target/wasm32-wasip2/guest",
        )
    };
    let files = vec![
        ("Cargo.toml", cargo_toml(name, native, sdk)),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        (".gitignore", "/target\n/out\n".to_string()),
        ("src/lib.rs", lib_rs(ident, kind, native)),
        ("pipeline.yaml", pipeline_yaml(ident, kind)),
        ("data/sample.jsonl", SAMPLE.to_string()),
        ("README.md", readme(name, ident, native, &build, &artifact, plugins)),
    ];
    Project { files: files.into_iter().map(|(p, t)| (p.to_string(), t)).collect(), build, artifact }
}

fn cargo_toml(name: &str, native: bool, sdk: &Sdk) -> String {
    let kind = if native {
        "\n# A native (C ABI) plugin: built as a shared library, run in curator-host's worker processes.\n[package.metadata.curator]\nkind = \"native\"\n"
    } else {
        ""
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
{kind}
[lib]
# cdylib: the plugin file (a WASM component or a shared library); rlib: the unit tests.
crate-type = ["cdylib", "rlib"]

[dependencies]
curator-sdk = {sdk}

# A workspace of its own (not part of any enclosing one).
[workspace]

[profile.release]
# Native plugins need unwinding panics: the SDK turns a panic into an error at the C boundary.
panic = "unwind"

# WASM builds (`--profile guest`): small and fast, as curator's own plugins are built.
[profile.guest]
inherits = "release"
debug = false
strip = true
codegen-units = 1
lto = true
"#,
        sdk = sdk.dependency()
    )
}

const CARGO_CONFIG: &str = r#"# curator runs WASM stages with SIMD enabled: build them with it, as curator's own are.
[target.wasm32-wasip2]
rustflags = ["-C", "target-feature=+simd128"]
"#;

fn lib_rs(ident: &str, kind: Kind, native: bool) -> String {
    let ty = camel(ident);
    let native_attr = if native { ", native" } else { "" };
    let (doc, attr_extra, fields, body, test) = match kind {
        Kind::Filter => (
            "Keeps documents with at least `min_words` words.",
            "",
            "    /// Fewest words a kept document may have.\n    #[param(default = 10, min = 0)]\n    pub min_words: usize,\n",
            format!(
                "impl Filter for {ty} {{\n    fn keep(&self, doc: &Doc<'_>) -> bool {{\n        doc.words() >= self.min_words\n    }}\n}}\n"
            ),
            format!(
                "        let mut s = NativeStage::new::<{ty}>(r#\"{{\"min_words\": 3}}\"#).unwrap();\n        assert_eq!(s.run_texts(&[\"one two\", \"one two three\"]).unwrap(), vec![\"one two three\"]);\n"
            ),
        ),
        Kind::Map => (
            "Collapses runs of whitespace into one space (and trims the ends) when `collapse` is set.",
            "",
            "    /// Collapse whitespace runs.\n    #[param(default = true)]\n    pub collapse: bool,\n",
            format!(
                "impl Map for {ty} {{\n    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {{\n        if !self.collapse {{\n            return Cow::Borrowed(doc.text());\n        }}\n        Cow::Owned(doc.text().split_whitespace().collect::<Vec<_>>().join(\" \"))\n    }}\n}}\n"
            ),
            format!(
                "        let mut s = NativeStage::new::<{ty}>(\"{{}}\").unwrap();\n        assert_eq!(s.run_texts(&[\"  a \\t b\\n\"]).unwrap(), vec![\"a b\"]);\n"
            ),
        ),
        Kind::Score => (
            "Scores each document by its share of uppercase letters and keeps those at or below `max_ratio` (NeMo Curator's ScoreFilter params: `score_field`, `invert`, `filter`).",
            ", score_filter",
            "    /// Largest share of uppercase letters a kept document may have.\n    #[param(default = 0.3, min = 0.0, max = 1.0)]\n    pub max_ratio: f64,\n",
            format!(
                "impl Score for {ty} {{\n    fn score(&self, doc: &Doc<'_>) -> f64 {{\n        let letters = doc.text().chars().filter(|c| c.is_alphabetic()).count();\n        let upper = doc.text().chars().filter(|c| c.is_uppercase()).count();\n        if letters == 0 {{ 0.0 }} else {{ upper as f64 / letters as f64 }}\n    }}\n    fn keep(&self, score: f64) -> bool {{\n        score <= self.max_ratio\n    }}\n    fn score_field(&self) -> Option<&str> {{\n        self.score_field.as_deref()\n    }}\n    fn invert(&self) -> bool {{\n        self.invert\n    }}\n    fn filter(&self) -> bool {{\n        self.filter\n    }}\n}}\n"
            ),
            format!(
                "        let mut s = NativeStage::new::<{ty}>(r#\"{{\"max_ratio\": 0.5}}\"#).unwrap();\n        assert_eq!(s.run_texts(&[\"SHOUTING TEXT\", \"Calm text\"]).unwrap(), vec![\"Calm text\"]);\n"
            ),
        ),
        Kind::Stage => (
            "Adds a column `chars`: each document's length in characters (a general batch stage).",
            ", outputs = [\"chars\"]",
            "    /// Count characters of at most this many bytes of each text (0: all).\n    #[param(default = 0, min = 0)]\n    pub max_bytes: usize,\n",
            format!(
                "impl Stage for {ty} {{\n    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {{\n        let texts = batch.column(\"text\").and_then(|c| c.strings()).map_err(|e| StageError::Failed(e.to_string()))?;\n        let mut counts = Vec::with_capacity(texts.len());\n        for i in 0..texts.len() {{\n            let t = texts.get(i).unwrap_or(\"\");\n            let mut end = if self.max_bytes > 0 {{ self.max_bytes.min(t.len()) }} else {{ t.len() }};\n            while !t.is_char_boundary(end) {{\n                end -= 1;\n            }}\n            let t = &t[..end];\n            counts.push(t.chars().count() as i64);\n        }}\n        Ok(Output::Columns(vec![Column::int64(\"chars\", &counts)]))\n    }}\n}}\n"
            ),
            format!(
                "        let mut s = NativeStage::new::<{ty}>(\"{{}}\").unwrap();\n        let batch = Batch {{ num_rows: 2, columns: vec![Column::utf8(\"text\", [\"héllo\", \"\"])] }};\n        match s.process(batch).unwrap() {{\n            Output::Columns(cols) => assert_eq!(cols[0].i64_values().unwrap(), vec![5, 0]),\n            _ => panic!(\"expected a chars column\"),\n        }}\n"
            ),
        ),
    };
    format!(
        r#"//! `{ident}`: a curator stage. Build it into one plugin file (README.md), drop the file into
//! a plugins directory and name it in a pipeline: `- plugin: {ident}`.

use curator_sdk::prelude::*;

/// {doc}
#[stage(name = "{ident}"{native_attr}{attr_extra}, cpus = 1.0, memory_mb = 256)]
pub struct {ty} {{
{fields}}}

{body}
#[cfg(test)]
mod tests {{
    use super::*;
    use curator_sdk::native::NativeStage;

    #[test]
    fn works_on_a_few_documents() {{
{test}    }}

    #[test]
    fn the_manifest_names_the_stage() {{
        use curator_sdk::StageDef;
        let m: curator_sdk::serde_json::Value = curator_sdk::serde_json::from_str({ty}::MANIFEST).unwrap();
        assert_eq!(m["name"], "{ident}");
    }}
}}
"#
    )
}

fn readme(name: &str, ident: &str, native: bool, build: &str, artifact: &str, plugins: &str) -> String {
    let target = if native { "" } else { "rustup target add wasm32-wasip2   # once\n" };
    let kind =
        if native { "a native library (C ABI), run in curator-host's supervised worker processes" } else { "a sandboxed WASM component" };
    format!(
        r#"# {name}

A curator stage ({kind}), made with `curator-host new stage`.

```sh
{target}{build} && curator-host run pipeline.yaml --plugins {plugins}
```

The first command builds `{artifact}`, the one file to ship; the second runs
`pipeline.yaml` on `data/sample.jsonl` into `out/`. `cargo test` runs the unit tests on the
SDK's test runner (no host needed).

To use it elsewhere, copy `{artifact}` into a plugins directory and name it in a pipeline
(`- plugin: {ident}`). `curator-host plugin inspect {artifact}` shows its manifest.
"#
    )
}
