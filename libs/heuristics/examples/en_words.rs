//! Prints the English words of stdin one per line, as datatrove's filters see them
//! (compare with spaCy: `python -c 'import spacy,sys; [print(t.text) for t in spacy.blank("en")(sys.stdin.read()) if t.text.strip()]'`).

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    for w in curator_heuristics::en_words::words(&text) {
        println!("{w}");
    }
    Ok(())
}
