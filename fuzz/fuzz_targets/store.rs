//! Fuzzes `loaderx_native::fuzzing::store`: open, gather, verify and stats over fuzzed files.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| std::env::temp_dir().join(format!("loaderx-fuzz-store-{}", std::process::id())))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| loaderx_native::fuzzing::store(data, scratch()));
