//! Files through which the shards of one phase meet while they run (semantic dedup's k-means
//! shards, between rounds): each written once, whole, by its one writer (the first writer
//! wins: a hard link on a shared disk, a conditional put in an object store), and waited for
//! by the others. They live in the work directory itself, or under its object-store prefix
//! when the phases exchange their work there (`exchange.rs`), never in a phase's scratch copy.

use std::time::{Duration, Instant};

use super::DedupError;
use crate::io::Loc;

/// How long a shard waits for the others before it gives up.
pub const PATIENCE: Duration = Duration::from_secs(30 * 60);

/// The meeting place: the work directory (or its prefix).
pub struct Rendezvous {
    root: Loc,
}

impl Rendezvous {
    pub fn new(root: Loc) -> Rendezvous {
        Rendezvous { root }
    }

    /// Write `rel` holding `bytes` unless it exists; whether this call wrote it.
    pub fn put(&self, rel: &str, bytes: &[u8]) -> Result<bool, DedupError> {
        Ok(self.root.join(rel).create_new(bytes)?)
    }

    pub fn display(&self) -> String {
        self.root.display()
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).exists()
    }

    /// The files `rels`, once every one exists, in that order. `what` names the missing ones
    /// (their places in `rels`) for the log, every half minute, and for the error after
    /// `patience`.
    pub fn wait(&self, rels: &[String], patience: Duration, what: impl Fn(&[usize]) -> String) -> Result<Vec<Vec<u8>>, DedupError> {
        let started = Instant::now();
        let mut got: Vec<Option<Vec<u8>>> = vec![None; rels.len()];
        let mut pause = Duration::from_millis(2);
        let mut told = Instant::now();
        loop {
            for (slot, rel) in got.iter_mut().zip(rels) {
                if slot.is_none() && self.exists(rel) {
                    *slot = Some(self.root.join(rel).read_all()?);
                }
            }
            let missing: Vec<usize> = got.iter().enumerate().filter(|(_, g)| g.is_none()).map(|(i, _)| i).collect();
            if missing.is_empty() {
                return Ok(got.into_iter().flatten().collect());
            }
            if started.elapsed() >= patience {
                return Err(DedupError::Data {
                    path: self.root.display(),
                    message: format!("gave up after {} s waiting for {}", patience.as_secs(), what(&missing)),
                });
            }
            if told.elapsed() >= Duration::from_secs(30) {
                tracing::info!("dedup: waiting for {}", what(&missing));
                told = Instant::now();
            }
            std::thread::sleep(pause.min(patience.saturating_sub(started.elapsed())));
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_writer_wins_and_a_waiter_gets_every_file_or_names_the_missing() {
        let dir = tempfile::tempdir().unwrap();
        let meet = Rendezvous::new(Loc::Local(dir.path().to_path_buf()));
        assert!(meet.put("kmeans/a.bin", b"first").unwrap());
        assert!(!meet.put("kmeans/a.bin", b"second").unwrap());
        let rels = ["kmeans/a.bin".to_string(), "kmeans/b.bin".to_string()];
        let late = std::thread::spawn({
            let root = dir.path().to_path_buf();
            move || {
                std::thread::sleep(Duration::from_millis(50));
                Rendezvous::new(Loc::Local(root)).put("kmeans/b.bin", b"b").unwrap()
            }
        });
        let got = meet.wait(&rels, Duration::from_secs(10), |_| String::new()).unwrap();
        assert!(late.join().unwrap());
        assert_eq!(got, vec![b"first".to_vec(), b"b".to_vec()]);
        let err =
            meet.wait(&["kmeans/c.bin".to_string()], Duration::from_millis(30), |m| format!("shard(s) {m:?}")).unwrap_err().to_string();
        assert!(err.contains("gave up after 0 s waiting for shard(s) [0]"), "{err}");
    }
}
