//! `gpu.rs`'s API in a build without the `cuda` feature (the lean host of README command 1):
//! [`Gpu::open`] says why there is no GPU path, so no [`Gpu`] ever exists (it holds an
//! `Infallible`) and callers fall back to the CPU as they do on a machine without a GPU.

use std::convert::Infallible;

use crate::{KMeans, KMeansParams};

/// Vectors on the device: none in this build.
pub struct OnDevice(Infallible);

/// The device: none in this build.
pub struct Gpu(Infallible);

impl Gpu {
    pub fn open() -> Result<Gpu, String> {
        Err("this build has no GPU path for semantic dedup (curator-vectors without its `cuda` feature)".into())
    }
    pub fn kmeans(&self, _data: &[f32], _d: usize, _p: &KMeansParams) -> Result<(KMeans, Vec<u32>, Vec<f32>), String> {
        match self.0 {}
    }
    pub fn semdedup(&self, _data: &OnDevice, _d: usize, _rows: &[u32], _tile: usize) -> Result<Vec<(f32, Option<u32>)>, String> {
        match self.0 {}
    }
    pub fn upload(&self, _data: &[f32]) -> Result<OnDevice, String> {
        match self.0 {}
    }
}
