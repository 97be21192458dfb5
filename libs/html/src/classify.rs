//! jusText's classification: each paragraph on its own (context-free: link density, a
//! copyright sign, inside a `select`, length, stop-word density), then by its neighbours
//! (short and near-good paragraphs take the class of the good or bad blocks around them;
//! headings close before good text are kept). The same rules, in the same order, as the
//! `justext` package's `classify_paragraphs` and `revise_paragraph_classification`, called as
//! NeMo Curator calls them: every class starts as its context-free class before the revision
//! (`justext.justext()` leaves them empty there, so its first heading pass never sees a good
//! paragraph; NeMo's extractor sets them first).

use crate::paragraphs::{Class, Paragraph};
use crate::stoplists::Stoplist;

/// jusText's parameters; the defaults are jusText's and NeMo Curator's.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub length_low: usize,
    pub length_high: usize,
    pub stopwords_low: f64,
    pub stopwords_high: f64,
    pub max_link_density: f64,
    pub max_heading_distance: usize,
    pub no_headings: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            length_low: 70,
            length_high: 200,
            stopwords_low: 0.30,
            stopwords_high: 0.32,
            max_link_density: 0.2,
            max_heading_distance: 200,
            no_headings: false,
        }
    }
}

/// Classify `paragraphs` in place: context-free, then revised.
pub fn classify(paragraphs: &mut [Paragraph], stoplist: &Stoplist, params: &Params) {
    for p in paragraphs.iter_mut() {
        p.cf_class = context_free(p, stoplist, params);
        p.heading = p.heading && !params.no_headings;
        p.class = p.cf_class;
    }
    revise(paragraphs, params.max_heading_distance);
}

/// Whether the text holds a copyright sign or `&copy`, jusText's two tests in one pass
/// (memchr's search, vectorised in the sandbox too, where `str::contains` is a byte-wise
/// two-way search).
fn has_copyright(text: &str) -> bool {
    let b = text.as_bytes();
    memchr::memchr2_iter(0xc2, b'&', b).any(|i| b[i + 1..].starts_with(if b[i] == 0xc2 { &[0xa9] } else { b"copy" }))
}

fn context_free(p: &Paragraph, stoplist: &Stoplist, params: &Params) -> Class {
    let link_density = if p.chars == 0 { 0.0 } else { p.chars_in_links as f64 / p.chars as f64 };
    if link_density > params.max_link_density || has_copyright(&p.text) || p.in_select {
        return Class::Bad;
    }
    if p.chars < params.length_low {
        return if p.chars_in_links > 0 { Class::Bad } else { Class::Short };
    }
    let (mut words, mut stop) = (0usize, 0usize);
    for w in p.text.split(curator_sdk::text::is_py_space).filter(|w| !w.is_empty()) {
        words += 1;
        stop += stoplist.contains(w) as usize;
    }
    let density = if words == 0 { 0.0 } else { stop as f64 / words as f64 };
    if density >= params.stopwords_high {
        if p.chars > params.length_high { Class::Good } else { Class::NearGood }
    } else if density >= params.stopwords_low {
        Class::NearGood
    } else {
        Class::Bad
    }
}

/// The class of the nearest good or bad paragraph (or near-good, unless `ignore_neargood`)
/// from `i` in direction `forward`; `Bad` past the ends.
fn neighbour(ps: &[Paragraph], i: usize, ignore_neargood: bool, forward: bool) -> Class {
    let mut j = i;
    loop {
        if forward {
            j += 1;
            if j >= ps.len() {
                return Class::Bad;
            }
        } else {
            if j == 0 {
                return Class::Bad;
            }
            j -= 1;
        }
        match ps[j].class {
            c @ (Class::Good | Class::Bad) => return c,
            Class::NearGood if !ignore_neargood => return Class::NearGood,
            _ => {}
        }
    }
}

/// Whether a good paragraph starts within `max_distance` characters after paragraph `i`.
fn good_follows(ps: &[Paragraph], i: usize, max_distance: usize) -> bool {
    let mut distance = 0;
    for p in &ps[i + 1..] {
        if distance > max_distance {
            return false;
        }
        if p.class == Class::Good {
            return true;
        }
        distance += p.chars;
    }
    false
}

fn revise(ps: &mut [Paragraph], max_heading_distance: usize) {
    // Short headings before good text become near-good.
    for i in 0..ps.len() {
        if ps[i].heading && ps[i].class == Class::Short && good_follows(ps, i, max_heading_distance) {
            ps[i].class = Class::NearGood;
        }
    }
    // Short paragraphs take their neighbours' class (decided on the classes before this pass).
    let mut new_classes = Vec::new();
    for i in 0..ps.len() {
        if ps[i].class != Class::Short {
            continue;
        }
        let prev = neighbour(ps, i, true, false);
        let next = neighbour(ps, i, true, true);
        let class = match (prev, next) {
            (Class::Good, Class::Good) => Class::Good,
            (Class::Bad, Class::Bad) => Class::Bad,
            _ if (prev == Class::Bad && neighbour(ps, i, false, false) == Class::NearGood)
                || (next == Class::Bad && neighbour(ps, i, false, true) == Class::NearGood) =>
            {
                Class::Good
            }
            _ => Class::Bad,
        };
        new_classes.push((i, class));
    }
    for (i, c) in new_classes {
        ps[i].class = c;
    }
    // Near-good paragraphs are good unless bad on both sides.
    for i in 0..ps.len() {
        if ps[i].class != Class::NearGood {
            continue;
        }
        let bad_both = neighbour(ps, i, true, false) == Class::Bad && neighbour(ps, i, true, true) == Class::Bad;
        ps[i].class = if bad_both { Class::Bad } else { Class::Good };
    }
    // More good headings: a heading made bad by its context, near good text, is good.
    for i in 0..ps.len() {
        if ps[i].heading && ps[i].class == Class::Bad && ps[i].cf_class != Class::Bad && good_follows(ps, i, max_heading_distance) {
            ps[i].class = Class::Good;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn para(text: &str, class: Class) -> Paragraph {
        Paragraph {
            text: text.into(),
            chars: text.chars().count(),
            chars_in_links: 0,
            heading: false,
            in_select: false,
            class,
            cf_class: class,
        }
    }

    /// One pass for jusText's two copyright tests says what the two `contains` say.
    #[test]
    fn the_copyright_test_is_jus_texts_two() {
        for t in ["", "©", "a © 2024", "&copy; 2024", "&cop", "&&copy", "\u{c2}x", "Ç©", "é", "&amp;", "copy", "&COPY", "\u{a0}x\u{ab}"]
        {
            assert_eq!(super::has_copyright(t), t.contains('\u{a9}') || t.contains("&copy"), "{t:?}");
        }
    }

    #[test]
    fn context_free_rules_in_order() {
        let en = Stoplist::for_language("English").unwrap();
        let p = Params::default();
        let long_prose = "This is a sentence that is written with many of the words that are in the list of stop words and it goes on for a while longer than two hundred characters so that it is long enough to be good on its own merits.";
        assert_eq!(context_free(&para(long_prose, Class::Bad), &en, &p), Class::Good);
        assert_eq!(context_free(&para(&long_prose[..120], Class::Bad), &en, &p), Class::NearGood);
        assert_eq!(context_free(&para("short", Class::Bad), &en, &p), Class::Short);
        let mut linked = para("short", Class::Bad);
        linked.chars_in_links = 1;
        assert_eq!(context_free(&linked, &en, &p), Class::Bad);
        let listy = "Home Products Services Contact Blog Careers Investors Press Partners Support Downloads Documentation Pricing";
        assert_eq!(context_free(&para(listy, Class::Bad), &en, &p), Class::Bad);
        assert_eq!(context_free(&para(&format!("{long_prose} \u{a9} 2024"), Class::Bad), &en, &p), Class::Bad);
    }

    #[test]
    fn short_paragraphs_follow_their_neighbours() {
        let classes = |cs: &[Class]| {
            let mut ps: Vec<Paragraph> = cs.iter().map(|&c| para("x", c)).collect();
            revise(&mut ps, 200);
            ps.iter().map(|p| p.class).collect::<Vec<_>>()
        };
        use Class::*;
        assert_eq!(classes(&[Good, Short, Good]), [Good, Good, Good]);
        assert_eq!(classes(&[Bad, Short, Bad]), [Bad, Bad, Bad]);
        // Bad on one side, but a near-good paragraph between it and the bad one: good.
        assert_eq!(classes(&[Good, Short, NearGood, Bad]), [Good, Good, Good, Bad]);
        assert_eq!(classes(&[Bad, Short, NearGood, Good]), [Bad, Bad, Good, Good]);
        assert_eq!(classes(&[Good, Short, Bad]), [Good, Bad, Bad]);
        assert_eq!(classes(&[Bad, NearGood, Bad]), [Bad, Bad, Bad]);
        assert_eq!(classes(&[Short]), [Bad]);
    }
}
