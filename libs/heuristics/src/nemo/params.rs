//! The params of NeMo Curator's heuristic filters: name, type, default (a JSON literal) and
//! doc, written once. [`__rules_struct!`](crate::__rules_struct) makes each library struct
//! from its list (`heuristic!` in this folder); [`crate::nemo_stage!`] makes a stage's
//! `#[param]`s from the same list, so a stage never restates a default.

/// A NeMo heuristic's field list, handed to the generator macro `$cb` with `$args`.
#[doc(hidden)]
#[macro_export]
macro_rules! __nemo_params {
    (NonAlphaNumericFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of other characters kept.
            max_non_alpha_numeric_to_text_ratio: f64 = 0.25,
        } }
    };
    (SymbolsToWordsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of symbol words kept.
            max_symbol_to_word_ratio: f64 = 0.1,
        } }
    };
    (NumbersFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of digits kept.
            max_number_to_text_ratio: f64 = 0.15,
        } }
    };
    (UrlsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of URL characters kept.
            max_url_to_text_ratio: f64 = 0.2,
        } }
    };
    (BulletsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of bullet lines kept.
            max_bullet_lines_ratio: f64 = 0.9,
        } }
    };
    (WhiteSpaceFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of whitespace kept.
            max_white_space_ratio: f64 = 0.25,
        } }
    };
    (ParenthesesFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of brackets kept.
            max_parentheses_ratio: f64 = 0.1,
        } }
    };
    (LongWordFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Longest word kept.
            max_word_length: f64 = 1000,
        } }
    };
    (WordCountFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Fewest words a kept document may have.
            min_words: usize = 50,
            /// Most words a kept document may have.
            max_words: usize = 100000,
        } }
    };
    (BoilerPlateStringFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of boilerplate paragraphs kept.
            max_boilerplate_string_ratio: f64 = 0.4,
            /// Accepted for compatibility; NeMo Curator 1.4 does not use it either.
            remove_if_at_top_or_bottom: bool = true,
        } }
    };
    (MeanWordLengthFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Shortest mean word length kept.
            min_mean_word_length: f64 = 3,
            /// Longest mean word length kept.
            max_mean_word_length: f64 = 10,
        } }
    };
    (PunctuationFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of lines without an end mark kept.
            max_num_sentences_without_endmark_ratio: f64 = 0.85,
        } }
    };
    (EllipsisFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Largest share of ellipsis lines kept.
            max_num_lines_ending_with_ellipsis_ratio: f64 = 0.3,
        } }
    };
    (CommonEnglishWordsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Fewest common words kept.
            min_num_common_words: f64 = 2,
            /// Stop counting at the cutoff (the score is then at most the cutoff).
            stop_at_false: bool = true,
        } }
    };
    (WordsWithoutAlphabetsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share of words with a letter kept.
            min_words_with_alphabets: f64 = 0.8,
        } }
    };
    (PornographicUrlsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
        } }
    };
    (RepeatedLinesFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share of distinct lines kept.
            max_repeated_line_fraction: f64 = 0.7,
        } }
    };
    (RepeatedParagraphsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share of distinct paragraphs kept.
            max_repeated_paragraphs_ratio: f64 = 0.7,
        } }
    };
    (RepeatedLinesByCharFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share kept.
            max_repeated_lines_char_ratio: f64 = 0.8,
        } }
    };
    (RepeatedParagraphsByCharFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Smallest share kept.
            max_repeated_paragraphs_char_ratio: f64 = 0.8,
        } }
    };
    (RepeatingTopNGramsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Words per n-gram.
            n: usize = 2,
            /// Largest share kept.
            max_repeating_ngram_ratio: f64 = 0.2,
        } }
    };
    (RepeatingDuplicateNGramsFilter, $cb:ident $args:tt) => {
        $crate::$cb! { $args {
            /// Words per n-gram.
            n: usize = 2,
            /// Largest share kept.
            max_repeating_duplicate_ngram_ratio: f64 = 0.2,
        } }
    };
}
