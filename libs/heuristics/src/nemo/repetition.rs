//! NeMo Curator's repetition filters (`heuristic/repetition/repetition.py`): repeated lines
//! and paragraphs, and the word n-gram filters, with the hasher their maps use.

use super::*;

heuristic!(
    /// Share of non-blank lines that are distinct; keep ≥ 0.7.
    RepeatedLinesFilter
);
impl Heuristic for RepeatedLinesFilter {
    const NAME: &'static str = "RepeatedLinesFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.line_uniques();
        ratio(u.unique, u.total, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_line_fraction
    }
}

heuristic!(
    /// Share of paragraphs that are distinct; keep ≥ 0.7.
    RepeatedParagraphsFilter
);
impl Heuristic for RepeatedParagraphsFilter {
    const NAME: &'static str = "RepeatedParagraphsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.paragraph_uniques();
        ratio(u.unique, u.total, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_paragraphs_ratio
    }
}

heuristic!(
    /// Share of line characters in distinct lines; keep ≥ 0.8.
    RepeatedLinesByCharFilter
);
impl Heuristic for RepeatedLinesByCharFilter {
    const NAME: &'static str = "RepeatedLinesByCharFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.line_uniques();
        ratio(u.unique_chars, u.total_chars, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_lines_char_ratio
    }
}

heuristic!(
    /// Share of paragraph characters in distinct paragraphs; keep ≥ 0.8.
    RepeatedParagraphsByCharFilter
);
impl Heuristic for RepeatedParagraphsByCharFilter {
    const NAME: &'static str = "RepeatedParagraphsByCharFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let u = doc.paragraph_uniques();
        ratio(u.unique_chars, u.total_chars, 0.0)
    }
    fn keep(&self, s: f64) -> bool {
        s >= self.max_repeated_paragraphs_char_ratio
    }
}

/// A fast, non-cryptographic hasher for in-memory maps keyed by word ids (FxHash's mix).
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Fx {
    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type FxMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

heuristic!(
    /// Share of characters taken by the most frequent word n-gram (as `text.replace` would
    /// remove it); keep ≤ 0.2. Among equally frequent n-grams the first to occur is taken
    /// (NeMo Curator takes whichever its hash set yields first; see DISAGREEMENTS.md).
    RepeatingTopNGramsFilter
);
impl Heuristic for RepeatingTopNGramsFilter {
    const NAME: &'static str = "RepeatingTopNGramsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let n = self.n.max(1);
        if doc.words().words.len() < n {
            return 1.0;
        }
        let Some(i) = doc.ngrams().level(n).most_frequent() else { return 1.0 };
        let joined = doc.words().words[i..i + n].join(" ");
        ratio(py::count(doc.text(), &joined) * py::len(&joined), doc.chars().chars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_repeating_ngram_ratio
    }
}

heuristic!(
    /// Share of characters in word n-grams seen before (overlaps counted once); keep ≤ 0.2.
    RepeatingDuplicateNGramsFilter
);
impl Heuristic for RepeatingDuplicateNGramsFilter {
    const NAME: &'static str = "RepeatingDuplicateNGramsFilter";
    fn score_view(&self, doc: &mut View<'_>) -> f64 {
        let n = self.n.max(1);
        if doc.words().words.len() < n {
            return 1.0;
        }
        let nchars = doc.chars().chars;
        let (ngrams, lens) = doc.ngrams_and_lens();
        // NeMo walks every window, counting down an overlap after each repeated one; only the
        // repeated windows add characters, so walk those and derive the overlap.
        let (mut duplicated, mut last) = (0usize, None::<usize>);
        for &i in &ngrams.level(n).seen_before {
            let i = i as usize;
            let overlapping = last.map_or(0, |l| n.saturating_sub(i - l));
            duplicated += lens[i + overlapping.min(n)..i + n].iter().map(|&l| l as usize).sum::<usize>();
            duplicated += (n - overlapping).min(n - 1);
            last = Some(i);
        }
        ratio(duplicated, nchars, 1.0)
    }
    fn keep(&self, s: f64) -> bool {
        s <= self.max_repeating_duplicate_ngram_ratio
    }
}

/// `(n, max_repeating_ngram_ratio)` of the RepeatingTopNGramsFilters in NeMo Curator's
/// English pipeline, in order.
pub const ENGLISH_TOP_NGRAMS: [(usize, f64); 3] = [(2, 0.2), (3, 0.18), (4, 0.16)];
/// `(n, max_repeating_duplicate_ngram_ratio)` of its RepeatingDuplicateNGramsFilters.
pub const ENGLISH_DUPLICATE_NGRAMS: [(usize, f64); 6] = [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)];

/// The repetition filters as NeMo Curator's English pipeline configures them, with the
/// names the parity reference uses (`RepeatingTopNGramsFilter(n=2)`, …).
pub fn repetition_all(text: &str) -> Vec<(String, f64, bool)> {
    fn one<H: Heuristic>(name: String, h: H, text: &str) -> (String, f64, bool) {
        let s = h.score(text);
        (name, s, h.keep(s))
    }
    let mut out = vec![
        one(RepeatedLinesFilter::NAME.into(), RepeatedLinesFilter::default(), text),
        one(RepeatedParagraphsFilter::NAME.into(), RepeatedParagraphsFilter::default(), text),
        one(RepeatedLinesByCharFilter::NAME.into(), RepeatedLinesByCharFilter::default(), text),
        one(RepeatedParagraphsByCharFilter::NAME.into(), RepeatedParagraphsByCharFilter::default(), text),
    ];
    for (n, r) in ENGLISH_TOP_NGRAMS {
        let h = RepeatingTopNGramsFilter { n, max_repeating_ngram_ratio: r };
        out.push(one(format!("RepeatingTopNGramsFilter(n={n})"), h, text));
    }
    for (n, r) in ENGLISH_DUPLICATE_NGRAMS {
        let h = RepeatingDuplicateNGramsFilter { n, max_repeating_duplicate_ngram_ratio: r };
        out.push(one(format!("RepeatingDuplicateNGramsFilter(n={n})"), h, text));
    }
    out
}
