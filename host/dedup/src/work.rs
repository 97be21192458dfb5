//! A dedup step's work directory (where it is: `plan/workdirs.rs`): the documents spilled in front of the barrier, the keys,
//! buckets and edges of each phase, and a marker per finished phase, so that a killed run
//! rerun with the same command resumes after the last finished phase. A fingerprint of what
//! the step depends on (the stages before it, the step, the input listing) guards against
//! resuming someone else's work: when it differs, the directory is emptied.

use std::io::Write;
use std::path::{Path, PathBuf};

use curator_core::PipelineSpec;
use curator_core::pipeline::Step;

use super::DedupError;
use crate::io::{InputFile, Loc};

/// The documents spill inside the work directory (`PARTITION-SEQ.arrow`, `PARTITION.done`).
pub const DOCS: &str = "docs";

/// What a step's results depend on: the source, every entry up to the dedup step, the
/// input files (path and size).
pub fn fingerprint(spec: &PipelineSpec, step: usize, inputs: &[InputFile]) -> String {
    let mut text = serde_json::to_string(&spec.source).unwrap_or_default();
    for s in spec.stages.iter().take(step + 1) {
        let s: &Step = s;
        text.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
    text.push_str(&spec.batch_size().to_string());
    for f in inputs {
        text.push_str(&format!("\n{} {}", f.display(), f.size));
    }
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
}

/// An open work directory.
pub struct Work {
    pub dir: PathBuf,
}

fn io(path: &Path, e: std::io::Error) -> DedupError {
    DedupError::Io { path: path.display().to_string(), source: e }
}

/// How the LSH passes and hash partitions of a step are laid out: fixed by the first run or
/// phase that opens the work directory (`Work::layout`), so that a resumed run or a phase on
/// another machine (with other memory) finds the passes and key files the earlier ones wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    pub bands_per_iteration: usize,
    pub iterations: usize,
    pub partitions: usize,
}

impl Work {
    /// Open (or create) the work directory for `fingerprint`; a directory left by a
    /// different pipeline or input is emptied first, or, when `shared` (the phases of a
    /// sharded step, which other machines may be using), refused.
    pub fn open(dir: &Path, fingerprint: &str, shared: bool) -> Result<Work, DedupError> {
        let state = dir.join("fingerprint");
        let found = std::fs::read_to_string(&state).ok();
        let same = found.as_deref().is_some_and(|f| f.trim() == fingerprint);
        if shared && !same && found.is_some() {
            return Err(DedupError::Data {
                path: dir.display().to_string(),
                message: "holds the dedup work of another pipeline or input (its fingerprint differs); every phase of a sharded step must run the same pipeline on the same input. Remove the directory to start over".into(),
            });
        }
        if !same && !shared && dir.exists() {
            tracing::info!("dedup: {} holds work of another pipeline or input; starting afresh", dir.display());
            std::fs::remove_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        if !same {
            write_atomic(&state, fingerprint.as_bytes())?;
        }
        Ok(Work { dir: dir.to_path_buf() })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A sub-directory of its own (one docs shard's keys or signatures).
    pub fn sub(&self, name: &str) -> Result<Work, DedupError> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        Ok(Work { dir })
    }

    /// The step's layout: the one recorded here, else `planned`, recorded. The first writer
    /// wins (a hard link cannot replace an existing name), so concurrent shards agree.
    pub fn layout(&self, planned: Layout) -> Result<Layout, DedupError> {
        let path = self.path(Self::LAYOUT);
        if !path.exists() && Loc::Local(path.clone()).create_new(&layout_bytes(&planned))? {
            return Ok(planned);
        }
        let bytes = read_all(&path)?;
        let found: Layout =
            serde_json::from_slice(&bytes).map_err(|e| DedupError::Data { path: path.display().to_string(), message: e.to_string() })?;
        if found != planned {
            tracing::info!(
                "dedup: using the layout {} recorded ({} band(s) per pass, {} pass(es), {} partition(s)); this machine's plan differs",
                path.display(),
                found.bands_per_iteration,
                found.iterations,
                found.partitions
            );
        }
        Ok(found)
    }

    /// The recorded layout's file name.
    pub const LAYOUT: &str = "layout.json";

    /// Whether phase `name` finished in this or an earlier run.
    pub fn done(&self, name: &str) -> bool {
        self.path(&format!("{name}.done")).exists()
    }

    /// Record that phase `name` finished (after its outputs are renamed into place).
    pub fn mark(&self, name: &str) -> Result<(), DedupError> {
        write_atomic(&self.path(&format!("{name}.done")), b"")?;
        crate::os::crash_point(name);
        Ok(())
    }

    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `layout` as `layout.json` holds it.
pub fn layout_bytes(layout: &Layout) -> Vec<u8> {
    serde_json::to_vec(layout).unwrap_or_default()
}

/// A temporary name beside `path` no other process uses (shards share work directories).
fn unique_tmp(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    path.with_file_name(format!(".{name}.{}-{n}.tmp", std::process::id()))
}

/// Write `bytes` to `path` through a temporary name and a rename, synced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DedupError> {
    let tmp = unique_tmp(path);
    let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))
}

/// A file of fixed-size records written through a temporary name; `commit` renames it.
pub struct RecordFile {
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl RecordFile {
    pub fn create(path: PathBuf) -> Result<RecordFile, DedupError> {
        let tmp = path.with_extension("tmp");
        let f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
        Ok(RecordFile { path, tmp, out: std::io::BufWriter::with_capacity(1 << 20, f) })
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<(), DedupError> {
        self.out.write_all(bytes).map_err(|e| io(&self.tmp, e))
    }

    pub fn commit(self) -> Result<(), DedupError> {
        let f = self.out.into_inner().map_err(|e| io(&self.tmp, e.into_error()))?;
        f.sync_all().map_err(|e| io(&self.tmp, e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| io(&self.path, e))
    }
}

/// Read a whole record file.
pub fn read_all(path: &Path) -> Result<Vec<u8>, DedupError> {
    std::fs::read(path).map_err(|e| io(path, e))
}

/// `(position, survivor)` pairs as a little-endian file.
pub fn save_pairs(work: &Work, name: &str, pairs: &[(u32, u32)]) -> Result<(), DedupError> {
    let mut bytes = Vec::with_capacity(pairs.len() * 8);
    for (a, b) in pairs {
        bytes.extend_from_slice(&a.to_le_bytes());
        bytes.extend_from_slice(&b.to_le_bytes());
    }
    write_atomic(&work.path(name), &bytes)
}

pub fn load_pairs(work: &Work, name: &str) -> Result<Vec<(u32, u32)>, DedupError> {
    let bytes = read_all(&work.path(name))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]), u32::from_le_bytes([c[4], c[5], c[6], c[7]])))
        .collect())
}
