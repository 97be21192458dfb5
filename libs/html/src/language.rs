//! The stop-word list for a page whose language nobody named (`language: auto`): its
//! language is detected from the text of its paragraphs (whatlang's trigram and script
//! model), as NeMo Curator detects it per page (with cld2, on the raw HTML) before it picks a
//! list. What follows NeMo Curator: a language jusText has a list for uses it; Chinese,
//! Japanese, Thai and Korean, written without spaces between words, keep every paragraph
//! (NeMo Curator keeps their boilerplate, so their lists decide nothing); a page in any other
//! language is dropped, as NeMo Curator drops a page whose language has no list.

use crate::paragraphs::Paragraph;
use crate::stoplists::Stoplist;

/// Characters of paragraph text the detection reads at most (whatlang's accuracy levels off
/// long before; a page's first paragraphs are enough).
const SAMPLE_CHARS: usize = 4096;

/// What a page's detected language means for its extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Classify with jusText's list of this name (`English`, `Norwegian_Bokmal`, …).
    List(&'static str),
    /// A language written without spaces between words: keep every paragraph.
    KeepAll,
    /// No list for it (or no text to tell): drop the page.
    Drop,
}

/// jusText's list name for a language whatlang detects, where the two name it differently
/// or jusText has no list; every other language has a list under whatlang's English name.
fn justext_name(lang: whatlang::Lang) -> Option<&'static str> {
    use whatlang::Lang::*;
    match lang {
        Nob => Some("Norwegian_Bokmal"),
        Slv => Some("Slovenian"),
        // whatlang's Punjabi is written in Gurmukhi; jusText's Western Panjabi in Shahmukhi.
        Pan | Yid | Amh | Ori | Mya | Sin | Khm | Aka | Zul | Sna => None,
        // Written without spaces (NeMo Curator keeps all their paragraphs): no list needed.
        Cmn | Jpn | Tha | Kor => None,
        other => Some(other.eng_name()),
    }
}

/// Paragraphs at least this long (characters), mostly outside links, are prose: the sample
/// is taken from them first (menus, code and link lists mislead a trigram model).
const PROSE_CHARS: usize = 70;

/// The choice for a page with these paragraphs.
pub fn choose(paragraphs: &[Paragraph]) -> Choice {
    let prose = |p: &&Paragraph| p.chars >= PROSE_CHARS && p.chars_in_links * 5 < p.chars;
    let mut sample = sample(paragraphs.iter().filter(prose));
    if sample.len() < PROSE_CHARS * 2 {
        sample = self::sample(paragraphs.iter());
    }
    let Some(info) = whatlang::detect(&sample) else { return Choice::Drop };
    match info.lang() {
        whatlang::Lang::Cmn | whatlang::Lang::Jpn | whatlang::Lang::Tha | whatlang::Lang::Kor => Choice::KeepAll,
        lang => match justext_name(lang) {
            Some(name) if Stoplist::for_language(name).is_some() => {
                // The list's own spelling of the name, 'static for the caller's cache.
                crate::stoplists::languages().find(|l| l.eq_ignore_ascii_case(name)).map_or(Choice::Drop, Choice::List)
            }
            _ => Choice::Drop,
        },
    }
}

/// The paragraphs' text, up to [`SAMPLE_CHARS`].
fn sample<'a>(paragraphs: impl Iterator<Item = &'a Paragraph>) -> String {
    let mut out = String::new();
    for p in paragraphs {
        if out.len() >= SAMPLE_CHARS {
            break;
        }
        out.push_str(&p.text);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str) -> Vec<Paragraph> {
        crate::paragraphs::paragraphs(&format!("<html><body><p>{text}</p></body></html>"))
    }

    #[test]
    fn a_page_gets_its_languages_list_or_keeps_all_or_is_dropped() {
        let en = "The history of the town is long and it is one of the oldest in the region, founded by farmers who came from the north.";
        let de = "Die Geschichte der Stadt ist lang, und sie ist eine der ältesten in der Region; sie wurde von Bauern gegründet, die aus dem Norden kamen.";
        let no =
            "Byens historie er lang, og den er en av de eldste i regionen. Den ble grunnlagt av bønder som kom fra nord for å finne jord.";
        let ja = "町の歴史は長く、この地域で最も古い町の一つです。北から土地を求めてやって来た農民によって築かれました。";
        let th = "เมืองนี้มีประวัติศาสตร์อันยาวนานและเป็นหนึ่งในเมืองที่เก่าแก่ที่สุดในภูมิภาค ก่อตั้งโดยชาวนาที่มาจากทางเหนือ";
        let am = "የከተማዋ ታሪክ ረጅም ነው፤ በክልሉ ውስጥ ካሉት ጥንታዊ ከተሞች አንዷ ናት። ከሰሜን በመጡ ገበሬዎች ተመሠረተች።";
        assert_eq!(choose(&page(en)), Choice::List("English"));
        assert_eq!(choose(&page(de)), Choice::List("German"));
        assert_eq!(choose(&page(no)), Choice::List("Norwegian_Bokmal"));
        assert_eq!(choose(&page(ja)), Choice::KeepAll);
        assert_eq!(choose(&page(th)), Choice::KeepAll);
        assert_eq!(choose(&page(am)), Choice::Drop);
        assert_eq!(choose(&[]), Choice::Drop);
        // Menus and identifiers first, prose after: the prose decides.
        let menu: String = (0..40).map(|i| format!("<p><a href=/{i}>os.fchmod{i}()</a></p>")).collect();
        let code = "<pre>os.setpgid os.getpgrp os.tcsetpgrp os.fchdir os.fsencode os.fsdecode</pre>".repeat(20);
        let html = format!("<html><body>{menu}{code}<p>{en}</p></body></html>");
        assert_eq!(choose(&crate::paragraphs::paragraphs(&html)), Choice::List("English"));
    }

    #[test]
    fn every_name_mapped_to_a_list_has_one() {
        for lang in whatlang::Lang::all() {
            if let Some(name) = justext_name(*lang) {
                assert!(Stoplist::for_language(name).is_some(), "{lang:?} → {name}: no jusText list");
            }
        }
    }
}
