//! TransNetV2's weights from `model.safetensors`, under the PyTorch state dict's own names
//! (`SDDCNN.0.DDCNN.1.Conv3D_4.layers.0.weight`, …), laid out once for the CPU path's
//! channels-last matrix products. Every tensor the published network has must be there with
//! its published shape; anything else is a mismatched model, named with the file.

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::ShotsError;

/// The published hyper-parameters: 16 filters doubling over 3 stacks of 2 blocks, 1024 wide.
pub const FILTERS: usize = 16;
pub const STACKS: usize = 3;
pub const BLOCKS: usize = 2;
pub const DENSE: usize = 1024;
/// Dilations of the four temporal branches of a block.
pub const DILATIONS: [usize; 4] = [1, 2, 4, 8];
/// Frames either side a similarity looks at (the lookup window is 101 frames).
pub const LOOKUP: usize = 101;
/// Width of the similarity and histogram features.
pub const SIMILARITY: usize = 128;
/// BatchNorm3d's epsilon in the published network.
pub const BN_EPS: f32 = 1e-3;

/// A dense layer: `weight` is `[out × in]` (PyTorch's layout), `y = x · weightᵀ + bias`.
#[derive(Debug, Clone)]
pub struct Linear {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub inputs: usize,
    pub outputs: usize,
}

/// One DilatedDCNNV2 block: four (2+1)D convolutions (a 1×3×3 spatial one to 2F channels, then a
/// 3×1×1 temporal one to F channels at dilation 1, 2, 4, 8), concatenated, batch-normalised.
#[derive(Debug, Clone)]
pub struct Block {
    pub in_channels: usize,
    pub filters: usize,
    /// The four branches' spatial kernels side by side: `[(kh, kw, c) × (branch, 2F)]`, the
    /// right operand of `im2col · spatial`.
    pub spatial: Vec<f32>,
    /// Per branch and tap (t − d, t, t + d): `[2F × F]`.
    pub temporal: [[Vec<f32>; 3]; 4],
    /// Batch norm folded to `y = x · scale + shift` per channel (4F).
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
    /// ReLU after the norm (every block of a stack but the last).
    pub relu: bool,
}

/// All of the network's weights.
#[derive(Debug, Clone)]
pub struct Weights {
    /// `STACKS` stacks of `BLOCKS` blocks.
    pub stacks: Vec<Vec<Block>>,
    pub similarity_projection: Linear,
    pub similarity_fc: Linear,
    pub histogram_fc: Linear,
    pub fc1: Linear,
    pub single: Linear,
    pub many_hot: Linear,
}

impl Weights {
    /// Channels out of stack `s`.
    pub fn stack_channels(s: usize) -> usize {
        FILTERS * (1 << s) * 4
    }

    pub fn load(file: &Path) -> Result<Weights, ShotsError> {
        let err = |message: String| ShotsError::Model { path: file.display().to_string(), message };
        let bytes = std::fs::read(file).map_err(|e| err(format!("cannot read the TransNetV2 weights: {e}")))?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| err(format!("not a safetensors file: {e}")))?;
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ShotsError> {
            let t = st.tensor(name).map_err(|_| {
                err(format!("no tensor {name}: not TransNetV2's published weights (make them with scripts/models/transnetv2_weights.py)"))
            })?;
            if t.shape() != shape {
                return Err(err(format!("tensor {name} has shape {:?}, TransNetV2's is {shape:?}", t.shape())));
            }
            let data = t.data();
            Ok(match t.dtype() {
                Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
                Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
                Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
                other => return Err(err(format!("tensor {name} is {other:?}; F32, F16 or BF16 expected"))),
            })
        };
        let linear = |name: &str, inputs: usize, outputs: usize| -> Result<Linear, ShotsError> {
            Ok(Linear {
                weight: get(&format!("{name}.weight"), &[outputs, inputs])?,
                bias: get(&format!("{name}.bias"), &[outputs])?,
                inputs,
                outputs,
            })
        };
        let mut stacks = Vec::with_capacity(STACKS);
        for s in 0..STACKS {
            let filters = FILTERS << s;
            let stack_in = if s == 0 { 3 } else { Weights::stack_channels(s - 1) };
            let mut blocks = Vec::with_capacity(BLOCKS);
            for b in 0..BLOCKS {
                let prefix = format!("SDDCNN.{s}.DDCNN.{b}");
                let in_channels = if b == 0 { stack_in } else { filters * 4 };
                let mid = 2 * filters;
                let mut spatial = vec![0f32; 9 * in_channels * 4 * mid];
                let mut temporal: [[Vec<f32>; 3]; 4] = Default::default();
                for (branch, d) in DILATIONS.iter().enumerate() {
                    let conv = format!("{prefix}.Conv3D_{d}.layers");
                    // [2F, C, 1, 3, 3] → spatial[(kh·3 + kw)·C + c][branch·2F + o]
                    let w = get(&format!("{conv}.0.weight"), &[mid, in_channels, 1, 3, 3])?;
                    for o in 0..mid {
                        for c in 0..in_channels {
                            for k in 0..9 {
                                spatial[(k * in_channels + c) * 4 * mid + branch * mid + o] = w[(o * in_channels + c) * 9 + k];
                            }
                        }
                    }
                    // [F, 2F, 3, 1, 1] → temporal[branch][tap][c][o]
                    let w = get(&format!("{conv}.1.weight"), &[filters, mid, 3, 1, 1])?;
                    for (tap, out) in temporal[branch].iter_mut().enumerate() {
                        *out = vec![0f32; mid * filters];
                        for o in 0..filters {
                            for c in 0..mid {
                                out[c * filters + o] = w[(o * mid + c) * 3 + tap];
                            }
                        }
                    }
                }
                let ch = 4 * filters;
                let gamma = get(&format!("{prefix}.bn.weight"), &[ch])?;
                let beta = get(&format!("{prefix}.bn.bias"), &[ch])?;
                let mean = get(&format!("{prefix}.bn.running_mean"), &[ch])?;
                let var = get(&format!("{prefix}.bn.running_var"), &[ch])?;
                let scale: Vec<f32> = (0..ch).map(|i| gamma[i] / (var[i] + BN_EPS).sqrt()).collect();
                let shift = (0..ch).map(|i| beta[i] - mean[i] * scale[i]).collect();
                blocks.push(Block { in_channels, filters, spatial, temporal, scale, shift, relu: b + 1 != BLOCKS });
            }
            stacks.push(blocks);
        }
        let features: usize = (0..STACKS).map(Weights::stack_channels).sum();
        let last = Weights::stack_channels(STACKS - 1) * 3 * 6;
        Ok(Weights {
            stacks,
            similarity_projection: linear("frame_sim_layer.projection", features, SIMILARITY)?,
            similarity_fc: linear("frame_sim_layer.fc", LOOKUP, SIMILARITY)?,
            histogram_fc: linear("color_hist_layer.fc", LOOKUP, SIMILARITY)?,
            fc1: linear("fc1", last + 2 * SIMILARITY, DENSE)?,
            single: linear("cls_layer1", DENSE, 1)?,
            many_hot: linear("cls_layer2", DENSE, 1)?,
        })
    }

    /// Weights of the published shapes drawn from a seeded generator (tests).
    #[cfg(test)]
    pub(crate) fn random(seed: u64) -> Weights {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut draw = |n: usize, scale: f32| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
                })
                .collect()
        };
        let stacks = (0..STACKS)
            .map(|s| {
                let filters = FILTERS << s;
                (0..BLOCKS)
                    .map(|b| {
                        let in_channels = if b > 0 {
                            filters * 4
                        } else if s == 0 {
                            3
                        } else {
                            Weights::stack_channels(s - 1)
                        };
                        let mid = 2 * filters;
                        Block {
                            in_channels,
                            filters,
                            spatial: draw(9 * in_channels * 4 * mid, 2.0 / ((9 * in_channels) as f32).sqrt()),
                            temporal: std::array::from_fn(|_| {
                                std::array::from_fn(|_| draw(mid * filters, 2.0 / ((3 * mid) as f32).sqrt()))
                            }),
                            scale: draw(4 * filters, 0.5).into_iter().map(|v| v + 1.0).collect(),
                            shift: draw(4 * filters, 0.2),
                            relu: b + 1 != BLOCKS,
                        }
                    })
                    .collect()
            })
            .collect();
        let mut linear = |inputs: usize, outputs: usize| Linear {
            weight: draw(inputs * outputs, 2.0 / (inputs as f32).sqrt()),
            bias: draw(outputs, 0.1),
            inputs,
            outputs,
        };
        let features: usize = (0..STACKS).map(Weights::stack_channels).sum();
        let last = Weights::stack_channels(STACKS - 1) * 3 * 6;
        Weights {
            stacks,
            similarity_projection: linear(features, SIMILARITY),
            similarity_fc: linear(LOOKUP, SIMILARITY),
            histogram_fc: linear(LOOKUP, SIMILARITY),
            fc1: linear(last + 2 * SIMILARITY, DENSE),
            single: linear(DENSE, 1),
            many_hot: linear(DENSE, 1),
        }
    }
}
