//! Changing one setting of a pipeline file in place, keeping everything else of the text as
//! it is (comments, order, quoting, blank lines): what `curator-host tune --apply` writes. No
//! YAML library round-trips comments, so this edits lines, and the caller parses the result to
//! check that exactly the intended value changed.

/// Why a file could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("no top-level `stages:` list in block style")]
    NoStages,
    #[error("the file has no stage {0} (counting from 0)")]
    NoSuchStage(usize),
    #[error("stage {0}'s params are written in a style this editor does not change (a multi-line flow mapping); set {1} by hand")]
    Unsupported(usize, String),
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

/// The value part of `key: value  # comment` split into (value, the rest from ` #`).
fn split_comment(s: &str) -> (&str, &str) {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if i == 0 || s[..i].ends_with(' ') => return (s[..i].trim_end(), &s[i..]),
            _ => {}
        }
    }
    (s.trim_end(), "")
}

/// Split a one-line flow mapping's inside (`a: 1, b: [x, y]`) at its top-level commas.
fn flow_entries(inner: &str) -> Vec<&str> {
    let (mut depth, mut quote, mut start, mut out) = (0i32, None, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        out.push(&inner[start..]);
    }
    out
}

fn key_of(entry: &str) -> &str {
    entry.split_once(':').map_or("", |(k, _)| k.trim().trim_matches(|c| c == '"' || c == '\''))
}

/// Set `params.<key>` of stage `index` (0-based, in `stages:` order) to `value` (YAML text,
/// e.g. `16384`), replacing the key where it is or adding it to the stage's params.
pub fn set_stage_param(text: &str, index: usize, key: &str, value: &str) -> Result<String, EditError> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let stages_at = lines
        .iter()
        .position(|l| indent(l) == 0 && l.starts_with("stages:") && split_comment(&l["stages:".len()..]).0.is_empty())
        .ok_or(EditError::NoStages)?;
    // Items of the list: lines starting with "- " at the list's indent, up to the next
    // top-level key.
    let mut items: Vec<(usize, usize)> = Vec::new();
    let mut item_indent = None;
    let mut end = lines.len();
    for (i, line) in lines.iter().enumerate().skip(stages_at + 1) {
        if !is_content(line) {
            continue;
        }
        let ind = indent(line);
        let t = line.trim_start();
        if ind == 0 && !t.starts_with("- ") && t != "-" {
            end = i;
            break;
        }
        if t.starts_with("- ") && item_indent.is_none_or(|d| d == ind) {
            item_indent = Some(ind);
            if let Some(last) = items.last_mut() {
                last.1 = i;
            }
            items.push((i, lines.len()));
        }
    }
    if let Some(last) = items.last_mut() {
        last.1 = last.1.min(end);
    }
    let &(start, stop) = items.get(index).ok_or(EditError::NoSuchStage(index))?;
    let content = item_indent.unwrap_or(0) + 2;
    // The item's `params:` line: on the item's first line (after "- ") or at the content indent.
    let params_line = (start..stop).find(|&i| {
        let l = &lines[i];
        let body = if i == start {
            &l[indent(l) + 2..]
        } else if indent(l) == content {
            l.trim_start()
        } else {
            return false;
        };
        body.starts_with("params:")
    });
    let entry = format!("{key}: {value}");
    match params_line {
        Some(p) => {
            let line = lines[p].clone();
            let at = line.find("params:").unwrap_or(0) + "params:".len();
            let (rest, comment) = split_comment(&line[at..]);
            let rest = rest.trim();
            if rest.is_empty() {
                // Block mapping: children are the following lines indented deeper.
                let children: Vec<usize> =
                    (p + 1..stop).filter(|&i| is_content(&lines[i])).take_while(|&i| indent(&lines[i]) > content).collect();
                let child_indent = children.first().map_or(content + 2, |&i| indent(&lines[i]));
                if let Some(&c) = children.iter().find(|&&i| indent(&lines[i]) == child_indent && key_of(lines[i].trim_start()) == key) {
                    let (_, comment) = split_comment(lines[c].split_once(':').map_or("", |(_, v)| v));
                    let sep = if comment.is_empty() { "" } else { " " };
                    lines[c] = format!("{}{entry}{sep}{comment}", " ".repeat(child_indent));
                } else {
                    let after = children.last().copied().unwrap_or(p);
                    lines.insert(after + 1, format!("{}{entry}", " ".repeat(child_indent)));
                }
            } else if rest.starts_with('{') && rest.ends_with('}') {
                let inner = &rest[1..rest.len() - 1];
                let mut entries: Vec<String> = flow_entries(inner).iter().map(|e| e.trim().to_string()).collect();
                match entries.iter_mut().find(|e| key_of(e) == key) {
                    Some(e) => *e = entry,
                    None => entries.push(entry),
                }
                let sep = if comment.is_empty() { "" } else { " " };
                lines[p] = format!("{}{{{}}}{sep}{comment}", &line[..at + 1], entries.join(", "));
            } else {
                return Err(EditError::Unsupported(index, key.to_string()));
            }
        }
        None => lines.insert(start + 1, format!("{}params: {{{entry}}}", " ".repeat(content))),
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# my pipeline\nsource: {path: in}\nstages:\n  # embed first\n  - plugin: embedder   # the GPU one\n    params:\n      model: /models/m  # fp16\n      max_batch_tokens: 4096 # was hand-picked\n    resources: {gpu_memory_gb: 8}\n  - plugin: classifier\n    params: {model: /models/c, device: gpu}\n  - plugin: word_count_filter\nsink: {path: out}\n";

    #[test]
    fn replaces_a_block_value_keeping_its_comment_and_everything_else() {
        let out = set_stage_param(FILE, 0, "max_batch_tokens", "32768").unwrap();
        assert_eq!(out, FILE.replace("max_batch_tokens: 4096 # was hand-picked", "max_batch_tokens: 32768 # was hand-picked"));
    }

    #[test]
    fn adds_to_flow_params_and_creates_params() {
        let out = set_stage_param(FILE, 1, "max_batch_tokens", "8192").unwrap();
        assert_eq!(out, FILE.replace("{model: /models/c, device: gpu}", "{model: /models/c, device: gpu, max_batch_tokens: 8192}"));
        let out = set_stage_param(FILE, 2, "max_batch_tokens", "8192").unwrap();
        assert_eq!(
            out,
            FILE.replace("  - plugin: word_count_filter\n", "  - plugin: word_count_filter\n    params: {max_batch_tokens: 8192}\n")
        );
        let block_without = FILE.replace("      max_batch_tokens: 4096 # was hand-picked\n", "");
        let out = set_stage_param(&block_without, 0, "max_batch_tokens", "2048").unwrap();
        assert!(out.contains("      model: /models/m  # fp16\n      max_batch_tokens: 2048\n    resources"), "{out}");
    }

    #[test]
    fn flow_values_with_commas_survive() {
        let f = "stages:\n- plugin: c\n  params: {keep_labels: [a, b], max_batch_tokens: 1}\n";
        assert_eq!(
            set_stage_param(f, 0, "max_batch_tokens", "2").unwrap(),
            "stages:\n- plugin: c\n  params: {keep_labels: [a, b], max_batch_tokens: 2}\n"
        );
    }

    #[test]
    fn refuses_what_it_cannot_edit() {
        assert_eq!(set_stage_param("source: {}\n", 0, "k", "1"), Err(EditError::NoStages));
        assert_eq!(set_stage_param(FILE, 3, "k", "1"), Err(EditError::NoSuchStage(3)));
        let multi = "stages:\n  - plugin: c\n    params: {a: 1,\n      b: 2}\n";
        assert!(matches!(set_stage_param(multi, 0, "k", "1"), Err(EditError::Unsupported(0, _))));
    }
}
