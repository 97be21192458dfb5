//! `unicode_normalize`: rewrites text to a Unicode normal form and normalises line endings.

use curator_sdk::prelude::*;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick, is_nfkc_quick};

/// Rewrites text to Unicode normal form `form` (NFC by default); optionally turns CRLF and CR
/// line endings into LF.
#[stage(name = "unicode_normalize", cpus = 1.0, memory_mb = 256)]
pub struct UnicodeNormalize {
    /// Normal form: nfc, nfkc, nfd or nfkd.
    #[param(default = "nfc", one_of = ["nfc", "nfkc", "nfd", "nfkd"])]
    pub form: String,
    /// Turn "\r\n" and "\r" into "\n".
    #[param(default = true)]
    pub normalize_newlines: bool,
}

impl UnicodeNormalize {
    fn normalize(&self, text: &str) -> String {
        match self.form.as_str() {
            "nfkc" => text.nfkc().collect(),
            "nfd" => text.nfd().collect(),
            "nfkd" => text.nfkd().collect(),
            _ => text.nfc().collect(),
        }
    }

    fn already_normal(&self, text: &str) -> bool {
        match self.form.as_str() {
            "nfc" => is_nfc_quick(text.chars()) == IsNormalized::Yes,
            "nfkc" => is_nfkc_quick(text.chars()) == IsNormalized::Yes,
            _ => false,
        }
    }
}

impl Map for UnicodeNormalize {
    fn init(&mut self) -> Result<(), StageError> {
        match self.form.as_str() {
            "nfc" | "nfkc" | "nfd" | "nfkd" => Ok(()),
            other => Err(StageError::InvalidParams(format!("form: unknown normal form {other:?}"))),
        }
    }

    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        let text = doc.text();
        let mut out: Cow<'a, str> =
            if text.is_ascii() || self.already_normal(text) { Cow::Borrowed(text) } else { Cow::Owned(self.normalize(text)) };
        if self.normalize_newlines && out.contains('\r') {
            out = Cow::Owned(out.replace("\r\n", "\n").replace('\r', "\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_sdk::native::NativeStage;

    #[test]
    fn nfc_composes_and_newlines_normalised() {
        let mut s = NativeStage::new::<UnicodeNormalize>("{}").unwrap();
        let out = s.run_texts(&["e\u{301}cole", "a\r\nb\rc", "plain", "ﬁ"]).unwrap();
        assert_eq!(out, vec!["\u{e9}cole", "a\nb\nc", "plain", "ﬁ"]);
    }

    #[test]
    fn nfkc_folds_compatibility() {
        let mut s = NativeStage::new::<UnicodeNormalize>(r#"{"form": "nfkc", "normalize_newlines": false}"#).unwrap();
        assert_eq!(s.run_texts(&["ﬁ ２ a\r\n"]).unwrap(), vec!["fi 2 a\r\n"]);
    }

    #[test]
    fn unknown_form_refused() {
        assert!(NativeStage::new::<UnicodeNormalize>(r#"{"form": "nfx"}"#).is_err());
    }
}
