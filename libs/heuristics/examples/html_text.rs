//! Prints the visible text of the HTML on stdin as HTMLBoilerplateFilter measures it.

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut html = String::new();
    std::io::stdin().read_to_string(&mut html)?;
    print!("{}", curator_heuristics::code::html_text(&html));
    Ok(())
}
