//! Maps store errors to the Python exception classes of `loaderx.errors`, in one `match`.
//!
//! Every class derives from `ZrecordError` (the reference's exception, with its numeric `code`),
//! and where Python users expect a builtin it derives from that too: `IndexError`, `ValueError`,
//! `OSError`.

use loaderx_native::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The reference's error codes (`loaderx/zrecord.py`), kept so `err.code` means the same.
mod code {
    pub(super) const IO: i32 = -2;
    pub(super) const INDEX: i32 = -3;
    pub(super) const RECORD_SIZE: i32 = -4;
    pub(super) const FULL: i32 = -5;
    pub(super) const BUFFER: i32 = -6;
    pub(super) const DECODE: i32 = -7;
    pub(super) const NOT_A_STORE: i32 = -8;
    pub(super) const DICT: i32 = -9;
    pub(super) const LOCKED: i32 = -10;
}

/// `(class name in loaderx.errors, code)` for an error.
fn class_of(e: &Error) -> (&'static str, i32) {
    match e {
        Error::Io { .. } => ("StoreIOError", code::IO),
        Error::NotFound(_) => ("StoreNotFoundError", code::IO),
        Error::NotADirectory(_) => ("StoreIOError", code::IO),
        Error::NotAStore { .. } => ("NotAStoreError", code::NOT_A_STORE),
        Error::Corrupt { .. } => ("CorruptStoreError", code::DECODE),
        Error::IndexOutOfRange { .. } => ("StoreIndexError", code::INDEX),
        Error::RecordSize { .. } => ("RecordSizeError", code::RECORD_SIZE),
        Error::BadArgument(_) => ("BadArgumentError", code::BUFFER),
        Error::Full(_) => ("StoreFullError", code::FULL),
        Error::Locked(_) => ("StoreLockedError", code::LOCKED),
        Error::Dictionary(_) => ("DictionaryError", code::DICT),
        Error::Decode { .. } => ("CorruptStoreError", code::DECODE),
        Error::Codec(_) => ("DictionaryError", code::DICT),
        _ => ("ZrecordError", code::IO),
    }
}

/// The Python exception for a store error.
pub(crate) fn to_py(e: Error) -> PyErr {
    let (class, code) = class_of(&e);
    let message = e.to_string();
    Python::attach(|py| {
        let built = py
            .import("loaderx.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|cls| cls.call1((code, message.clone())));
        match built {
            Ok(exc) => PyErr::from_value(exc),
            // The package is not importable (the module used on its own): still a clear error.
            Err(_) => PyValueError::new_err(message),
        }
    })
}

/// The error for a call on a closed handle.
pub(crate) fn closed() -> PyErr {
    PyValueError::new_err("I/O operation on a closed store")
}
