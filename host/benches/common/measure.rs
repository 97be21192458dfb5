//! Timing and inputs shared by the benches.

use std::path::Path;
use std::time::{Duration, Instant};

use curator_host::io::{InputFile, Loc};

/// The shortest of `n` runs of `f`.
pub fn best_of<F: FnMut()>(n: usize, mut f: F) -> Duration {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// A local file as an input, its format and compression from its name.
pub fn input(path: &Path) -> InputFile {
    let (format, compressed) = curator_host::io::sniff_name(&path.display().to_string(), None);
    InputFile {
        loc: Loc::Local(path.to_path_buf()),
        rel: String::new(),
        size: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        format,
        compressed,
    }
}
