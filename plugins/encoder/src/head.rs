//! What follows the encoder, on the host in f32 for both back-ends: pooling's last step
//! (normalisation) and the sequence-classification heads.

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
}
