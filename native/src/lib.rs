//! loaderx-native: the loaderx record store on files.
//!
//! A store is a directory holding `meta.zr` (header and record table, memory-mapped and used in
//! place), chunk files `0.zr`, `1.zr`, … (record bytes, written with positional I/O and read
//! through read-only maps) and optionally `dict.zr` (a zstd dictionary). The byte layout and
//! the planning logic live in `loaderx-core`; this crate adds files and threads.
//!
//! ```
//! use loaderx_native::{Codec, Store};
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open_or_create(dir.path().join("s")).unwrap();
//! let first = store.append(b"hello, world", &[0, 5], Codec::Zstd).unwrap();
//! assert_eq!(first, 0);
//! let mut out = vec![0u8; 12];
//! store.gather(&[1, 0], &mut out, &[0, 7]).unwrap();
//! assert_eq!(&out, b", worldhello");
//! ```
//!
//! Concurrency: `gather`, `lengths`, `stats` and `append` may be called from many threads at
//! once; `delete` and `compact` take exclusive access through an internal lock. A second process
//! that tries to write is refused ([`Error::Locked`]); readers never lock.

mod error;
mod fanout;
#[doc(hidden)]
pub mod fuzzing;
mod io;
mod map;
mod store;
mod write;

pub use error::{Error, Result};
pub use io::disk_usage;
pub use loaderx_core::format::{Codec, Header, RecordLoc};
pub use store::{OpenOptions, Stats, Store, VerifyReport};
pub use write::record_ranges;

/// The test-only I/O fault seam (see `io.rs`).
#[cfg(feature = "fault-injection")]
pub use io::{faults, Op as IoOp};

/// The README's Rust snippets, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeSnippets;
