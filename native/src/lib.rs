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
//!
//! Layout (each module's docs state its invariants; dependencies only point down the list):
//! * `cli`: the `loaderx` command;
//! * `conversion`: [`Conversion`], the one write session of every converter (checks, record
//!   sizes, dictionary training, rollback, the schema written last);
//! * `records`: [`Records`], the one read interface of a store and of a manifest;
//! * `many`: [`Many`]: a manifest's stores read as one, and manifest commits;
//! * `store`: [`Store`]: one open store, local or remote: opening, and the public read and write
//!   methods, which check arguments, take the locks and delegate to
//! * `writer` (append, delete, compact, train_dict, sync) and `journal` (the native half of the
//!   delete journal), for a local store, and to
//! * `reader`: the one read path (checks, core's planning, decoding on the one fan-out, verify,
//!   stats) over any
//! * `source`: the I/O seam: where a store's bytes come from. `sources::local` (a mapped
//!   directory), `sources::object` (object storage and HTTP; the `remote` feature) and
//!   `sources::cached` (a disk-cache decorator, over `cache`);
//! * `shared`: the maps and dictionary that readers and the writer share, and what their locks
//!   guard;
//! * `files`: paths, chunk views, the dictionary file, store creation, the schema file;
//! * `location` (URL or path, the refusal to write at a URL), `options` (how remote stores are
//!   reached and cached), `map` (memory maps), `io` (the I/O and fault seam, all platform code),
//!   `fanout` (the gather's thread fan-out), `process` (fork identity: the process id, values
//!   built per process, the rayon pool of each), `sync` (locks and atomics), `error`: in this
//!   group too, each uses only those after it.

#[cfg(feature = "remote")]
mod cache;
mod checksums;
#[cfg(feature = "cli")]
pub mod cli;
mod conversion;
mod error;
mod fanout;
mod files;
#[doc(hidden)]
pub mod fuzzing;
pub mod images;
mod io;
mod journal;
mod location;
mod many;
mod map;
mod meter;
mod options;
pub mod pack;
pub mod process;
mod reader;
mod records;
#[cfg(feature = "remote")]
mod remote_manifest;
mod shared;
mod source;
mod sources;
mod store;
mod sync;
pub mod upload;
mod writer;

pub use conversion::{Conversion, ConvertOptions, WriteMode, STAGING_ENV};
pub use error::{Error, Result};
pub use files::{read_schema, write_schema};
pub use io::disk_usage;
pub use loaderx_core::checksum::{Coverage, VerifyMode};
pub use loaderx_core::error::{Classify, ErrorKind, Location, StoreFile};
pub use loaderx_core::format::{Codec, Header, RecordLoc};
pub use loaderx_core::schema::{Layout, Schema};
pub use location::{check_writable, is_url};
pub use many::{commit, identify, read_manifest, write_manifest, Found, Many};
pub use meter::{meter, Meter};
pub use options::{CacheConfig, RemoteOptions};
pub use records::{packed, Joined, Records};
pub use store::{OpenOptions, Stats, Store, VerifyReport};
pub use writer::Backfill;

/// The test-only I/O fault seam (see `io.rs`).
#[cfg(feature = "fault-injection")]
pub use io::{faults, Op as IoOp};

/// The README's Rust snippets, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeSnippets;
