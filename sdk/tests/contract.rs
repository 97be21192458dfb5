//! The contract's constants have one source, `include/curator_stage.h`; the SDK's mirror,
//! `curator-core` (manifests, the host) and the WIT package must agree with it.

const HEADER: &str = include_str!("../include/curator_stage.h");
const WIT: &str = include_str!("../wit/stage.wit");

fn define(name: &str) -> String {
    let prefix = format!("#define {name} ");
    let line = HEADER.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("curator_stage.h has no {name}"));
    line[prefix.len()..].trim().trim_matches('"').to_string()
}

fn number(name: &str) -> i64 {
    define(name).parse().unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn sdk_core_and_wit_agree_with_the_header() {
    use curator_sdk::abi;
    let (major, minor) = (number("CURATOR_ABI_MAJOR") as u32, number("CURATOR_ABI_MINOR") as u32);
    assert_eq!((abi::ABI_MAJOR, abi::ABI_MINOR), (major, minor), "sdk/src/abi/mod.rs");
    assert_eq!((curator_core::ABI_MAJOR, curator_core::ABI_MINOR), (major, minor), "core/src/manifest.rs");
    let package = format!("curator:stage@{major}.{minor}.0");
    assert_eq!(curator_core::WIT_PACKAGE, package, "core's WIT_PACKAGE");
    assert!(WIT.contains(&format!("package {package};")), "sdk/wit/stage.wit declares another version");
    assert_eq!(define("CURATOR_STAGE_ENTRY"), abi::ENTRY_SYMBOL);
    for (name, value) in [
        ("CURATOR_OK", abi::OK),
        ("CURATOR_ERR_INVALID_PARAMS", abi::ERR_INVALID_PARAMS),
        ("CURATOR_ERR_FAILED", abi::ERR_FAILED),
        ("CURATOR_ERR_OUT_OF_MEMORY", abi::ERR_OUT_OF_MEMORY),
    ] {
        assert_eq!(number(name), value as i64, "{name}");
    }
    for (name, value) in [
        ("CURATOR_OUTPUT_SELECTION", abi::OUTPUT_SELECTION),
        ("CURATOR_OUTPUT_COLUMNS", abi::OUTPUT_COLUMNS),
        ("CURATOR_OUTPUT_BATCH", abi::OUTPUT_BATCH),
        ("CURATOR_OUTPUT_SCORED", abi::OUTPUT_SCORED),
        ("CURATOR_SCORED_KEEP", abi::SCORED_KEEP),
    ] {
        assert_eq!(define(name), value, "{name}");
    }
    // The WIT error variant has the C ABI's cases.
    for case in ["invalid-params(string)", "failed(string)", "out-of-memory(string)"] {
        assert!(WIT.contains(case), "stage-error lacks {case}");
    }
}

#[test]
fn the_vtable_layout_matches_the_header() {
    // abi_major, abi_minor, struct_size, reserved, then five pointers.
    let expected = 4 * 4 + 5 * std::mem::size_of::<usize>();
    assert_eq!(std::mem::size_of::<curator_sdk::abi::StageVTable>(), expected);
    let order: Vec<&str> =
        ["abi_major", "abi_minor", "struct_size", "reserved", "manifest_json", "create", "process", "destroy", "free_error"].to_vec();
    let body = &HEADER[HEADER.find("typedef struct CuratorStageVTable").unwrap()..HEADER.find("} CuratorStageVTable;").unwrap()];
    let mut at = 0;
    for field in order {
        let pos = body[at..].find(field).unwrap_or_else(|| panic!("{field} out of order in the header"));
        at += pos + field.len();
    }
}
