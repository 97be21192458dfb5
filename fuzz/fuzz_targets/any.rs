#![no_main]
//! Every harness in one binary, the one named by `CURATOR_FUZZ_TARGET` (for machines where one
//! file is easier to carry than six): `CURATOR_FUZZ_TARGET=jsonl_reader any corpus/jsonl_reader`.
libfuzzer_sys::fuzz_target!(init: curator_host::fuzz::init(), |data: &[u8]| curator_host::fuzz::by_name_from_env()(data));
