//! Prompt templates over a document's fields: `{text}`, `{title}`, any field the batch has;
//! `{{` and `}}` stand for braces. Parsed once, so a field the template names but the batch
//! lacks is an error before any request is sent.

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Field(String),
}

impl Template {
    pub fn parse(template: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = template.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let rest = &template[i + 1..];
                    let end = rest.find('}').ok_or_else(|| format!("an unclosed '{{' at character {i}"))?;
                    let name = rest[..end].trim();
                    if name.is_empty() || name.contains('{') {
                        return Err(format!("'{{{}}}' at character {i} names no field (write '{{{{' for a brace)", &rest[..end]));
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Field(name.to_string()));
                    for _ in 0..rest[..=end].chars().count() {
                        chars.next();
                    }
                }
                '}' => return Err(format!("a lone '}}' at character {i} (write '}}}}' for a brace)")),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { pieces })
    }

    /// The fields it names, in order, once each.
    pub fn fields(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in &self.pieces {
            if let Piece::Field(f) = p
                && !out.contains(&f.as_str())
            {
                out.push(f);
            }
        }
        out
    }

    /// The prompt for one document; `value` gives a field's text.
    pub fn render<'a>(&self, mut value: impl FnMut(&str) -> &'a str) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(f) => out.push_str(value(f)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_braces() {
        let t = Template::parse("Title: {title}\n{{json}} {text} and {text}").unwrap();
        assert_eq!(t.fields(), ["title", "text"]);
        assert_eq!(t.render(|f| if f == "title" { "T" } else { "é" }), "Title: T\n{json} é and é");
    }

    #[test]
    fn mistakes_are_named() {
        assert!(Template::parse("{text").unwrap_err().contains("unclosed"));
        assert!(Template::parse("a } b").unwrap_err().contains("lone"));
        assert!(Template::parse("{ }").unwrap_err().contains("names no field"));
    }
}
