//! The read methods a single store and a manifest of stores share, written once: argument
//! conversion, the GIL released around the read, errors mapped.

use loaderx_native::{Layout, Many, Result, Store};
use numpy::{PyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::to_py;
use crate::{pool, schema, threads, U64s};

/// What the Python datasets read through.
pub(crate) trait Reads: Sync {
    fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>>;
    fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>>;
    fn gather(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64]) -> Result<()>;
    fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()>;
    fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()>;
}

macro_rules! reads_for {
    ($t:ty) => {
        impl Reads for $t {
            fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
                <$t>::lengths(self, indices)
            }
            fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
                <$t>::lengths_fitting(self, indices, layout)
            }
            fn gather(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64]) -> Result<()> {
                <$t>::gather(self, indices, dst, offsets)
            }
            fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
                <$t>::gather_fixed(self, indices, dst, stride)
            }
            fn gather_rows(
                &self,
                indices: &[u64],
                dst: &mut [u8],
                positions: &[u64],
                stride: u64,
            ) -> Result<()> {
                <$t>::gather_rows(self, indices, dst, positions, stride)
            }
        }
    };
}
reads_for!(Store);
reads_for!(Many);

pub(crate) fn lengths<'py>(
    py: Python<'py>,
    r: &impl Reads,
    idxs: U64s<'py>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let idxs = idxs.as_slice()?;
    let lens = py.detach(|| r.lengths(idxs)).map_err(to_py)?;
    Ok(PyArray1::from_vec(py, lens))
}

/// Logical lengths of records `idxs`, each checked to fit `schema` (core's one rule).
pub(crate) fn lengths_fitting<'py>(
    py: Python<'py>,
    r: &impl Reads,
    idxs: U64s<'py>,
    schema: &schema::Schema,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let layout = schema.layout()?;
    let idxs = idxs.as_slice()?;
    let lens = py.detach(|| r.lengths_fitting(idxs, layout)).map_err(to_py)?;
    Ok(PyArray1::from_vec(py, lens))
}

/// Decodes records `idxs` into the byte array `dst` at byte `offsets`.
pub(crate) fn gather(
    py: Python<'_>,
    r: &impl Reads,
    idxs: U64s<'_>,
    mut dst: PyReadwriteArray1<'_, u8>,
    offsets: U64s<'_>,
) -> PyResult<()> {
    let (idxs, offsets) = (idxs.as_slice()?, offsets.as_slice()?);
    let dst = dst.as_slice_mut()?;
    py.detach(|| threads::run(|| r.gather(idxs, dst, offsets))).map_err(to_py)
}

/// Decodes records `idxs`, each exactly `stride` bytes, into rows `positions` of the byte
/// array `dst`.
pub(crate) fn gather_rows(
    py: Python<'_>,
    r: &impl Reads,
    idxs: U64s<'_>,
    mut dst: PyReadwriteArray1<'_, u8>,
    positions: U64s<'_>,
    stride: u64,
) -> PyResult<()> {
    let (idxs, positions) = (idxs.as_slice()?, positions.as_slice()?);
    let dst = dst.as_slice_mut()?;
    py.detach(|| threads::run(|| r.gather_rows(idxs, dst, positions, stride))).map_err(to_py)
}

/// Gathers records `idxs`, each exactly `stride` bytes, into a new uint8 array of
/// `len(idxs) * stride` bytes (its memory is recycled across batches of the same size).
pub(crate) fn gather_fixed_new<'py>(
    py: Python<'py>,
    r: &impl Reads,
    idxs: U64s<'py>,
    stride: u64,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let idxs = idxs.as_slice()?;
    let len = (idxs.len() as u64)
        .checked_mul(stride)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| crate::error::argument("batch too large".into()))?;
    let mut buffer = pool::take(len);
    py.detach(|| threads::run(|| r.gather_fixed(idxs, buffer.as_mut_slice(), stride))).map_err(to_py)?;
    pool::into_array(py, buffer)
}

/// Gathers records `idxs` of a ragged store, each checked to fit `schema`, back to back into a
/// new uint8 array (its memory recycled like `gather_fixed_new`'s); returns it with each
/// record's length in bytes. One call instead of three: lengths, offsets and the gather.
pub(crate) fn gather_ragged_new<'py>(
    py: Python<'py>,
    r: &impl Reads,
    idxs: U64s<'py>,
    schema: &schema::Schema,
) -> PyResult<Bound<'py, PyTuple>> {
    let layout = schema.layout()?;
    let idxs = idxs.as_slice()?;
    let (buffer, lens) = py
        .detach(|| -> Result<_> {
            let lens = r.lengths_fitting(idxs, layout)?;
            let mut offsets = Vec::with_capacity(lens.len());
            let mut total = 0u64;
            for &n in &lens {
                offsets.push(total);
                total += u64::from(n);
            }
            // u32 lengths summed in u64 cannot overflow; the sum must still fit this machine.
            let total = usize::try_from(total)
                .map_err(|_| loaderx_native::Error::BadArgument("batch too large".into()))?;
            let mut buffer = pool::take_varying(total);
            threads::run(|| r.gather(idxs, buffer.as_mut_slice(), &offsets))?;
            Ok((buffer, lens))
        })
        .map_err(to_py)?;
    let array = pool::into_array(py, buffer)?;
    PyTuple::new(py, [array.into_any(), PyArray1::from_vec(py, lens).into_any()])
}
