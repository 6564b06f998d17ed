//! loaderx-core: the loaderx record-store format, schema, sampler, per-record codec and the pure
//! planning half of the executor.
//!
//! Invariant: this crate performs no I/O. It never touches files, threads or memory maps, so it
//! builds for `wasm32-unknown-unknown`. Front ends hand it bytes and file sizes; it returns
//! values, typed errors and plans that the front end executes.

pub mod augment;
pub mod checksum;
pub mod codec;
pub mod dtype;
pub mod error;
pub mod filter;
pub mod format;
#[cfg(feature = "image")]
pub mod image;
pub mod journal;
pub mod lengths;
pub mod manifest;
pub mod mask;
pub mod metrics;
pub mod mix;
pub mod names;
pub mod open;
pub mod pack;
pub mod plan;
pub mod profile;
pub mod read;
pub mod sampler;
pub mod schema;
pub mod stats;
pub mod url;
pub mod verify;
pub mod view;
