//! `Profiler`: whole-store statistics (`loaderx_core::profile`) for the viewer and
//! `loaderx-qa`. JavaScript streams decoded record bytes in, in record order (the first pass,
//! then, when `needsValuesAgain`, the same records again for the value histograms); the summary
//! comes back as JSON. `Reader.codecSums` gives the per-codec bytes of a store's table.
//!
//! Invariant: bad input (a schema that is not one, lengths that do not add up to the bytes
//! given) is a JavaScript error; nothing here panics.

use loaderx_core::profile::{CodecTally, Profile, Spec, DEFAULT_BINS};
use loaderx_core::schema::{Kind, Schema};
use wasm_bindgen::prelude::*;

use crate::error::argument;
use crate::reader::{size, Reader};

/// A profile being accumulated for one store (or one manifest's stores, read as one).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Profiler {
    inner: Profile,
}

fn lens_of(lens: &[f64]) -> Result<Vec<u64>, JsValue> {
    lens.iter().map(|&l| size(l, "record lengths")).collect()
}

/// The schema fields a profile reads, from the JavaScript schema object's JSON
/// (`{kind, dtype, itemShape, media?}`), or `None` for `null` (records are bytes).
fn schema_of(json: &str) -> Result<Option<Schema>, JsValue> {
    let bad = |why: String| argument(&format!("profile schema: {why}"));
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    if v.is_null() {
        return Ok(None);
    }
    let text =
        |key: &str| v.get(key).and_then(serde_json::Value::as_str).ok_or_else(|| bad(format!("no {key}")));
    let kind: Kind =
        text("kind")?.parse().map_err(|e: loaderx_core::schema::SchemaError| bad(e.to_string()))?;
    let shape = v
        .get("itemShape")
        .and_then(serde_json::Value::as_array)
        .and_then(|a| a.iter().map(serde_json::Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| bad("itemShape must be an array of non-negative integers".into()))?;
    let mut schema = Schema::new(kind, text("dtype")?, &shape, "raw");
    if let Some(media) = v.get("media").and_then(serde_json::Value::as_str) {
        schema.set("media", media.into());
    }
    Ok(Some(schema))
}

#[wasm_bindgen]
impl Profiler {
    /// A profile of records with the schema `schema_json` (the JSON of a store's `schema`, or
    /// `null`), with `bins` histogram bins (0: the default, 20).
    #[wasm_bindgen(constructor)]
    pub fn new(schema_json: &str, bins: u32) -> Result<Profiler, JsValue> {
        let bins = if bins == 0 { DEFAULT_BINS } else { bins as usize };
        let schema = schema_of(schema_json)?;
        Ok(Profiler { inner: Profile::new(Spec::of(schema.as_ref(), bins)) })
    }

    /// The first pass: records `first..first + lens.length`, their decoded bytes back to back.
    pub fn add(&mut self, first: f64, data: &[u8], lens: &[f64]) -> Result<(), JsValue> {
        let first = size(first, "first")?;
        self.inner.add(first, data, &lens_of(lens)?).map_err(|e| argument(&e))
    }

    /// Whether the value histograms need the records a second time (`addHistogram`).
    #[wasm_bindgen(getter, js_name = needsValuesAgain)]
    pub fn needs_values_again(&self) -> bool {
        self.inner.needs_values_again()
    }

    /// The second pass, over the same records in order.
    #[wasm_bindgen(js_name = addHistogram)]
    pub fn add_histogram(&mut self, data: &[u8], lens: &[f64]) -> Result<(), JsValue> {
        self.inner.add_histogram(data, &lens_of(lens)?).map_err(|e| argument(&e))
    }

    /// The statistics so far, as JSON (`loaderx_core::profile::Summary`, camelCase keys).
    pub fn summary(&self) -> Result<String, JsValue> {
        serde_json::to_string(&self.inner.summary()).map_err(|e| argument(&e.to_string()))
    }
}

#[wasm_bindgen]
impl Reader {
    /// `[{codec, records, storedBytes, decodedBytes}]` (JSON) of the table entries of records
    /// `start..end`, whose table pages must be cached (`tableRangesSpan(start, end)`).
    #[wasm_bindgen(js_name = codecSums)]
    pub fn codec_sums(&self, start: f64, end: f64) -> Result<String, JsValue> {
        let (_, entries) = self.entries_in(start, end)?;
        let mut tally = CodecTally::default();
        entries.into_iter().for_each(|e| tally.add(e));
        serde_json::to_string(&tally.sums()).map_err(|e| argument(&e.to_string()))
    }
}
