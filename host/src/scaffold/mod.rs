//! `curator-host new stage NAME`: a stage of its own, with a unit test, a README with the
//! commands to build and try it, and a pipeline that runs it on sample data. In Rust
//! (`rust.rs`): a crate outside any workspace that builds the way the first-party plugins do;
//! in Python (`python.rs`): a module for the Python SDK's `curator-sdk build`.

use std::path::{Path, PathBuf};

mod python;
mod rust;

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

pub(super) fn camel(name: &str) -> String {
    name.split('_').filter(|p| !p.is_empty()).map(|p| p[..1].to_uppercase() + &p[1..]).collect()
}

/// What the stage is written in and built into (`--lang`, `--native`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Rust, built into a sandboxed WASM component (the default).
    RustWasm,
    /// Rust, built into a native library behind the C ABI.
    RustNative,
    /// Python, built into a sandboxed WASM component by `curator-sdk build` (componentize-py).
    Python,
}

/// Write a new stage `name` (a crate, or a Python project) into `parent/name`.
pub fn new_stage(parent: &Path, name: &str, kind: Kind, form: Form, sdk: &Sdk) -> Result<Scaffolded, ScaffoldError> {
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
    let project = match form {
        Form::RustWasm => rust::project(name, &ident, kind, false, sdk),
        Form::RustNative => rust::project(name, &ident, kind, true, sdk),
        Form::Python => python::project(name, &ident, kind, sdk),
    };
    let mut written = Vec::new();
    for (rel, text) in project.files {
        let path = dir.join(rel);
        let io = |source| ScaffoldError::Io { path: path.display().to_string(), source };
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(io)?;
        }
        std::fs::write(&path, text).map_err(io)?;
        written.push(path);
    }
    Ok(Scaffolded { dir, files: written, build: project.build, artifact: project.artifact })
}

/// The files of a new stage (paths relative to its folder), the command that builds its
/// plugin file, and where that file lands.
struct Project {
    files: Vec<(String, String)>,
    build: String,
    artifact: String,
}

pub(super) const SAMPLE: &str = r#"{"id": "a", "text": "A short line."}
{"id": "b", "text": "This document is long enough to pass a filter that wants at least ten words in it."}
{"id": "c", "text": "Another fairly long document, written here so that the sample has more than one survivor to show."}
{"id": "d", "text": "Too short."}
"#;

pub(super) fn pipeline_yaml(ident: &str, kind: Kind) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_types_are_camel_case() {
        let dir = tempfile::tempdir().unwrap();
        let sdk = Sdk::Version("0.1.0".into());
        assert!(matches!(new_stage(dir.path(), "Bad Name", Kind::Filter, Form::RustWasm, &sdk), Err(ScaffoldError::Name(_))));
        assert!(matches!(new_stage(dir.path(), "9lives", Kind::Filter, Form::RustWasm, &sdk), Err(ScaffoldError::Name(_))));
        let s = new_stage(dir.path(), "my-filter", Kind::Filter, Form::RustWasm, &sdk).unwrap();
        assert!(s.artifact.ends_with("my_filter.wasm"));
        let lib = std::fs::read_to_string(s.dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct MyFilter") && lib.contains("name = \"my_filter\""), "{lib}");
        assert!(matches!(new_stage(dir.path(), "my-filter", Kind::Filter, Form::RustWasm, &sdk), Err(ScaffoldError::Exists(_))));
        let n = new_stage(dir.path(), "gpu_thing", Kind::Stage, Form::RustNative, &sdk).unwrap();
        assert!(std::fs::read_to_string(n.dir.join("src/lib.rs")).unwrap().contains(", native, outputs"));
        assert!(std::fs::read_to_string(n.dir.join("Cargo.toml")).unwrap().contains("curator-sdk = \"0.1.0\""));
    }

    #[test]
    fn a_python_stage_is_a_module_its_test_and_a_readme_that_builds_it() {
        let dir = tempfile::tempdir().unwrap();
        let sdk = Sdk::Git("https://example.com/curator".into());
        let s = new_stage(dir.path(), "shout-score", Kind::Score, Form::Python, &sdk).unwrap();
        assert_eq!(s.artifact, "plugins/shout_score.wasm");
        assert_eq!(s.build, "curator-sdk build shout_score.py -o plugins");
        let module = std::fs::read_to_string(s.dir.join("shout_score.py")).unwrap();
        assert!(module.contains("class ShoutScore(Score):") && module.contains("name = \"shout_score\""), "{module}");
        let test = std::fs::read_to_string(s.dir.join("test_shout_score.py")).unwrap();
        assert!(test.contains("from shout_score import ShoutScore"), "{test}");
        let readme = std::fs::read_to_string(s.dir.join("README.md")).unwrap();
        assert!(readme.contains("git+https://example.com/curator#subdirectory=python/curator-sdk"), "{readme}");
        assert!(readme.contains("curator-sdk build shout_score.py -o plugins && curator-host run pipeline.yaml --plugins plugins"));
        assert!(s.dir.join("pipeline.yaml").exists() && s.dir.join("data/sample.jsonl").exists());
    }
}
