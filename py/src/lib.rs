//! `loaderx._loaderx`: the private pyo3 module under the `loaderx` Python package. This file
//! only registers what the modules define:
//! * `handle`: `Handle`, one open store or manifest (every read declared once), and `commit`;
//! * `conversion`: `Conversion`, the converter session (the converters only produce blocks);
//! * `sampler`, `mix`, `pack`: core's sampler, mixer and packer; `schema`: the schema file;
//! * `images`: pictures rendered from stores of encoded images, and image headers;
//! * `functions`: the command-line tool and the URL rules;
//! * `error` (typed exceptions), `pool` (recycled batch buffers).
//!
//! Each method converts its arguments, releases the GIL around anything that reads, writes or
//! runs threads (`py.detach`), maps errors, and stops there. Logic lives in `loaderx-core` and
//! `loaderx-native`; the Python API lives in the pure-Python package.

mod conversion;
mod error;
mod functions;
mod handle;
mod images;
mod mask;
mod metrics;
mod mix;
mod pack;
mod pool;
mod sampler;
mod schema;

use loaderx_core::format::{Codec, MAX_RECORD_LEN};
use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pymodule(gil_used = false)]
fn _loaderx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<handle::Handle>()?;
    m.add_class::<conversion::Conversion>()?;
    m.add_class::<schema::Schema>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<mix::Mixer>()?;
    m.add_class::<pack::Packer>()?;
    m.add_class::<metrics::Recorder>()?;
    m.add_class::<images::Images>()?;
    m.add_class::<mask::Mask>()?;
    m.add_function(wrap_pyfunction!(images::image_header, m)?)?;
    m.add_function(wrap_pyfunction!(images::media_value, m)?)?;
    m.add_function(wrap_pyfunction!(images::random_resized_params, m)?)?;
    m.add("MAX_PIXELS", loaderx_core::image::DEFAULT_MAX_PIXELS)?;
    m.add_function(wrap_pyfunction!(handle::commit, m)?)?;
    m.add_function(wrap_pyfunction!(functions::cli, m)?)?;
    m.add_function(wrap_pyfunction!(functions::copy_store, m)?)?;
    m.add_function(wrap_pyfunction!(functions::check_destination, m)?)?;
    m.add_function(wrap_pyfunction!(functions::remove_partial_copy, m)?)?;
    m.add_function(wrap_pyfunction!(functions::list_children, m)?)?;
    m.add_function(wrap_pyfunction!(functions::is_url, m)?)?;
    m.add_function(wrap_pyfunction!(functions::redact_url, m)?)?;
    m.add_function(wrap_pyfunction!(functions::check_writable, m)?)?;
    m.add_function(wrap_pyfunction!(functions::manifest_file, m)?)?;
    m.add_function(wrap_pyfunction!(functions::is_store_file, m)?)?;
    m.add_function(wrap_pyfunction!(functions::process_id, m)?)?;
    m.add_function(wrap_pyfunction!(functions::thread_meter, m)?)?;
    m.add_function(wrap_pyfunction!(functions::meter_since, m)?)?;
    m.add("ERROR_CODES", error::codes(m.py())?)?;
    let codecs = PyDict::new(m.py());
    for c in Codec::ALL {
        codecs.set_item(c.name(), c as u8)?;
    }
    m.add("CODECS", codecs)?;
    m.add("SCHEMA_FILE", loaderx_core::open::SCHEMA_FILE)?;
    m.add("META_FILE", loaderx_core::open::META_FILE)?;
    m.add("MANIFEST_FILE", loaderx_core::open::MANIFEST_FILE)?;
    m.add("FORMAT", loaderx_core::schema::FORMAT)?;
    m.add("MAX_RECORD_LEN", MAX_RECORD_LEN)?;
    m.add("MAX_RECORDS", loaderx_core::format::MAX_RECORDS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
