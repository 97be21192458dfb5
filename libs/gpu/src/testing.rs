//! For tests of GPU paths: [`gpu_or_skip`] gives the first GPU when this machine has one, and
//! otherwise says on the terminal that the test skipped its GPU part (CI has no GPU, so it
//! is not an error there); `CURATOR_REQUIRE_GPU=1` (set by `scripts/gpu-checks.sh` on the GPU
//! machine) turns a missing GPU into a failure, so a check meant for the card cannot pass
//! without one.

use std::io::Write as _;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use crate::{CudaLib, require};

/// GPU 0 with `libs` loadable, or `None` after saying why the GPU part of `test` is skipped.
///
/// # Panics
/// When `CURATOR_REQUIRE_GPU=1` and there is no such GPU.
pub fn gpu_or_skip(test: &str, libs: &[CudaLib]) -> Option<Arc<CudaContext>> {
    let why = match require(&[&[CudaLib::Driver][..], libs].concat()) {
        Err(missing) => missing.to_string(),
        Ok(()) => match CudaContext::device_count() {
            Ok(n) if n > 0 => match CudaContext::new(0) {
                Ok(ctx) => return Some(ctx),
                Err(e) => format!("cannot open GPU 0: {e:?}"),
            },
            Ok(_) => "no GPU on this machine".to_string(),
            Err(e) => format!("cannot count GPUs: {e:?}"),
        },
    };
    assert!(std::env::var("CURATOR_REQUIRE_GPU").as_deref() != Ok("1"), "{test}: CURATOR_REQUIRE_GPU=1 but {why}");
    // Past the test harness's capture (which takes only `eprintln!`), so a plain `cargo test`
    // shows what it did not check.
    let _ = writeln!(std::io::stderr(), "skipped the GPU part of {test}: {why}");
    None
}

/// Check that `source` compiles with NVRTC (no GPU needed; CI installs NVRTC from PyPI) for
/// compute capability 9.0 and that every kernel of `kernels` (a [`kernels!`](crate::kernels)
/// struct's `SIGNATURES`) is in the PTX. Skipped, saying so, where no NVRTC library is found.
///
/// # Panics
/// When NVRTC refuses the source (with its log) or a kernel is missing.
pub fn assert_kernels_compile(family: &str, source: &str, kernels: &[(&str, &[&str])]) {
    if let Err(missing) = require(&[CudaLib::Nvrtc]) {
        let _ = writeln!(std::io::stderr(), "skipped the NVRTC compile of {family}: {missing}");
        return;
    }
    let entry = kernels.first().map_or("", |k| k.0);
    let (ptx, _) = crate::ptx(&format!("{family}-test"), source, entry, Some((9, 0)), None).unwrap_or_else(|e| panic!("{e}"));
    let text = ptx.to_src();
    for (name, _) in kernels {
        assert!(text.contains(&format!(".entry {name}")), "{family}: {name} is not in the PTX");
    }
}
