//! Manifests for JavaScript: core's answer to "store or manifest?" ([`identify`]) and a parsed
//! manifest ([`Manifest`]) that checks each store the JS package opens against its entry and
//! splits a request's indices over the stores by core's one rule. The JS package reads the
//! files and opens the stores; nothing of the manifest's rules is written again in JS.

use loaderx_core::error::ErrorKind;
use loaderx_core::manifest::{self, Holds, Seen};
use loaderx_core::schema::{Kind, Schema};
use wasm_bindgen::prelude::*;

use crate::error::{argument, js, js_error};

/// Largest total a JS number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

/// What a location holds, from what JS sees there: `seen` is `"nothing"`, `"file"` (with its
/// `name`) or `"directory"` (with whether it holds `meta.zr` and `manifest.json`). Returns
/// `"store"`, `"manifestFile"` (the location is the manifest) or `"manifestInside"` (read
/// `manifest.json` in it); a location that is neither throws core's error (LOADERX_NOT_FOUND,
/// LOADERX_NOT_A_STORE or LOADERX_ARGUMENT) naming what was found.
#[wasm_bindgen]
pub fn identify(seen: &str, name: &str, store: bool, manifest: bool) -> Result<String, JsValue> {
    let seen = match seen {
        "nothing" => Seen::Nothing,
        "file" => Seen::File { name },
        "directory" => Seen::Directory { store, manifest },
        other => return Err(argument(&format!("identify: unknown seen {other:?}"))),
    };
    let holds = manifest::identify(seen).map_err(js)?;
    Ok(match holds {
        Holds::Store => "store",
        Holds::ManifestFile => "manifestFile",
        Holds::ManifestInside => "manifestInside",
    }
    .to_owned())
}

/// Whether a URL's last part names a file decided on by name alone (`meta.zr`, `*.json`), so
/// that a location that cannot be listed (HTTP) is not probed for files inside it.
#[wasm_bindgen(js_name = namesAFile)]
pub fn names_a_file(name: &str) -> bool {
    manifest::names_a_file(name)
}

/// The manifest file's name inside a directory (`manifest.json`).
#[wasm_bindgen(js_name = manifestFile)]
pub fn manifest_file() -> String {
    manifest::MANIFEST_FILE.to_owned()
}

/// A manifest, parsed and checked.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Manifest {
    inner: manifest::Manifest,
    offsets: Vec<u64>,
}

#[wasm_bindgen]
impl Manifest {
    /// Parses a manifest's JSON (LOADERX_CORRUPT when it is not one this version reads).
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: &[u8]) -> Result<Manifest, JsValue> {
        let inner = manifest::Manifest::parse(bytes).map_err(js)?;
        if inner.len() > MAX_SAFE {
            let message =
                format!("the manifest lists {} records; JavaScript reads at most 2^53 - 1", inner.len());
            return Err(js_error(ErrorKind::TooLarge, &message, None).into());
        }
        let offsets = inner.offsets();
        Ok(Manifest { inner, offsets })
    }

    /// Records over all stores, as listed.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        self.inner.len() as f64
    }

    /// The stores' paths, as listed.
    pub fn paths(&self) -> Vec<String> {
        self.inner.stores().iter().map(|e| e.path.clone()).collect()
    }

    /// Each store's listed length.
    #[wasm_bindgen(js_name = listedLengths)]
    pub fn listed_lengths(&self) -> Vec<f64> {
        self.inner.stores().iter().map(|e| e.length as f64).collect()
    }

    /// Global index of each store's first record, plus the total at the end.
    pub fn offsets(&self) -> Vec<f64> {
        self.offsets.iter().map(|&o| o as f64).collect()
    }

    /// Checks store `k` as opened against its entry: its `length` and its layout (`kind`,
    /// `dtype`, `itemShape` of its schema; `kind` null for a store without one). A store that
    /// changed is LOADERX_CORRUPT naming it, one of another layout LOADERX_ARGUMENT.
    #[wasm_bindgen(js_name = checkStore)]
    pub fn check_store(
        &self,
        k: usize,
        length: f64,
        kind: Option<String>,
        dtype: Option<String>,
        item_shape: Option<Vec<f64>>,
    ) -> Result<(), JsValue> {
        let schema = match kind {
            None => None,
            Some(kind) => {
                let kind: Kind = kind.parse().map_err(js)?;
                let shape: Vec<u64> = item_shape.unwrap_or_default().iter().map(|&d| d as u64).collect();
                Some(Schema::new(kind, dtype.as_deref().unwrap_or(""), &shape, "raw"))
            }
        };
        self.inner.check_store(k, length as u64, schema.as_ref()).map_err(js)
    }

    /// Splits `indices` (checked below the total) by store: `[{store, positions, local}]` in
    /// store order, `positions` being places in the request and `local` the indices inside the
    /// store (both Float64Arrays).
    pub fn split(&self, indices: &[f64]) -> Result<js_sys::Array, JsValue> {
        let global = crate::error::indices(indices, self.inner.len())?;
        let parts = js_sys::Array::new();
        for p in manifest::split(&self.offsets, &global) {
            let part = js_sys::Object::new();
            let positions: Vec<f64> = p.positions.iter().map(|&i| i as f64).collect();
            let local: Vec<f64> = p.local.iter().map(|&i| i as f64).collect();
            let _ = js_sys::Reflect::set(&part, &"store".into(), &JsValue::from_f64(p.store as f64));
            let _ =
                js_sys::Reflect::set(&part, &"positions".into(), &js_sys::Float64Array::from(&positions[..]));
            let _ = js_sys::Reflect::set(&part, &"local".into(), &js_sys::Float64Array::from(&local[..]));
            parts.push(&part);
        }
        Ok(parts)
    }
}
