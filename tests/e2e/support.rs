//! Shared helpers: build the guests once, run the binary, read outputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host crate has a parent").to_path_buf()
}

/// Guest stages built from source (first-party plugins and the test-only guests), once per
/// test process. Returns the directory holding the `.wasm` files.
pub fn guests_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = root();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(&root)
            .args(["build", "--locked", "--profile", "guest", "--target", "wasm32-wasip2", "--target-dir"])
            .arg(root.join("target/wasm"))
            .args(["-p", "hostile", "-p", "dir_reader"])
            .args(wasm_plugins(&root).iter().flat_map(|p| ["-p".to_string(), p.clone()]))
            .status()
            .expect("cannot run cargo to build guest stages");
        assert!(
            status.success(),
            "building guest stages for wasm32-wasip2 failed (is the target installed? rustup target add wasm32-wasip2)"
        );
        root.join("target/wasm/wasm32-wasip2/guest")
    })
}

/// A plugins directory `target/native/<name>` holding the native plugins `packages`, built
/// from source (release, shared libraries) the first time it is asked for.
pub fn native_plugins_dir(name: &str, packages: &[&str]) -> PathBuf {
    let built = native_libraries(packages);
    let dir = root().join("target/native").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for p in packages {
        let file = format!("lib{p}.so");
        install_library(&built.join(&file), &dir.join(&file));
    }
    dir
}

/// Put a shared library at `to`, copied beside it and renamed over: test processes running at
/// once (nextest runs each test in its own) may have workers with the old file mapped, and a
/// copy in place would rewrite the pages under them (they die of SIGBUS); a rename leaves
/// their file whole.
pub fn install_library(from: &Path, to: &Path) {
    let name = to.file_name().expect("a file name").to_string_lossy();
    let part = to.with_file_name(format!(".{name}.{}", std::process::id()));
    std::fs::copy(from, &part).unwrap();
    std::fs::rename(&part, to).unwrap();
}

/// The directory holding `lib<package>.so` for every package of `packages`, built from source.
///
/// `scripts/test.sh` builds every workspace plugin's shared library into `target/<profile>/deps`
/// (`cargo build --workspace --lib`) before `cargo test --workspace`, from the same sources and
/// with the same features; it says so with `CURATOR_TEST_NATIVE_BUILT=1`, and the libraries
/// are used from there. Otherwise (a plain `cargo test -p curator-host`, which builds none of
/// them) they are built here, in their own target directory `target/native` so that a plugin
/// edited since is never picked up stale.
pub fn native_libraries(packages: &[&str]) -> PathBuf {
    if std::env::var_os("CURATOR_TEST_NATIVE_BUILT").is_some() {
        let deps = std::env::current_exe().expect("test executable").parent().expect("deps directory").to_path_buf();
        for p in packages {
            let file = deps.join(format!("lib{p}.so"));
            assert!(
                file.is_file(),
                "CURATOR_TEST_NATIVE_BUILT is set but {} is missing: run the tests with --workspace (scripts/test.sh does)",
                file.display()
            );
        }
        return deps;
    }
    let target = root().join("target/native");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .args(["build", "--locked", "--release", "--target-dir"])
        .arg(&target)
        .args(packages.iter().flat_map(|p| ["-p", p]))
        .status()
        .expect("cannot run cargo");
    assert!(status.success(), "building native plugins {packages:?} failed");
    target.join("release")
}

/// The first-party WASM plugins (`plugins/*` and `plugins/catalogue/*` but native plugins), as
/// `scripts/build-dist.sh` picks them.
pub fn wasm_plugins(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = ["plugins", "plugins/catalogue"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("plugins/").flatten())
        .filter(|e| {
            let manifest = std::fs::read_to_string(e.path().join("Cargo.toml")).unwrap_or_default();
            !manifest.is_empty() && !manifest.contains("kind = \"library\"") && !manifest.contains("kind = \"native\"")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The result of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "expected success\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }
}

/// A command for the binary with a shared compiled-plugin cache and no ambient plugin path.
pub fn host() -> Command {
    host_at(Path::new(env!("CARGO_BIN_EXE_curator-host")))
}

/// [`host`], run from another copy of the binary.
pub fn host_at(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.env("CURATOR_CACHE_DIR", root().join("target/e2e-cache")).env_remove("CURATOR_PLUGINS").env("NO_COLOR", "1");
    c
}

/// Run `curator-host ARGS… --plugins <guests>`.
pub fn run_with_guests(args: &[&str]) -> Run {
    host().args(args).arg("--plugins").arg(guests_dir()).output().expect("cannot start curator-host").into()
}

/// Write `yaml` as `pipeline.yaml` in `dir`.
pub fn write_pipeline(dir: &Path, yaml: &str) -> PathBuf {
    let p = dir.join("pipeline.yaml");
    std::fs::write(&p, yaml).expect("write pipeline");
    p
}

/// Write JSONL documents `{"id": "d<i>", "text": …}` to `path`.
pub fn write_docs(path: &Path, texts: &[String]) {
    let mut s = String::new();
    for (i, t) in texts.iter().enumerate() {
        s.push_str(&serde_json::json!({"id": format!("d{i}"), "text": t}).to_string());
        s.push('\n');
    }
    std::fs::write(path, s).expect("write docs");
}

/// Documents of a JSONL output (plain, .gz or .zst).
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let bytes = curator_host::io::read_decoded(path).unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8(bytes).expect("utf8").lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

/// The documents (as JSON text, sorted) of the output files directly in `dir` whose names end
/// with `suffix` (`_`- and `.`-files skipped): a run's output as a multiset.
pub fn output_docs(dir: &Path, suffix: &str) -> Vec<String> {
    let mut docs = Vec::new();
    for e in std::fs::read_dir(dir).expect("output directory").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(suffix) && !name.starts_with(['_', '.']) {
            docs.extend(read_jsonl(&e.path()).iter().map(|d| d.to_string()));
        }
    }
    docs.sort();
    docs
}

/// Files under `dir` whose names contain `.tmp-` (leftovers of an unfinished write).
pub fn temp_leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(temp_leftovers(&p));
            } else if p.file_name().is_some_and(|n| n.to_string_lossy().contains(".tmp-")) {
                out.push(p);
            }
        }
    }
    out
}

/// What a test needs from outside the repository (`scripts/test.sh` installs or fetches
/// each of them).
#[derive(Debug, Clone, Copy)]
pub enum Need {
    /// moto's S3-compatible server (`pip install 'moto[server]'`).
    MotoServer,
    /// Debian's `docker-registry` (the CNCF distribution registry).
    DockerRegistry,
    /// FFmpeg: the `ffmpeg` tool (test videos) and its libraries (the video stages build
    /// against them; `scripts/install-ffmpeg.sh`).
    Ffmpeg,
    /// Ray and the `curator-ray` package (`pip install ./python/curator-ray`).
    Ray,
    /// The encoder models in `target/models`: MiniLM, the random-weight DeBERTa and CLIP
    /// models and image heads (`python3 scripts/models/fetch.py`).
    EncoderModels,
    /// TransNetV2's published weights and the sample footage they ship with, in
    /// `target/models/transnetv2` (`python3 scripts/models/fetch.py`).
    TransNetV2,
    /// fastText's lid.176 in `target/fasttext` (`python3 scripts/langid/make_fasttext_reference.py --model-only`).
    FastTextModel,
    /// pyarrow, polars and DuckDB from PyPI, for the compatibility matrix.
    DataFrameTools,
    /// megatron-core, datatrove and tokenizers from PyPI, for the tokenized sinks' parity.
    TokenTools,
    /// llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`) and `gguf`'s writer,
    /// for the served-model tests.
    LlamaServer,
}

impl Need {
    fn present(self) -> bool {
        let on_path = |tool: &str| std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
        let succeeds = |cmd: &str, args: &[&str]| Command::new(cmd).args(args).output().map(|o| o.status.success()).unwrap_or(false);
        match self {
            Need::MotoServer => on_path("moto_server"),
            Need::DockerRegistry => ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"].iter().any(|p| Path::new(p).exists()),
            Need::Ffmpeg => on_path("ffmpeg") && succeeds("pkg-config", &["--exists", "libavcodec", "libavformat", "libswscale"]),
            Need::Ray => succeeds("python3", &["-c", "import ray, curator_ray"]),
            Need::EncoderModels => ["all-MiniLM-L6-v2", "clip-l14-2l", "aesthetic-head"]
                .iter()
                .all(|m| root().join("target/models").join(m).join("model.safetensors").exists()),
            Need::TransNetV2 => {
                ["model.safetensors", "sample.mp4"].iter().all(|f| root().join("target/models/transnetv2").join(f).exists())
            }
            Need::FastTextModel => root().join("target/fasttext/lid.176.ftz").exists(),
            Need::DataFrameTools => succeeds("python3", &["-c", "import pyarrow, polars, duckdb"]),
            Need::LlamaServer => succeeds("python3", &["-c", "import llama_cpp.server.app, gguf"]),
            Need::TokenTools => {
                succeeds("python3", &["-c", "import importlib.util as u, datatrove, tokenizers; assert u.find_spec('megatron.core')"])
            }
        }
    }
}

/// Whether what the calling test needs is here. When it is not, under CI (`CI=true`) the
/// test fails naming it; elsewhere it says on the terminal which test it skipped and why
/// (written past the test harness's capture, so a plain `cargo test` shows it), and the
/// test returns early.
pub fn needs(need: Need) -> bool {
    curator_test_support::require(need.present(), format_args!("needs {need:?} (scripts/test.sh installs it)"))
}
