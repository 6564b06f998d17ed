//! Encoded images for JavaScript: the header (format, display size, EXIF orientation) and a
//! full decode, by core's `image` module (pure Rust: zune-jpeg, zune-png, image-webp), so Node
//! QA finds the records a native loader could not decode. The viewer shows pictures with the
//! browser's own decoder.

use loaderx_core::image::{self, Limits};
use wasm_bindgen::prelude::*;

use crate::error::js;

fn set(obj: &js_sys::Object, key: &str, value: JsValue) {
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(obj, &key.into(), &value);
}

/// `{media, width, height, orientation}` of one encoded image (no pixels decoded); throws a
/// `LoaderxError` (`LOADERX_CORRUPT`) saying why the bytes are not an image.
#[wasm_bindgen(js_name = imageHeader)]
pub fn image_header(bytes: &[u8]) -> Result<JsValue, JsValue> {
    let h = image::header(bytes).map_err(js)?;
    let obj = js_sys::Object::new();
    set(&obj, "media", h.media.as_str().into());
    set(&obj, "width", h.width.into());
    set(&obj, "height", h.height.into());
    set(&obj, "orientation", h.orientation.into());
    Ok(obj.into())
}

/// Decodes every pixel of an encoded image (refusing more than `max_pixels`):
/// `{width, height, rgb}` with `rgb` a `Uint8Array` of rows of RGB, in display orientation.
#[wasm_bindgen(js_name = decodeImage)]
pub fn decode_image(bytes: &[u8], max_pixels: f64) -> Result<JsValue, JsValue> {
    let limits = Limits { max_pixels: max_pixels.clamp(0.0, u64::MAX as f64) as u64 };
    let p = image::decode(bytes, &limits).map_err(js)?;
    let obj = js_sys::Object::new();
    set(&obj, "width", p.width.into());
    set(&obj, "height", p.height.into());
    set(&obj, "rgb", js_sys::Uint8Array::from(p.rgb.as_slice()).into());
    Ok(obj.into())
}

/// Why an encoded image does not decode under `max_pixels`, or `undefined` when it does.
#[wasm_bindgen(js_name = imageProblem)]
pub fn image_problem(bytes: &[u8], max_pixels: f64) -> Option<String> {
    let limits = Limits { max_pixels: max_pixels.clamp(0.0, u64::MAX as f64) as u64 };
    image::decode(bytes, &limits).err().map(|e| e.to_string())
}

/// The default pixel limit (Pillow's decompression-bomb limit).
#[wasm_bindgen(js_name = defaultMaxPixels)]
pub fn default_max_pixels() -> f64 {
    image::DEFAULT_MAX_PIXELS as f64
}
