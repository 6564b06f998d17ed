//! Fuzzes `loaderx_native::fuzzing::image`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loaderx_native::fuzzing::image(data));
