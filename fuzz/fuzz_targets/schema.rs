//! Fuzzes `loaderx_native::fuzzing::schema`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loaderx_native::fuzzing::schema(data));
