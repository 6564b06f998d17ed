//! The names of a store's files, in one place: every front end (native, wasm, the Python and
//! JS packages through them) builds file names from here.
//!
//! Invariant: a chunk file's name is `<id>.zr` with `id` in decimal below
//! [`crate::format::MAX_CHUNKS`]; [`chunk_id`] accepts exactly the names [`chunk_name`] makes
//! (and the same digits with leading zeros, as the reference accepts them).

use crate::error::StoreFile;
use crate::format::MAX_CHUNKS;

/// The header and record table.
pub const META_FILE: &str = "meta.zr";
/// The trained zstd dictionary, when the store has one.
pub const DICT_FILE: &str = "dict.zr";
/// The schema, when the store has one.
pub const SCHEMA_FILE: &str = "schema.msgpack";
/// The outcome of a delete that is running or was interrupted.
pub const JOURNAL_FILE: &str = "delete.journal";
/// Per-record checksums, when the store has them (the checksum module). Not `<digits>.zr`, so
/// the reference never takes it for a chunk file.
pub const CHECKSUM_FILE: &str = "checksums.lx";
/// A manifest (several stores read as one), by convention, in a directory of its own.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Chunk file `id`'s name: `<id>.zr`.
pub fn chunk_name(id: u16) -> String {
    format!("{id}.zr")
}

/// The chunk id a file name stands for (`17.zr` → 17); `None` for any other name.
pub fn chunk_id(name: &str) -> Option<u16> {
    let stem = name.strip_suffix(".zr")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok().filter(|&id| u64::from(id) < MAX_CHUNKS)
}

impl StoreFile {
    /// The file's name inside the store directory.
    pub fn name(self) -> String {
        match self {
            StoreFile::Meta => META_FILE.into(),
            StoreFile::Chunk(id) => chunk_name(id),
            StoreFile::Dict => DICT_FILE.into(),
            StoreFile::Schema => SCHEMA_FILE.into(),
            StoreFile::Journal => JOURNAL_FILE.into(),
            StoreFile::Checksums => CHECKSUM_FILE.into(),
        }
    }
}
