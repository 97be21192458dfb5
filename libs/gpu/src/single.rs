//! The set-up the f32 GPU paths share (TransNetV2's stacks, the video tower): GPU 0 with one
//! stream, cuBLAS on it with TF32 tensor-core products (what PyTorch's cuDNN convolutions use by
//! default, and PyTorch's products with `allow_tf32`), and a CUDA source compiled by NVRTC (or
//! read from the kernel cache) and loaded.

use std::path::Path;
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaModule, CudaStream};

use crate::{CudaLib, require};

/// GPU 0, its one stream, cuBLAS in TF32 on that stream, and the compiled kernels.
pub struct SingleStream {
    pub stream: Arc<CudaStream>,
    /// Dropped before the stream and context it uses (fields drop in order).
    pub blas: CudaBlas,
    pub module: Arc<CudaModule>,
    pub ctx: Arc<CudaContext>,
}

impl SingleStream {
    /// Open GPU 0 and compile `source` (the family `family`, whose kernel `entry` marks a
    /// complete cached file) for its architecture. A missing CUDA library, or a set-up that
    /// panics inside cudarc (a library that loads but lacks a symbol), is an `Err` with the
    /// reason, never a panic.
    pub fn open(family: &str, source: &str, entry: &str, kernel_cache: Option<&Path>) -> Result<SingleStream, String> {
        require(&[CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas])?;
        match std::panic::catch_unwind(|| SingleStream::open_inner(family, source, entry, kernel_cache)) {
            Ok(r) => r,
            Err(_) => Err("CUDA set-up panicked (a CUDA library is missing)".into()),
        }
    }

    fn open_inner(family: &str, source: &str, entry: &str, kernel_cache: Option<&Path>) -> Result<SingleStream, String> {
        let ctx = CudaContext::new(0).map_err(|e| format!("cannot open GPU 0: {e:?}"))?;
        // SAFETY: everything runs on the one stream below, so no buffer is shared between
        // streams and cudarc's cross-stream events are not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| format!("create a stream: {e:?}"))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("cuBLAS: {e:?}"))?;
        // SAFETY: the handle is live; the call sets a mode on it.
        unsafe { cudarc::cublas::sys::cublasSetMathMode(*blas.handle(), cudarc::cublas::sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH) }
            .result()
            .map_err(|e| format!("cuBLAS math mode: {e:?}"))?;
        let arch = ctx.compute_capability().map_err(|e| format!("compute capability: {e:?}"))?;
        let (ptx, _) = crate::ptx(family, source, entry, Some(arch), kernel_cache)?;
        let module = ctx.load_module(ptx).map_err(|e| format!("load kernels: {e:?}"))?;
        Ok(SingleStream { stream, blas, module, ctx })
    }
}
