//! `Conversion`: the native converter session (`loaderx_native::Conversion`) for the Python
//! converters, which only cut their data into blocks of packed records. Every call runs on this
//! process's pool (`process::run`), as the handle's do: a forked child's writes never wait on
//! the parent's pool threads, which the child does not have.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use loaderx_core::format::Codec;
use loaderx_native::{process, ConvertOptions, WriteMode};
use pyo3::prelude::*;

use crate::error::{argument, to_py};
use crate::handle::{Bytes, U64s};
use crate::schema::Schema;

/// One conversion into a local store: checked when made, rolled back unless finished.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Conversion {
    inner: Mutex<Option<loaderx_native::Conversion>>,
}

impl Conversion {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut loaderx_native::Conversion) -> loaderx_native::Result<T> + Send,
    ) -> PyResult<T> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let conversion = guard.as_mut().ok_or_else(|| argument("the conversion is over".into()))?;
        py.detach(|| process::run(|| f(conversion))).map_err(to_py)
    }
}

#[pymethods]
impl Conversion {
    /// Starts a conversion into `location` (a path, or an s3://, gs:// or az:// URL, staged
    /// and streamed up as it is written) of records that `schema` describes (None: no schema
    /// is written). `mode` is `append`, `overwrite` or `error`.
    #[new]
    #[pyo3(signature = (location, schema, codec, mode, dict_size = None, storage_options = None))]
    fn new(
        py: Python<'_>,
        location: PathBuf,
        schema: Option<&Schema>,
        codec: &str,
        mode: &str,
        dict_size: Option<usize>,
        storage_options: Option<BTreeMap<String, String>>,
    ) -> PyResult<Conversion> {
        let codec = Codec::from_name(codec).ok_or_else(|| argument(format!("unknown codec {codec:?}")))?;
        let mode = WriteMode::from_name(mode).map_err(to_py)?;
        let schema = schema.map(|s| s.core().clone());
        let options = ConvertOptions { codec, mode, dict_size };
        let remote = crate::handle::remote_options(storage_options, None, None, None)?;
        let location = location.to_string_lossy().into_owned();
        let begin = || loaderx_native::Conversion::begin_at(&location, schema, options, &remote);
        let inner = py.detach(|| process::run(begin)).map_err(to_py)?;
        Ok(Conversion { inner: Mutex::new(Some(inner)) })
    }

    /// The schema the store held before this conversion, or None.
    #[getter]
    fn existing(&self) -> PyResult<Option<Schema>> {
        let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let conversion = guard.as_ref().ok_or_else(|| argument("the conversion is over".into()))?;
        Ok(conversion.existing_schema().cloned().map(Schema::from))
    }

    /// Appends the records packed in `src` (record `k` starts at `offsets[k]`).
    fn append(&self, py: Python<'_>, src: Bytes<'_>, offsets: U64s<'_>) -> PyResult<()> {
        let (src, offsets) = (src.as_slice()?, offsets.as_slice()?);
        self.with(py, |c| c.append(src, offsets))
    }

    /// Sets a string key of the schema written at `finish` (an image store's `media`).
    fn set_schema_key(&self, py: Python<'_>, key: &str, value: &str) -> PyResult<()> {
        self.with(py, |c| c.set_schema_key(key, value))
    }

    /// Syncs, writes the schema, swaps an overwrite in; returns the records written.
    fn finish(&self, py: Python<'_>) -> PyResult<u64> {
        let conversion = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let conversion = conversion.ok_or_else(|| argument("the conversion is over".into()))?;
        py.detach(|| process::run(|| conversion.finish())).map_err(to_py)
    }

    /// Undoes everything this conversion wrote. Does nothing once it is over.
    fn abort(&self, py: Python<'_>) {
        let conversion = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(|| process::run(|| drop(conversion)));
    }
}
