//! Filters chosen by name, for a chain run as one stage (`AnyHeuristic`).

use super::*;

macro_rules! by_name {
    ($($stage:literal => $ty:ident),* $(,)?) => {
        /// One of the heuristics above, chosen by the name of the stage that runs it alone
        /// (`repeating_top_n_grams_filter`), with that stage's params.
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyHeuristic { $($ty($ty)),* }

        impl AnyHeuristic {
            /// The stage names, in the order above.
            pub const NAMES: &'static [&'static str] = &[$($stage),*];

            /// The heuristic a stage name stands for, from that stage's params (a JSON object;
            /// missing params take their defaults, unknown ones are an error).
            pub fn from_params(stage: &str, params: serde_json::Value) -> Result<AnyHeuristic, String> {
                match stage {
                    $($stage => {
                        let h: $ty = serde_json::from_value(params).map_err(|e| e.to_string())?;
                        Heuristic::check(&h)?;
                        Ok(AnyHeuristic::$ty(h))
                    })*
                    other => Err(format!("unknown filter `{other}` (one of: {})", Self::NAMES.join(", "))),
                }
            }

            /// The stage name.
            pub fn name(&self) -> &'static str {
                match self { $(AnyHeuristic::$ty(_) => $stage),* }
            }

            pub fn score_view(&self, doc: &mut View<'_>) -> f64 {
                match self { $(AnyHeuristic::$ty(h) => h.score_view(doc)),* }
            }

            pub fn keep(&self, score: f64) -> bool {
                match self { $(AnyHeuristic::$ty(h) => h.keep(score)),* }
            }
        }
    };
}

by_name! {
    "non_alpha_numeric_filter" => NonAlphaNumericFilter,
    "symbols_to_words_filter" => SymbolsToWordsFilter,
    "numbers_filter" => NumbersFilter,
    "urls_filter" => UrlsFilter,
    "bullets_filter" => BulletsFilter,
    "white_space_filter" => WhiteSpaceFilter,
    "parentheses_filter" => ParenthesesFilter,
    "long_word_filter" => LongWordFilter,
    "word_count_filter" => WordCountFilter,
    "boiler_plate_string_filter" => BoilerPlateStringFilter,
    "mean_word_length_filter" => MeanWordLengthFilter,
    "punctuation_filter" => PunctuationFilter,
    "ellipsis_filter" => EllipsisFilter,
    "common_english_words_filter" => CommonEnglishWordsFilter,
    "words_without_alphabets_filter" => WordsWithoutAlphabetsFilter,
    "pornographic_urls_filter" => PornographicUrlsFilter,
    "repeated_lines_filter" => RepeatedLinesFilter,
    "repeated_paragraphs_filter" => RepeatedParagraphsFilter,
    "repeated_lines_by_char_filter" => RepeatedLinesByCharFilter,
    "repeated_paragraphs_by_char_filter" => RepeatedParagraphsByCharFilter,
    "repeating_top_n_grams_filter" => RepeatingTopNGramsFilter,
    "repeating_duplicate_n_grams_filter" => RepeatingDuplicateNGramsFilter,
}
