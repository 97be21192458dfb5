//! What the encoder's integration tests share: the repository root and the fetched models.

use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fetched model `name`, or `None` (the test skips, saying so on the terminal) when
/// `python3 scripts/models/fetch.py` has not run; under CI (`CI=true`) a missing model fails.
pub fn model(name: &str) -> Option<PathBuf> {
    let dir = root().join("target/models").join(name);
    let why = format_args!("{} is missing: run `python3 scripts/models/fetch.py` (scripts/test.sh does)", dir.display());
    curator_test_support::require(dir.join("model.safetensors").exists(), why).then_some(dir)
}
