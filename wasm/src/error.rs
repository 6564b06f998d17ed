//! The one conversion from Rust errors to JavaScript: an `Error` named `LoaderxError` with a
//! stable `code`, plus `index`, `file` and `offset` when the error is about one record or about
//! bytes on disk.
//!
//! Every error is classified by `loaderx_core::error::Classify`, and [`code`] maps each kind to
//! its `LOADERX_*` code in one `match`. The JS package adds the codes of its own I/O
//! (`LOADERX_IO`, `LOADERX_NOT_FOUND`, `LOADERX_NO_RANGE`, `LOADERX_CLOSED`) from the same list.

use loaderx_core::error::{Classify, ErrorKind};
use wasm_bindgen::JsValue;

/// The `LOADERX_*` code of a kind.
pub(crate) fn code(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "LOADERX_NOT_FOUND",
        ErrorKind::NotAStore => "LOADERX_NOT_A_STORE",
        ErrorKind::Corrupt => "LOADERX_CORRUPT",
        ErrorKind::Index => "LOADERX_INDEX",
        ErrorKind::TooLarge => "LOADERX_TOO_LARGE",
        ErrorKind::Io => "LOADERX_IO",
        ErrorKind::Closed => "LOADERX_CLOSED",
        // Nothing the reader does appends, locks or trains: these can only be a caller's doing.
        ErrorKind::Argument | ErrorKind::RecordSize | ErrorKind::Dictionary | ErrorKind::Locked => {
            "LOADERX_ARGUMENT"
        }
        _ => "LOADERX_ARGUMENT",
    }
}

fn set(err: &js_sys::Error, key: &str, value: JsValue) {
    // Setting a property on a fresh Error object cannot fail; if it somehow did, the error
    // would still carry its message.
    let _ = js_sys::Reflect::set(err, &key.into(), &value);
}

/// Builds the JS error of a kind.
pub(crate) fn js_error(kind: ErrorKind, message: &str, index: Option<u64>) -> js_sys::Error {
    let err = js_sys::Error::new(message);
    err.set_name("LoaderxError");
    set(&err, "code", code(kind).into());
    if let Some(i) = index {
        set(&err, "index", JsValue::from_f64(i as f64));
    }
    err
}

/// The JS error of any classified error, with its record and location.
pub(crate) fn to_js(e: &(impl Classify + std::fmt::Display)) -> JsValue {
    let err = js_error(e.kind(), &e.to_string(), e.index());
    if let Some(at) = e.location() {
        set(&err, "file", at.file.name().into());
        if let Some(offset) = at.offset {
            set(&err, "offset", JsValue::from_f64(offset as f64));
        }
    }
    err.into()
}

/// `map_err` form of [`to_js`].
pub(crate) fn js<E: Classify + std::fmt::Display>(e: E) -> JsValue {
    to_js(&e)
}

/// A caller's argument is wrong.
pub(crate) fn argument(message: &str) -> JsValue {
    js_error(ErrorKind::Argument, message, None).into()
}

/// An index that is no index: negative, fractional, NaN or infinite (a JavaScript number
/// turned into a store index at the edge; the range check is core's).
pub(crate) fn not_an_index(x: f64, length: u64) -> JsValue {
    // Named as JavaScript writes the number (5e-324, not 0.000…5).
    let shown = String::from(
        js_sys::Number::from(x).to_string_with_radix(10).unwrap_or_else(|_| format!("{x}").into()),
    );
    let message = format!("index {shown} is not an integer index into a store of {length} records");
    js_error(ErrorKind::Index, &message, None).into()
}

/// JavaScript numbers as indices into `length` records: whole and non-negative here (the edge),
/// below the length by core's one rule. The first bad element is the one named, whichever rule
/// it breaks.
pub(crate) fn indices(xs: &[f64], length: u64) -> Result<Vec<u64>, JsValue> {
    let mut indices = Vec::with_capacity(xs.len());
    for &x in xs {
        if !(x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(64)) {
            loaderx_core::read::check_indices(&indices, length).map_err(js)?;
            return Err(not_an_index(x, length));
        }
        indices.push(x as u64);
    }
    loaderx_core::read::check_indices(&indices, length).map_err(js)?;
    Ok(indices)
}

/// A store's `schema.msgpack` that breaks the rules (its message names the file).
pub(crate) fn schema(e: loaderx_core::schema::SchemaError) -> JsValue {
    let err = js_error(e.kind(), &format!("schema.msgpack: {e}"), None);
    if let Some(at) = e.location() {
        set(&err, "file", at.file.name().into());
    }
    err.into()
}
