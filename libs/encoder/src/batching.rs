//! Which documents run together: sorted by length (longest first) and grouped under a budget
//! of *padded* tokens per forward pass, so a batch of short documents holds many and one of
//! long documents few, and padding stays small (every batch pads to its own longest).
//! text-embeddings-inference batches by `max_batch_tokens` the same way.

/// Round a sequence length up to what a batch pads it to (multiples of 8 keep the GPU's
/// matrix units on their fast path).
pub fn padded_len(len: usize) -> usize {
    len.div_ceil(8) * 8
}

/// Groups of document indices, longest documents first. Each group's `count × padded
/// longest` is at most `token_budget` (a document longer than the budget goes alone) and
/// it holds at most `max_docs` documents.
pub fn by_token_budget(lengths: &[usize], token_budget: usize, max_docs: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]).then(a.cmp(&b)));
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut width = 0;
    for i in order {
        if current.is_empty() {
            width = padded_len(lengths[i].max(1));
        } else if (current.len() + 1) * width > token_budget || current.len() >= max_docs.max(1) {
            batches.push(std::mem::take(&mut current));
            width = padded_len(lengths[i].max(1));
        }
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Padded tokens over real tokens for a set of batches (1.0 = no padding at all).
pub fn padding_ratio(lengths: &[usize], batches: &[Vec<usize>]) -> f64 {
    let real: usize = lengths.iter().sum();
    let padded: usize = batches.iter().map(|b| b.len() * b.iter().map(|&i| padded_len(lengths[i].max(1))).max().unwrap_or(0)).sum();
    if real == 0 { 1.0 } else { padded as f64 / real as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_once_longest_first_within_budget() {
        let lengths: Vec<usize> = (0..1000).map(|i| (i * 7919) % 500 + 1).collect();
        let batches = by_token_budget(&lengths, 4096, 64);
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        let mut last = usize::MAX;
        for b in &batches {
            let longest = padded_len(lengths[b[0]]);
            assert!(b.len() * longest <= 4096 || b.len() == 1, "{} × {longest}", b.len());
            assert!(b.len() <= 64);
            for &i in b {
                assert!(lengths[i] <= last);
                last = lengths[i];
            }
        }
        // Sorting keeps padding small.
        assert!(padding_ratio(&lengths, &batches) < 1.1, "{}", padding_ratio(&lengths, &batches));
    }

    #[test]
    fn short_documents_share_a_batch_and_long_ones_go_alone() {
        let lengths = [8, 8, 8, 8, 600, 8];
        let batches = by_token_budget(&lengths, 512, 1000);
        assert_eq!(batches, vec![vec![4], vec![0, 1, 2, 3, 5]]);
        // The doc count caps a batch too.
        assert_eq!(by_token_budget(&[8; 5], 1 << 20, 2).len(), 3);
        assert!(by_token_budget(&[], 512, 8).is_empty());
    }

    #[test]
    fn unsorted_fixed_batches_pad_more_than_budgeted_ones() {
        let lengths: Vec<usize> = (0..512).map(|i| if i % 2 == 0 { 16 } else { 256 }).collect();
        let fixed: Vec<Vec<usize>> = (0..512).collect::<Vec<_>>().chunks(32).map(|c| c.to_vec()).collect();
        let budgeted = by_token_budget(&lengths, 8192, 512);
        assert!(padding_ratio(&lengths, &fixed) > 1.8);
        assert!(padding_ratio(&lengths, &budgeted) < 1.01);
    }
}
