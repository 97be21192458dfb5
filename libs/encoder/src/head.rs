//! What follows the encoder, on the host in f32 for both back-ends: pooling's last step
//! (normalisation) and the sequence-classification heads.

use rayon::prelude::*;

use crate::tensors;
pub use crate::tensors::gelu;
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

/// The head's logits for one document's pooled state (`[CLS]`, or the mean for
/// [`Head::MeanHeads`]).
pub fn logits(head: &Head, cls: &[f32]) -> Vec<f32> {
    match head {
        Head::Bert { pooler, classifier } => match pooler {
            Some(p) => linear(classifier, &linear(p, cls).into_iter().map(f32::tanh).collect::<Vec<_>>()),
            None => linear(classifier, cls),
        },
        Head::Roberta { dense, out_proj } => linear(out_proj, &linear(dense, cls).into_iter().map(f32::tanh).collect::<Vec<_>>()),
        Head::ContextPooler { dense, classifier } => linear(classifier, &linear(dense, cls).into_iter().map(gelu).collect::<Vec<_>>()),
        Head::First { fc } => linear(fc, cls),
        Head::MeanHeads { heads } => heads.iter().flat_map(|fc| linear(fc, cls)).collect(),
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
            Head::Bert { pooler: Some(p), classifier } => tensors::dense(classifier, &tanh(tensors::dense(p, x, m)), m),
            Head::Bert { pooler: None, classifier } => tensors::dense(classifier, x, m),
            Head::Roberta { dense, out_proj } => tensors::dense(out_proj, &tanh(tensors::dense(dense, x, m)), m),
            Head::ContextPooler { dense, classifier } => {
                let mut p = tensors::dense(dense, x, m);
                p.iter_mut().for_each(|v| *v = gelu(*v));
                tensors::dense(classifier, &p, m)
            }
            Head::First { fc } => tensors::dense(fc, x, m),
            Head::MeanHeads { heads } => {
                // Each head's [m × out] side by side per row.
                let outs: Vec<Vec<f32>> = heads.iter().map(|fc| tensors::dense(fc, x, m)).collect();
                (0..m)
                    .flat_map(|r| heads.iter().zip(&outs).flat_map(move |(fc, o)| o[r * fc.out..(r + 1) * fc.out].iter().copied()))
                    .collect()
            }
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

/// What NeMo's prompt task and complexity classifier writes for one prompt, computed from its
/// heads' logits as NeMo's `CustomDeberta.process_logits` does (same rounding).
#[derive(Debug, Clone, PartialEq)]
pub struct Complexity {
    /// The two likeliest task types (the second is `NA` when its probability, rounded to
    /// three places, is below 0.1) and the first one's probability (three places).
    pub task_type_1: String,
    pub task_type_2: String,
    pub task_type_prob: f64,
    /// Every other target's score: softmax · weights / divisor, four places
    /// (`number_of_few_shots` below 0.05 is 0), in the targets' order.
    pub scores: Vec<(String, f64)>,
    /// The weighted sum of six of them, five places.
    pub prompt_complexity_score: f64,
}

/// Python's `round(x, places)` (round half to even on the decimal value; close enough
/// here: ties are measure-zero on softmax outputs).
fn round_to(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    let y = x * f;
    let r = y.round();
    let r = if (y - y.trunc()).abs() == 0.5 && r % 2.0 != 0.0 { r - y.signum() } else { r };
    r / f
}

/// NeMo's per-target results from one prompt's concatenated head logits.
pub fn complexity(targets: &crate::config::Targets, logits: &[f32]) -> Complexity {
    let mut at = 0;
    let mut out = Complexity {
        task_type_1: String::new(),
        task_type_2: String::new(),
        task_type_prob: 0.0,
        scores: Vec::new(),
        prompt_complexity_score: 0.0,
    };
    for (name, n) in &targets.sizes {
        let part = &logits[at..at + n];
        at += n;
        let probs = softmax(part);
        if name == "task_type" {
            let mut order: Vec<usize> = (0..*n).collect();
            order.sort_by(|&a, &b| part[b].total_cmp(&part[a]).then(a.cmp(&b)));
            let label = |i: usize| targets.task_types.get(i).cloned().unwrap_or_else(|| format!("TASK_{i}"));
            out.task_type_1 = label(order[0]);
            out.task_type_prob = round_to(f64::from(probs[order[0]]), 3);
            out.task_type_2 = match order.get(1) {
                Some(&second) if round_to(f64::from(probs[second]), 3) >= 0.1 => label(second),
                _ => "NA".to_string(),
            };
            continue;
        }
        let weights = targets.weights.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let sum: f64 = probs.iter().zip(weights).map(|(p, w)| f64::from(*p) * w).sum();
        let mut score = round_to(sum / targets.divisors.get(name).copied().unwrap_or(1.0), 4);
        if name == "number_of_few_shots" && score < 0.05 {
            score = 0.0;
        }
        out.scores.push((name.clone(), score));
    }
    let get = |name: &str| out.scores.iter().find(|(n, _)| n == name).map_or(0.0, |(_, s)| *s);
    out.prompt_complexity_score = round_to(
        0.35 * get("creativity_scope")
            + 0.25 * get("reasoning")
            + 0.15 * get("constraint_ct")
            + 0.15 * get("domain_knowledge")
            + 0.05 * get("contextual_knowledge")
            + 0.05 * get("number_of_few_shots"),
        5,
    );
    out
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
    fn complexity_follows_nemos_rounding_and_rules() {
        use crate::config::Targets;
        let targets = Targets {
            sizes: vec![("task_type".into(), 3), ("creativity_scope".into(), 2), ("number_of_few_shots".into(), 2)],
            task_types: vec!["QA".into(), "Code".into(), "Other".into()],
            weights: [("creativity_scope".to_string(), vec![0.0, 1.0]), ("number_of_few_shots".to_string(), vec![0.0, 1.0])].into(),
            divisors: [("creativity_scope".to_string(), 1.0), ("number_of_few_shots".to_string(), 1.0)].into(),
        };
        // Task types: Code first (p ≈ 0.9), the runner-up under 0.1 → "NA". Creativity: softmax
        // [0, ln 3] = [0.25, 0.75] → 0.75. Few shots: [0, ln(1/99)] → 0.01 < 0.05 → 0.
        let logits = [0.0, (0.9f32 / 0.05).ln(), 0.0, 0.0, 3f32.ln(), 0.0, (1.0f32 / 99.0).ln()];
        let c = complexity(&targets, &logits);
        assert_eq!((c.task_type_1.as_str(), c.task_type_2.as_str(), c.task_type_prob), ("Code", "NA", 0.9));
        assert_eq!(c.scores, vec![("creativity_scope".to_string(), 0.75), ("number_of_few_shots".to_string(), 0.0)]);
        assert_eq!(c.prompt_complexity_score, 0.2625, "0.35 × 0.75, rounded to five places");
        // Python's round: halves go to the even neighbour.
        assert_eq!(round_to(0.125, 2), 0.12);
        assert_eq!(round_to(0.375, 2), 0.38);
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
