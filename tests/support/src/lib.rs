//! What the workspace's test suites share (std only, a dev-dependency of the crates whose
//! tests need it).
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

#[cfg(test)]
mod tests {
    use super::*;

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
