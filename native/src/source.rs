//! The one I/O seam of the read path: where a store's bytes come from.
//!
//! A [`ChunkSource`] answers three questions about a store, whatever holds it: how many records
//! are published and how large each chunk file is, what the table says about some records, and
//! which bytes lie in some ranges of the chunk files. Three implementations:
//! * `sources::local`: a directory on disk, mapped (zero-copy: pieces borrow the maps);
//! * `sources::object`: an object store or HTTP server (object_store), each request pinned to
//!   the version seen at open;
//! * `sources::cached`: a decorator keeping another source's chunk blocks in a disk cache.
//!
//! Everything else (the open protocol's checks, planning, decoding on the one fan-out, verify
//! and stats) is the reader's (`reader.rs`), written once for every source.
//!
//! Invariants:
//! * A [`View`] is consistent for its whole life: the length, chunk sizes, table entries and
//!   bytes it hands out belong to one state of the store. The local view holds the store's read
//!   gate, so no delete or compaction runs meanwhile; appends only add records past the length
//!   it reported.
//! * Sources check nothing about the data: the reader validates every entry against the format
//!   rules and the chunk sizes before it asks for bytes, and treats every piece as possibly short.

use std::ops::Deref;

use std::sync::Arc;

use bytes::Bytes;
use loaderx_core::checksum::{SidecarError, SidecarHeader, Slot};
use loaderx_core::codec::Dictionary;
use loaderx_core::format::{Header, RecordLoc};
use loaderx_core::read::ReadRange;
use loaderx_core::schema::Schema;

use crate::error::Result;

/// Bytes of one planned range: borrowed from a map, or owned (fetched, or cut from cache blocks).
#[derive(Debug)]
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) enum Piece<'v> {
    Borrowed(&'v [u8]),
    Owned(Bytes),
}

impl Deref for Piece<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Piece::Borrowed(b) => b,
            Piece::Owned(b) => b,
        }
    }
}

/// Where a store's bytes come from (see the module docs).
pub(crate) trait ChunkSource: Send + Sync + std::fmt::Debug {
    /// A consistent view for one call.
    fn view(&self) -> Result<Box<dyn View + '_>>;

    /// True when ranges are read in place (a map): the reader then plans one range per record
    /// in request order instead of merging neighbours.
    fn in_place(&self) -> bool;

    /// The source's location as shown in errors (a path, or a URL without its secrets).
    fn shown(&self) -> &str;

    /// The header as it is now (its `length` is the published record count), without a view.
    fn header(&self) -> Header;

    /// The store's dictionary, if it has one.
    fn dict(&self) -> Option<Arc<Dictionary>>;

    /// The store's schema, if it has one.
    fn schema(&self) -> Result<Option<Schema>>;

    /// For a source that is not read in place: the largest gap between two records that are
    /// still read in one range (`None`: the reader's default). A cache reads whole blocks, so
    /// there nothing is gained by reading gaps.
    fn max_gap(&self) -> Option<u64> {
        None
    }

    /// For a source whose chunk files may be cached locally: chunk file `chunk`'s object URL
    /// and version (ETag), which name its blocks in the cache.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    fn cache_identity(&self, chunk: u16) -> Option<(String, Option<String>)> {
        let _ = chunk;
        None
    }
}

/// One call's view of a store (see [`ChunkSource::view`]).
pub(crate) trait View: Sync {
    /// The header as it is now (the published length is `header().length`).
    fn header(&self) -> Header;

    /// Sizes of the chunk files by id; `None` where a file does not exist.
    fn chunk_lens(&self) -> &[Option<u64>];

    /// The store's dictionary, if it has one.
    fn dict(&self) -> Option<&Dictionary>;

    /// The table entries of `indices` (each below the published length), in order, with their
    /// indices, unchecked; an entry past the end of `meta.zr` is [`crate::Error::Corrupt`].
    fn entries(&self, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>>;

    /// The bytes of `ranges` (of chunk files), in order; a piece may be short where the file ends.
    fn fetch(&self, ranges: &[ReadRange]) -> Result<Vec<Piece<'_>>>;

    /// The `checksums.lx` header: `None` when the store has no sidecar, an error when it cannot
    /// be used (every record is uncovered then).
    fn sidecar_header(&self) -> Option<std::result::Result<SidecarHeader, SidecarError>> {
        None
    }

    /// The checksum slots of `indices`, in order, `None` where the sidecar has none (it ends
    /// first); empty when the store has no sidecar.
    fn slots(&self, _indices: &[u64]) -> Result<Vec<Option<Slot>>> {
        Ok(Vec::new())
    }

    /// The (stale) entry just past the live table; `None` where `meta.zr` ends first or the table
    /// is full (it is unknown then).
    fn stale_entry(&self) -> Result<Option<RecordLoc>> {
        Ok(None)
    }

    /// Says whether the bytes of the last [`View::fetch`] passed their checks: a caching view
    /// keeps fetched bytes only then.
    fn settle(&self, _keep: bool) {}

    /// Drops any cached copy of `ranges`, so the next fetch reads them from their origin.
    fn forget(&self, _ranges: &[ReadRange]) {}
}
