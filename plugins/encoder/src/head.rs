//! What follows the encoder, on the host in f32 for both back-ends: pooling's last step
//! (normalisation) and the sequence-classification heads.

use rayon::prelude::*;

use crate::weights::{Head, Linear};

/// `x Wᵀ + b` for one vector.
pub fn linear(l: &Linear, x: &[f32]) -> Vec<f32> {
    (0..l.out).map(|o| l.b[o] + l.w[o * l.inp..(o + 1) * l.inp].iter().zip(x).map(|(w, v)| w * v).sum::<f32>()).collect()
}

/// Scale `v` to unit length (left as is when it is all zeros).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The head's logits for one document's `[CLS]` state.
pub fn logits(head: &Head, cls: &[f32]) -> Vec<f32> {
    match head {
        Head::Bert { pooler, classifier } => match pooler {
            Some(p) => linear(classifier, &linear(p, cls).into_iter().map(f32::tanh).collect::<Vec<_>>()),
            None => linear(classifier, cls),
        },
        Head::Roberta { dense, out_proj } => linear(out_proj, &linear(dense, cls).into_iter().map(f32::tanh).collect::<Vec<_>>()),
    }
}

/// The head's logits for `[CLS]` states, `cls` holding one row of `hidden` values per
/// document: `[rows × labels]`. Row blocks run as matrix products on all threads (the per-row
/// [`logits`] costs more than the GPU's forward pass on a big batch).
pub fn logits_rows(head: &Head, cls: &[f32], hidden: usize) -> Vec<f32> {
    const BLOCK: usize = 256;
    let tanh = |mut v: Vec<f32>| {
        v.iter_mut().for_each(|x| *x = x.tanh());
        v
    };
    let block = |x: &[f32]| {
        let m = x.len() / hidden;
        match head {
            Head::Bert { pooler: Some(p), classifier } => crate::cpu::dense(classifier, &tanh(crate::cpu::dense(p, x, m)), m),
            Head::Bert { pooler: None, classifier } => crate::cpu::dense(classifier, x, m),
            Head::Roberta { dense, out_proj } => crate::cpu::dense(out_proj, &tanh(crate::cpu::dense(dense, x, m)), m),
        }
    };
    cls.par_chunks(BLOCK * hidden).map(block).collect::<Vec<_>>().concat()
}

/// Softmax of logits (probabilities per label).
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = logits.iter().map(|x| (x - max).exp()).collect();
    let sum: f32 = e.iter().sum();
    e.into_iter().map(|x| x / sum).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_softmax_normalize() {
        let l = Linear { w: vec![1.0, 2.0, 0.0, -1.0], b: vec![0.5, 0.0], out: 2, inp: 2 };
        assert_eq!(linear(&l, &[1.0, 1.0]), vec![3.5, -1.0]);
        let p = softmax(&[0.0, 0.0]);
        assert_eq!(p, vec![0.5, 0.5]);
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0; 3];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 3]);
    }

    #[test]
    fn logits_of_many_rows_equal_the_per_row_head() {
        let (h, n) = (8, 3);
        let lin = |out: usize, inp: usize, seed: f32| Linear {
            w: (0..out * inp).map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.5).collect(),
            b: (0..out).map(|i| (i as f32 + seed).cos() * 0.1).collect(),
            out,
            inp,
        };
        let heads = [
            Head::Bert { pooler: Some(lin(h, h, 1.0)), classifier: lin(n, h, 2.0) },
            Head::Bert { pooler: None, classifier: lin(n, h, 3.0) },
            Head::Roberta { dense: lin(h, h, 4.0), out_proj: lin(n, h, 5.0) },
        ];
        // 600 rows: more than two blocks, the last one partial.
        let cls: Vec<f32> = (0..600 * h).map(|i| (i as f32 * 0.11).cos()).collect();
        for head in &heads {
            let many = logits_rows(head, &cls, h);
            let one: Vec<f32> = cls.chunks_exact(h).flat_map(|c| logits(head, c)).collect();
            assert_eq!(many.len(), one.len());
            assert!(many.iter().zip(&one).all(|(a, b)| (a - b).abs() < 1e-5), "{head:?}");
        }
    }
}
