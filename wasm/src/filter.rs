//! `Filter`: core's record filter language (`loaderx_core::filter`) for the viewer's search and
//! scripts. JavaScript reads the columns `columns()` names for a batch of records and asks which
//! match.
//!
//! Invariant: a bad filter or bad columns are JavaScript errors; nothing here panics.

use loaderx_core::filter::Filter as CoreFilter;
use wasm_bindgen::prelude::*;

use crate::error::{argument, js};

/// A parsed filter.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Filter {
    inner: CoreFilter,
}

#[wasm_bindgen]
impl Filter {
    /// Parses `text` (LOADERX_ARGUMENT with the position of a syntax error).
    #[wasm_bindgen(constructor)]
    pub fn new(text: &str) -> Result<Filter, JsValue> {
        Ok(Filter { inner: CoreFilter::parse(text).map_err(js)? })
    }

    /// `[[name, isLength], ...]`: the columns to read, in the order `matches` takes them.
    pub fn columns(&self) -> js_sys::Array {
        self.inner
            .columns()
            .iter()
            .map(|c| -> JsValue {
                js_sys::Array::of2(&JsValue::from_str(&c.name), &JsValue::from_bool(c.length)).into()
            })
            .collect()
    }

    /// 1 for each of `n` records that matches; `flat` holds the columns one after another.
    pub fn matches(&self, flat: &[f64], n: usize) -> Result<Vec<u8>, JsValue> {
        let k = self.inner.columns().len();
        if flat.len() != k * n {
            return Err(argument(&format!(
                "{k} columns of {n} values are {} numbers, got {}",
                k * n,
                flat.len()
            )));
        }
        let cols: Vec<&[f64]> = if n == 0 { vec![&[][..]; k] } else { flat.chunks_exact(n).collect() };
        Ok(self.inner.matches(&cols, n).map_err(js)?.into_iter().map(u8::from).collect())
    }
}
