//! Our tree against lxml's (libxml2's HTML parser, which jusText, NeMo Curator and trafilatura
//! run), element for element and text for text: Debian's HTML documentation, the planted
//! pages and seeded tag soup, through `scripts/parity/compare_tree.py` (lxml 6.1.3, installed
//! by `scripts/test.sh`). Every tree must be the same.

use curator_html::dom::{Dom, NodeRef, NodeValue, push_children};

/// The tree as the script writes lxml's: `+tag`, `-tag`, text (not of HTML whitespace only).
fn events(root: NodeRef<'_>) -> Vec<String> {
    enum Step<'a> {
        Enter(NodeRef<'a>),
        Leave(&'a str),
    }
    let mut out = Vec::new();
    let mut stack = vec![Step::Enter(root)];
    while let Some(step) = stack.pop() {
        let n = match step {
            Step::Leave(name) => {
                out.push(format!("-{name}"));
                continue;
            }
            Step::Enter(n) => n,
        };
        match n.value() {
            NodeValue::Text(t) if !t.trim_matches([' ', '\t', '\n', '\r', '\x0c']).is_empty() => out.push(t.to_string()),
            NodeValue::Element(name) => {
                out.push(format!("+{name}"));
                stack.push(Step::Leave(name));
                push_children(&mut stack, n, Step::Enter);
            }
            NodeValue::Document => push_children(&mut stack, n, Step::Enter),
            _ => {}
        }
    }
    out
}

#[test]
fn trees_equal_lxmls_on_real_pages_and_tag_soup() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let lxml = std::process::Command::new("python3")
        .args(["-c", "import lxml.html, lxml.etree; assert lxml.etree.LIBXML_VERSION == (2, 14, 6)"])
        .status();
    if !curator_test_support::require(
        lxml.is_ok_and(|s| s.success()),
        "lxml 6.1.3 (libxml2 2.14.6) is not installed (pip install lxml==6.1.3)",
    ) {
        return;
    }
    let out = std::path::Path::new(root).join("target/tmp/tree_parity.jsonl");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = std::process::Command::new("python3")
        .arg(format!("{root}scripts/parity/compare_tree.py"))
        .arg(&out)
        .args(["--soup", "3000"])
        .status()
        .unwrap();
    assert!(status.success(), "compare_tree.py failed");
    let text = std::fs::read_to_string(&out).unwrap();
    let (mut real, mut soup, mut differ) = ([0usize; 2], [0usize; 2], Vec::new());
    for line in text.lines() {
        let page: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = page["name"].as_str().unwrap();
        let theirs: Vec<&str> = page["events"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
        let ours = events(Dom::parse(page["html"].as_str().unwrap()).root());
        let count = if name.starts_with("soup-") { &mut soup } else { &mut real };
        count[1] += 1;
        if ours == theirs {
            count[0] += 1;
        } else if differ.len() < 5 {
            let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
            let window = |v: &[String]| v[at.saturating_sub(3)..(at + 4).min(v.len())].to_vec();
            let theirs: Vec<String> = theirs.iter().map(|s| s.to_string()).collect();
            differ.push(format!("{name}: event {at}: ours {:?}, lxml {:?}", window(&ours), window(&theirs)));
        }
    }
    println!("tree parity: {} of {} real pages, {} of {} tag-soup pages identical to lxml's", real[0], real[1], soup[0], soup[1]);
    assert!(soup[1] >= 2900, "too few tag-soup pages: {}", soup[1]);
    assert!(differ.is_empty(), "trees differ from lxml's:\n{}", differ.join("\n"));
}
