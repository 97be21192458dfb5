//! One-way floors: no module of `core`, `host` or the `sdk` uses a module on a floor above its own, as
//! ARCHITECTURE.md's "Floors go one way" lines declare them.

use curator_house::{check_crate, declared_floors, repo_root};

#[test]
fn no_module_uses_a_floor_above_its_own() {
    let root = repo_root();
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let floors = declared_floors(&architecture);
    let names: Vec<&str> = floors.iter().map(|f| f.krate.as_str()).collect();
    assert!(
        ["core", "host", "sdk"].iter().all(|c| names.contains(c)),
        "ARCHITECTURE.md declares floors for core, host and sdk, found {names:?}"
    );
    let mut report = Vec::new();
    for f in &floors {
        // The binary's own modules (`main.rs`, `cli/`) are the top floor of `host` and not
        // part of its library: `crate::` there means the binary.
        let (violations, _) = check_crate(&root.join(&f.krate).join("src"), f, &["main", "cli"]);
        for v in violations {
            report.push(format!("{}/src/{}: {} → {} ({})", f.krate, v.file, v.from, v.to, v.why));
        }
    }
    assert!(report.is_empty(), "floors broken (ARCHITECTURE.md, \"Floors go one way\"):\n{}", report.join("\n"));
}
