//! The store's error type. Every failure is a value: bad input from callers, corrupt files and
//! I/O errors never panic.
//!
//! Invariants:
//! * Every variant has one [`ErrorKind`] ([`Classify::kind`], one `match`), which is what front
//!   ends map to their own classes and codes.
//! * Corrupt-data errors ([`Error::Corrupt`], [`Error::Decode`]) name the damaged file and,
//!   where it is known, the byte offset in it, both as fields and in the message.
//! * Errors of `loaderx-core` become store errors through their kind (`Error::classified`):
//!   a corrupt-data error keeps its [`Location`], turned into a path inside the store.

use std::fmt;
use std::path::{Path, PathBuf};

use loaderx_core::codec::CodecError;
use loaderx_core::error::{Classify, ErrorKind, Location, StoreFile};
use loaderx_core::plan::PlanError;

/// Errors from [`crate::Store`].
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: std::io::Error },
    /// The store directory does not exist (and `create` was not requested).
    #[error("no store at {0}: the directory does not exist")]
    NotFound(PathBuf),
    /// The path exists but is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// The directory holds no `meta.zr`, or its header is not a version-3 loaderx header.
    #[error("{path} is not a loaderx store: {reason}")]
    NotAStore { path: PathBuf, reason: String },
    /// A file of the store is damaged: `file`, at byte `offset` when that is known.
    #[error("corrupt store: {file}{}: {detail}", At(*.offset))]
    Corrupt { file: PathBuf, offset: Option<u64>, index: Option<u64>, detail: String },
    /// A record index is not below the store's length.
    #[error("index {index} out of range for a store of {length} records")]
    IndexOutOfRange { index: u64, length: u64 },
    /// A record to append is empty or longer than 1 MiB.
    #[error("record {position} is {len} bytes; records must be 1..=1048576 bytes")]
    RecordSize { position: usize, len: u64 },
    /// A record to write does not fit the schema of the store it goes to.
    #[error("{0}")]
    DoesNotFit(loaderx_core::schema::Misfit),
    /// A conversion in the `error` mode found a store where it was to write one.
    #[error("{0} already holds a store")]
    Exists(PathBuf),
    /// A caller-supplied buffer or offset list does not fit.
    #[error("{0}")]
    BadArgument(String),
    /// The store would exceed 2^24 records or 4096 chunks.
    #[error("store is full: {0}")]
    Full(String),
    /// Another process holds the writer lock.
    #[error("{0} is being written by another handle or process (its writer lock is held)")]
    Locked(PathBuf),
    /// A zstd_dict append or read on a store without a dictionary, or a refused re-training.
    #[error("{0}")]
    Dictionary(String),
    /// A stored record failed to decode: its bytes start at `offset` of chunk file `file`.
    #[error("record {index}: {source} ({file} at byte {offset})")]
    Decode { index: u64, file: PathBuf, offset: u64, source: CodecError },
    /// A record's stored bytes do not match the checksum that covers it (`checksums.lx`), in a
    /// store whose table is as the checksums' writer left it: damage.
    #[error("record {index}: checksum mismatch in {file} at byte {offset} (checksums.lx says xxh3 {expected:016x}, the bytes hash to {found:016x})")]
    Checksum { index: u64, file: PathBuf, offset: u64, expected: u64, found: u64 },
    /// A record of an image store is not a picture the spec can make (`images`).
    #[error("record {index}: {source}")]
    Image { index: u64, source: loaderx_core::image::ImageError },
    /// Encoding or dictionary training failed.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A request to a remote store failed (after `object_store`'s retries).
    #[cfg(feature = "remote")]
    #[error("{url}: {}", shown(.source))]
    Remote { url: String, source: object_store::Error },
    /// Nothing at a remote URL: no such bucket, or no such key or prefix (`what` says which).
    #[cfg(feature = "remote")]
    #[error("{url}: {what}")]
    RemoteMissing { url: String, what: String },
    /// A remote object changed after the store was opened (its ETag differs).
    #[cfg(feature = "remote")]
    #[error("{url}: {object} changed after the store was opened; open it again to read the new version")]
    RemoteChanged { url: String, object: String },
    /// The server answered a ranged read with the whole object: it does not support Range.
    #[cfg(feature = "remote")]
    #[error("{url}: the server does not support HTTP Range requests (it answered a ranged read with the whole object): {}", shown(.source))]
    NoRange { url: String, source: object_store::Error },
    /// A remote request failed and no credentials were configured for the URL's service.
    #[cfg(feature = "remote")]
    #[error("{url}: no credentials found ({hint}): {}", shown(.source))]
    Credentials { url: String, hint: &'static str, source: object_store::Error },
    /// A write to a URL was refused: no permission (or no valid credentials) for it.
    #[cfg(feature = "remote")]
    #[error("{url}: no permission to write there: {}", shown(.source))]
    RemoteDenied { url: String, source: object_store::Error },
    /// A write to a URL lost to another writer (a conditional write failed), or found a store
    /// where it was to publish one.
    #[cfg(feature = "remote")]
    #[error("{url}: {what}")]
    RemoteConflict { url: String, what: String },
    /// A call on a remote store ran past its deadline.
    #[error("{url}: no answer within the {after:?} deadline")]
    Deadline { url: String, after: std::time::Duration },
}

/// Shown as its kind and its message, which hides the secrets of any URL in it (the fields of a
/// remote error's source may hold the full URL).
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind())
            .field("message", &loaderx_core::url::redact(&self.to_string()))
            .finish()
    }
}

/// The message of `e` followed by its causes (`error sending request: … : connection refused`),
/// each one left out when the text so far already says it, with every URL in it redacted
/// ([`loaderx_core::url::redact`]).
#[cfg(feature = "remote")]
pub(crate) fn shown(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !more.is_empty() && !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    loaderx_core::url::redact(&text)
}

/// Result alias for the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Formats an optional byte offset as ` at byte N`.
struct At(Option<u64>);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(offset) => write!(f, " at byte {offset}"),
            None => Ok(()),
        }
    }
}

impl Classify for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } | Error::NotADirectory(_) => ErrorKind::Io,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::NotAStore { .. } => ErrorKind::NotAStore,
            Error::Corrupt { .. } | Error::Decode { .. } | Error::Checksum { .. } => ErrorKind::Corrupt,
            Error::IndexOutOfRange { .. } => ErrorKind::Index,
            Error::RecordSize { .. } | Error::DoesNotFit(_) => ErrorKind::RecordSize,
            Error::BadArgument(_) | Error::Exists(_) => ErrorKind::Argument,
            Error::Full(_) => ErrorKind::TooLarge,
            Error::Locked(_) => ErrorKind::Locked,
            // Encoding and training fail only for reasons of the dictionary (or its absence).
            Error::Dictionary(_) | Error::Codec(_) => ErrorKind::Dictionary,
            Error::Deadline { .. } => ErrorKind::Io,
            Error::Image { source, .. } => source.kind(),
            #[cfg(feature = "remote")]
            Error::Remote { source, .. } => match source {
                object_store::Error::NotFound { .. } => ErrorKind::NotFound,
                _ => ErrorKind::Io,
            },
            #[cfg(feature = "remote")]
            Error::RemoteMissing { .. } => ErrorKind::NotFound,
            #[cfg(feature = "remote")]
            Error::RemoteChanged { .. }
            | Error::Credentials { .. }
            | Error::NoRange { .. }
            | Error::RemoteDenied { .. } => ErrorKind::Io,
            // Another writer holds what this one was to write: as a store locked by a writer.
            #[cfg(feature = "remote")]
            Error::RemoteConflict { .. } => ErrorKind::Locked,
        }
    }

    /// The damaged file, as one of the store's files, and the offset in it.
    fn location(&self) -> Option<Location> {
        let file = store_file(self.file()?)?;
        Some(Location { file, offset: self.offset() })
    }

    fn index(&self) -> Option<u64> {
        match self {
            Error::IndexOutOfRange { index, .. }
            | Error::Decode { index, .. }
            | Error::Checksum { index, .. }
            | Error::Image { index, .. } => Some(*index),
            Error::Corrupt { index, .. } => *index,
            Error::DoesNotFit(misfit) => Some(misfit.index),
            // The record's position among those being written (an append's, a conversion's).
            Error::RecordSize { position, .. } => Some(*position as u64),
            _ => None,
        }
    }
}

/// Which file of a store `path` is, by its name.
fn store_file(path: &Path) -> Option<StoreFile> {
    loaderx_core::open::store_file(path.file_name()?.to_str()?)
}

impl Error {
    /// The file holding the damaged bytes, for corrupt-data errors.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Error::Corrupt { file, .. } | Error::Decode { file, .. } | Error::Checksum { file, .. } => {
                Some(file)
            }
            _ => None,
        }
    }

    /// The byte offset of the damage in [`Error::file`], where it is known.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Corrupt { offset, .. } => *offset,
            Error::Decode { offset, .. } | Error::Checksum { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    /// Damage somewhere in `file`.
    pub(crate) fn corrupt(file: impl Into<PathBuf>, detail: impl fmt::Display) -> Error {
        Error::Corrupt { file: file.into(), offset: None, index: None, detail: detail.to_string() }
    }

    /// Damage at byte `offset` of `file`.
    pub(crate) fn corrupt_at(file: impl Into<PathBuf>, offset: u64, detail: impl fmt::Display) -> Error {
        Error::Corrupt { file: file.into(), offset: Some(offset), index: None, detail: detail.to_string() }
    }

    /// `meta.zr` of the store at `at` ends before table entry `index`.
    pub(crate) fn entry_past_end(at: &Path, index: u64) -> Error {
        let offset = loaderx_core::format::entry_offset(index);
        let file = at.join(loaderx_core::names::META_FILE);
        Error::corrupt_at(file, offset, format!("entry {index} lies past the end of the file"))
    }

    /// A `loaderx-core` error of the store in `dir`, by its kind. A corrupt-data error names the
    /// file and offset of its [`Location`] (the directory itself when it has none).
    pub(crate) fn classified<E: Classify + fmt::Display>(dir: &Path, e: E) -> Error {
        let path = || e.location().map_or_else(|| dir.to_path_buf(), |l| dir.join(l.file.name()));
        match e.kind() {
            ErrorKind::Corrupt => Error::Corrupt {
                file: path(),
                offset: e.location().and_then(|l| l.offset),
                index: e.index(),
                detail: e.to_string(),
            },
            ErrorKind::NotAStore => Error::NotAStore { path: path(), reason: e.to_string() },
            ErrorKind::TooLarge => Error::Full(e.to_string()),
            ErrorKind::Dictionary => Error::Dictionary(e.to_string()),
            ErrorKind::NotFound => Error::NotFound(path()),
            ErrorKind::Locked => Error::Locked(dir.to_path_buf()),
            // Core errors of these kinds that carry structured fields are converted with them
            // (`From<PlanError>`); the rest are the caller's mistake.
            _ => Error::BadArgument(e.to_string()),
        }
    }
}

impl From<PlanError> for Error {
    /// Through the kind: the variants with structured fields keep them, the rest are classified
    /// by [`Classify::kind`]. A corrupt table (`Overlap`) names `meta.zr` relative to the store,
    /// so the store converts that case itself, knowing its directory.
    fn from(e: PlanError) -> Error {
        match e {
            PlanError::IndexOutOfRange { index, length } => Error::IndexOutOfRange { index, length },
            PlanError::RecordSize { position, len } => Error::RecordSize { position, len },
            other => Error::classified(Path::new(""), other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::format::{entry_offset, FormatError};
    use loaderx_core::schema::{Kind, Layout};

    fn io_error() -> std::io::Error {
        std::io::Error::other("x")
    }

    #[test]
    fn every_variant_has_its_kind() {
        use loaderx_core::schema::Misfit;
        let dir = PathBuf::from("/s");
        let table: Vec<(Error, ErrorKind)> = vec![
            (Error::Io { op: "read", path: dir.clone(), source: io_error() }, ErrorKind::Io),
            (Error::NotFound(dir.clone()), ErrorKind::NotFound),
            (Error::NotADirectory(dir.clone()), ErrorKind::Io),
            (Error::NotAStore { path: dir.clone(), reason: "r".into() }, ErrorKind::NotAStore),
            (Error::corrupt(dir.join("meta.zr"), "d"), ErrorKind::Corrupt),
            (Error::IndexOutOfRange { index: 3, length: 2 }, ErrorKind::Index),
            (Error::RecordSize { position: 0, len: 0 }, ErrorKind::RecordSize),
            (Error::DoesNotFit(Misfit { index: 1, len: 3, why: "w".into() }), ErrorKind::RecordSize),
            (Error::Exists(dir.clone()), ErrorKind::Argument),
            (Error::BadArgument("b".into()), ErrorKind::Argument),
            (Error::Full("f".into()), ErrorKind::TooLarge),
            (Error::Locked(dir.clone()), ErrorKind::Locked),
            (Error::Dictionary("d".into()), ErrorKind::Dictionary),
            (
                Error::Decode {
                    index: 1,
                    file: dir.join("0.zr"),
                    offset: 7,
                    source: CodecError::Decode("bad frame".into()),
                },
                ErrorKind::Corrupt,
            ),
            (Error::Codec(CodecError::Decode("bad".into())), ErrorKind::Dictionary),
        ];
        for (error, kind) in &table {
            assert_eq!(error.kind(), *kind, "{error:?}");
        }
        #[cfg(feature = "remote")]
        {
            let url = || "s3://b/s".to_owned();
            let missing = Error::RemoteMissing { url: url(), what: "no such bucket".into() };
            assert_eq!(missing.kind(), ErrorKind::NotFound);
            assert_eq!(Error::RemoteChanged { url: url(), object: "0.zr".into() }.kind(), ErrorKind::Io);
            let source =
                object_store::Error::NotImplemented { operation: "x".into(), implementer: "y".into() };
            assert_eq!(Error::Credentials { url: url(), hint: "h", source }.kind(), ErrorKind::Io);
        }
        // The Python classes of today (py/src/error.rs) follow from the kinds' codes.
        let codes: Vec<i32> = table.iter().map(|(e, _)| e.kind().code()).collect();
        assert_eq!(codes, [-2, -2, -2, -8, -7, -3, -4, -4, -6, -6, -5, -10, -9, -7, -9]);
    }

    #[test]
    fn corrupt_errors_carry_file_and_offset() {
        let e = Error::corrupt_at("/s/3.zr", 4096, "record lies past the end of the file");
        assert_eq!((e.file(), e.offset()), (Some(Path::new("/s/3.zr")), Some(4096)));
        assert_eq!(e.location(), Some(Location::at(StoreFile::Chunk(3), 4096)));
        assert_eq!(
            e.to_string(),
            "corrupt store: /s/3.zr at byte 4096: record lies past the end of the file"
        );
        let e = Error::corrupt("/s/delete.journal", "short");
        assert_eq!(e.location(), Some(Location::file(StoreFile::Journal)));
        assert_eq!(e.to_string(), "corrupt store: /s/delete.journal: short");
        assert_eq!(Error::Full("x".into()).file(), None);
        let e = Error::Decode {
            index: 4,
            file: "/s/0.zr".into(),
            offset: 9,
            source: CodecError::Decode("x".into()),
        };
        assert_eq!((e.index(), e.offset()), (Some(4), Some(9)));
        assert_eq!(e.location(), Some(Location::at(StoreFile::Chunk(0), 9)));
    }

    #[test]
    fn core_errors_keep_their_location() {
        let dir = Path::new("/s");
        let outside = FormatError::OutsideChunk {
            index: 2,
            meta_offset: entry_offset(2),
            chunk: 5,
            start: 100,
            reason: "missing".into(),
        };
        let e = Error::classified(dir, outside);
        assert_eq!((e.file(), e.offset()), (Some(Path::new("/s/5.zr")), Some(100)));
        let e = Error::classified(dir, FormatError::NotAStore { magic: *b"NOPE", version: 3 });
        assert!(matches!(e, Error::NotAStore { ref path, .. } if path == Path::new("/s/meta.zr")), "{e}");
        let misfit = Layout { kind: Kind::Dense, item_bytes: 8 }.check(3, 5).unwrap_err();
        let e = Error::classified(dir, misfit);
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert_eq!((e.file(), e.offset()), (Some(Path::new("/s/meta.zr")), Some(entry_offset(3))));
    }

    #[test]
    fn plan_errors_go_through_their_kind() {
        let e = Error::from(PlanError::RecordSize { position: 2, len: 0 });
        assert!(matches!(e, Error::RecordSize { position: 2, len: 0 }));
        let e = Error::from(PlanError::OffsetPastEnd { position: 1, offset: 11, len: 10 });
        assert!(matches!(e, Error::BadArgument(_)), "{e}");
        let e = Error::from(PlanError::IndexOutOfRange { index: 6, length: 6 });
        assert!(matches!(e, Error::IndexOutOfRange { index: 6, length: 6 }));
        assert!(matches!(Error::from(PlanError::Full { length: 1, adding: 2 }), Error::Full(_)));
        let e = Error::classified(Path::new("/s"), PlanError::Overlap { index: 1 });
        assert_eq!((e.file(), e.offset()), (Some(Path::new("/s/meta.zr")), Some(entry_offset(1))));
    }

    #[cfg(feature = "remote")]
    #[test]
    fn remote_errors_name_their_causes_and_hide_url_secrets() {
        #[derive(Debug)]
        struct Sending(std::io::Error);
        impl fmt::Display for Sending {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("error sending request for url (http://user:pa55word@h/s/meta.zr?sig=s3cret)")
            }
        }
        impl std::error::Error for Sending {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        let source = object_store::Error::Generic { store: "HTTP", source: Box::new(Sending(refused)) };
        let e = Error::Remote { url: "http://***@h/s?sig=***".into(), source };
        for text in [e.to_string(), format!("{e:?}")] {
            assert!(!text.contains("pa55word") && !text.contains("s3cret"), "{text}");
            assert!(
                text.contains("(http://***@h/s/meta.zr?sig=***): Connection refused (os error 111)"),
                "{text}"
            );
        }
    }
}
