//! Exclusion masks for JavaScript (`loaderx_core::mask`): the mask file, the kept records'
//! rank/select, and a store's identity, fed by JavaScript from the reader's table spans and the
//! store's content digest or sampled records, in core's order.
//!
//! Invariant: bad bytes and bad indices are JavaScript errors; nothing here panics.

use loaderx_core::mask::{self, identity_text, Identity, Kept, Mask as CoreMask};
use wasm_bindgen::prelude::*;

use crate::error::{argument, js};
use crate::reader::{size, Reader};

fn identity_of(bytes: &[u8]) -> Result<[u8; 32], JsValue> {
    bytes.try_into().map_err(|_| argument(&format!("a store identity is 32 bytes, got {}", bytes.len())))
}

/// An exclusion mask and the index of the records it keeps.
#[wasm_bindgen(js_name = MaskFile)]
#[derive(Debug)]
pub struct MaskFile {
    mask: CoreMask,
    kept: Kept,
}

impl MaskFile {
    /// The index of the kept records (for a packer over them).
    pub(crate) fn kept_index(&self) -> &Kept {
        &self.kept
    }
}

fn with_kept(mask: CoreMask) -> Result<MaskFile, JsValue> {
    let kept = mask.kept().map_err(js)?;
    Ok(MaskFile { mask, kept })
}

#[wasm_bindgen(js_class = MaskFile)]
impl MaskFile {
    /// Parses a mask file.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: &[u8]) -> Result<MaskFile, JsValue> {
        with_kept(CoreMask::from_bytes(bytes).map_err(js)?)
    }

    /// A mask over `length` records of the store with `identity` (32 bytes), excluding `indices`.
    pub fn build(length: f64, identity: &[u8], indices: &[f64]) -> Result<MaskFile, JsValue> {
        let idx = indices.iter().map(|&i| size(i, "an index")).collect::<Result<Vec<_>, _>>()?;
        with_kept(CoreMask::new(size(length, "length")?, identity_of(identity)?, idx).map_err(js)?)
    }

    #[wasm_bindgen(js_name = toBytes)]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.mask.to_bytes()
    }

    /// Refuses a store of another length or identity.
    pub fn check(&self, length: f64, identity: &[u8]) -> Result<(), JsValue> {
        self.mask.check(size(length, "length")?, &identity_of(identity)?).map_err(js)
    }

    /// The records at positions `indices` of the kept records (each below `kept`).
    pub fn select(&self, indices: &[f64]) -> Result<Vec<f64>, JsValue> {
        indices
            .iter()
            .map(|&j| {
                let j = size(j, "a kept index")?;
                self.kept.select(j).map(|r| r as f64).ok_or_else(|| {
                    argument(&format!("kept index {j} is not below the {} kept records", self.kept.count()))
                })
            })
            .collect()
    }

    #[wasm_bindgen(js_name = isExcluded)]
    pub fn is_excluded(&self, index: f64) -> bool {
        index >= 0.0 && self.mask.is_excluded(index as u64)
    }

    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        self.mask.length() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn excluded(&self) -> f64 {
        self.mask.excluded() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn kept(&self) -> f64 {
        self.kept.count() as f64
    }

    /// `sha256:<hex>` of the store the mask is for.
    #[wasm_bindgen(getter)]
    pub fn identity(&self) -> String {
        identity_text(self.mask.identity())
    }
}

/// A store's identity being computed (core's [`Identity`]): the schema first (from the reader),
/// then the table in spans, then the content digest or the sampled records.
#[wasm_bindgen(js_name = MaskIdentity)]
#[derive(Debug)]
pub struct MaskIdentity {
    inner: Option<Identity>,
}

#[wasm_bindgen(js_class = MaskIdentity)]
impl MaskIdentity {
    #[wasm_bindgen(constructor)]
    pub fn new(reader: &Reader) -> MaskIdentity {
        MaskIdentity { inner: Some(Identity::new(reader.schema_bytes().as_deref())) }
    }

    fn hasher(&mut self) -> Result<&mut Identity, JsValue> {
        self.inner.as_mut().ok_or_else(|| argument("the identity is finished"))
    }

    /// The table entries of records `start..end` (their pages cached), in record order.
    pub fn table(&mut self, reader: &Reader, start: f64, end: f64) -> Result<(), JsValue> {
        let (_, entries) = reader.entries_in(start, end)?;
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.to_bytes()).collect();
        self.hasher()?.table(&bytes);
        Ok(())
    }

    pub fn digest(&mut self, digest: &str) -> Result<(), JsValue> {
        self.hasher()?.digest(digest);
        Ok(())
    }

    pub fn record(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        self.hasher()?.record(bytes);
        Ok(())
    }

    /// The 32-byte identity.
    pub fn finish(&mut self) -> Result<Vec<u8>, JsValue> {
        let h = self.inner.take().ok_or_else(|| argument("the identity is finished"))?;
        Ok(h.finish().to_vec())
    }
}

/// The records whose bytes enter the identity of a store of `length` records without checksums.
#[wasm_bindgen(js_name = maskSamples)]
pub fn mask_samples(length: f64) -> Result<Vec<f64>, JsValue> {
    Ok(mask::sampled(size(length, "length")?).into_iter().map(|i| i as f64).collect())
}

/// The identity of stores read as one, from theirs (32 bytes each, in order).
#[wasm_bindgen(js_name = combinedMaskIdentity)]
pub fn combined_mask_identity(parts: &[u8]) -> Result<Vec<u8>, JsValue> {
    if parts.len() % 32 != 0 {
        return Err(argument("identities are 32 bytes each"));
    }
    Ok(mask::combined_identity(parts.chunks_exact(32).map(|c| c.try_into().unwrap_or([0; 32]))).to_vec())
}
