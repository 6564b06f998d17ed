//! `Many`: the stores a manifest lists, read as one (read-only), and `commit`, which adds
//! stores to a manifest atomically. Both are `loaderx_native`'s; this is the binding.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use numpy::{PyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::{closed, to_py};
use crate::{reads, remote_options, schema, U64s};

/// The stores of a manifest, open as one index space. Thread-safe.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Many {
    inner: RwLock<Option<Arc<loaderx_native::Many>>>,
}

impl Many {
    fn get(&self) -> PyResult<Arc<loaderx_native::Many>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(closed)
    }
}

#[pymethods]
impl Many {
    #[new]
    #[pyo3(signature = (path, storage_options = None, deadline = None, cache_dir = None, cache_bytes = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        storage_options: Option<BTreeMap<String, String>>,
        deadline: Option<f64>,
        cache_dir: Option<PathBuf>,
        cache_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let remote = remote_options(storage_options, deadline, cache_dir, cache_bytes)?;
        let many = py.detach(|| loaderx_native::Many::open(&path, &remote)).map_err(to_py)?;
        Ok(Many { inner: RwLock::new(Some(Arc::new(many))) })
    }

    /// The stores' shared schema, or None for plain byte stores.
    fn schema(&self) -> PyResult<Option<schema::Schema>> {
        Ok(self.get()?.schema().cloned().map(schema::Schema::from))
    }

    /// The listed stores: (path as listed, records).
    #[getter]
    fn stores(&self) -> PyResult<Vec<(String, u64)>> {
        Ok(self.get()?.manifest().stores().iter().map(|e| (e.path.clone(), e.length)).collect())
    }

    #[getter]
    fn remote(&self) -> bool {
        false
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.get()?.len() as usize)
    }

    /// Releases the stores. Idempotent.
    fn close(&self) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    fn lengths<'py>(&self, py: Python<'py>, idxs: U64s<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        reads::lengths(py, &*self.get()?, idxs)
    }

    fn lengths_fitting<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        reads::lengths_fitting(py, &*self.get()?, idxs, schema)
    }

    fn gather(
        &self,
        py: Python<'_>,
        idxs: U64s<'_>,
        dst: PyReadwriteArray1<'_, u8>,
        offsets: U64s<'_>,
    ) -> PyResult<()> {
        reads::gather(py, &*self.get()?, idxs, dst, offsets)
    }

    fn gather_ragged_new<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyTuple>> {
        reads::gather_ragged_new(py, &*self.get()?, idxs, schema)
    }

    fn gather_fixed_new<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        stride: u64,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        reads::gather_fixed_new(py, &*self.get()?, idxs, stride)
    }

    /// Decodes records `idxs`, each exactly `stride` bytes, into rows `positions` of the byte
    /// array `dst` (rows of `stride` bytes).
    fn gather_rows(
        &self,
        py: Python<'_>,
        idxs: U64s<'_>,
        dst: PyReadwriteArray1<'_, u8>,
        positions: U64s<'_>,
        stride: u64,
    ) -> PyResult<()> {
        reads::gather_rows(py, &*self.get()?, idxs, dst, positions, stride)
    }
}

/// Adds `stores` (as they should be listed: relative to the manifest's directory, absolute, or
/// URLs) to the manifest at `path`, creating it if needed; every store is opened and checked
/// first, then the manifest is replaced atomically. Returns the listed stores.
#[pyfunction]
#[pyo3(signature = (path, stores, storage_options = None))]
pub(crate) fn commit(
    py: Python<'_>,
    path: PathBuf,
    stores: Vec<String>,
    storage_options: Option<BTreeMap<String, String>>,
) -> PyResult<Vec<(String, u64)>> {
    let remote = remote_options(storage_options, None, None, None)?;
    let m = py.detach(|| loaderx_native::commit(&path, &stores, &remote)).map_err(to_py)?;
    Ok(m.stores().iter().map(|e| (e.path.clone(), e.length)).collect())
}
