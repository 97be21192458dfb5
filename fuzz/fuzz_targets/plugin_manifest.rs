#![no_main]
//! See `curator_host::fuzz::plugin_manifest`.
libfuzzer_sys::fuzz_target!(init: curator_host::fuzz::init(), |data: &[u8]| curator_host::fuzz::plugin_manifest(data));
