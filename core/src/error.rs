//! The one classification of errors that every front end shares.
//!
//! Each error type of this crate (and the native store's) says what kind of failure it is
//! ([`ErrorKind`]), and, where the failure is about bytes on disk, where they are
//! ([`Location`]). A front end maps a kind to its own error class or code in one `match`:
//! Python to the classes of `loaderx.errors`, JavaScript to the `LOADERX_*` codes.
//!
//! Invariants:
//! * Every kind has a stable name ([`ErrorKind::name`]) and the reference's numeric code
//!   ([`ErrorKind::code`]); both are part of the public API and never change meaning.
//! * A damaged file is [`ErrorKind::Corrupt`], never [`ErrorKind::NotAStore`]: "not a store"
//!   means there is no `meta.zr`, or its header names another format or version. A `meta.zr`
//!   shorter than its 16-byte header is corrupt, since loaderx only ever creates `meta.zr`
//!   whole (see `docs/format.md`).

use std::fmt;

/// What kind of failure an error is. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The path names nothing.
    NotFound,
    /// There is no `meta.zr`, or its header is not a version-3 loaderx header.
    NotAStore,
    /// A file of the store is damaged, or a record fails to decode or fit the schema.
    Corrupt,
    /// An index is not below the store's length, or is not an index at all.
    Index,
    /// A caller's argument is wrong (a buffer, offsets, options, a sampler setting).
    Argument,
    /// A record to append is empty or longer than 1 MiB.
    RecordSize,
    /// Something would exceed a limit: the store's capacity, or a batch's memory cap.
    TooLarge,
    /// The store's dictionary is missing where one is needed, training failed, or a
    /// re-training was refused.
    Dictionary,
    /// An operating-system or transport call failed.
    Io,
    /// Another handle or process holds the store's writer lock.
    Locked,
    /// The handle was closed.
    Closed,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::NotFound,
        ErrorKind::NotAStore,
        ErrorKind::Corrupt,
        ErrorKind::Index,
        ErrorKind::Argument,
        ErrorKind::RecordSize,
        ErrorKind::TooLarge,
        ErrorKind::Dictionary,
        ErrorKind::Io,
        ErrorKind::Locked,
        ErrorKind::Closed,
    ];

    /// A stable snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::NotAStore => "not_a_store",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Index => "index",
            ErrorKind::Argument => "argument",
            ErrorKind::RecordSize => "record_size",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Dictionary => "dictionary",
            ErrorKind::Io => "io",
            ErrorKind::Locked => "locked",
            ErrorKind::Closed => "closed",
        }
    }

    /// The numeric code of loaderx 0.9.11's `ZrecordError` for this kind (negative, as the
    /// reference returns them).
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::NotFound | ErrorKind::Io | ErrorKind::Closed => -2,
            ErrorKind::Index => -3,
            ErrorKind::RecordSize => -4,
            ErrorKind::TooLarge => -5,
            ErrorKind::Argument => -6,
            ErrorKind::Corrupt => -7,
            ErrorKind::NotAStore => -8,
            ErrorKind::Dictionary => -9,
            ErrorKind::Locked => -10,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A file of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreFile {
    /// `meta.zr`: header and table.
    Meta,
    /// Chunk file `<id>.zr`.
    Chunk(u16),
    /// `dict.zr`.
    Dict,
    /// `schema.msgpack`.
    Schema,
    /// `delete.journal`.
    Journal,
    /// `checksums.lx`.
    Checksums,
}

/// Where damaged bytes are: a file of the store and, when known, the byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    pub file: StoreFile,
    pub offset: Option<u64>,
}

impl Location {
    /// `file` at `offset`.
    pub fn at(file: StoreFile, offset: u64) -> Location {
        Location { file, offset: Some(offset) }
    }

    /// Somewhere in `file`.
    pub fn file(file: StoreFile) -> Location {
        Location { file, offset: None }
    }
}

/// What every error type tells a front end.
pub trait Classify {
    /// The kind of failure.
    fn kind(&self) -> ErrorKind;
    /// Where the damaged bytes are, for corrupt-data errors.
    fn location(&self) -> Option<Location> {
        None
    }
    /// The record the error is about, if it is about one.
    fn index(&self) -> Option<u64> {
        None
    }
}

/// Errors from decoding or interpreting a schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The bytes are not one well-formed msgpack value.
    #[error("schema.msgpack is not valid msgpack: {0}")]
    Decode(String),
    /// The top-level value is not a map.
    #[error("schema.msgpack is not a map")]
    NotAMap,
    /// A required key is absent.
    #[error("schema has no {0:?} key")]
    MissingKey(&'static str),
    /// A key holds a value of the wrong msgpack type.
    #[error("schema key {key:?} must be {expected}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What it must hold.
        expected: &'static str,
    },
    /// `format` is not `"loaderx-zrecord"`.
    #[error("schema format is {0:?}, expected \"loaderx-zrecord\"")]
    WrongFormat(String),
    /// `kind` is not the kind the caller asked for.
    #[error("schema kind is {found:?}, expected {expected}")]
    WrongKind {
        /// The kind required.
        expected: &'static str,
        /// The kind found.
        found: String,
    },
    /// `kind` is neither `"dense"` nor `"ragged"`.
    #[error("schema kind is {0:?}, expected \"dense\" or \"ragged\"")]
    UnknownKind(String),
    /// `dtype` is not a supported NumPy dtype string.
    #[error("bad dtype: {0}")]
    BadDType(String),
    /// `prod(item_shape) · itemsize` does not fit in a u64.
    #[error("item_shape times itemsize overflows u64")]
    Overflow,
    /// `prod(item_shape) · itemsize` is 0, so no record (at least 1 byte) can fit.
    #[error("items of 0 bytes (item_shape has a 0): no record can fit")]
    EmptyItem,
}

impl Classify for SchemaError {
    /// A store whose schema breaks the rules is damaged; a store of another kind than the
    /// caller asked for ([`SchemaError::WrongKind`]) is the caller's mistake.
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            SchemaError::WrongKind { .. } => crate::error::ErrorKind::Argument,
            _ => crate::error::ErrorKind::Corrupt,
        }
    }

    fn location(&self) -> Option<crate::error::Location> {
        Some(crate::error::Location::file(crate::error::StoreFile::Schema))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_codes_are_the_references() {
        let mut names: Vec<_> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        assert_eq!(ErrorKind::Corrupt.code(), -7);
        assert_eq!(ErrorKind::Locked.code(), -10);
        assert!(ErrorKind::ALL.iter().all(|k| k.code() < 0));
    }

    #[test]
    fn store_file_names() {
        assert_eq!(StoreFile::Chunk(12).name(), "12.zr");
        assert_eq!(StoreFile::Schema.name(), "schema.msgpack");
        assert_eq!(StoreFile::Journal.name(), "delete.journal");
    }
}
