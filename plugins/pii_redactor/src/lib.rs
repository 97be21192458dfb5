//! PII redaction: finds emails, phone numbers, IPv4 and IPv6 addresses, credit card numbers
//! (Luhn-checked, known issuer prefixes), US social security numbers (valid area, group and
//! serial) and IBANs (mod-97-checked), and replaces each match with `replacement`
//! (`{type}` becomes the entity's name in capitals: `<EMAIL>`). Nothing outside a match
//! changes. Candidates are found with patterns, then validated, so version numbers, dates and
//! ISBNs are left alone.

use std::net::Ipv6Addr;
use std::sync::OnceLock;

use curator_sdk::prelude::*;
use regex_lite::Regex;

/// The entity kinds, in the order overlapping matches are resolved (earlier wins).
pub const ENTITIES: [&str; 7] = ["email", "iban", "credit_card", "us_ssn", "ipv6", "ipv4", "phone"];

/// Redacts personal data in `text`.
#[stage(name = "pii_redactor", cpus = 1.0, memory_mb = 128)]
pub struct PiiRedactor {
    /// Which kinds to redact: email, phone, ipv4, ipv6, credit_card, us_ssn, iban (default: all).
    #[param(default = ["email", "phone", "ipv4", "ipv6", "credit_card", "us_ssn", "iban"])]
    pub entities: Vec<String>,
    /// What replaces a match; `{type}` becomes EMAIL, PHONE, IPV4, IPV6, CREDIT_CARD, US_SSN or IBAN.
    #[param(default = "<{type}>")]
    pub replacement: String,
}

struct Patterns {
    email: Regex,
    phone: Regex,
    ipv4: Regex,
    ipv6: Regex,
    card: Regex,
    ssn: Regex,
    iban: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("pattern {p}: {e}"));
        Patterns {
            email: re(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
            phone: re(r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,4}|\+\d{7,14}"),
            ipv4: re(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"),
            ipv6: re(r"[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*"),
            card: re(r"\d(?:[ -]?\d){12,18}"),
            ssn: re(r"\d{3}-\d{2}-\d{4}"),
            iban: re(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}"),
        }
    })
}

/// Whether the match `[s, e)` stands alone: not glued to letters, digits or (for dotted and
/// dashed forms) further dots and dashes.
fn isolated(text: &str, s: usize, e: usize) -> bool {
    let before = text[..s].chars().next_back();
    let after = text[e..].chars().next();
    let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let dotted =
        |c: Option<char>, next: Option<char>| matches!(c, Some('.' | '-' | ':')) && next.is_some_and(|n| n.is_ascii_alphanumeric());
    !glued(before)
        && !glued(after)
        && !dotted(before, before.and(text[..s].chars().rev().nth(1)))
        && !dotted(after, text[e..].chars().nth(1))
}

/// Whether a number continues past the match through a separator (`4111 1111 1111 1112`
/// is not a phone number followed by 1112).
fn number_continues(text: &str, s: usize, e: usize) -> bool {
    let sep = |c: Option<char>| matches!(c, Some(' ' | '-' | '.' | '/'));
    let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
    let mut before = text[..s].chars().rev();
    let mut after = text[e..].chars();
    let (b1, b2) = (before.next(), before.next());
    let (a1, a2) = (after.next(), after.next());
    (sep(b1) && digit(b2)) || (sep(a1) && digit(a2))
}

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

/// The Luhn checksum of a card number.
pub fn luhn(d: &[u32]) -> bool {
    let sum: u32 = d.iter().rev().enumerate().map(|(i, &x)| if i % 2 == 1 { if x * 2 > 9 { x * 2 - 9 } else { x * 2 } } else { x }).sum();
    sum.is_multiple_of(10)
}

fn card_prefix_ok(d: &[u32]) -> bool {
    // Visa 4, Mastercard 51–55 and 2221–2720, Amex 34/37, Discover 6011/64–65, JCB 35, Diners 36/38/30.
    let p2 = d[0] * 10 + d[1];
    let p4 = p2 * 100 + d[2] * 10 + d[3];
    d[0] == 4 || (51..=55).contains(&p2) || (2221..=2720).contains(&p4) || matches!(p2, 34 | 37 | 35 | 36 | 38 | 30 | 64 | 65) || p4 == 6011
}

/// IBAN check: move the first four characters to the end, letters to numbers, mod 97 == 1.
pub fn iban_ok(s: &str) -> bool {
    let c: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&c.len()) {
        return false;
    }
    let mut rem: u32 = 0;
    for ch in c[4..].iter().chain(&c[..4]) {
        let v = match ch.to_digit(36) {
            Some(v) => v,
            None => return false,
        };
        rem = if v < 10 { (rem * 10 + v) % 97 } else { (rem * 100 + v) % 97 };
    }
    rem == 1
}

fn ssn_ok(s: &str) -> bool {
    let d = digits(s);
    let area = d[0] * 100 + d[1] * 10 + d[2];
    let group = d[3] * 10 + d[4];
    let serial = d[5..].iter().fold(0, |a, x| a * 10 + x);
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// `(start, end, kind)` of every entity found in `text`, non-overlapping, in text order.
pub fn find(text: &str, kinds: &[String]) -> Vec<(usize, usize, &'static str)> {
    let p = patterns();
    let mut found: Vec<(usize, usize, &'static str)> = Vec::new();
    let want = |k: &str| kinds.iter().any(|x| x == k);
    for kind in ENTITIES {
        if !want(kind) {
            continue;
        }
        let (re, check): (&Regex, &dyn Fn(&str) -> bool) = match kind {
            "email" => (&p.email, &|_| true),
            "iban" => (&p.iban, &iban_ok),
            "credit_card" => (&p.card, &|m| {
                let d = digits(m);
                (13..=19).contains(&d.len()) && card_prefix_ok(&d) && luhn(&d)
            }),
            "us_ssn" => (&p.ssn, &ssn_ok),
            "ipv6" => (&p.ipv6, &|m| m.matches(':').count() >= 2 && m.parse::<Ipv6Addr>().is_ok()),
            "ipv4" => (&p.ipv4, &|m| m.split('.').all(|o| o.parse::<u8>().is_ok() && (o == "0" || !o.starts_with('0')))),
            _ => (&p.phone, &|m| (9..=15).contains(&digits(m).len())),
        };
        for m in re.find_iter(text) {
            let (s, e) = (m.start(), m.end());
            let numeric = matches!(kind, "phone" | "credit_card" | "us_ssn" | "ipv4");
            if !isolated(text, s, e) || (numeric && number_continues(text, s, e)) || !check(m.as_str()) {
                continue;
            }
            if found.iter().any(|&(fs, fe, _)| s < fe && fs < e) {
                continue; // an earlier kind already took (part of) it
            }
            found.push((s, e, kind));
        }
    }
    found.sort_by_key(|f| f.0);
    found
}

/// `text` with every entity replaced.
pub fn redact(text: &str, kinds: &[String], replacement: &str) -> String {
    let found = find(text, kinds);
    if found.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (s, e, kind) in found {
        out.push_str(&text[at..s]);
        out.push_str(&replacement.replace("{type}", &kind.to_ascii_uppercase()));
        at = e;
    }
    out.push_str(&text[at..]);
    out
}

impl Map for PiiRedactor {
    fn init(&mut self) -> Result<(), StageError> {
        if let Some(bad) = self.entities.iter().find(|e| !ENTITIES.contains(&e.as_str())) {
            return Err(StageError::InvalidParams(format!("entities: unknown kind {bad:?} (known: {})", ENTITIES.join(", "))));
        }
        Ok(())
    }
    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        let t = doc.text();
        if find(t, &self.entities).is_empty() { Cow::Borrowed(t) } else { Cow::Owned(redact(t, &self.entities, &self.replacement)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<String> {
        ENTITIES.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn true_positives() {
        let cases = [
            ("Mail jane.doe+news@example.co.uk today", "Mail <EMAIL> today"),
            ("Call (415) 555-0132 or +44 20 7946 0958.", "Call <PHONE> or <PHONE>."),
            ("Call 415-555-0132, or 415.555.0132", "Call <PHONE>, or <PHONE>"),
            ("Server 192.168.0.1 and 8.8.8.8.", "Server <IPV4> and <IPV4>."),
            ("v6 2001:db8::8a2e:370:7334 and ::1 and fe80::1%", "v6 <IPV6> and <IPV6> and <IPV6>%"),
            ("Card 4111 1111 1111 1111 exp", "Card <CREDIT_CARD> exp"),
            ("Amex 3782-822463-10005.", "Amex <CREDIT_CARD>."),
            ("SSN 123-45-6789.", "SSN <US_SSN>."),
            ("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN <IBAN> please"),
            ("IBAN GB82WEST12345698765432.", "IBAN <IBAN>."),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input, &all(), "<{type}>"), want, "{input}");
        }
    }

    #[test]
    fn tricky_negatives_are_left_alone() {
        for text in [
            "Python 3.12.1 and version 1.2.3.4.5 released",
            "On 2024-01-05 at 12:30:45, see ISBN 978-0-306-40615-7 and ISBN 0-306-40615-2.",
            "Invoice 4111 1111 1111 1112 is not a card (Luhn fails).",
            "Order 1234567890123 and 000-12-3456 and 666-12-3456 and 123-00-4567",
            "Ratio 10:30 and 999.999.999.999 and 256.1.1.1 and 01.02.03.04",
            "DE89 3704 0044 0532 0130 01 has a bad checksum",
            "user@localhost is not an email with a domain; a@b.c neither",
            "Pages 100-200, 1990-1995, call at 5 pm, room 12-34.",
        ] {
            assert_eq!(redact(text, &all(), "<{type}>"), text, "{text}: {:?}", find(text, &all()));
        }
    }

    #[test]
    fn only_requested_kinds_and_custom_replacement() {
        let t = "a@b.io 192.168.1.1";
        assert_eq!(redact(t, &["ipv4".into()], "[REDACTED]"), "a@b.io [REDACTED]");
        assert_eq!(redact(t, &["email".into()], "x{type}x"), "xEMAILx 192.168.1.1");
        assert!(luhn(&digits("4111111111111111")) && !luhn(&digits("4111111111111112")));
        assert!(iban_ok("DE89370400440532013000") && !iban_ok("DE89370400440532013001"));
    }

    #[test]
    fn as_a_stage() {
        let mut s = curator_sdk::native::NativeStage::new::<PiiRedactor>("{}").unwrap();
        let out = s.run_texts(&["mail me: a.b@c.org", "nothing here"]).unwrap();
        assert_eq!(out, ["mail me: <EMAIL>", "nothing here"]);
        assert!(curator_sdk::native::NativeStage::new::<PiiRedactor>(r#"{"entities": ["names"]}"#).is_err());
    }
}
