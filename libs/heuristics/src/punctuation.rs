//! datatrove's punctuation tables (`datatrove.utils.text`): `TERMINAL_PUNCTUATION`, the
//! sentence-final marks of many scripts, and `PUNCTUATION`. Shared by the datatrove filters
//! and the English sentence splitter (`en_words`), so neither imports the other.

/// datatrove's `TERMINAL_PUNCTUATION`: sentence-final marks of many scripts.
const TERMINAL: &[char] = &[
    '\u{21}',
    '\u{2e}',
    '\u{3f}',
    '\u{589}',
    '\u{61d}',
    '\u{61e}',
    '\u{61f}',
    '\u{6d4}',
    '\u{700}',
    '\u{701}',
    '\u{702}',
    '\u{7f9}',
    '\u{837}',
    '\u{839}',
    '\u{83d}',
    '\u{83e}',
    '\u{964}',
    '\u{965}',
    '\u{104a}',
    '\u{104b}',
    '\u{1362}',
    '\u{1367}',
    '\u{1368}',
    '\u{166e}',
    '\u{1735}',
    '\u{1736}',
    '\u{17d4}',
    '\u{17d5}',
    '\u{17d6}',
    '\u{17d9}',
    '\u{17da}',
    '\u{1803}',
    '\u{1809}',
    '\u{1944}',
    '\u{1945}',
    '\u{1aa8}',
    '\u{1aa9}',
    '\u{1aaa}',
    '\u{1aab}',
    '\u{1b5a}',
    '\u{1b5b}',
    '\u{1b5e}',
    '\u{1b5f}',
    '\u{1b7d}',
    '\u{1b7e}',
    '\u{1c3b}',
    '\u{1c3c}',
    '\u{1c7e}',
    '\u{1c7f}',
    '\u{203c}',
    '\u{203d}',
    '\u{2047}',
    '\u{2048}',
    '\u{2049}',
    '\u{2e2e}',
    '\u{2e3c}',
    '\u{2e53}',
    '\u{2e54}',
    '\u{3002}',
    '\u{a4ff}',
    '\u{a60e}',
    '\u{a60f}',
    '\u{a6f3}',
    '\u{a6f7}',
    '\u{a876}',
    '\u{a877}',
    '\u{a8ce}',
    '\u{a8cf}',
    '\u{a92f}',
    '\u{a9c8}',
    '\u{a9c9}',
    '\u{aa5d}',
    '\u{aa5e}',
    '\u{aa5f}',
    '\u{aaf0}',
    '\u{aaf1}',
    '\u{abeb}',
    '\u{fe52}',
    '\u{fe56}',
    '\u{fe57}',
    '\u{ff01}',
    '\u{ff0e}',
    '\u{ff1f}',
    '\u{ff61}',
    '\u{10a56}',
    '\u{10a57}',
    '\u{10f55}',
    '\u{10f56}',
    '\u{10f57}',
    '\u{10f58}',
    '\u{10f59}',
    '\u{10f86}',
    '\u{10f87}',
    '\u{10f88}',
    '\u{10f89}',
    '\u{11047}',
    '\u{11048}',
    '\u{110be}',
    '\u{110bf}',
    '\u{110c0}',
    '\u{110c1}',
    '\u{11141}',
    '\u{11142}',
    '\u{11143}',
    '\u{111c5}',
    '\u{111c6}',
    '\u{111cd}',
    '\u{111de}',
    '\u{111df}',
    '\u{11238}',
    '\u{11239}',
    '\u{1123b}',
    '\u{1123c}',
    '\u{112a9}',
    '\u{1144b}',
    '\u{1144c}',
    '\u{115c2}',
    '\u{115c3}',
    '\u{115c9}',
    '\u{115ca}',
    '\u{115cb}',
    '\u{115cc}',
    '\u{115cd}',
    '\u{115ce}',
    '\u{115cf}',
    '\u{115d0}',
    '\u{115d1}',
    '\u{115d2}',
    '\u{115d3}',
    '\u{115d4}',
    '\u{115d5}',
    '\u{115d6}',
    '\u{115d7}',
    '\u{11641}',
    '\u{11642}',
    '\u{1173c}',
    '\u{1173d}',
    '\u{1173e}',
    '\u{11944}',
    '\u{11946}',
    '\u{11a42}',
    '\u{11a43}',
    '\u{11a9b}',
    '\u{11a9c}',
    '\u{11c41}',
    '\u{11c42}',
    '\u{11ef7}',
    '\u{11ef8}',
    '\u{11f43}',
    '\u{11f44}',
    '\u{16a6e}',
    '\u{16a6f}',
    '\u{16af5}',
    '\u{16b37}',
    '\u{16b38}',
    '\u{16b44}',
    '\u{16e98}',
    '\u{1bc9f}',
    '\u{1da88}',
];

/// datatrove's `PUNCTUATION_SET` less [`TERMINAL`] (the set is the union of the two): ASCII
/// and CJK punctuation and control characters; a word made only of these is a "symbol".
const PUNCTUATION: &[char] = &[
    '\u{0}', '\u{1}', '\u{2}', '\u{3}', '\u{4}', '\u{5}', '\u{6}', '\u{7}', '\u{8}', '\u{b}', '\u{c}', '\u{d}', '\u{e}', '\u{f}', '\u{10}',
    '\u{11}', '\u{12}', '\u{13}', '\u{14}', '\u{15}', '\u{16}', '\u{17}', '\u{18}', '\u{19}', '\u{1a}', '\u{1b}', '\u{1c}', '\u{1d}',
    '\u{1e}', '\u{1f}', '\u{22}', '\u{23}', '\u{24}', '\u{25}', '\u{26}', '\u{27}', '\u{28}', '\u{29}', '\u{2a}', '\u{2b}', '\u{2c}',
    '\u{2d}', '\u{2f}', '\u{3a}', '\u{3b}', '\u{3c}', '\u{3d}', '\u{3e}', '\u{40}', '\u{5b}', '\u{5c}', '\u{5d}', '\u{5e}', '\u{5f}',
    '\u{60}', '\u{7b}', '\u{7c}', '\u{7d}', '\u{7e}', '\u{7f}', '\u{80}', '\u{81}', '\u{82}', '\u{83}', '\u{84}', '\u{85}', '\u{86}',
    '\u{87}', '\u{88}', '\u{89}', '\u{8a}', '\u{8b}', '\u{8c}', '\u{8d}', '\u{8e}', '\u{8f}', '\u{90}', '\u{91}', '\u{92}', '\u{93}',
    '\u{94}', '\u{95}', '\u{96}', '\u{97}', '\u{98}', '\u{99}', '\u{9a}', '\u{9b}', '\u{9c}', '\u{9d}', '\u{9e}', '\u{9f}', '\u{ab}',
    '\u{b4}', '\u{bb}', '\u{2013}', '\u{2014}', '\u{2019}', '\u{201c}', '\u{201d}', '\u{201e}', '\u{2026}', '\u{2236}', '\u{2501}',
    '\u{25ba}', '\u{3001}', '\u{3008}', '\u{3009}', '\u{300a}', '\u{300b}', '\u{300c}', '\u{300d}', '\u{3010}', '\u{3011}', '\u{ff05}',
    '\u{ff08}', '\u{ff09}', '\u{ff0c}', '\u{ff11}', '\u{ff1a}', '\u{ff1b}', '\u{ff5e}',
];

/// Whether `c` is one of datatrove's sentence-final marks.
pub fn is_terminal_punctuation(c: char) -> bool {
    TERMINAL.binary_search(&c).is_ok()
}

/// Whether `c` is one of datatrove's `PUNCTUATION` or `TERMINAL_PUNCTUATION` marks.
pub fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return ASCII_PUNCTUATION[c as usize];
    }
    PUNCTUATION.binary_search(&c).is_ok() || is_terminal_punctuation(c)
}

/// [`PUNCTUATION`] and [`TERMINAL`] below U+0080, as a table (a table, not a 128-bit set: a
/// variable `u128` shift is a library call on wasm32).
pub(crate) const ASCII_PUNCTUATION: [bool; 128] = {
    let mut set = [false; 128];
    let mut i = 0;
    while i < PUNCTUATION.len() {
        if (PUNCTUATION[i] as u32) < 128 {
            set[PUNCTUATION[i] as usize] = true;
        }
        i += 1;
    }
    let mut i = 0;
    while i < TERMINAL.len() {
        if (TERMINAL[i] as u32) < 128 {
            set[TERMINAL[i] as usize] = true;
        }
        i += 1;
    }
    set
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_punctuation_set_equals_the_tables() {
        for c in (0u8..128).map(char::from) {
            assert_eq!(is_punctuation(c), PUNCTUATION.binary_search(&c).is_ok() || is_terminal_punctuation(c), "{c:?}");
        }
    }

    #[test]
    fn tables_are_sorted_for_binary_search() {
        assert!(TERMINAL.windows(2).all(|w| w[0] < w[1]));
        assert!(PUNCTUATION.windows(2).all(|w| w[0] < w[1]));
        assert!(is_terminal_punctuation('.') && is_terminal_punctuation('。') && !is_terminal_punctuation(','));
    }
}
