//! NeMo Curator's `UnicodeReformatter` as a stage; the logic lives in `curator-heuristics` (parity-tested
//! against NeMo Curator 1.4.0).

use curator_heuristics::ftfy::FixerConfig;
use curator_sdk::prelude::*;

/// Repairs mojibake and HTML entities, removes terminal escapes and control characters (ftfy's fixes, NeMo's defaults).
#[stage(name = "unicode_reformatter", cpus = 1.0, memory_mb = 128)]
pub struct UnicodeReformatter {
    /// "auto" (unless the line has a `<`), "true" or "false".
    #[param(default = "auto", one_of = ["auto", "true", "false"])]
    pub unescape_html: String,
    /// Remove ANSI terminal escapes.
    #[param(default = true)]
    pub remove_terminal_escapes: bool,
    /// Repair UTF-8 that was decoded as Windows-1252 or Latin-1.
    #[param(default = true)]
    pub fix_encoding: bool,
    /// Read a space as a no-break space inside mojibake (`Ã ` → `à`).
    #[param(default = true)]
    pub restore_byte_a0: bool,
    /// Map C1 control characters to their Windows-1252 characters.
    #[param(default = true)]
    pub fix_c1_controls: bool,
    /// Replace ligatures such as `ﬁ` with their letters.
    #[param(default = false)]
    pub fix_latin_ligatures: bool,
    /// Replace full-width Latin letters and digits with ASCII.
    #[param(default = false)]
    pub fix_character_width: bool,
    /// Replace curly quotes with straight ones.
    #[param(default = false)]
    pub uncurl_quotes: bool,
    /// Make every line break a `\n`.
    #[param(default = false)]
    pub fix_line_breaks: bool,
    /// Remove control characters (but tab, newline, form feed, carriage return) and BOMs.
    #[param(default = true)]
    pub remove_control_chars: bool,
    /// Unicode normalization form: NFC, NFD, NFKC or NFKD (none by default).
    #[param(one_of = ["NFC", "NFD", "NFKC", "NFKD"])]
    pub normalization: Option<String>,
    /// The fixes, built from the params once.
    #[state]
    config: FixerConfig,
}

impl Map for UnicodeReformatter {
    fn init(&mut self) -> Result<(), StageError> {
        self.config = FixerConfig {
            unescape_html: self.unescape_html.clone(),
            remove_terminal_escapes: self.remove_terminal_escapes,
            fix_encoding: self.fix_encoding,
            restore_byte_a0: self.restore_byte_a0,
            fix_c1_controls: self.fix_c1_controls,
            fix_latin_ligatures: self.fix_latin_ligatures,
            fix_character_width: self.fix_character_width,
            uncurl_quotes: self.uncurl_quotes,
            fix_line_breaks: self.fix_line_breaks,
            remove_control_chars: self.remove_control_chars,
            normalization: self.normalization.clone(),
        };
        Ok(())
    }

    fn map<'a>(&self, doc: &Doc<'a>) -> Cow<'a, str> {
        self.config.fix(doc.text())
    }
}
