//! Word n-grams as classes (`NGrams`), grown level by level, and `FirstSeen`, the one
//! open-addressing table behind every intern/seen-before map.

/// Word n-grams as classes: for each n, each window of n words is labelled with the position
/// of the first window equal to it, so equal n-grams share a label and "seen before" is
/// `label != position`. Exact: words are interned (compared as strings), and the label of an
/// (n+1)-gram is looked up by the pair (label of its first n words, id of its last word).
/// A window whose n-gram occurs once keeps a unique label at every larger n, so only the
/// windows of repeated n-grams are looked up again: on prose, few beyond n = 3.
pub struct NGrams {
    /// `levels[k]`: the classes of (k+1)-grams.
    levels: Vec<Level>,
    table: FirstSeen,
}

/// The classes of one n.
pub struct Level {
    /// Per window, the position of the first equal window.
    pub classes: Vec<u32>,
    /// Per position, how many windows have it as their class.
    pub counts: Vec<u32>,
    /// The windows equal to an earlier one (`classes[i] != i`), in order: few on prose, so
    /// the scores walk them instead of every window.
    pub seen_before: Vec<u32>,
}

impl Level {
    /// The position of the first window among the most frequent n-grams (`Counter.most_common`
    /// order), `None` without windows.
    pub fn most_frequent(&self) -> Option<usize> {
        if self.classes.is_empty() {
            return None;
        }
        // A repeated n-gram's first window comes before its other windows: the answer is the
        // smallest first window among the most counted, or window 0 when nothing repeats.
        let mut best = (0usize, 1u32);
        for &d in &self.seen_before {
            let c = self.classes[d as usize] as usize;
            let k = self.counts[c];
            if k > best.1 || (k == best.1 && c < best.0) {
                best = (c, k);
            }
        }
        Some(best.0)
    }

    /// From the classes, given the only windows that may be equal to an earlier one.
    fn from_classes(classes: Vec<u32>, candidates: impl Iterator<Item = u32>) -> Level {
        let mut counts = vec![1u32; classes.len()];
        let mut seen_before = Vec::new();
        for i in candidates {
            let c = classes[i as usize];
            if c != i {
                counts[c as usize] += 1;
                counts[i as usize] = 0;
                seen_before.push(i);
            }
        }
        Level { classes, counts, seen_before }
    }
}

/// An open-addressing map from 64-bit keys to the first position inserted under each (the
/// interning and "seen before" tables of the filters: no per-entry allocation, a reusable
/// buffer, one multiply per probe).
#[derive(Default)]
pub(crate) struct FirstSeen {
    /// (key, position, generation): a slot of an older generation is empty, so emptying the
    /// table is one increment, not a pass over it.
    slots: Vec<(u64, u32, u32)>,
    bits: u32,
    generation: u32,
}

impl FirstSeen {
    /// Empty, sized for `n` keys.
    pub(crate) fn reset(&mut self, n: usize) {
        let bits = (2 * n).max(16).next_power_of_two().trailing_zeros();
        self.generation = self.generation.wrapping_add(1);
        if bits > self.bits || self.generation == 0 {
            self.bits = self.bits.max(bits);
            self.slots.clear();
            self.slots.resize(1 << self.bits, (0, 0, 0));
            self.generation = 1;
        }
    }

    /// The position first inserted under `key` for which `same` holds (equal keys may hide
    /// different items: `same` compares them), or `pos`, inserted.
    #[inline]
    pub(crate) fn first_or_insert(&mut self, key: u64, pos: u32, same: impl Fn(u32) -> bool) -> u32 {
        let mask = self.slots.len() - 1;
        let mut h = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize;
        loop {
            let slot = &mut self.slots[h & mask];
            if slot.2 != self.generation {
                *slot = (key, pos, self.generation);
                return pos;
            }
            if slot.0 == key && same(slot.1) {
                return slot.1;
            }
            h += 1;
        }
    }
}

/// A word's 64-bit hash: words of up to 8 bytes in one multiply.
pub(crate) fn word_hash(w: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (w.len() as u64).wrapping_mul(K);
    let mut eights = w.chunks_exact(8);
    for c in &mut eights {
        let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(23) ^ v).wrapping_mul(K);
    }
    let rest = eights.remainder();
    if !rest.is_empty() {
        // byte by byte: a copy into a buffer would be a `memory.copy` call inside WASM
        let v = rest.iter().rev().fold(0u64, |v, &b| (v << 8) | u64::from(b));
        h = (h.rotate_left(23) ^ v).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

impl NGrams {
    pub fn new(words: &[&str]) -> NGrams {
        // words interned by position; a word of up to 7 bytes is its own key (bytes and
        // length packed: equal keys, equal words), a longer one is hashed and compared
        let mut table = FirstSeen::default();
        table.reset(words.len());
        let mut classes = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            let b = w.as_bytes();
            let class = if b.len() <= 7 {
                let packed = b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)) | ((b.len() as u64) << 56);
                table.first_or_insert(packed, i as u32, |_| true)
            } else {
                let key = word_hash(b) | (1 << 63); // top bit set: never a packed key
                table.first_or_insert(key, i as u32, |p| words[p as usize] == *w)
            };
            classes.push(class);
        }
        let n = words.len() as u32;
        NGrams { levels: vec![Level::from_classes(classes, 0..n)], table }
    }

    /// The classes of n-grams (`1 ≤ n ≤` the number of words).
    pub fn level(&mut self, n: usize) -> &Level {
        assert!(n >= 1 && n <= self.levels[0].classes.len(), "n-gram size {n} out of range");
        while self.levels.len() < n {
            let next = self.extend();
            self.levels.push(next);
        }
        &self.levels[n - 1]
    }

    /// The classes of (n+1)-grams from those of n-grams, n = `levels.len()`.
    ///
    /// Only windows whose n-gram repeats can share an (n+1)-gram: the repeated n-grams' first
    /// windows and the windows seen before. Windows sharing an (n+1)-gram share their n-gram
    /// class, whose first window is the smallest of them; so the first windows go into the
    /// table first (in any order), then the windows seen before in order, and each key keeps
    /// its smallest window without walking every window.
    fn extend(&mut self) -> Level {
        let n = self.levels.len();
        let (words, prev) = (&self.levels[0].classes, &self.levels[n - 1]);
        let windows = prev.classes.len() - 1;
        let mut classes: Vec<u32> = (0..windows as u32).collect();
        let repeated: Vec<u32> = prev.seen_before.iter().copied().filter(|&d| (d as usize) < windows).collect();
        if !repeated.is_empty() {
            let mut firsts = Vec::with_capacity(repeated.len());
            let mut listed = vec![false; windows + 1];
            for &d in &repeated {
                let c = prev.classes[d as usize];
                if !std::mem::replace(&mut listed[c as usize], true) && (c as usize) < windows {
                    firsts.push(c);
                }
            }
            self.table.reset(firsts.len() + repeated.len());
            for &i in firsts.iter().chain(&repeated) {
                // (class of the first n words, id of the last): exact, no comparison needed
                let key = (u64::from(prev.classes[i as usize]) << 32) | u64::from(words[i as usize + n]);
                classes[i as usize] = self.table.first_or_insert(key, i, |_| true);
            }
        }
        Level::from_classes(classes, repeated.into_iter())
    }
}
