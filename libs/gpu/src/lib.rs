//! What every GPU crate of curator shares: [`missing`], the one probe for the CUDA libraries a
//! GPU path needs (cudarc loads them lazily and panics on the first call into one that is
//! absent, so a GPU path looks before it leaps), and [`ptx`], the one NVRTC compile, with its
//! on-disk cache, [`kernels!`], typed kernel launches checked against their CUDA source, and
//! [`RowMajor`], row-major products described once for cuBLAS.

use std::path::Path;

pub mod gemm;
pub mod kernels;
pub mod single;
pub mod testing;

pub use cudarc;
pub use gemm::RowMajor;
pub use kernels::{DeviceIn, DeviceOut, check_signatures, cuda_signatures};
pub use single::SingleStream;

use cudarc::nvrtc::{CompileOptions, Ptx};

/// A CUDA library a GPU path may need, loaded at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaLib {
    /// The driver API (`libcuda`), which every GPU path needs.
    Driver,
    /// The run-time compiler (`libnvrtc`), for kernels compiled on the machine.
    Nvrtc,
    /// cuBLAS (`libcublas`).
    Cublas,
}

impl CudaLib {
    /// Whether this machine can load it.
    pub fn present(self) -> bool {
        match self {
            // SAFETY: `is_culib_present` only tries to dlopen the library (and keeps it);
            // it calls nothing in it.
            CudaLib::Driver => unsafe { cudarc::driver::sys::is_culib_present() },
            // SAFETY: as above.
            CudaLib::Nvrtc => unsafe { cudarc::nvrtc::sys::is_culib_present() },
            // SAFETY: as above.
            CudaLib::Cublas => unsafe { cudarc::cublas::sys::is_culib_present() },
        }
    }

    /// What to say when it is missing.
    pub fn missing_message(self) -> &'static str {
        match self {
            CudaLib::Driver => "no CUDA driver library (libcuda) found",
            CudaLib::Nvrtc => "no NVRTC library (libnvrtc) found",
            CudaLib::Cublas => "no cuBLAS library (libcublas) found",
        }
    }
}

/// The first of `libs` this machine lacks, if any.
pub fn missing(libs: &[CudaLib]) -> Option<CudaLib> {
    libs.iter().copied().find(|l| !l.present())
}

/// `Err` with what is missing, for a GPU path that needs `libs`.
pub fn require(libs: &[CudaLib]) -> Result<(), &'static str> {
    missing(libs).map_or(Ok(()), |l| Err(l.missing_message()))
}

/// Where a kernel family's PTX came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtxFrom {
    /// Compiled by NVRTC in this process.
    Compiled,
    /// Read from the cache an earlier process wrote.
    Cached,
}

impl PtxFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            PtxFrom::Compiled => "compiled",
            PtxFrom::Cached => "cached",
        }
    }
}

/// The PTX of the CUDA source `source` (the kernel family `family`, which names its cache
/// files) for compute capability `arch` (NVRTC's default architecture when `None`): from
/// `cache` when an earlier process compiled the same source with the same NVRTC for the same
/// architecture (and the file holds the entry `entry`), else compiled by NVRTC and written
/// there (under a temporary name, then renamed: a reader never sees half a file). NVRTC must
/// be present ([`require`]).
pub fn ptx(family: &str, source: &str, entry: &str, arch: Option<(i32, i32)>, cache: Option<&Path>) -> Result<(Ptx, PtxFrom), String> {
    let mut nvrtc = (0, 0);
    // SAFETY: NVRTC is present (the caller's check); the call only writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut nvrtc.0, &mut nvrtc.1) };
    let key = xxhash_rust::xxh3::xxh3_128(format!("{source}\0nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    let target = arch.map_or("default".to_string(), |(major, minor)| format!("compute_{major}{minor}"));
    let file = cache.map(|d| d.join(format!("{family}-{key:032x}-{target}.ptx")));
    if let Some(text) = file.as_ref().and_then(|f| std::fs::read_to_string(f).ok())
        && text.contains(&format!(".entry {entry}"))
    {
        return Ok((Ptx::from_src(text), PtxFrom::Cached));
    }
    // NVRTC wants a 'static name; one per architecture and process.
    let arch_name: Option<&'static str> = arch.map(|_| &*Box::leak(target.clone().into_boxed_str()));
    let opts = CompileOptions { arch: arch_name, ..Default::default() };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| format!("NVRTC ({family}): {e:?}"))?;
    if let (Some(file), Some(bytes)) = (&file, ptx.as_bytes()) {
        let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
        let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
        let written = file
            .parent()
            .map(std::fs::create_dir_all)
            .transpose()
            .and_then(|_| std::fs::write(&tmp, text))
            .and_then(|_| std::fs::rename(&tmp, file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok((ptx, PtxFrom::Compiled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_agrees_with_itself_and_names_what_it_lacks() {
        let all = [CudaLib::Driver, CudaLib::Nvrtc, CudaLib::Cublas];
        match missing(&all) {
            Some(l) => {
                assert!(!l.present());
                assert_eq!(require(&all), Err(l.missing_message()));
            }
            None => assert!(all.iter().all(|l| l.present()) && require(&all).is_ok()),
        }
        assert_eq!(missing(&[]), None);
    }

    /// A kernel compiles (NVRTC needs no GPU; skipped, said so, where there is no NVRTC), and
    /// the second time, from the same source, comes from the cache; another source does not.
    #[test]
    fn ptx_is_compiled_once_and_then_read_from_the_cache() {
        if let Err(missing) = require(&[CudaLib::Nvrtc]) {
            eprintln!("skipped: {missing}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("curator-gpu-ptx-{}", std::process::id()));
        let source = "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }";
        let (ptx, from) = ptx("test", source, "twice", Some((8, 0)), Some(&dir)).unwrap();
        assert_eq!(from, PtxFrom::Compiled);
        assert!(ptx.to_src().contains(".entry twice"));
        assert_eq!(self::ptx("test", source, "twice", Some((8, 0)), Some(&dir)).unwrap().1, PtxFrom::Cached);
        assert_eq!(self::ptx("test", source, "twice", Some((9, 0)), Some(&dir)).unwrap().1, PtxFrom::Compiled, "another arch");
        let other = source.replace("2.0f", "3.0f");
        assert_eq!(self::ptx("test", &other, "twice", Some((8, 0)), Some(&dir)).unwrap().1, PtxFrom::Compiled, "another source");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
