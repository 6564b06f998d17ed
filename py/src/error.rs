//! Maps every error to the Python exception classes of `loaderx.errors`, in one `match` on its
//! kind (`loaderx_core::error::ErrorKind`).
//!
//! Every class derives from `ZrecordError` (the reference's exception, with its numeric `code`,
//! which comes from the kind), and where Python users expect a builtin it derives from that too:
//! `IndexError`, `ValueError`, `OSError`. Corrupt-data errors carry `file` and `offset`, and
//! errors about one record its `index`, as attributes.

use loaderx_core::error::{Classify, ErrorKind};
use loaderx_core::url::redact;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The class in `loaderx.errors` for a kind.
fn class_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "StoreNotFoundError",
        ErrorKind::Io => "StoreIOError",
        ErrorKind::NotAStore => "NotAStoreError",
        ErrorKind::Corrupt => "CorruptStoreError",
        ErrorKind::Index => "StoreIndexError",
        ErrorKind::RecordSize => "RecordSizeError",
        ErrorKind::Argument => "BadArgumentError",
        ErrorKind::TooLarge => "StoreFullError",
        ErrorKind::Locked => "StoreLockedError",
        ErrorKind::Dictionary => "DictionaryError",
        ErrorKind::Closed => "StoreClosedError",
        _ => "ZrecordError",
    }
}

/// The Python exception `class` (the kind's, [`class_of`], or a subclass of it) of a kind, with
/// the error's fields.
fn build(
    class: &str,
    kind: ErrorKind,
    message: String,
    file: Option<String>,
    offset: Option<u64>,
    index: Option<u64>,
) -> PyErr {
    Python::attach(|py| {
        let built = (|| {
            let cls = py.import("loaderx.errors")?.getattr(class)?;
            let fields = PyDict::new(py);
            fields.set_item("file", file)?;
            fields.set_item("offset", offset)?;
            fields.set_item("index", index)?;
            cls.call((kind.code(), message.clone()), Some(&fields))
        })();
        match built {
            Ok(exc) => PyErr::from_value(exc),
            // The package is not importable (the module used on its own): still a clear error.
            Err(_) => PyValueError::new_err(message),
        }
    })
}

/// The Python exception for a store error. Its message and file show URLs without their
/// secrets (`loaderx_core::url::redact`).
pub(crate) fn to_py(e: loaderx_native::Error) -> PyErr {
    if let loaderx_native::Error::Exists(_) = e {
        // A conversion refused to touch a store (mode='error'): Python's own class for it.
        let hint = "(mode='error'); use mode='append' to add to it or mode='overwrite' to replace it";
        return pyo3::exceptions::PyFileExistsError::new_err(format!("{} {hint}", redact(&e.to_string())));
    }
    let file = e.file().map(|p| redact(&p.to_string_lossy()));
    // A checksum mismatch is a corrupt-data error of its own class.
    let class = match e {
        loaderx_native::Error::Checksum { .. } => "ChecksumError",
        // A record that is not a picture the spec can make, for any reason but a bad spec.
        loaderx_native::Error::Image { ref source, .. }
            if !matches!(source, loaderx_core::image::ImageError::Spec(_)) =>
        {
            "ImageDecodeError"
        }
        _ => class_of(e.kind()),
    };
    build(class, e.kind(), redact(&e.to_string()), file, e.offset(), e.index())
}

/// The Python exception for any core error (sampler, schema, plan).
pub(crate) fn core_to_py(e: impl Classify + std::fmt::Display) -> PyErr {
    let file = e.location().map(|at| at.file.name());
    let offset = e.location().and_then(|at| at.offset);
    build(class_of(e.kind()), e.kind(), e.to_string(), file, offset, e.index())
}

/// A caller's argument is wrong.
pub(crate) fn argument(message: String) -> PyErr {
    build(class_of(ErrorKind::Argument), ErrorKind::Argument, message, None, None, None)
}

/// The error for a call on a closed handle.
pub(crate) fn closed() -> PyErr {
    build(
        class_of(ErrorKind::Closed),
        ErrorKind::Closed,
        "I/O operation on a closed store".into(),
        None,
        None,
        None,
    )
}

/// `{kind name: code}` for every kind: the one table of numeric codes `loaderx.errors` uses.
pub(crate) fn codes(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let table = PyDict::new(py);
    for kind in ErrorKind::ALL {
        table.set_item(kind.name(), kind.code())?;
    }
    Ok(table)
}
