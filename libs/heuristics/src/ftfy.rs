//! Text repair in the spirit of ftfy (which NeMo Curator's `UnicodeReformatter` wraps), with
//! ftfy's option names and NeMo's defaults. Not a port: our own rules, checked against
//! ftfy 6.3.1's output on the parity fixture and crafted mojibake
//! (`tests/parity/modifier_reference.jsonl`); differences are listed in
//! `tests/parity/DISAGREEMENTS.md`.
//!
//! Mojibake repair: UTF-8 text that was decoded as Windows-1252 (or Latin-1) shows up as
//! runs like `Ã©` or `â€™`. Each run of characters that map back to single bytes is
//! re-encoded, and the multi-byte UTF-8 sequences inside it are decoded, when they are
//! plausible: a sequence led by `Â`/`Ã` (the Latin-1 range) or a 3- or 4-byte sequence
//! stands alone; other 2-byte sequences (Greek, Cyrillic, Hebrew, Arabic) only in pairs, so
//! French `«CAFÉ»` stays as it is. Repeated until nothing changes (double encoding).

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

/// The fixes to apply (ftfy's `TextFixerConfig` names; defaults as NeMo's UnicodeReformatter).
#[derive(Debug, Clone, PartialEq)]
pub struct FixerConfig {
    /// `"auto"` (unescape unless the line has a `<`), `"true"` or `"false"`.
    pub unescape_html: String,
    pub remove_terminal_escapes: bool,
    pub fix_encoding: bool,
    pub restore_byte_a0: bool,
    pub fix_c1_controls: bool,
    pub fix_latin_ligatures: bool,
    pub fix_character_width: bool,
    pub uncurl_quotes: bool,
    pub fix_line_breaks: bool,
    pub remove_control_chars: bool,
    /// `NFC`, `NFD`, `NFKC`, `NFKD` or none.
    pub normalization: Option<String>,
}

impl Default for FixerConfig {
    fn default() -> Self {
        FixerConfig {
            unescape_html: "auto".into(),
            remove_terminal_escapes: true,
            fix_encoding: true,
            restore_byte_a0: true,
            fix_c1_controls: true,
            fix_latin_ligatures: false,
            fix_character_width: false,
            uncurl_quotes: false,
            fix_line_breaks: false,
            remove_control_chars: true,
            normalization: None,
        }
    }
}

/// Windows-1252's characters for bytes 0x80–0x9F (`None`: undefined, kept as the C1 control).
const CP1252_HIGH: [Option<char>; 32] = [
    Some('€'),
    None,
    Some('‚'),
    Some('ƒ'),
    Some('„'),
    Some('…'),
    Some('†'),
    Some('‡'),
    Some('ˆ'),
    Some('‰'),
    Some('Š'),
    Some('‹'),
    Some('Œ'),
    None,
    Some('Ž'),
    None,
    None,
    Some('‘'),
    Some('’'),
    Some('“'),
    Some('”'),
    Some('•'),
    Some('–'),
    Some('—'),
    Some('˜'),
    Some('™'),
    Some('š'),
    Some('›'),
    Some('œ'),
    None,
    Some('ž'),
    Some('Ÿ'),
];

/// The byte a character stands for when UTF-8 was misread as Windows-1252 or Latin-1.
fn sloppy_byte(c: char) -> Option<u8> {
    let u = c as u32;
    if u < 0x100 {
        return Some(u as u8);
    }
    CP1252_HIGH.iter().position(|&h| h == Some(c)).map(|i| 0x80 + i as u8)
}

impl FixerConfig {
    /// The repaired text.
    pub fn fix<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        for line in text.split_inclusive('\n') {
            let fixed = self.fix_line(line);
            changed |= matches!(fixed, Cow::Owned(_));
            out.push_str(&fixed);
        }
        if changed && out != text { Cow::Owned(out) } else { Cow::Borrowed(text) }
    }

    fn fix_line<'a>(&self, line: &'a str) -> Cow<'a, str> {
        let mut s = Cow::Borrowed(line);
        for _ in 0..4 {
            let before = s.clone();
            let unescape = match self.unescape_html.as_str() {
                "auto" => !s.contains('<'),
                v => v == "true",
            };
            if unescape && s.contains('&') {
                s = Cow::Owned(unescape_html_entities(&s).into_owned());
            }
            if self.remove_terminal_escapes && s.contains('\x1b') {
                s = Cow::Owned(remove_terminal_escapes(&s));
            }
            if self.fix_encoding && !s.is_ascii() {
                s = Cow::Owned(fix_encoding(&s, self.restore_byte_a0).into_owned());
            }
            if self.fix_c1_controls && s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)) {
                s = Cow::Owned(
                    s.chars()
                        .map(|c| if ('\u{80}'..='\u{9f}').contains(&c) { CP1252_HIGH[c as usize - 0x80].unwrap_or(c) } else { c })
                        .collect(),
                );
            }
            if self.fix_latin_ligatures {
                s = map_chars(s, latin_ligature);
            }
            if self.fix_character_width {
                s = map_chars(s, |c| match c {
                    '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).map(String::from),
                    '\u{3000}' => Some(" ".into()),
                    _ => None,
                });
            }
            if self.uncurl_quotes {
                s = map_chars(s, |c| match c {
                    '‘' | '’' | '‚' | '‛' => Some("'".into()),
                    '“' | '”' | '„' | '‟' => Some("\"".into()),
                    _ => None,
                });
            }
            if self.fix_line_breaks {
                if s.contains('\r') {
                    s = Cow::Owned(s.replace("\r\n", "\n").replace('\r', "\n"));
                }
                s = map_chars(s, |c| matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}').then(|| "\n".into()));
            }
            if self.remove_control_chars {
                s = map_chars(s, |c| is_removed_control(c).then(String::new));
            }
            if let Some(form) = self.normalization.as_deref() {
                let n: String = match form {
                    "NFC" => s.nfc().collect(),
                    "NFD" => s.nfd().collect(),
                    "NFKC" => s.nfkc().collect(),
                    _ => s.nfkd().collect(),
                };
                if n != *s {
                    s = Cow::Owned(n);
                }
            }
            if s == before {
                break;
            }
        }
        if s == line { Cow::Borrowed(line) } else { s }
    }
}

fn map_chars<'a>(s: Cow<'a, str>, f: impl Fn(char) -> Option<String>) -> Cow<'a, str> {
    if !s.chars().any(|c| f(c).is_some()) {
        return s;
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match f(c) {
            Some(r) => out.push_str(&r),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn latin_ligature(c: char) -> Option<String> {
    Some(
        match c {
            'Ĳ' => "IJ",
            'ĳ' => "ij",
            'ŉ' => "ʼn",
            'Ǳ' => "DZ",
            'ǲ' => "Dz",
            'ǳ' => "dz",
            'Ǆ' => "DŽ",
            'ǅ' => "Dž",
            'ǆ' => "dž",
            'Ǉ' => "LJ",
            'ǈ' => "Lj",
            'ǉ' => "lj",
            'Ǌ' => "NJ",
            'ǋ' => "Nj",
            'ǌ' => "nj",
            'ﬀ' => "ff",
            'ﬁ' => "fi",
            'ﬂ' => "fl",
            'ﬃ' => "ffi",
            'ﬄ' => "ffl",
            'ﬅ' => "ſt",
            'ﬆ' => "st",
            _ => return None,
        }
        .into(),
    )
}

/// Control characters ftfy removes: C0 controls but tab, newline, form feed and carriage
/// return; DEL; deprecated format characters; the byte-order mark; interlinear annotation.
fn is_removed_control(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b' | '\x0e'..='\x1f' | '\x7f' | '\u{206a}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffc}')
}

/// Removes ANSI terminal escapes (`ESC [ digits/semicolons letter`).
fn remove_terminal_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let params = tail.bytes().take_while(|b| b.is_ascii_digit() || *b == b';').count();
        if tail[params..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            rest = &tail[params + 1..];
        } else {
            out.push_str("\x1b[");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Named HTML entities that occur in text (Latin-1 letters and symbols, typography).
const ENTITIES: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("nbsp", '\u{a0}'),
    ("iexcl", '¡'),
    ("cent", '¢'),
    ("pound", '£'),
    ("curren", '¤'),
    ("yen", '¥'),
    ("brvbar", '¦'),
    ("sect", '§'),
    ("uml", '¨'),
    ("copy", '©'),
    ("ordf", 'ª'),
    ("laquo", '«'),
    ("not", '¬'),
    ("shy", '\u{ad}'),
    ("reg", '®'),
    ("macr", '¯'),
    ("deg", '°'),
    ("plusmn", '±'),
    ("sup2", '²'),
    ("sup3", '³'),
    ("acute", '´'),
    ("micro", 'µ'),
    ("para", '¶'),
    ("middot", '·'),
    ("cedil", '¸'),
    ("sup1", '¹'),
    ("ordm", 'º'),
    ("raquo", '»'),
    ("frac14", '¼'),
    ("frac12", '½'),
    ("frac34", '¾'),
    ("iquest", '¿'),
    ("times", '×'),
    ("divide", '÷'),
    ("szlig", 'ß'),
    ("ndash", '–'),
    ("mdash", '—'),
    ("lsquo", '‘'),
    ("rsquo", '’'),
    ("sbquo", '‚'),
    ("ldquo", '“'),
    ("rdquo", '”'),
    ("bdquo", '„'),
    ("dagger", '†'),
    ("Dagger", '‡'),
    ("bull", '•'),
    ("hellip", '…'),
    ("permil", '‰'),
    ("prime", '′'),
    ("lsaquo", '‹'),
    ("rsaquo", '›'),
    ("euro", '€'),
    ("trade", '™'),
    ("larr", '←'),
    ("rarr", '→'),
    ("uarr", '↑'),
    ("darr", '↓'),
    ("harr", '↔'),
    ("minus", '−'),
    ("infin", '∞'),
    ("ne", '≠'),
    ("le", '≤'),
    ("ge", '≥'),
    ("OElig", 'Œ'),
    ("oelig", 'œ'),
    ("Scaron", 'Š'),
    ("scaron", 'š'),
    ("Yuml", 'Ÿ'),
    ("fnof", 'ƒ'),
    ("circ", 'ˆ'),
    ("tilde", '˜'),
    ("ensp", '\u{2002}'),
    ("emsp", '\u{2003}'),
    ("thinsp", '\u{2009}'),
    ("zwnj", '\u{200c}'),
    ("zwj", '\u{200d}'),
    ("lrm", '\u{200e}'),
    ("rlm", '\u{200f}'),
];

/// Latin-1 letters by their entity stem: `&eacute;` → `é`.
fn accented(name: &str) -> Option<char> {
    let (base, accent) = name.char_indices().nth(1).map(|(i, _)| name.split_at(i))?;
    let base = base.chars().next()?;
    let combining = match accent {
        "grave" => '\u{300}',
        "acute" => '\u{301}',
        "circ" => '\u{302}',
        "tilde" => '\u{303}',
        "uml" => '\u{308}',
        "ring" => '\u{30a}',
        "cedil" => '\u{327}',
        "slash" => return matches!(base, 'o' | 'O').then_some(if base == 'o' { 'ø' } else { 'Ø' }),
        "lig" => return matches!(base, 'a' | 'A').then_some(if base == 'a' { 'æ' } else { 'Æ' }),
        _ => return None,
    };
    let composed: Vec<char> = [base, combining].into_iter().nfc().collect();
    (composed.len() == 1).then(|| composed[0])
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        // HTML maps the C1 range to Windows-1252, as browsers do.
        if (0x80..=0x9f).contains(&code) {
            return CP1252_HIGH[code as usize - 0x80].or(char::from_u32(code));
        }
        return char::from_u32(code).filter(|&c| c != '\0');
    }
    match name {
        "eth" => return Some('ð'),
        "ETH" => return Some('Ð'),
        "thorn" => return Some('þ'),
        "THORN" => return Some('Þ'),
        _ => {}
    }
    ENTITIES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c).or_else(|| accented(name))
}

/// Replaces `&name;`, `&#123;` and `&#x1F600;` (the entities of [`ENTITIES`], Latin-1 letters, numeric references).
pub fn unescape_html_entities(s: &str) -> Cow<'_, str> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut changed = false;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let name_len = tail.bytes().take(32).take_while(|b| b.is_ascii_alphanumeric() || *b == b'#').count();
        if let Some(c) = tail[name_len..].starts_with(';').then(|| entity(&tail[..name_len])).flatten() {
            out.push(c);
            rest = &tail[name_len + 1..];
            changed = true;
            continue;
        }
        out.push('&');
        rest = tail;
    }
    if !changed {
        return Cow::Borrowed(s);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Length of the UTF-8 sequence a lead byte starts (0: not a lead of a multi-byte sequence).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 0,
    }
}

/// Repairs UTF-8 that was decoded as Windows-1252 or Latin-1 (see the module docs).
fn fix_encoding(s: &str, restore_byte_a0: bool) -> Cow<'_, str> {
    let chars: Vec<char> = s.chars().collect();
    let bytes: Vec<Option<u8>> = chars.iter().map(|&c| sloppy_byte(c)).collect();
    // Candidate sequences: (start, len in chars, decoded char)
    let mut found: Vec<(usize, usize, char)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let n = bytes[i].map_or(0, utf8_len);
        if n == 0 || i + n > chars.len() {
            i += 1;
            continue;
        }
        let mut seq = Vec::with_capacity(n);
        seq.push(bytes[i].unwrap_or(0));
        for k in 1..n {
            match bytes[i + k] {
                Some(b) if (0x80..=0xBF).contains(&b) => seq.push(b),
                Some(0x20) if restore_byte_a0 && n == 2 => seq.push(0xA0),
                _ => break,
            }
        }
        match std::str::from_utf8(&seq).ok().filter(|_| seq.len() == n).and_then(|d| d.chars().next()) {
            Some(c) => {
                found.push((i, n, c));
                i += n;
            }
            None => i += 1,
        }
    }
    if found.is_empty() {
        return Cow::Borrowed(s);
    }
    let strong = |&(start, n, _): &(usize, usize, char)| n >= 3 || matches!(bytes[start], Some(0xC2 | 0xC3));
    let has_strong_non_space = found.iter().any(|f| strong(f) && !chars[f.0 + 1..f.0 + f.1].contains(&' '));
    let accept: Vec<bool> = found
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let uses_space = chars[f.0 + 1..f.0 + f.1].contains(&' ');
            if uses_space {
                // a space read as a no-break space: only with other evidence of mojibake
                return has_strong_non_space;
            }
            if strong(f) {
                return true;
            }
            // other 2-byte sequences: only next to another one
            let adjacent = |o: Option<&(usize, usize, char)>| o.is_some_and(|o| o.0 + o.1 == f.0 || f.0 + f.1 == o.0);
            adjacent(k.checked_sub(1).and_then(|j| found.get(j))) || adjacent(found.get(k + 1))
        })
        .collect();
    if !accept.iter().any(|&a| a) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for (f, ok) in found.iter().zip(&accept) {
        if !ok {
            continue;
        }
        out.extend(&chars[at..f.0]);
        out.push(f.2);
        at = f.0 + f.1;
    }
    out.extend(&chars[at..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_mojibake_and_leaves_real_text() {
        let f = FixerConfig::default();
        for (bad, good) in [
            ("cafÃ© Ã¼ber donâ€™t", "café über don’t"),
            ("ÃƒÂ©tÃƒÂ©", "été"),
            ("Ã  la carte, Â£5", "à la carte, £5"),
            ("ðŸ˜€", "😀"),
            ("5â‚¬", "5€"),
            ("Tom &amp; Jerry &eacute;t&eacute; &#x2014;", "Tom & Jerry été —"),
            ("<b>&amp;</b>", "<b>&amp;</b>"),
            ("\x1b[31mred\x1b[0m", "red"),
            ("a\x00b\u{feff}c", "abc"),
            ("\u{93}q\u{94}", "“q”"),
        ] {
            assert_eq!(f.fix(bad), good, "{bad:?}");
        }
        for real in ["café, naïve, São Paulo, Ærøskøbing, ½ cup, ±5 °C", "«CAFÉ»", "IRMÃ E", "Ã alone"] {
            assert_eq!(f.fix(real), real);
        }
    }
}
