//! What every GPU crate of curator shares. So far: [`missing`], the one probe for the CUDA
//! libraries a GPU path needs (cudarc loads them lazily and panics on the first call into one
//! that is absent, so a GPU path looks before it leaps).

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
}
