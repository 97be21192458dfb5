//! `curator-host new stage NAME`: a stage crate of its own, outside any workspace, that builds
//! the same way the first-party plugins do (the `guest` profile, `+simd128` for WASM,
//! unwinding panics for native libraries), with a unit test on the SDK's test runner, a
//! README with the commands to build and try it, and a pipeline that runs it on sample data.

use std::path::{Path, PathBuf};

/// What kind of stage to start from (`--kind`): the SDK trait it implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Filter,
    Map,
    Score,
    Stage,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "filter" => Some(Kind::Filter),
            "map" => Some(Kind::Map),
            "score" => Some(Kind::Score),
            "stage" => Some(Kind::Stage),
            _ => None,
        }
    }
}

/// Where the new crate gets `curator-sdk` from.
#[derive(Debug, Clone)]
pub enum Sdk {
    Path(PathBuf),
    Git(String),
    Version(String),
}

impl Sdk {
    /// The SDK this host was built from, when its sources are still there; else the
    /// published version.
    pub fn default_for_this_host() -> Sdk {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
        match here.canonicalize() {
            Ok(p) if p.join("Cargo.toml").exists() => Sdk::Path(p),
            _ => Sdk::Version(env!("CARGO_PKG_VERSION").to_string()),
        }
    }

    fn dependency(&self) -> String {
        match self {
            Sdk::Path(p) => format!("{{ path = {:?} }}", p.display().to_string()),
            Sdk::Git(url) => format!("{{ git = {url:?} }}"),
            Sdk::Version(v) => format!("{v:?}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("stage name {0:?}: use lowercase letters, digits and `_` or `-`, starting with a letter")]
    Name(String),
    #[error("{0} already exists; choose another name or --dir")]
    Exists(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// What `new stage` wrote.
pub struct Scaffolded {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    /// The command that builds the plugin file, and where the file lands.
    pub build: String,
    pub artifact: String,
}

fn camel(name: &str) -> String {
    name.split('_').filter(|p| !p.is_empty()).map(|p| p[..1].to_uppercase() + &p[1..]).collect()
}

/// Write a new stage crate `name` into `parent/name`.
pub fn new_stage(parent: &Path, name: &str, kind: Kind, native: bool, sdk: &Sdk) -> Result<Scaffolded, ScaffoldError> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !ok {
        return Err(ScaffoldError::Name(name.to_string()));
    }
    let dir = parent.join(name);
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.display().to_string()));
    }
    let ident = name.replace('-', "_");
    let (build, artifact, plugins) = if native {
        ("cargo build --release".to_string(), format!("target/release/lib{ident}.so"), "target/release")
    } else {
        (
            "cargo build --profile guest --target wasm32-wasip2".to_string(),
            format!("target/wasm32-wasip2/guest/{ident}.wasm"),
            "target/wasm32-wasip2/guest",
        )
    };
    let files: Vec<(&str, String)> = vec![
        ("Cargo.toml", cargo_toml(name, native, sdk)),
        (".cargo/config.toml", CARGO_CONFIG.to_string()),
        (".gitignore", "/target\n/out\n".to_string()),
        ("src/lib.rs", lib_rs(&ident, kind, native)),
        ("pipeline.yaml", pipeline_yaml(&ident, kind)),
        ("data/sample.jsonl", SAMPLE.to_string()),
        ("README.md", readme(name, &ident, native, &build, &artifact, plugins)),
    ];
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        let io = |source| ScaffoldError::Io { path: path.display().to_string(), source };
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(io)?;
        }
        std::fs::write(&path, text).map_err(io)?;
        written.push(path);
    }
    Ok(Scaffolded { dir, files: written, build, artifact })
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

const SAMPLE: &str = r#"{"id": "a", "text": "A short line."}
{"id": "b", "text": "This document is long enough to pass a filter that wants at least ten words in it."}
{"id": "c", "text": "Another fairly long document, written here so that the sample has more than one survivor to show."}
{"id": "d", "text": "Too short."}
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

fn pipeline_yaml(ident: &str, kind: Kind) -> String {
    let params = match kind {
        Kind::Filter => "{min_words: 10}",
        Kind::Map => "{collapse: true}",
        Kind::Score => "{max_ratio: 0.3, score_field: upper_ratio}",
        Kind::Stage => "{}",
    };
    format!(
        "# Runs {ident} on the sample data: curator-host run pipeline.yaml --plugins <the plugin's folder>\nsource: {{path: data}}\nstages:\n  - plugin: {ident}\n    params: {params}\nsink: {{path: out, mode: overwrite}}\n"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_types_are_camel_case() {
        let dir = tempfile::tempdir().unwrap();
        let sdk = Sdk::Version("0.1.0".into());
        assert!(matches!(new_stage(dir.path(), "Bad Name", Kind::Filter, false, &sdk), Err(ScaffoldError::Name(_))));
        assert!(matches!(new_stage(dir.path(), "9lives", Kind::Filter, false, &sdk), Err(ScaffoldError::Name(_))));
        let s = new_stage(dir.path(), "my-filter", Kind::Filter, false, &sdk).unwrap();
        assert!(s.artifact.ends_with("my_filter.wasm"));
        let lib = std::fs::read_to_string(s.dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct MyFilter") && lib.contains("name = \"my_filter\""), "{lib}");
        assert!(matches!(new_stage(dir.path(), "my-filter", Kind::Filter, false, &sdk), Err(ScaffoldError::Exists(_))));
        let n = new_stage(dir.path(), "gpu_thing", Kind::Stage, true, &sdk).unwrap();
        assert!(std::fs::read_to_string(n.dir.join("src/lib.rs")).unwrap().contains(", native, outputs"));
        assert!(std::fs::read_to_string(n.dir.join("Cargo.toml")).unwrap().contains("curator-sdk = \"0.1.0\""));
    }
}
