//! NeMo Curator's code filters (`nemo_curator.stages.text.filters.heuristic.code`, 1.4.0),
//! plus SubstringFilter: same scores and keep rules, checked against NeMo's own classes on real
//! source files (`tests/parity/code_reference.jsonl`, made by
//! `scripts/parity/make_code_reference.py`).
//!
//! NeMo finds Python comments and docstrings with Python's own tokenizer and parser, and other
//! languages' comments with the `comment_parser` package; we lex the source ourselves with the
//! same rules. Python files that Python itself would reject for reasons other than an
//! unterminated string or bracket (NeMo scores those 0) are beyond a lexer: see
//! `tests/parity/DISAGREEMENTS.md`.

use std::collections::HashMap;

use crate::py;

/// NumberOfLinesOfCodeFilter's score: newlines + 1.
pub fn number_of_lines(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count() + 1
}

/// XMLHeaderFilter's score: 1 when `<?xml version=` starts within the first `prefix` characters.
pub fn xml_header(text: &str, prefix: usize) -> f64 {
    let end = text.char_indices().nth(prefix).map_or(text.len(), |(i, _)| i);
    f64::from(u8::from(text[..end].contains("<?xml version=")))
}

/// AlphaFilter's score: share of alphabetic characters (0 for an empty text; NeMo divides by zero).
pub fn alpha_ratio(text: &str) -> f64 {
    let (mut n, mut alpha) = (0usize, 0usize);
    for c in text.chars() {
        n += 1;
        alpha += usize::from(c.is_alphabetic());
    }
    if n == 0 { 0.0 } else { alpha as f64 / n as f64 }
}

/// SubstringFilter: whether `substring` occurs at `position` (`prefix`, `suffix` or `any`).
pub fn has_substring(text: &str, substring: &str, position: &str) -> bool {
    match position {
        "prefix" => text.starts_with(substring),
        "suffix" => text.ends_with(substring),
        _ => text.contains(substring),
    }
}

// ---------------------------------------------------------------------------------------------
// Python

/// Comments and docstrings of Python source, as NeMo's `get_comments_and_docstring` measures
/// them, or `None` where Python's tokenizer would fail (an unterminated string or bracket).
#[derive(Debug, Clone, PartialEq)]
pub struct PythonText {
    /// Characters of all comments, `#` included.
    pub comment_chars: usize,
    /// The docstrings (module, classes, functions), cleaned as `inspect.cleandoc` does.
    pub docstrings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str { raw: bool, fstring: bool, bytes: bool, body: String },
    Op(char),
    Name(String),
    Other,
}

struct Line {
    indent: usize,
    toks: Vec<Tok>,
}

/// Splits Python source into logical lines of tokens; `None` on an unterminated string or
/// an unclosed bracket at the end.
fn python_lines(src: &str, comment_chars: &mut usize) -> Option<Vec<Line>> {
    let chars: Vec<char> = src.chars().collect();
    let mut lines = Vec::new();
    let mut cur: Vec<Tok> = Vec::new();
    let (mut depth, mut i, mut indent, mut at_line_start) = (0usize, 0usize, 0usize, true);
    while i < chars.len() {
        let c = chars[i];
        if at_line_start {
            let mut col = 0;
            while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\x0c') {
                col = if chars[i] == '\t' { (col / 8 + 1) * 8 } else { col + 1 };
                i += 1;
            }
            indent = col;
            at_line_start = false;
            continue;
        }
        match c {
            '#' => {
                let start = i;
                while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                    i += 1;
                }
                *comment_chars += i - start;
            }
            '\n' | '\r' => {
                i += 1;
                if c == '\r' && chars.get(i) == Some(&'\n') {
                    i += 1;
                }
                if depth == 0 {
                    if !cur.is_empty() {
                        lines.push(Line { indent, toks: std::mem::take(&mut cur) });
                    }
                    at_line_start = true;
                }
            }
            '\\' if matches!(chars.get(i + 1), Some('\n' | '\r')) => {
                i += 2;
                if c == '\\' && chars.get(i - 1) == Some(&'\r') && chars.get(i) == Some(&'\n') {
                    i += 1;
                }
            }
            ' ' | '\t' | '\x0c' => i += 1,
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(Tok::Op(c));
                i += 1;
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                cur.push(Tok::Op(c));
                i += 1;
            }
            '"' | '\'' => {
                let (tok, next) = python_string(&chars, i, "")?;
                cur.push(tok);
                i = next;
            }
            _ if c.is_alphanumeric() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if i < chars.len() && matches!(chars[i], '"' | '\'') && word.len() <= 3 && word.chars().all(|p| "rRbBuUfF".contains(p)) {
                    let (tok, next) = python_string(&chars, i, &word)?;
                    cur.push(tok);
                    i = next;
                } else {
                    cur.push(if word.starts_with(|d: char| d.is_ascii_digit()) { Tok::Other } else { Tok::Name(word) });
                }
            }
            ':' | ';' | '.' | ',' | '=' | '@' => {
                cur.push(Tok::Op(c));
                i += 1;
            }
            _ => {
                cur.push(Tok::Other);
                i += 1;
            }
        }
    }
    if depth > 0 {
        return None;
    }
    if !cur.is_empty() {
        lines.push(Line { indent, toks: cur });
    }
    Some(lines)
}

/// A string literal starting at `chars[at]` (a quote) with `prefix` letters before it.
fn python_string(chars: &[char], at: usize, prefix: &str) -> Option<(Tok, usize)> {
    let q = chars[at];
    let triple = chars.get(at + 1) == Some(&q) && chars.get(at + 2) == Some(&q);
    let lower = prefix.to_ascii_lowercase();
    let raw = lower.contains('r');
    let mut i = at + if triple { 3 } else { 1 };
    let start = i;
    loop {
        let c = *chars.get(i)?;
        if c == '\\' {
            i += 2;
            continue;
        }
        if !triple && (c == '\n' || c == '\r') {
            return None;
        }
        if c == q && (!triple || (chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q))) {
            let body: String = chars[start..i].iter().collect();
            let end = i + if triple { 3 } else { 1 };
            return Some((Tok::Str { raw, fstring: lower.contains('f'), bytes: lower.contains('b'), body }, end));
        }
        i += 1;
    }
}

/// The value of a (non-raw) string body: Python's escapes.
fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut it = body.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('\n') => {}
            Some('\r') => {
                if it.peek() == Some(&'\n') {
                    it.next();
                }
            }
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match it.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            it.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            Some(k @ ('x' | 'u' | 'U')) => {
                let n = match k {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = (0..n).filter_map(|_| it.next()).collect();
                out.push(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32).unwrap_or('\u{fffd}'));
            }
            Some('N') if it.peek() == Some(&'{') => {
                for c in it.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                out.push('\u{fffd}');
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `inspect.cleandoc`.
fn cleandoc(doc: &str) -> String {
    let expanded: Vec<String> = doc.split('\n').map(expandtabs).collect();
    let mut margin = usize::MAX;
    for line in expanded.iter().skip(1) {
        let content = line.trim_start_matches(py::is_py_space).chars().count();
        if content > 0 {
            margin = margin.min(line.chars().count() - content);
        }
    }
    let mut lines: Vec<String> = Vec::with_capacity(expanded.len());
    for (k, line) in expanded.iter().enumerate() {
        if k == 0 {
            lines.push(line.trim_start_matches(py::is_py_space).to_string());
        } else if margin < usize::MAX {
            lines.push(line.chars().skip(margin).collect());
        } else {
            lines.push(line.clone());
        }
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let first = lines.iter().position(|l| !l.is_empty()).unwrap_or(lines.len());
    lines[first..].join("\n")
}

fn expandtabs(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let n = 8 - col % 8;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            out.push(c);
            col = if c == '\n' || c == '\r' { 0 } else { col + 1 };
        }
    }
    out
}

/// A docstring candidate: a logical line that is one string literal (or several, implicitly
/// concatenated), not an f-string or bytes.
fn docstring_of(toks: &[Tok]) -> Option<String> {
    let toks = match toks.last() {
        Some(Tok::Op(';')) => &toks[..toks.len() - 1],
        _ => toks,
    };
    if toks.is_empty() {
        return None;
    }
    let mut value = String::new();
    for t in toks {
        match t {
            Tok::Str { raw, fstring: false, bytes: false, body } => value.push_str(&if *raw { body.clone() } else { unescape(body) }),
            _ => return None,
        }
    }
    Some(value)
}

/// NeMo's comments and docstrings of Python `src`.
pub fn python_text(src: &str) -> Option<PythonText> {
    let mut comment_chars = 0;
    let lines = python_lines(src, &mut comment_chars)?;
    let mut docstrings = Vec::new();
    // NeMo counts modules, classes and (plain, not `async`) functions.
    let is_header = |toks: &[Tok]| matches!(toks.first(), Some(Tok::Name(n)) if n == "def" || n == "class");
    for (k, line) in lines.iter().enumerate() {
        if k == 0
            && let Some(d) = docstring_of(&line.toks)
        {
            docstrings.push(d);
        }
        if !is_header(&line.toks) {
            continue;
        }
        // The header's colon at bracket depth 0: a body on the same line, or the next line.
        let mut depth = 0i32;
        let colon = line.toks.iter().position(|t| {
            match t {
                Tok::Op('(' | '[' | '{') => depth += 1,
                Tok::Op(')' | ']' | '}') => depth -= 1,
                _ => {}
            }
            depth == 0 && *t == Tok::Op(':')
        });
        let Some(colon) = colon else { continue };
        let same_line = &line.toks[colon + 1..];
        if !same_line.is_empty() {
            // `def f(): "doc"; x = 1`: the first simple statement
            let end = same_line.iter().position(|t| *t == Tok::Op(';')).map_or(same_line.len(), |p| p + 1);
            if let Some(d) = docstring_of(&same_line[..end]) {
                docstrings.push(d);
            }
        } else if let Some(d) = lines.get(k + 1).filter(|n| n.indent > line.indent).and_then(|next| docstring_of(&next.toks)) {
            docstrings.push(d);
        }
    }
    let docstrings = docstrings.iter().map(|d| cleandoc(d)).filter(|d| !d.is_empty()).collect();
    Some(PythonText { comment_chars, docstrings })
}

/// PythonCommentToCodeFilter's score: characters of comments and docstrings per character.
pub fn python_comment_ratio(src: &str) -> f64 {
    let Some(t) = python_text(src) else { return 0.0 };
    let doc_chars: usize = t.docstrings.iter().map(|d| py::len(d)).sum::<usize>() + t.docstrings.len().saturating_sub(1);
    let n = py::len(src);
    if n == 0 { 0.0 } else { (t.comment_chars + doc_chars) as f64 / n as f64 }
}

// ---------------------------------------------------------------------------------------------
// Other languages (comment_parser's rules)

/// Comment texts of `src` for a MIME type comment_parser knows; `Err` for an unterminated
/// comment (NeMo then scores 9999) or an unknown type.
pub fn comments(src: &str, mime: &str) -> Result<Vec<String>, String> {
    match mime {
        "text/x-c" | "text/x-c++" | "text/x-java" | "text/x-java-source" => c_comments(src),
        "application/javascript" | "text/x-javascript" => slash_comments(src, &['"', '\'']),
        "text/x-go" => slash_comments(src, &['"', '\'', '`']),
        "text/x-shellscript" => Ok(shell_comments(src)),
        "text/html" | "text/xml" => html_comments(src),
        "text/x-ruby" => Ok(ruby_comments(src)),
        "text/x-python" | "text/x-script.python" => python_comment_texts(src),
        other => Err(format!("unsupported MIME type {other:?}")),
    }
}

/// GeneralCommentToCodeFilter's score: characters of comment text (joined by spaces) per
/// character; 9999 where comment_parser raises.
pub fn comment_ratio(src: &str, mime: &str) -> f64 {
    match comments(src, mime) {
        Ok(c) => {
            let joined: usize = c.iter().map(|t| py::len(t)).sum::<usize>() + c.len().saturating_sub(1);
            joined as f64 / py::len(src) as f64
        }
        Err(_) => 9999.0,
    }
}

/// C family: a `"…"` literal (no newline inside) hides comment marks; `//` to end of line;
/// `/* … */`; an unterminated `/*` is an error. Single quotes are not literals here.
fn c_comments(src: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => match src[i + 1..].find(['"', '\n']) {
                Some(k) if b[i + 1 + k] == b'"' => i += k + 2,
                _ => i += 1,
            },
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(src.len(), |k| i + k);
                out.push(src[i + 2..end].to_string());
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => match src[i + 2..].find("*/") {
                Some(k) => {
                    out.push(src[i + 2..i + 2 + k].to_string());
                    i += k + 4;
                }
                None => return Err("unterminated comment".into()),
            },
            _ => i += 1,
        }
    }
    Ok(out)
}

/// JavaScript and Go (comment_parser's state machine, quirks included: the character after a
/// lone `/` is not looked at again).
fn slash_comments(src: &str, quotes: &[char]) -> Result<Vec<String>, String> {
    let (mut state, mut quote, mut cur, mut out) = (0u8, '"', String::new(), Vec::new());
    for c in src.chars() {
        match state {
            0 if c == '/' => state = 1,
            0 if quotes.contains(&c) => {
                quote = c;
                state = 5;
            }
            1 => {
                state = match c {
                    '/' => 2,
                    '*' => 3,
                    _ => 0,
                }
            }
            2 if c == '\n' => {
                out.push(std::mem::take(&mut cur));
                state = 0;
            }
            2 => cur.push(c),
            3 if c == '*' => state = 4,
            3 => cur.push(c),
            4 if c == '/' => {
                out.push(std::mem::take(&mut cur));
                state = 0;
            }
            4 => {
                cur.push('*');
                if c != '*' {
                    cur.push(c);
                    state = 3;
                }
            }
            5 if c == quote => state = 0,
            5 if c == '\\' => state = 6,
            6 => state = 5,
            _ => {}
        }
    }
    match state {
        3 | 4 => Err("unterminated comment".into()),
        2 => {
            out.push(cur);
            Ok(out)
        }
        _ => Ok(out),
    }
}

fn shell_comments(src: &str) -> Vec<String> {
    let (mut state, mut quote, mut cur, mut out) = (0u8, '"', String::new(), Vec::new());
    for c in src.chars() {
        match state {
            0 if c == '#' => state = 1,
            0 if c == '"' || c == '\'' => {
                quote = c;
                state = 2;
            }
            0 if c == '\\' => state = 4,
            1 if c == '\n' => {
                out.push(std::mem::take(&mut cur));
                state = 0;
            }
            1 => cur.push(c),
            2 if c == quote => state = 0,
            2 if c == '\\' => state = 3,
            3 => state = 2,
            4 => state = 0,
            _ => {}
        }
    }
    if state == 1 {
        out.push(cur);
    }
    out
}

/// HTML/XML: `<!-- … -->`; a `"…"` literal without newlines hides them; unterminated is an error.
fn html_comments(src: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            match src[i + 1..].find(['"', '\n']) {
                Some(k) if b[i + 1 + k] == b'"' => i += k + 2,
                _ => i += 1,
            }
        } else if b[i..].starts_with(b"<!--") {
            match src[i + 4..].find("-->") {
                Some(k) => {
                    out.push(src[i + 4..i + 4 + k].to_string());
                    i += k + 7;
                }
                None => return Err("unterminated comment".into()),
            }
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// Ruby: `#` to end of line, outside `"…"`/`'…'` literals on one line.
fn ruby_comments(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in src.split('\n') {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '"' || c == '\'' {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != c {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = if j < chars.len() { j + 1 } else { i + 1 };
            } else if c == '#' {
                out.push(chars[i + 1..].iter().collect());
                break;
            } else {
                i += 1;
            }
        }
    }
    out
}

fn python_comment_texts(src: &str) -> Result<Vec<String>, String> {
    let mut n = 0;
    python_lines(src, &mut n).ok_or("tokenize error")?;
    // Comments are what the lexer skipped: collect them in a second, simpler pass.
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' => {
                let (_, next) = python_string(&chars, i, "").ok_or("tokenize error")?;
                i = next;
            }
            '#' => {
                let start = i + 1;
                while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                    i += 1;
                }
                out.push(chars[start..i].iter().collect());
            }
            _ => i += 1,
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// HTML

/// HTMLBoilerplateFilter's score: characters of visible text (scripts and styles removed,
/// entities decoded) per character of HTML; 0 when under `min_chars` of text.
pub fn html_content_ratio(src: &str, min_chars: usize) -> f64 {
    let text = html_text(src);
    let n = py::len(&text);
    if n < min_chars {
        return 0.0;
    }
    n as f64 / py::len(src) as f64
}

/// The text of an HTML document as BeautifulSoup's `get_text()` gives it after removing
/// `<script>` and `<style>` elements: tags, comments, doctype and processing instructions
/// removed; character references decoded; a text node of ASCII whitespace only becomes one
/// newline (or one space, without a newline), except inside `<pre>` and `<textarea>`.
pub fn html_text(src: &str) -> String {
    let mut out = String::with_capacity(src.len() / 2);
    let lower = src.to_ascii_lowercase();
    let mut preserve = 0usize;
    let mut i = 0;
    let text_node = |out: &mut String, s: &str, preserve: usize| {
        if s.is_empty() {
            return;
        }
        if preserve == 0 && s.bytes().all(|b| matches!(b, b' ' | b'\n' | b'\t' | b'\x0c' | b'\r')) {
            out.push(if s.contains('\n') { '\n' } else { ' ' });
        } else {
            push_decoded(out, s);
        }
    };
    let mut pending = String::new();
    while i < src.len() {
        let Some(k) = src[i..].find('<') else {
            pending.push_str(&src[i..]);
            break;
        };
        pending.push_str(&src[i..i + k]);
        i += k;
        let rest = &src[i..];
        let next = rest[1..].chars().next();
        if !next.is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!' || c == '?') {
            pending.push('<');
            i += 1;
            continue;
        }
        text_node(&mut out, &pending, preserve);
        pending.clear();
        if rest.starts_with("<!--") {
            i = rest.find("-->").map_or(src.len(), |e| i + e + 3);
            continue;
        }
        let end = tag_end(rest).map_or(src.len(), |e| i + e + 1);
        let closing = rest.starts_with("</");
        let name: String =
            rest[if closing { 2 } else { 1 }..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
        i = end;
        if name == "pre" || name == "textarea" {
            if closing {
                preserve = preserve.saturating_sub(1);
            } else if !src[..end].ends_with("/>") {
                preserve += 1;
            }
        }
        if !closing && (name == "script" || name == "style") {
            let close = format!("</{name}");
            i = lower[i..].find(&close).map_or(src.len(), |e| {
                let at = i + e;
                tag_end(&src[at..]).map_or(src.len(), |t| at + t + 1)
            });
        }
    }
    text_node(&mut out, &pending, preserve);
    out
}

/// The index of the `>` closing the tag at the start of `s`, skipping quoted attribute values
/// (a quote counts only right after `=`, as in Python's html.parser).
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    let mut after_eq = false;
    for (i, c) in s.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') if after_eq => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
        if quote.is_none() && !c.is_whitespace() {
            after_eq = c == '=';
        }
    }
    None
}

fn push_decoded(out: &mut String, s: &str) {
    if !s.contains('&') {
        out.push_str(s);
        return;
    }
    out.push_str(&crate::ftfy::unescape_html_entities(s));
}

// ---------------------------------------------------------------------------------------------
// Per extension

/// One row of PerExtensionFilter's metadata CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionRule {
    pub include: bool,
    pub line_max: Option<i64>,
    pub line_mean: Option<i64>,
    pub alphanum_frac: Option<f64>,
    pub alphabetic_frac: Option<f64>,
}

/// Rules by (language, extension), from the CSV's columns `language`, `extension`, `Include`,
/// `Long_line_threshold`, `Alphanum_threshold` and `Alpha filter` (rows of `language` only,
/// when given).
pub fn load_extension_rules(csv: &str, language: Option<&str>) -> Result<HashMap<(String, String), ExtensionRule>, String> {
    let mut rows = csv_records(csv).into_iter();
    let header = rows.next().ok_or("the metadata file is empty")?;
    let col = |name: &str| header.iter().position(|h| h == name).ok_or(format!("the metadata file has no column {name:?}"));
    let (lang, ext, inc, long, alnum, alpha) = (
        col("language")?,
        col("extension")?,
        col("Include")?,
        col("Long_line_threshold")?,
        col("Alphanum_threshold")?,
        col("Alpha filter")?,
    );
    let mut out = HashMap::new();
    for row in rows {
        let get = |k: usize| row.get(k).map(String::as_str).unwrap_or("");
        if language.is_some_and(|l| l != get(lang)) {
            continue;
        }
        let line_max = get(long).trim().parse::<i64>().ok();
        let rule = ExtensionRule {
            include: get(inc) == "1",
            line_max,
            line_mean: line_max.filter(|&m| m != 0).map(|_| 100),
            alphanum_frac: get(alnum).trim().parse().ok(),
            alphabetic_frac: get(alpha).trim().parse().ok(),
        };
        out.insert((get(lang).to_string(), get(ext).to_string()), rule);
    }
    if out.is_empty() {
        return Err(format!("no filtering rules for language {:?} in the metadata file", language.unwrap_or("")));
    }
    Ok(out)
}

/// CSV records (RFC 4180: quoted fields may hold commas, quotes and newlines).
fn csv_records(csv: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut row = vec![String::new()];
    let mut quoted = false;
    let mut chars = csv.chars().peekable();
    while let Some(c) = chars.next() {
        let field = row.last_mut().expect("a row has a field");
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => row.push(String::new()),
            '\r' if !quoted => {}
            '\n' if !quoted => records.push(std::mem::replace(&mut row, vec![String::new()])),
            _ => field.push(c),
        }
    }
    if row.len() > 1 || !row[0].is_empty() {
        records.push(row);
    }
    records
}

/// NeMo's language name as the CSV spells it (`C#` → `c-sharp`, `Visual Basic` → `visual-basic`).
pub fn csv_language(lang: &str) -> String {
    match lang {
        "C#" => "c-sharp".into(),
        "F#" => "f-sharp".into(),
        _ => lang.to_lowercase().replace(' ', "-"),
    }
}

/// PerExtensionFilter's score: 1 to keep, 0 to drop.
pub fn per_extension_score(src: &str, rule: Option<&ExtensionRule>) -> f64 {
    let Some(r) = rule.filter(|r| r.include) else { return 0.0 };
    let n = py::len(src);
    let lengths: Vec<usize> = src.split('\n').map(py::len).collect();
    let max_len = lengths.iter().copied().max().unwrap_or(0) as i64;
    let mean_len = (n as f64 + 1.0) / lengths.len() as f64 - 1.0;
    let alnum = || src.chars().filter(|c| c.is_ascii_alphanumeric() || "\n?!,.".contains(*c)).count() as f64 / n as f64;
    let alpha = || src.chars().filter(|c| c.is_alphabetic()).count() as f64;
    let drop = r.line_max.is_some_and(|m| m != 0 && max_len > m)
        || r.line_mean.is_some_and(|m| m != 0 && mean_len > m as f64)
        || r.alphanum_frac.is_some_and(|f| f != 0.0 && alnum() < f)
        || r.alphabetic_frac.is_some_and(|f| f != 0.0 && alpha() < f * n as f64);
    if drop { 0.0 } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_comments_and_docstrings() {
        let src = "\"\"\"Module doc.\"\"\"\n# a comment\ndef f(x):\n    '''Function\n       doc.'''\n    return x  # trailing\nclass C: 'inline'\ns = \"# not a comment\"\n";
        let t = python_text(src).unwrap();
        assert_eq!(t.comment_chars, "# a comment".len() + "# trailing".len());
        assert_eq!(t.docstrings, ["Module doc.", "Function\ndoc.", "inline"]);
        assert_eq!(python_text("x = (1,\n"), None);
        assert_eq!(python_text("s = '''open\n"), None);
    }

    #[test]
    fn comment_parsers() {
        assert_eq!(comments("int a; // one\n/* two\n */ char *s = \"// no\";", "text/x-c").unwrap(), [" one", " two\n "]);
        assert!(comments("/* open", "text/x-c").is_err());
        assert_eq!(comments("echo '#no' # yes\n", "text/x-shellscript").unwrap(), [" yes"]);
        assert_eq!(comments("<p>x</p><!-- c -->", "text/html").unwrap(), [" c "]);
        assert_eq!(comments("let s = `//no`; // yes", "text/x-go").unwrap(), [" yes"]);
    }

    #[test]
    fn html_text_drops_scripts_and_tags() {
        assert_eq!(
            html_text(
                "<html><head><style>p{}</style><script>var a='<b>';</script></head><body><p>Hi &amp; bye</p><!-- x --></body></html>"
            ),
            "Hi & bye"
        );
    }
}
