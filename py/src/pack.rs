//! `Packer`: packed rows of tokens (`loaderx_core::pack`), read from a store through a `Handle`
//! (`loaderx_native::pack`). The binding converts and maps errors; the rules are core's.

use std::sync::Arc;

use loaderx_core::pack::{PackSpec, Packer as CorePacker, Packing, Rows};
use loaderx_core::sampler::Mode;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::{argument, core_to_py};
use crate::handle::Handle;
use crate::mask::Mask;

#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Packer {
    inner: Arc<CorePacker>,
}

/// `rows × seq_len`, or a clear error when it does not fit in memory.
fn slots(rows: u64, seq_len: u32, elem: usize) -> PyResult<(usize, usize)> {
    let n = rows
        .checked_mul(u64::from(seq_len))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| n.checked_mul(elem.max(8)).is_some())
        .ok_or_else(|| argument(format!("{rows} rows of {seq_len} tokens do not fit in memory")))?;
    Ok((n, n * elem))
}

#[pymethods]
impl Packer {
    /// A packed stream over documents of `lengths` tokens (planning, where the mode needs it
    /// up front, runs with the GIL released). With `mask`, `lengths` are its kept records' and
    /// rows name the records themselves.
    #[new]
    #[pyo3(signature = (lengths, seq_len, packing, bins, mode, seed, mask = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        lengths: PyReadonlyArray1<'_, u32>,
        seq_len: u32,
        packing: &str,
        bins: u32,
        mode: u8,
        seed: u64,
        mask: Option<PyRef<'_, Mask>>,
    ) -> PyResult<Self> {
        let packing = match packing {
            "concat" => Packing::Concat,
            "best_fit" => Packing::BestFit { bins },
            other => return Err(argument(format!("packing must be 'concat' or 'best_fit', got {other:?}"))),
        };
        let mode = Mode::try_from(mode).map_err(core_to_py)?;
        let lengths = lengths.as_slice()?.to_vec();
        let spec = PackSpec { seq_len, packing, mode, seed };
        let kept = mask.map(|m| m.kept_index().clone());
        let inner = py
            .detach(|| {
                let p = CorePacker::new(lengths, spec)?;
                match kept {
                    Some(kept) => p.with_kept(kept),
                    None => Ok(p),
                }
            })
            .map_err(core_to_py)?;
        Ok(Packer { inner: Arc::new(inner) })
    }

    /// Rows `first..first + rows` read from `handle`'s records of `elem`-byte tokens:
    /// `(tokens as bytes, segment_ids, positions, doc_index, doc_offset)`, each flat.
    fn rows<'py>(
        &self,
        py: Python<'py>,
        handle: &Handle,
        first: u64,
        rows: u64,
        elem: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let (n, bytes) = slots(rows, self.inner.spec().seq_len, elem)?;
        let (mut tokens, mut ids, mut pos) = (vec![0u8; bytes], vec![0i32; n], vec![0i32; n]);
        let (mut doc, mut off) = (vec![0i64; n], vec![0i64; n]);
        let packer = Arc::clone(&self.inner);
        handle.read(py, |r| {
            let out = Rows {
                tokens: &mut tokens,
                segment_ids: &mut ids,
                positions: &mut pos,
                doc_index: &mut doc,
                doc_offset: &mut off,
            };
            loaderx_native::pack::read_rows(r, &packer, first, rows, elem, out)
        })?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, tokens).into_any(),
                PyArray1::from_vec(py, ids).into_any(),
                PyArray1::from_vec(py, pos).into_any(),
                PyArray1::from_vec(py, doc).into_any(),
                PyArray1::from_vec(py, off).into_any(),
            ],
        )
    }

    /// The plan of rows `first..first + rows`: `(row, col, len, doc, offset)` per segment.
    fn segments<'py>(&self, py: Python<'py>, first: u64, rows: u64) -> PyResult<Bound<'py, PyTuple>> {
        let packer = Arc::clone(&self.inner);
        let segments = py.detach(|| packer.segments(first, rows)).map_err(core_to_py)?;
        let col = |f: fn(&loaderx_core::pack::Segment) -> u64| segments.iter().map(f).collect::<Vec<u64>>();
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, col(|g| g.row)),
                PyArray1::from_vec(py, col(|g| u64::from(g.col))),
                PyArray1::from_vec(py, col(|g| u64::from(g.len))),
                PyArray1::from_vec(py, col(|g| g.doc)),
                PyArray1::from_vec(py, col(|g| g.offset)),
            ],
        )
    }

    /// Rows of epoch `epoch` (best_fit), or None (concat: epochs are `tokens` tokens).
    fn epoch_rows(&self, py: Python<'_>, epoch: u64) -> PyResult<Option<u64>> {
        let packer = Arc::clone(&self.inner);
        py.detach(|| packer.epoch_rows(epoch)).map_err(core_to_py)
    }

    /// Tokens in all documents.
    #[getter]
    fn tokens(&self) -> u64 {
        self.inner.tokens()
    }

    /// Documents.
    #[getter]
    fn documents(&self) -> u64 {
        self.inner.documents()
    }

    /// Bytes the cached epoch plans hold.
    #[getter]
    fn plan_bytes(&self) -> usize {
        self.inner.plan_bytes()
    }

    /// The bytes the document lengths take (2 per document, more for those of 65,535 tokens
    /// or more).
    #[getter]
    fn lengths_bytes(&self) -> usize {
        self.inner.lengths().bytes()
    }
}
