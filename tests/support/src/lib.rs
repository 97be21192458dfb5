//! What the workspace's test suites and benches share (std only, a dev-dependency of the crates
//! whose tests need it): the skip-or-fail rule below, a seeded generator for drawn cases, and
//! for benches paired with a Python baseline, its server process and the pairs' quartiles.
//!
//! One rule for a test that needs something from outside the repository (a server, a tool, a
//! fetched model): where it is missing, a plain `cargo test` skips the test and says so on the
//! terminal; under CI (`CI=true`) the test fails naming what is missing, because CI's script
//! installs all of it (`scripts/test.sh`).

use std::fmt::Display;
use std::io::Write as _;

/// Whether the calling test may go on: `present`, or else (outside CI) a line
/// `skipped <test>: <why>` written past the test harness's capture, so a plain `cargo test`
/// shows it. Under CI (`CI=true`) a missing need panics with `why`.
pub fn require(present: bool, why: impl Display) -> bool {
    if present {
        return true;
    }
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    assert!(!under_ci(), "{test}: {why} (CI must install it: scripts/test.sh)");
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
    false
}

/// Whether this run is CI's (`CI=true`), where nothing may be skipped.
pub fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A seeded xorshift64 generator for tests that draw many cases: the same seed, the same
/// cases on every machine (no `rand`, whose streams change between versions).
pub struct Xorshift(u64);

impl Xorshift {
    /// A generator from `seed` (zero, which xorshift never leaves, is moved off).
    pub fn new(seed: u64) -> Xorshift {
        Xorshift(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A Python process kept alive for a whole bench, timing the baseline's side of each pair: it is
/// sent one line (what to time) and answers one line, the seconds that took, measured inside
/// Python (its start and imports once, outside every pair).
pub struct PythonServer {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl PythonServer {
    /// `python3 -c script args…`; `None` if it cannot be started.
    pub fn start(script: &str, args: &[&std::ffi::OsStr]) -> Option<PythonServer> {
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let out = std::io::BufReader::new(child.stdout.take()?);
        Some(PythonServer { child, out })
    }

    /// Send `line`; the seconds the server answers, or `None` when it answers nothing readable.
    pub fn time(&mut self, line: &str) -> Option<std::time::Duration> {
        use std::io::BufRead as _;
        writeln!(self.child.stdin.as_mut()?, "{line}").ok()?;
        let mut answer = String::new();
        self.out.read_line(&mut answer).ok()?;
        answer.trim().parse::<f64>().ok().map(std::time::Duration::from_secs_f64)
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The lower quartile, median and upper quartile of `v` (sorted in place; NaN when empty).
pub fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v.get(((v.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN);
    (at(0.25), at(0.5), at(0.75))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_repeats_its_seed_and_stays_below_its_bound() {
        let (mut a, mut b) = (Xorshift::new(7), Xorshift::new(7));
        let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..100).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
        assert!((0..1000).all(|_| a.below(3) < 3));
        assert_ne!(Xorshift::new(0).next_u64(), 0);
    }

    #[test]
    fn quartiles_of_a_few_values() {
        assert_eq!(quartiles(&mut [5.0, 1.0, 3.0, 2.0, 4.0]), (2.0, 3.0, 4.0));
        assert!(quartiles(&mut []).1.is_nan());
    }

    #[test]
    fn a_present_need_goes_on_and_a_missing_one_skips_or_fails_under_ci() {
        assert!(require(true, "never shown"));
        if under_ci() {
            let r = std::panic::catch_unwind(|| require(false, "the thing is missing"));
            let msg = r.unwrap_err().downcast::<String>().map(|s| *s).unwrap_or_default();
            assert!(msg.contains("the thing is missing") && msg.contains("scripts/test.sh"), "{msg}");
        } else {
            assert!(!require(false, "the thing is missing (this skip is the test's own)"));
        }
    }
}

/// A tensor filled from its name (`centre + scale · (2u − 1)`), as listed in a parity
/// reference that cannot ship its weights (`tests/parity/internvideo2_reference.json`).
#[derive(Debug, Clone)]
pub struct SeededTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub centre: f64,
    pub scale: f64,
}

/// The values of `t`, as `scripts/models/internvideo2_reference.py` fills them:
/// splitmix64 of FNV-1a(name) + (i + 1) · golden ratio, the top 24 bits as a uniform `u` in
/// [0, 1), `centre + scale · (2u − 1)` in f64, rounded to f32 (so both sides hold the same
/// bits).
pub fn seeded_values(t: &SeededTensor) -> Vec<f32> {
    let seed = t.name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3));
    let n: usize = t.shape.iter().product();
    (0..n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 40) as f64 / f64::from(1u32 << 24);
            (t.centre + t.scale * (2.0 * u - 1.0)) as f32
        })
        .collect()
}

/// `tensors`, seeded, as a `.safetensors` file (f32, little-endian; the header written by hand
/// to keep this crate std-only).
pub fn write_seeded_safetensors(path: &std::path::Path, tensors: &[SeededTensor]) -> std::io::Result<()> {
    let mut data = Vec::new();
    let mut header = String::from("{");
    for (k, t) in tensors.iter().enumerate() {
        let start = data.len();
        seeded_values(t).iter().for_each(|v| data.extend_from_slice(&v.to_le_bytes()));
        let shape = t.shape.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let sep = if k > 0 { "," } else { "" };
        header.push_str(&format!(
            "{sep}\"{}\":{{\"dtype\":\"F32\",\"shape\":[{shape}],\"data_offsets\":[{start},{}]}}",
            t.name,
            data.len()
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = std::fs::File::create(path)?;
    file.write_all(&(header.len() as u64).to_le_bytes())?;
    file.write_all(header.as_bytes())?;
    file.write_all(&data)
}
