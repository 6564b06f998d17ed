//! The module's functions: the command-line tool, the URL rules every front end shares, and
//! the process id that fork-aware code compares.

use pyo3::prelude::*;

use crate::error::to_py;

/// Runs the `loaderx` command-line tool (the native one) on `argv` (program name first) and
/// returns its exit code. The GIL is released while it runs.
#[pyfunction]
pub(crate) fn cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| loaderx_native::process::run(|| loaderx_native::cli::run(argv)))
}

/// True for the URL forms a store opens by (`s3://`, `gs://`, `az://`, `http(s)://`).
#[pyfunction]
pub(crate) fn is_url(path: &str) -> bool {
    loaderx_native::is_url(path)
}

/// `text` with every store URL in it shown without secrets: userinfo becomes `***@` and each
/// query value `***` (`loaderx_core::url::redact`, the one rule of every front end).
#[pyfunction]
pub(crate) fn redact_url(text: &str) -> String {
    loaderx_core::url::redact(text)
}

/// Raises `BadArgumentError` naming `path` when it is a URL (or one a path type collapsed, such
/// as `s3:/b/x`): stores at URLs are read-only.
#[pyfunction]
pub(crate) fn check_writable(path: std::path::PathBuf) -> PyResult<()> {
    loaderx_native::check_writable(&path.to_string_lossy()).map_err(to_py)
}

/// The manifest file `location` names (the `.json` file itself, or `manifest.json` in a
/// directory that is not a store), or None when it holds a store or nothing readable: native's
/// one answer to "store or manifest?" (`loaderx_native::identify`), which the CLI and the JS
/// package ask too.
#[pyfunction]
pub(crate) fn manifest_file(location: std::path::PathBuf) -> Option<std::path::PathBuf> {
    match loaderx_native::identify(&location.to_string_lossy()) {
        Ok(loaderx_native::Found::Manifest(file)) => Some(file),
        _ => None,
    }
}

/// Whether `name` is one of the files a store keeps in its directory (`meta.zr`, chunk files,
/// `dict.zr`, `schema.msgpack`, `delete.journal`; core's list, `loaderx_core::open`).
#[pyfunction]
pub(crate) fn is_store_file(name: &str) -> bool {
    loaderx_core::open::is_store_file(name)
}

/// This process's id as native keeps it (`loaderx_native::process::current`): the one answer to
/// "am I still the process that built this?" that native's per-process state and the Python
/// package's fork-aware objects (through `loaderx._process`) both ask.
#[pyfunction]
pub(crate) fn process_id() -> u32 {
    loaderx_native::process::current()
}

/// The calling thread's read meter (`loaderx_native::meter`): nanoseconds decoding, bytes read
/// and bytes over the network, remote cache block hits and misses. Loader metrics subtract two
/// readings around a step's reads.
#[pyfunction]
pub(crate) fn thread_meter() -> (u64, u64, u64, u64, u64) {
    let m = loaderx_native::meter();
    (m.decode_ns, m.read_bytes, m.network_bytes, m.cache_hits, m.cache_misses)
}

/// What the calling thread's reads cost since `before` (a [`thread_meter`] reading): seconds
/// decoding, bytes read, bytes over the network, cache hits and misses, as floats (the marks a
/// loader step carries, across processes too).
#[pyfunction]
pub(crate) fn meter_since(before: (u64, u64, u64, u64, u64)) -> (f64, f64, f64, f64, f64) {
    let m = loaderx_native::meter();
    let d = |now: u64, then: u64| now.wrapping_sub(then) as f64;
    (
        d(m.decode_ns, before.0) * 1e-9,
        d(m.read_bytes, before.1),
        d(m.network_bytes, before.2),
        d(m.cache_hits, before.3),
        d(m.cache_misses, before.4),
    )
}

/// Copies the local store `src` to the URL `dst` (`loaderx_native::upload`: live bytes,
/// `meta.zr` last, resumable, read back) or to a new local directory (sparse, live bytes): `{url, objects, skipped, sent_bytes, live_bytes,
/// apparent_bytes, digest}`. The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (src, dst, storage_options = None))]
pub(crate) fn copy_store<'py>(
    py: Python<'py>,
    src: std::path::PathBuf,
    dst: &str,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let options = crate::handle::remote_options(storage_options, None, None, None)?;
    let report = py.detach(|| loaderx_native::upload::copy(&src, dst, &options, &|_| {})).map_err(to_py)?;
    let out = pyo3::types::PyDict::new(py);
    out.set_item("url", report.url)?;
    out.set_item("objects", report.objects)?;
    out.set_item("skipped", report.skipped)?;
    out.set_item("sent_bytes", report.sent)?;
    out.set_item("live_bytes", report.live)?;
    out.set_item("apparent_bytes", report.apparent)?;
    out.set_item("digest", report.digest)?;
    Ok(out)
}

/// Raises unless a store can be written at `dst` (`loaderx_native::upload::check_destination`:
/// not HTTP, reachable with the credentials, no store there).
#[pyfunction]
#[pyo3(signature = (dst, storage_options = None))]
pub(crate) fn check_destination(
    py: Python<'_>,
    dst: &str,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<()> {
    let options = crate::handle::remote_options(storage_options, None, None, None)?;
    py.detach(|| loaderx_native::upload::check_destination(dst, &options)).map_err(to_py)
}

/// Removes what an interrupted copy left at `dst` (a published store only with `published`):
/// the objects removed.
#[pyfunction]
#[pyo3(signature = (dst, storage_options = None, published = false))]
pub(crate) fn remove_partial_copy(
    py: Python<'_>,
    dst: &str,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
    published: bool,
) -> PyResult<usize> {
    let options = crate::handle::remote_options(storage_options, None, None, None)?;
    py.detach(|| loaderx_native::upload::remove_partial(dst, &options, published)).map_err(to_py)
}

/// The names directly under the prefix `url`, sorted.
#[pyfunction]
#[pyo3(signature = (url, storage_options = None))]
pub(crate) fn list_children(
    py: Python<'_>,
    url: &str,
    storage_options: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<Vec<String>> {
    let options = crate::handle::remote_options(storage_options, None, None, None)?;
    py.detach(|| loaderx_native::upload::children(url, &options)).map_err(to_py)
}
