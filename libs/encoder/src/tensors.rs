//! The host-side number types and row operations every back-end shares: the element type a
//! matrix is held in, `nn.Linear`'s and `nn.LayerNorm`'s parameters, and the f32 products,
//! norms and GELU the CPU reference (and the load-time DeBERTa projections) compute with.

use std::borrow::Cow;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// The number type a matrix is held in on the host: f32 (the CPU reference) or fp16 (what
/// the GPU path uploads). Conversions use half's slice routines (F16C where the CPU has it).
pub trait Elem: bytemuck::Pod + Send + Sync + std::fmt::Debug {
    fn from_f32(v: Vec<f32>) -> Vec<Self>;
    fn from_f16(v: Vec<f16>) -> Vec<Self>;
    fn from_bf16(v: Vec<bf16>) -> Vec<Self>;
    /// The values as f32 (borrowed when they are f32 already).
    fn widen(v: &[Self]) -> Cow<'_, [f32]>;
    /// The values as fp16 (borrowed when they are fp16 already).
    fn narrow(v: &[Self]) -> Cow<'_, [f16]>;
}

impl Elem for f32 {
    fn from_f32(v: Vec<f32>) -> Vec<f32> {
        v
    }
    fn from_f16(v: Vec<f16>) -> Vec<f32> {
        let mut out = vec![0f32; v.len()];
        v.convert_to_f32_slice(&mut out);
        out
    }
    fn from_bf16(v: Vec<bf16>) -> Vec<f32> {
        let mut out = vec![0f32; v.len()];
        v.convert_to_f32_slice(&mut out);
        out
    }
    fn widen(v: &[f32]) -> Cow<'_, [f32]> {
        Cow::Borrowed(v)
    }
    fn narrow(v: &[f32]) -> Cow<'_, [f16]> {
        let mut out = vec![f16::ZERO; v.len()];
        out.convert_from_f32_slice(v);
        Cow::Owned(out)
    }
}

impl Elem for f16 {
    fn from_f32(v: Vec<f32>) -> Vec<f16> {
        <f32 as Elem>::narrow(&v).into_owned()
    }
    fn from_f16(v: Vec<f16>) -> Vec<f16> {
        v
    }
    fn from_bf16(v: Vec<bf16>) -> Vec<f16> {
        <f16 as Elem>::from_f32(<f32 as Elem>::from_bf16(v))
    }
    fn widen(v: &[f16]) -> Cow<'_, [f32]> {
        let mut out = vec![0f32; v.len()];
        v.convert_to_f32_slice(&mut out);
        Cow::Owned(out)
    }
    fn narrow(v: &[f16]) -> Cow<'_, [f16]> {
        Cow::Borrowed(v)
    }
}

/// `y = x Wᵀ + b` with `W` as `[out, inp]`, row-major (PyTorch's `nn.Linear`); `W` in `M`,
/// the bias in f32.
#[derive(Debug, Clone)]
pub struct Linear<M = f32> {
    pub w: Vec<M>,
    pub b: Vec<f32>,
    pub out: usize,
    pub inp: usize,
}

/// A layer norm's scale and shift.
#[derive(Debug, Clone)]
pub struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// `out[m × l.out] = x[m × l.inp] Wᵀ + b`.
pub fn dense(l: &Linear, x: &[f32], m: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * l.out];
    for row in out.chunks_exact_mut(l.out) {
        row.copy_from_slice(&l.b);
    }
    // SAFETY: the strides describe x (m × inp, row-major), Wᵀ (inp × out, read from W's
    // row-major out × inp) and out (m × out) exactly; the slices hold that many values.
    unsafe {
        matrixmultiply::sgemm(
            m,
            l.inp,
            l.out,
            1.0,
            x.as_ptr(),
            l.inp as isize,
            1,
            l.w.as_ptr(),
            1,
            l.inp as isize,
            1.0,
            out.as_mut_ptr(),
            l.out as isize,
            1,
        );
    }
    out
}

/// `row ← LayerNorm(row)`.
pub fn layer_norm(row: &mut [f32], norm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// The exact (erf) GELU, as `torch.nn.functional.gelu`.
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x / std::f32::consts::SQRT_2))
}
