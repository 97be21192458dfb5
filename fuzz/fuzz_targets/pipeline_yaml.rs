#![no_main]
//! See `curator_host::fuzz::pipeline_yaml`.
libfuzzer_sys::fuzz_target!(init: curator_host::fuzz::init(), |data: &[u8]| curator_host::fuzz::pipeline_yaml(data));
