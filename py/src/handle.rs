//! `Handle`: one open store, or one manifest's stores read as one, behind one class. Every read
//! is declared once, over `loaderx_native::Records`; writes reach the store, and a manifest
//! (read-only) refuses them.
//!
//! Each method converts its arguments, releases the GIL around anything that reads, writes or
//! runs threads (`py.detach`), maps errors (`error.rs`), and stops there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use loaderx_core::format::Codec;
use loaderx_native::{process, CacheConfig, Joined, Many, Records, RemoteOptions, Result, Store, VerifyMode};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::error::{argument, closed, to_py};
use crate::{pool, schema};

/// A read-only 1-D uint8 array (record bytes).
pub(crate) type Bytes<'py> = PyReadonlyArray1<'py, u8>;
/// A read-only 1-D uint64 array (indices, offsets, sizes).
pub(crate) type U64s<'py> = PyReadonlyArray1<'py, u64>;

/// How stores behind URLs are reached, from the Python arguments.
pub(crate) fn remote_options(
    storage_options: Option<BTreeMap<String, String>>,
    deadline: Option<f64>,
    cache_dir: Option<PathBuf>,
    cache_bytes: Option<u64>,
) -> PyResult<RemoteOptions> {
    let mut remote = RemoteOptions { options: storage_options.unwrap_or_default(), ..Default::default() };
    remote.cache = match (cache_dir, cache_bytes) {
        (Some(dir), Some(max_bytes)) => Some(CacheConfig { dir, max_bytes }),
        (None, None) => None,
        _ => return Err(argument("cache_dir and cache_bytes go together".into())),
    };
    if let Some(secs) = deadline {
        remote.deadline = std::time::Duration::try_from_secs_f64(secs)
            .map_err(|_| argument(format!("deadline must be a positive number of seconds, got {secs}")))?;
    }
    Ok(remote)
}

/// What a handle holds while open: what it reads through, and the store itself for writes
/// (`None` for a manifest).
#[derive(Clone)]
struct Open {
    records: Arc<dyn Records>,
    store: Option<Arc<Store>>,
}

/// A store, or a manifest's stores, open. Thread-safe: every method may be called from any
/// thread.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Handle {
    inner: RwLock<Option<Open>>,
}

impl Handle {
    fn get(&self) -> PyResult<Open> {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(closed)
    }

    fn records(&self) -> PyResult<Arc<dyn Records>> {
        Ok(self.get()?.records)
    }

    /// Runs `read` over the records with the GIL released, on this process's pool, its error
    /// mapped: the frame of every read method.
    pub(crate) fn read<T: Send>(
        &self,
        py: Python<'_>,
        read: impl FnOnce(&dyn Records) -> Result<T> + Send,
    ) -> PyResult<T> {
        let records = self.records()?;
        py.detach(|| process::run(|| read(&*records))).map_err(to_py)
    }

    /// Runs `write` on the store with the GIL released, on this process's pool, its error mapped;
    /// a manifest (read-only) refuses to `what`.
    fn write<T: Send>(
        &self,
        py: Python<'_>,
        what: &str,
        write: impl FnOnce(&Store) -> Result<T> + Send,
    ) -> PyResult<T> {
        let store = self
            .get()?
            .store
            .ok_or_else(|| argument(format!("a manifest or a mix is read-only: cannot {what}")))?;
        py.detach(|| process::run(|| write(&store))).map_err(to_py)
    }
}

#[pymethods]
impl Handle {
    /// Opens the store at `location` (a path or URL; created when `create` and there is none),
    /// or with `manifest`, the manifest file at `location`.
    #[new]
    #[pyo3(signature = (location, create = false, manifest = false, storage_options = None, deadline = None, cache_dir = None, cache_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        location: PathBuf,
        create: bool,
        manifest: bool,
        storage_options: Option<BTreeMap<String, String>>,
        deadline: Option<f64>,
        cache_dir: Option<PathBuf>,
        cache_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let remote = remote_options(storage_options, deadline, cache_dir, cache_bytes)?;
        let open = if manifest {
            let many = py.detach(|| process::run(|| Many::open(&location, &remote))).map_err(to_py)?;
            Open { records: Arc::new(many), store: None }
        } else {
            let location = location.to_string_lossy().into_owned();
            let store = Arc::new(
                py.detach(|| process::run(|| Store::open_location(&location, create, &remote)))
                    .map_err(to_py)?,
            );
            Open { records: store.clone(), store: Some(store) }
        };
        Ok(Handle { inner: RwLock::new(Some(open)) })
    }

    /// `handles` read as one index space, in order (`loaderx_native::Joined`): how mixing reads
    /// its sources. Read-only; closing it leaves the parts open.
    #[staticmethod]
    fn join(handles: Vec<PyRef<'_, Handle>>) -> PyResult<Handle> {
        let parts = handles.iter().map(|h| h.records()).collect::<PyResult<Vec<_>>>()?;
        let records: Arc<dyn Records> = Arc::new(Joined::new(parts));
        Ok(Handle { inner: RwLock::new(Some(Open { records, store: None })) })
    }

    /// The schema, or None when there is none.
    fn schema(&self, py: Python<'_>) -> PyResult<Option<schema::Schema>> {
        Ok(self.read(py, |r| r.schema())?.map(schema::Schema::from))
    }

    /// True when the records are read over the network (read-only).
    #[getter]
    fn remote(&self) -> PyResult<bool> {
        Ok(self.records()?.is_remote())
    }

    /// A manifest's stores: (path as listed, records); empty for one store.
    #[getter]
    fn stores(&self) -> PyResult<Vec<(String, u64)>> {
        Ok(self.records()?.listing())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.records()?.len() as usize)
    }

    /// Releases the files (the handle is unusable afterwards). Idempotent.
    fn close(&self) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Logical lengths of records `idxs`.
    fn lengths<'py>(&self, py: Python<'py>, idxs: U64s<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let idxs = idxs.as_slice()?;
        Ok(PyArray1::from_vec(py, self.read(py, |r| r.lengths(idxs))?))
    }

    /// Logical lengths of records `idxs`, each checked to fit `schema` (core's one rule).
    fn lengths_fitting<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let (idxs, layout) = (idxs.as_slice()?, schema.layout()?);
        Ok(PyArray1::from_vec(py, self.read(py, |r| r.lengths_fitting(idxs, layout))?))
    }

    /// Decodes records `idxs` into the byte array `dst` at byte `offsets`.
    fn gather(
        &self,
        py: Python<'_>,
        idxs: U64s<'_>,
        mut dst: PyReadwriteArray1<'_, u8>,
        offsets: U64s<'_>,
    ) -> PyResult<()> {
        let (idxs, offsets, dst) = (idxs.as_slice()?, offsets.as_slice()?, dst.as_slice_mut()?);
        self.read(py, |r| r.gather(idxs, dst, offsets))
    }

    /// Gathers records `idxs` of a ragged store, each checked to fit `schema`, back to back into
    /// a new uint8 array (its memory recycled across batches); returns it with each record's
    /// length in bytes. One call instead of three: lengths, offsets and the gather.
    fn gather_ragged_new<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        schema: &schema::Schema,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let (idxs, layout) = (idxs.as_slice()?, schema.layout()?);
        let (buffer, lens) = self.read(py, |r| {
            let lens = r.lengths_fitting(idxs, layout)?;
            let (offsets, total) = loaderx_native::packed(&lens);
            // The sum must fit this machine.
            let total = usize::try_from(total)
                .map_err(|_| loaderx_native::Error::BadArgument("batch too large".into()))?;
            let mut buffer = pool::take_varying(total);
            r.gather(idxs, buffer.as_mut_slice(), &offsets)?;
            Ok((buffer, lens))
        })?;
        let array = pool::into_array(py, buffer)?;
        PyTuple::new(py, [array.into_any(), PyArray1::from_vec(py, lens).into_any()])
    }

    /// Gathers records `idxs`, each exactly `stride` bytes, into a new uint8 array of
    /// `len(idxs) * stride` bytes (its memory is recycled across batches of the same size).
    fn gather_fixed_new<'py>(
        &self,
        py: Python<'py>,
        idxs: U64s<'py>,
        stride: u64,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let idxs = idxs.as_slice()?;
        let len = (idxs.len() as u64)
            .checked_mul(stride)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| argument("batch too large".into()))?;
        let mut buffer = pool::take(len);
        self.read(py, |r| r.gather_fixed(idxs, buffer.as_mut_slice(), stride))?;
        pool::into_array(py, buffer)
    }

    /// Decodes records `idxs`, each exactly `stride` bytes, into rows `positions` of the byte
    /// array `dst`.
    fn gather_rows(
        &self,
        py: Python<'_>,
        idxs: U64s<'_>,
        mut dst: PyReadwriteArray1<'_, u8>,
        positions: U64s<'_>,
        stride: u64,
    ) -> PyResult<()> {
        let (idxs, positions, dst) = (idxs.as_slice()?, positions.as_slice()?, dst.as_slice_mut()?);
        self.read(py, |r| r.gather_rows(idxs, dst, positions, stride))
    }

    /// Storage usage: records, live_bytes, chunk_bytes, reclaimable.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.read(py, |r| r.stats())?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("live_bytes", s.live_bytes)?;
        d.set_item("chunk_bytes", s.chunk_bytes)?;
        d.set_item("reclaimable", s.reclaimable)?;
        Ok(d)
    }

    /// Decodes every record; returns `(checked, [(index, reason), ...])`.
    fn verify(&self, py: Python<'_>) -> PyResult<(u64, Vec<(u64, String)>)> {
        let report = self.read(py, |r| Ok(r.verify(&mut |_, _| {})))?;
        Ok((report.checked, report.bad))
    }

    /// Checks every record (checksums where they cover it; decoding where they do not, or
    /// always when `deep`): a dict of `checked`, `bad` (index, reason), `unlisted`, and the
    /// checksum counts `verified`, `mismatched`, `uncovered`, `unverified`.
    fn verify_report<'py>(&self, py: Python<'py>, deep: bool) -> PyResult<Bound<'py, PyDict>> {
        let r = self.read(py, |r| Ok(r.verify_with(deep, &mut |_, _| {})))?;
        let d = PyDict::new(py);
        d.set_item("checked", r.checked)?;
        d.set_item("bad", r.bad)?;
        d.set_item("unlisted", r.unlisted)?;
        d.set_item("verified", r.coverage.verified)?;
        d.set_item("mismatched", r.coverage.mismatched)?;
        d.set_item("uncovered", r.coverage.uncovered)?;
        d.set_item("unverified", r.coverage.unverified)?;
        Ok(d)
    }

    /// Sets which reads are checked against the checksums: `off`, `fetched` or `always`.
    fn set_verify(&self, mode: &str) -> PyResult<()> {
        let mode = VerifyMode::from_name(mode)
            .ok_or_else(|| argument(format!("verify must be 'off', 'fetched' or 'always', not {mode:?}")))?;
        self.records()?.set_verify_mode(mode);
        Ok(())
    }

    /// The content digest (`sha256:…`), or None unless checksums cover every record.
    fn digest(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.read(py, |r| r.content_digest())
    }

    /// The store's identity for exclusion masks: 32 bytes (schema and table; no record is read).
    fn mask_identity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let id = self.read(py, |r| r.mask_identity())?;
        Ok(pyo3::types::PyBytes::new(py, &id))
    }

    /// Gives every record without a checksum one and seals the checksums (`loaderx checksum
    /// add`): a dict of `verified`, `added`, `replaced` and `mismatched` (indices).
    fn add_checksums<'py>(&self, py: Python<'py>, adopt: bool) -> PyResult<Bound<'py, PyDict>> {
        let fill = self.write(py, "add checksums", |s| s.add_checksums(adopt, |_, _| {}))?;
        let d = PyDict::new(py);
        d.set_item("verified", fill.verified)?;
        d.set_item("added", fill.added)?;
        d.set_item("replaced", fill.replaced)?;
        d.set_item("mismatched", fill.mismatched)?;
        Ok(d)
    }

    /// Makes appended records durable (nothing to do for a manifest or a remote store).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        match self.get()?.store {
            Some(_) => self.write(py, "sync", Store::sync),
            None => Ok(()),
        }
    }

    /// True if the store has a dictionary (a manifest: never).
    fn has_dict(&self) -> PyResult<bool> {
        Ok(self.get()?.store.is_some_and(|s| s.has_dict()))
    }

    /// Appends the records packed in `src` (record k starts at `offsets[k]`); returns the first
    /// new index.
    fn append(&self, py: Python<'_>, src: Bytes<'_>, offsets: U64s<'_>, codec_tag: u8) -> PyResult<u64> {
        let codec =
            Codec::from_tag(codec_tag).ok_or_else(|| argument(format!("unknown codec tag {codec_tag}")))?;
        let (src, offsets) = (src.as_slice()?, offsets.as_slice()?);
        self.write(py, "append", |s| s.append(src, offsets, codec))
    }

    fn delete(&self, py: Python<'_>, idxs: U64s<'_>) -> PyResult<()> {
        let idxs = idxs.as_slice()?;
        self.write(py, "delete", |s| s.delete(idxs))
    }

    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.write(py, "compact", Store::compact)
    }

    fn train_dict(
        &self,
        py: Python<'_>,
        samples: Bytes<'_>,
        sizes: U64s<'_>,
        target: usize,
    ) -> PyResult<usize> {
        let samples = samples.as_slice()?;
        let sizes: Vec<usize> = sizes.as_slice()?.iter().map(|&s| s as usize).collect();
        self.write(py, "train a dictionary", |s| s.train_dict(samples, &sizes, target))
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
    let m = py.detach(|| process::run(|| loaderx_native::commit(&path, &stores, &remote))).map_err(to_py)?;
    Ok(m.stores().iter().map(|e| (e.path.clone(), e.length)).collect())
}
