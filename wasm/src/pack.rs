//! The core packer for JavaScript: which tokens of which documents fill each row of a packed
//! stream, exactly as native plans them (`loaderx_core::pack`). Segments come back as a
//! `Float64Array` of `[row, col, len, doc, offset]` per segment (exact: values stay below 2^53).

use loaderx_core::pack::{PackSpec, Packer as CorePacker, Packing};
use loaderx_core::sampler::Mode;
use wasm_bindgen::prelude::*;

use crate::error::{argument, js};
use crate::mask::MaskFile;

/// Most rows one `segments` call plans, so a typo cannot exhaust memory.
const MAX_ROWS: u64 = 1 << 20;

/// Rows of a packed stream over documents of `lengths` tokens.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Packer {
    inner: CorePacker,
}

#[wasm_bindgen]
impl Packer {
    /// `packing`: `"concat"` or `"best_fit"` (with `bins` open rows); `mode`: 0 sequential,
    /// 1 iid, 2 cyclic.
    #[wasm_bindgen(constructor)]
    pub fn new(
        lengths: Vec<u32>,
        seq_len: u32,
        packing: &str,
        bins: u32,
        mode: u8,
        seed: u64,
    ) -> Result<Packer, JsValue> {
        let packing = match packing {
            "concat" => Packing::Concat,
            "best_fit" => Packing::BestFit { bins },
            other => return Err(argument(&format!("packing must be 'concat' or 'best_fit', got {other:?}"))),
        };
        let mode = Mode::try_from(mode).map_err(js)?;
        let inner = CorePacker::new(lengths, PackSpec { seq_len, packing, mode, seed }).map_err(js)?;
        Ok(Packer { inner })
    }

    /// The same stream over `mask`'s kept records (this packer's `lengths` were theirs, in
    /// order); segments then name the records. Consumes this packer.
    #[wasm_bindgen(js_name = withMask)]
    pub fn with_mask(self, mask: &MaskFile) -> Result<Packer, JsValue> {
        Ok(Packer { inner: self.inner.with_kept(mask.kept_index().clone()).map_err(js)? })
    }

    /// The segments of rows `first..first + rows`: `[row, col, len, doc, offset]` each.
    pub fn segments(&self, first: u64, rows: u64) -> Result<Vec<f64>, JsValue> {
        if rows > MAX_ROWS {
            return Err(argument("a segments call plans at most 2^20 rows in JavaScript"));
        }
        let segments = self.inner.segments(first, rows).map_err(js)?;
        Ok(segments
            .iter()
            .flat_map(|g| [g.row as f64, f64::from(g.col), f64::from(g.len), g.doc as f64, g.offset as f64])
            .collect())
    }

    /// Rows of epoch `epoch` (best_fit), or undefined (concat: epochs are `tokens` tokens).
    #[wasm_bindgen(js_name = epochRows)]
    pub fn epoch_rows(&self, epoch: u64) -> Result<Option<f64>, JsValue> {
        Ok(self.inner.epoch_rows(epoch).map_err(js)?.map(|r| r as f64))
    }

    /// Tokens in all documents.
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> f64 {
        self.inner.tokens() as f64
    }

    /// Documents.
    #[wasm_bindgen(getter)]
    pub fn documents(&self) -> f64 {
        self.inner.documents() as f64
    }
}
