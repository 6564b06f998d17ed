//! loaderx-wasm: `loaderx-core` for JavaScript.
//!
//! The JS package (`js/`) does all I/O. This crate plans what to read, checks everything it is
//! handed, and decodes records:
//! * [`Reader`] — a store without its files: header, schema, dictionary, chunk sizes and cached
//!   table pages. It plans ranged reads ([`Plan`]) and decodes the bytes that come back.
//! * [`Manifest`] — a manifest's stores checked against their entries and a request split over
//!   them by core's rules; `identify` answers "store or manifest?" from what JS sees.
//! * [`Sampler`] — the core sampler; the same arguments give the same batches as native.
//! * [`Packer`] — the core packer; the same arguments plan the same packed rows as native.
//! * `imageHeader`, `decodeImage`, `imageProblem` — encoded images, by core's pure-Rust decoders.
//!
//! Errors are JavaScript `Error`s named `LoaderxError` with a stable `code` (see [`error`]).
//! No path reachable from JavaScript panics, so a rejected call never leaves the module
//! unusable.
//!
//! Two builds share this source: the plain one (stable; Node and pages that are not
//! cross-origin isolated) and the threaded one (nightly with `+atomics`; isolated pages), which
//! decodes a batch on a wasm-bindgen-rayon pool, exports `initThreadPool`, and can decode while
//! the calling thread returns to its event loop ([`DecodeJob`], `Reader.decodeStart`).

mod error;
mod filter;
mod image;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
mod job;
mod manifest;
mod mask;
mod pack;
mod profile;
mod reader;
mod sampler;

pub use filter::Filter;
pub use image::{decode_image, default_max_pixels, image_header, image_problem};
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use job::DecodeJob;
pub use manifest::{identify, manifest_file, names_a_file, Manifest};
pub use mask::{combined_mask_identity, mask_samples, MaskFile, MaskIdentity};
pub use pack::Packer;
pub use profile::Profiler;
pub use reader::{blank_scan_window, blank_tail_problem, combined_digest, Plan, Reader, MAX_OUT};
pub use sampler::{mix_stream_seed, Mixer, Sampler};

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use wasm_bindgen_rayon::init_thread_pool;

/// The loaderx version this build was made from (the workspace version in Cargo.toml).
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// This module's memory (a `WebAssembly.Memory`), for views over buffers it hands out by address.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = wasmMemory)]
pub fn wasm_memory() -> wasm_bindgen::JsValue {
    wasm_bindgen::memory()
}

/// Whether this build decodes on a thread pool.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = isThreaded)]
pub fn is_threaded() -> bool {
    cfg!(all(target_arch = "wasm32", target_feature = "atomics"))
}
