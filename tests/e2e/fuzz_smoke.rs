//! The fuzz harnesses' smoke test (CI): every committed corpus file and crash regression of
//! `fuzz/`, then deterministic mutations of them, through the same functions libFuzzer runs
//! (`scripts/fuzz.sh` runs the real fuzzer for as long as it is given).

use std::path::Path;

use curator_host::fuzz::{TARGETS, worker_output_seed};

use crate::support::root;

/// Files of `dir` (none if it does not exist), in name order.
fn files(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    paths.sort();
    paths.iter().filter(|p| p.is_file()).filter_map(|p| std::fs::read(p).ok()).collect()
}

/// xorshift: the same mutations on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// One mutation of `seed`: a flipped byte, a cut, a duplicated run, an interesting value, or
/// a splice with `other`.
fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => v.truncate(rng.below(v.len() + 1)),
            2 if !v.is_empty() => {
                let a = rng.below(v.len());
                let b = (a + rng.below(64)).min(v.len());
                let run = v[a..b].to_vec();
                let at = rng.below(v.len());
                v.splice(at..at, run);
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0u8, 0xff, 0x7f, 0x80, b'"', b'\\', b'{', b'\n'][rng.below(8)];
            }
            _ => {
                let cut = rng.below(v.len() + 1);
                v.truncate(cut);
                v.extend_from_slice(&other[rng.below(other.len() + 1)..]);
            }
        }
    }
    v
}

#[test]
fn fuzz_targets_survive_their_corpora_and_mutations() {
    let fuzz = root().join("fuzz");
    for &(name, target) in TARGETS {
        let mut seeds = files(&fuzz.join("corpus").join(name));
        if name == "worker_output" {
            seeds.push(worker_output_seed());
        }
        assert!(!seeds.is_empty(), "fuzz/corpus/{name} has no seeds");
        // Crashes found by the fuzzer, kept as regression inputs.
        for crash in files(&fuzz.join("regressions").join(name)) {
            target(&crash);
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        for s in &seeds {
            target(s);
        }
        for _ in 0..1500 {
            let a = &seeds[rng.below(seeds.len())];
            let b = &seeds[rng.below(seeds.len())];
            target(&mutate(&mut rng, a, b));
        }
    }
}

/// Writes the worker-output seed into `fuzz/corpus/worker_output/` (run by hand after the
/// descriptor format changes: `cargo test --release -p curator-host --test e2e -- --ignored write_worker_output_seed`).
#[test]
#[ignore]
fn write_worker_output_seed() {
    let dir = root().join("fuzz/corpus/worker_output");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("answer"), worker_output_seed()).unwrap();
}
