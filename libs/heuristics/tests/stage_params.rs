//! A stage declared with `nemo_score_stage!` (one per test crate: a stage exports the C ABI
//! entry point) has its heuristic's params: the
//! same names and the same defaults as the library struct (one list, `nemo/params.rs`).

use curator_heuristics::nemo::BoilerPlateStringFilter;
use curator_sdk::StageDef as Stage;
use curator_sdk::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

curator_heuristics::nemo_score_stage!(BoilerPlateStringFilter,
    /// Test stage.
    #[stage(name = "boiler_plate_string_filter", score_filter, cpus = 1.0, memory_mb = 128)]
    pub struct BoilerPlate);

/// The params schema's properties of a stage's manifest, less ScoreFilter's own three.
fn params<S: Stage>() -> Map<String, Value> {
    let manifest: Value = serde_json::from_str(S::MANIFEST).expect("manifest JSON");
    let schema = manifest.pointer("/params_schema/properties").or_else(|| manifest.pointer("/params/properties"));
    let mut props = schema.and_then(Value::as_object).cloned().unwrap_or_else(|| panic!("no params schema in {}", S::MANIFEST));
    for own in ["score_field", "invert", "filter"] {
        props.remove(own);
    }
    props
}

/// The stage's defaults, read into the library struct, are the library's defaults, and the
/// stage has every field the library has (a field the stage lacked would not be in `names`).
fn same_as_library<S: Stage, L: DeserializeOwned + Default + PartialEq + std::fmt::Debug>(fields: &[&str]) {
    let props = params::<S>();
    let names: Vec<&str> = props.keys().map(String::as_str).collect();
    let mut want = fields.to_vec();
    want.sort_unstable();
    let mut got = names.clone();
    got.sort_unstable();
    assert_eq!(got, want, "{}: params", S::MANIFEST);
    let defaults: Map<String, Value> =
        props.iter().map(|(k, v)| (k.clone(), v.get("default").cloned().unwrap_or_else(|| panic!("{k} has no default")))).collect();
    let lib: L = serde_json::from_value(Value::Object(defaults)).expect("the stage's defaults fit the library struct");
    assert_eq!(lib, L::default());
}

#[test]
fn stages_take_their_params_and_defaults_from_the_library() {
    same_as_library::<BoilerPlate, BoilerPlateStringFilter>(&["max_boilerplate_string_ratio", "remove_if_at_top_or_bottom"]);
}

#[test]
fn a_stage_builds_its_heuristic_from_its_params() {
    let text = "lorem ipsum dolor";
    let mut stage = curator_sdk::native::NativeStage::new::<BoilerPlate>("{}").unwrap();
    assert!(stage.run_texts(&[text]).unwrap().is_empty());
    let mut stage = curator_sdk::native::NativeStage::new::<BoilerPlate>(r#"{"max_boilerplate_string_ratio": 1.0}"#).unwrap();
    assert_eq!(stage.run_texts(&[text]).unwrap(), vec![text]);
}
