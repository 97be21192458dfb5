//! No cycles between the modules of a crate: in every crate of the workspace (core, host, the
//! SDK, every library and stage), no two sibling modules use each other, directly or around a
//! loop. A module may use its parent's items and its children's; siblings go one way.

use curator_house::{ModuleGraph, repo_root, workspace_crates};

#[test]
fn no_crate_has_a_cycle_between_its_modules() {
    let root = repo_root();
    let crates = workspace_crates(&root);
    assert!(crates.len() > 20, "found only {} crates under {}", crates.len(), root.display());
    let mut report = Vec::new();
    for krate in &crates {
        // The host's binary (`main.rs`, `cli/`) is a crate of its own over the library.
        let graph = ModuleGraph::read(&krate.join("src"), &["main", "cli"]);
        for cycle in graph.sibling_cycles() {
            report.push(format!("{}: {cycle}", krate.strip_prefix(&root).unwrap_or(krate).display()));
        }
    }
    assert!(
        report.is_empty(),
        "module cycles (break each by moving what both sides need into a module below them):\n{}",
        report.join("\n")
    );
}
