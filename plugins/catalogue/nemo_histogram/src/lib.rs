//! NeMo Curator's `HistogramFilter` (NLLB's character-histogram check, a cheap language-ID
//! sanity test) as a stage. The histograms are fairseq's (`histograms.tar.gz` from the
//! m2m_100 release), extracted by the user into the directory the pipeline grants as
//! `histograms`; one file per language, one character per line, until a line starting with
//! `threshold_char`.

use std::collections::HashSet;

use curator_sdk::prelude::*;

/// Drops documents with too few characters from the language's histogram.
#[stage(name = "histogram_filter", score_filter, cpus = 1.0, memory_mb = 128, dir = "histograms")]
pub struct HistogramFilter {
    /// Expected language: the histogram file's name.
    #[param(default = "en")]
    pub lang: String,
    /// Smallest share of characters in the histogram.
    #[param(default = 0.8)]
    pub threshold: f64,
    /// Where the language files are, as the stage sees it.
    #[param(default = "/histograms/checkpoint/edunov/cc60_multilingual/clean_hists")]
    pub histogram_dir: String,
    /// The line marking the end of the histogram.
    #[param(default = "]")]
    pub threshold_char: String,
    #[state]
    chars: HashSet<char>,
}

/// The characters of a histogram file: the first character of each line, up to the line that
/// starts with `end`.
pub fn read_histogram(file: &str, end: char) -> HashSet<char> {
    file.lines().filter_map(|l| l.chars().next()).take_while(|&c| c != end).collect()
}

/// NeMo's score: 1 when more than `threshold` of the characters (of the stripped text, over
/// the whole text's length) are in the histogram, else 0.
pub fn histogram_score(text: &str, chars: &HashSet<char>, threshold: f64) -> f64 {
    let n = text.chars().count();
    if n == 0 {
        return 0.0; // NeMo divides by zero here
    }
    let inside = curator_heuristics::py::strip(text).chars().filter(|c| chars.contains(c)).count();
    f64::from(u8::from(inside as f64 / n as f64 > threshold))
}

impl Stage for HistogramFilter {
    fn init(&mut self) -> Result<(), StageError> {
        let path = format!("{}/{}", self.histogram_dir.trim_end_matches('/'), self.lang);
        let file = read_granted("histogram", &path, "histograms")?;
        let end = self.threshold_char.chars().next().unwrap_or(']');
        self.chars = read_histogram(&String::from_utf8_lossy(&file), end);
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        score_filter(&batch, self.score_field.as_deref(), self.filter, self.invert, |doc| {
            let s = histogram_score(doc.text(), &self.chars, self.threshold);
            Ok((s, s == 1.0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_like_nemo() {
        let h = read_histogram("e\nt\na\n \n]\nz\n", ']');
        assert_eq!(h.len(), 4);
        assert!(!h.contains(&'z'));
        assert_eq!(histogram_score("eat tea", &h, 0.8), 1.0);
        assert_eq!(histogram_score("zzz eat", &h, 0.8), 0.0);
        // stripped text counted over the unstripped length
        assert_eq!(histogram_score("eat        ", &h, 0.8), 0.0);
        assert_eq!(histogram_score("", &h, 0.8), 0.0);
    }
}
