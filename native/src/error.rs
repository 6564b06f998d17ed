//! The store's error type. Every failure is a value: bad input from callers, corrupt files and
//! I/O errors never panic.

use std::path::PathBuf;

use loaderx_core::codec::CodecError;
use loaderx_core::format::FormatError;
use loaderx_core::plan::PlanError;

/// Errors from [`crate::Store`].
#[derive(Debug, thiserror::Error)]
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
    /// A file of the store is damaged. `file` names it; the message names the offset.
    #[error("corrupt store: {file}: {detail}")]
    Corrupt { file: PathBuf, detail: String },
    /// A record index is not below the store's length.
    #[error("index {index} out of range for a store of {length} records")]
    IndexOutOfRange { index: u64, length: u64 },
    /// A record to append is empty or longer than 1 MiB.
    #[error("record {position} is {len} bytes; records must be 1..=1048576 bytes")]
    RecordSize { position: usize, len: u64 },
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
    /// A stored record failed to decode.
    #[error("record {index}: {source}")]
    Decode { index: u64, source: CodecError },
    /// Encoding or dictionary training failed.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// Result alias for the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    pub(crate) fn corrupt(file: impl Into<PathBuf>, detail: impl std::fmt::Display) -> Error {
        Error::Corrupt { file: file.into(), detail: detail.to_string() }
    }

    pub(crate) fn format(meta: impl Into<PathBuf>, e: FormatError) -> Error {
        match e {
            FormatError::NotAStore { .. } => Error::NotAStore { path: meta.into(), reason: e.to_string() },
            other => Error::corrupt(meta, other),
        }
    }
}

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Error {
        match e {
            PlanError::IndexOutOfRange { index, length } => Error::IndexOutOfRange { index, length },
            PlanError::Full { .. } => Error::Full(e.to_string()),
            other => Error::BadArgument(other.to_string()),
        }
    }
}
