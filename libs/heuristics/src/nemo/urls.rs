//! NeMo's URL pattern (`regex_url`), scanned by hand: the URLs of a text, left to right.

/// Matches of NeMo's `regex_url`
/// (`https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+`), left to right,
/// as byte ranges.
pub fn urls(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let allowed = |c: u8| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'$' | b'-' | b'_' | b'@' | b'.' | b'&' | b'+' | b'/' | b':' | b'=' | b'?' | b'#' | b'~' | b'!' | b'*' | b'(' | b')' | b','
            )
    };
    let mut out = Vec::new();
    let mut i = 0;
    static HTTP: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
    let finder = HTTP.get_or_init(|| memchr::memmem::Finder::new(b"http"));
    while i < b.len() {
        match finder.find(&b[i..]) {
            Some(k) => i += k,
            None => break,
        }
        let rest = &b[i..];
        let scheme = if rest.starts_with(b"https://") {
            8
        } else if rest.starts_with(b"http://") {
            7
        } else {
            i += 1;
            continue;
        };
        let mut j = i + scheme;
        loop {
            if j < b.len() && allowed(b[j]) {
                j += 1;
            } else if j + 2 < b.len() && b[j] == b'%' && b[j + 1].is_ascii_hexdigit() && b[j + 2].is_ascii_hexdigit() {
                j += 3;
            } else {
                break;
            }
        }
        if j > i + scheme {
            out.push(&text[i..j]);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}
