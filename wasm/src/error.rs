//! The one conversion from Rust errors to JavaScript: an `Error` named `LoaderxError` with a
//! stable `code` (and `index` when the error is about one record).
//!
//! Codes: `LOADERX_NOT_A_STORE`, `LOADERX_CORRUPT`, `LOADERX_INDEX`, `LOADERX_ARGUMENT`,
//! `LOADERX_TOO_LARGE`. The JS package adds the I/O codes (`LOADERX_IO`, `LOADERX_NOT_FOUND`,
//! `LOADERX_NO_RANGE`, `LOADERX_CLOSED`).

use loaderx_core::format::FormatError;
use loaderx_core::read::ReadError;
use loaderx_core::sampler::SamplerError;
use loaderx_core::schema::SchemaError;
use wasm_bindgen::JsValue;

/// Builds the JS error.
pub(crate) fn js_error(code: &str, message: &str, index: Option<u64>) -> JsValue {
    let err = js_sys::Error::new(message);
    err.set_name("LoaderxError");
    // Setting a property on a fresh Error object cannot fail; if it somehow did, the error
    // would still carry its message.
    let _ = js_sys::Reflect::set(&err, &"code".into(), &code.into());
    if let Some(i) = index {
        let _ = js_sys::Reflect::set(&err, &"index".into(), &JsValue::from_f64(i as f64));
    }
    err.into()
}

/// The stable code of a read error.
pub(crate) fn read_code(e: &ReadError) -> &'static str {
    match e {
        // A meta.zr too short to hold a header is not a store either.
        ReadError::Format(
            FormatError::NotAStore { .. } | FormatError::MetaTooShort { length: 0, needed: 16, .. },
        ) => "LOADERX_NOT_A_STORE",
        ReadError::Index { .. } => "LOADERX_INDEX",
        ReadError::TooLarge { .. } => "LOADERX_TOO_LARGE",
        _ => "LOADERX_CORRUPT",
    }
}

pub(crate) fn from_read(e: ReadError) -> JsValue {
    js_error(read_code(&e), &e.to_string(), e.index())
}

pub(crate) fn from_format(e: FormatError) -> JsValue {
    from_read(e.into())
}

pub(crate) fn from_schema(e: SchemaError) -> JsValue {
    js_error("LOADERX_CORRUPT", &format!("schema.msgpack: {e}"), None)
}

pub(crate) fn from_sampler(e: SamplerError) -> JsValue {
    js_error("LOADERX_ARGUMENT", &e.to_string(), None)
}

pub(crate) fn argument(message: &str) -> JsValue {
    js_error("LOADERX_ARGUMENT", message, None)
}
