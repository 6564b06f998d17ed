//! `loaderx._loaderx`: the private pyo3 module under the `loaderx` Python package.
//!
//! Each method converts its arguments, releases the GIL around anything that reads, writes or
//! runs threads (`py.detach`), maps errors (see `error.rs`), and stops there. Logic lives in
//! `loaderx-core` and `loaderx-native`; the Python API lives in the pure-Python package.

mod error;
mod many;
mod mix;
mod pool;
mod reads;
mod schema;
mod threads;

use std::sync::{Arc, Mutex, RwLock};

use loaderx_core::format::{Codec, MAX_RECORD_LEN};
use loaderx_core::sampler::{Mode, Sampler as CoreSampler};
use loaderx_native::{CacheConfig, RemoteOptions, Store as Handle};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::error::{closed, core_to_py, to_py};

/// A read-only 1-D uint8 array (record bytes).
type Bytes<'py> = PyReadonlyArray1<'py, u8>;
/// A read-only 1-D uint64 array (indices, offsets, sizes).
pub(crate) type U64s<'py> = PyReadonlyArray1<'py, u64>;

fn codec(tag: u8) -> PyResult<Codec> {
    Codec::from_tag(tag).ok_or_else(|| crate::error::argument(format!("unknown codec tag {tag}")))
}

/// How stores behind URLs are reached, from the Python arguments.
pub(crate) fn remote_options(
    storage_options: Option<std::collections::BTreeMap<String, String>>,
    deadline: Option<f64>,
    cache_dir: Option<std::path::PathBuf>,
    cache_bytes: Option<u64>,
) -> PyResult<RemoteOptions> {
    let mut remote = RemoteOptions { options: storage_options.unwrap_or_default(), ..Default::default() };
    remote.cache = match (cache_dir, cache_bytes) {
        (Some(dir), Some(max_bytes)) => Some(CacheConfig { dir, max_bytes }),
        (None, None) => None,
        _ => return Err(crate::error::argument("cache_dir and cache_bytes go together".into())),
    };
    if let Some(secs) = deadline {
        remote.deadline = std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
            crate::error::argument(format!("deadline must be a positive number of seconds, got {secs}"))
        })?;
    }
    Ok(remote)
}

/// A record store handle. Thread-safe: every method may be called from any thread.
#[pyclass(frozen, module = "loaderx._loaderx")]
struct Store {
    inner: RwLock<Option<Arc<Handle>>>,
}

impl Store {
    fn get(&self) -> PyResult<Arc<Handle>> {
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        guard.clone().ok_or_else(closed)
    }
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (path, create = true, storage_options = None, deadline = None, cache_dir = None, cache_bytes = None))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        create: bool,
        storage_options: Option<std::collections::BTreeMap<String, String>>,
        deadline: Option<f64>,
        cache_dir: Option<std::path::PathBuf>,
        cache_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let remote = remote_options(storage_options, deadline, cache_dir, cache_bytes)?;
        let path = path.to_string_lossy().into_owned();
        let store = py.detach(|| Handle::open_location(&path, create, &remote)).map_err(to_py)?;
        Ok(Store { inner: RwLock::new(Some(Arc::new(store))) })
    }

    /// The store's schema, or None when it has none.
    fn schema(&self, py: Python<'_>) -> PyResult<Option<schema::Schema>> {
        let store = self.get()?;
        let found = py.detach(|| store.schema()).map_err(to_py)?;
        Ok(found.map(schema::Schema::from))
    }

    /// True for a store opened by URL (read-only).
    #[getter]
    fn remote(&self) -> PyResult<bool> {
        Ok(self.get()?.is_remote())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.get()?.len() as usize)
    }

    /// Releases the files (the handle is unusable afterwards). Idempotent.
    fn close(&self) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.get()?;
        py.detach(|| store.sync()).map_err(to_py)
    }

    fn lengths<'py>(&self, py: Python<'py>, idxs: U64s<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        reads::lengths(py, &*self.get()?, idxs)
    }

    /// Logical lengths of records `idxs`, each checked to fit `schema` (core's one rule).
    fn lengths_fitting<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        reads::lengths_fitting(py, &*self.get()?, idxs, schema)
    }

    /// Decodes records `idxs` into the byte array `dst` at byte `offsets`.
    fn gather(
        &self,
        py: Python<'_>,
        idxs: U64s<'_>,
        dst: PyReadwriteArray1<'_, u8>,
        offsets: U64s<'_>,
    ) -> PyResult<()> {
        reads::gather(py, &*self.get()?, idxs, dst, offsets)
    }

    /// Gathers ragged records `idxs` (each checked to fit `schema`) back to back into a new
    /// uint8 array; returns it with each record's length in bytes.
    fn gather_ragged_new<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyTuple>> {
        reads::gather_ragged_new(py, &*self.get()?, idxs, schema)
    }

    /// Gathers records `idxs`, each exactly `stride` bytes, into a new uint8 array of
    /// `len(idxs) * stride` bytes (its memory is recycled across batches of the same size).
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

    /// Appends the records packed in `src` (record k starts at `offsets[k]`); returns the first
    /// new index.
    fn append(&self, py: Python<'_>, src: Bytes<'_>, offsets: U64s<'_>, codec_tag: u8) -> PyResult<u64> {
        let store = self.get()?;
        let codec = codec(codec_tag)?;
        let (src, offsets) = (src.as_slice()?, offsets.as_slice()?);
        py.detach(|| threads::run(|| store.append(src, offsets, codec))).map_err(to_py)
    }

    fn delete(&self, py: Python<'_>, idxs: U64s<'_>) -> PyResult<()> {
        let store = self.get()?;
        let idxs = idxs.as_slice()?;
        py.detach(|| store.delete(idxs)).map_err(to_py)
    }

    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.get()?;
        py.detach(|| store.compact()).map_err(to_py)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.get()?;
        let s = py.detach(|| store.stats()).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("live_bytes", s.live_bytes)?;
        d.set_item("chunk_bytes", s.chunk_bytes)?;
        d.set_item("reclaimable", s.reclaimable)?;
        Ok(d)
    }

    fn train_dict(
        &self,
        py: Python<'_>,
        samples: Bytes<'_>,
        sizes: U64s<'_>,
        target: usize,
    ) -> PyResult<usize> {
        let store = self.get()?;
        let samples = samples.as_slice()?;
        let sizes: Vec<usize> = sizes.as_slice()?.iter().map(|&s| s as usize).collect();
        py.detach(|| store.train_dict(samples, &sizes, target)).map_err(to_py)
    }

    /// Trains the dictionary on the batch packed in `src` by the converters' rule (up to 8192
    /// evenly spaced records; `capacity` bytes, by default 1% of the sample within 8 KiB..1 MiB).
    #[pyo3(signature = (src, offsets, capacity = None))]
    fn train_dict_for(
        &self,
        py: Python<'_>,
        src: Bytes<'_>,
        offsets: U64s<'_>,
        capacity: Option<usize>,
    ) -> PyResult<usize> {
        let store = self.get()?;
        let (src, offsets) = (src.as_slice()?, offsets.as_slice()?);
        py.detach(|| store.train_dict_for(src, offsets, capacity)).map_err(to_py)
    }

    fn has_dict(&self) -> PyResult<bool> {
        Ok(self.get()?.has_dict())
    }

    /// Decodes every record; returns `(checked, [(index, reason), ...])`.
    fn verify(&self, py: Python<'_>) -> PyResult<(u64, Vec<(u64, String)>)> {
        let store = self.get()?;
        let report = py.detach(|| store.verify(|_, _| {}));
        Ok((report.checked, report.bad))
    }
}

/// Batches of indices as a pure function of (length, batch_size, mode, seed, step).
#[pyclass(frozen, module = "loaderx._loaderx")]
struct Sampler {
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

/// Runs the `loaderx` command-line tool (the native one) on `argv` (program name first) and
/// returns its exit code. The GIL is released while it runs.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| loaderx_native::cli::run(argv))
}

/// True for the URL forms a store opens by (`s3://`, `gs://`, `az://`, `http(s)://`).
#[pyfunction]
fn is_url(path: &str) -> bool {
    loaderx_native::is_url(path)
}

/// `text` with every store URL in it shown without secrets: userinfo becomes `***@` and each
/// query value `***` (`loaderx_core::url::redact`, the one rule of every front end).
#[pyfunction]
fn redact_url(text: &str) -> String {
    loaderx_core::url::redact(text)
}

/// Raises `BadArgumentError` naming `path` when it is a URL (or one a path type collapsed, such
/// as `s3:/b/x`): stores at URLs are read-only.
#[pyfunction]
fn check_writable(path: std::path::PathBuf) -> PyResult<()> {
    loaderx_native::check_writable(&path.to_string_lossy()).map_err(to_py)
}

#[pymodule(gil_used = false)]
fn _loaderx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_class::<schema::Schema>()?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(is_url, m)?)?;
    m.add_function(wrap_pyfunction!(redact_url, m)?)?;
    m.add_function(wrap_pyfunction!(check_writable, m)?)?;
    m.add("ERROR_CODES", error::codes(m.py())?)?;
    m.add_class::<Sampler>()?;
    m.add_class::<many::Many>()?;
    m.add_class::<mix::Mixer>()?;
    m.add_function(wrap_pyfunction!(many::commit, m)?)?;
    let codecs = PyDict::new(m.py());
    for c in Codec::ALL {
        codecs.set_item(c.name(), c as u8)?;
    }
    m.add("CODECS", codecs)?;
    m.add("SCHEMA_FILE", loaderx_core::schema::SCHEMA_FILE)?;
    m.add("FORMAT", loaderx_core::schema::FORMAT)?;
    m.add("MAX_RECORD_LEN", MAX_RECORD_LEN)?;
    m.add("MAX_RECORDS", loaderx_core::format::MAX_RECORDS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
