//! `Sampler`: batches of indices as a pure function of (length, batch_size, mode, seed, step),
//! core's sampler behind a lock.

use std::sync::Mutex;

use loaderx_core::sampler::{Mode, Sampler as CoreSampler};
use numpy::PyArray1;
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

use crate::error::core_to_py;

/// Batches of indices as a pure function of (length, batch_size, mode, seed, step).
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Sampler {
    inner: Mutex<CoreSampler>,
}

impl Sampler {
    fn lock(&self) -> std::sync::MutexGuard<'_, CoreSampler> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Sampler {
    #[new]
    fn new(length: u64, batch_size: u64, mode: u8, seed: u64) -> PyResult<Self> {
        let mode = Mode::try_from(mode).map_err(core_to_py)?;
        let sampler = CoreSampler::new(length, batch_size, mode, seed).map_err(core_to_py)?;
        Ok(Sampler { inner: Mutex::new(sampler) })
    }

    /// The batch at the cursor; advances the cursor.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let mut sampler = self.lock();
        let mut out = batch_buffer(sampler.batch_len())?;
        sampler.next_into(&mut out).map_err(core_to_py)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The batch at `step`, without moving the cursor.
    fn batch_at<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let sampler = self.lock().clone();
        let mut out = batch_buffer(sampler.batch_len())?;
        sampler.batch_at(step, &mut out).map_err(core_to_py)?;
        Ok(PyArray1::from_vec(py, out))
    }

    fn seek(&self, step: u64) {
        self.lock().seek(step);
    }

    #[getter]
    fn step(&self) -> u64 {
        self.lock().step()
    }

    #[getter]
    fn batch_len(&self) -> usize {
        self.lock().batch_len()
    }
}

/// A zeroed buffer for one batch, or `MemoryError` when it cannot be allocated (never an abort).
fn batch_buffer(len: usize) -> PyResult<Vec<u64>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len)
        .map_err(|_| PyMemoryError::new_err(format!("a batch of {len} indices does not fit in memory")))?;
    out.resize(len, 0);
    Ok(out)
}
