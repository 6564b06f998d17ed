//! `.npy` files in and out: `export` writes a dense store as one array `[n, ...item_shape]`,
//! `convert` makes a dense store from an array, one record per row, with the `schema.msgpack`
//! the Python converter writes. Headers are read and written by `ndarray-npy`.
//!
//! Invariants: rows are streamed in blocks of about [`BLOCK_BYTES`], so memory stays bounded
//! whatever the file size; a conversion that fails part-way removes the store it created.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::Codec;
use loaderx_core::dtype::DType;
use loaderx_core::schema::{Kind, Schema};
use ndarray_npy::npy::header::{Header, Layout};
use py_literal::Value as Py;

use super::{progress, Fail, Source};

/// Rows per block: about this many bytes.
const BLOCK_BYTES: u64 = 64 << 20;

/// Writes a dense store (or a manifest's stores, in order) to `out` as one `.npy` array.
pub(crate) fn export(store: &Source, schema: &Schema, out: &Path, quiet: bool) -> Result<u64, Fail> {
    if schema.kind().map_err(Fail::data)? != Kind::Dense {
        return Err(Fail::usage(
            "only dense stores export to one .npy array (ragged records differ in length)",
        ));
    }
    let dtype = schema.dtype_str().map_err(Fail::data)?.to_owned();
    let item_shape = schema.item_shape().map_err(Fail::data)?;
    let item = schema.item_bytes().map_err(Fail::data)?;
    let n = store.len();
    let shape = std::iter::once(n).chain(item_shape.iter().copied()).map(|d| d as usize).collect();
    let header = Header { type_descriptor: Py::String(dtype), layout: Layout::Standard, shape };
    let mut w = BufWriter::new(File::create(out).map_err(Fail::io(out))?);
    header.write(&mut w).map_err(|e| Fail::Data(format!("writing the .npy header: {e}")))?;
    let rows = (BLOCK_BYTES / item.max(1)).max(1);
    let bar = progress(n, quiet, "exporting");
    let mut buf = Vec::new();
    for start in (0..n).step_by(rows as usize) {
        let end = (start + rows).min(n);
        let indices: Vec<u64> = (start..end).collect();
        let offsets: Vec<u64> = (0..end - start).map(|k| k * item).collect();
        buf.resize(((end - start) * item) as usize, 0);
        // Every record must be one whole item before any is placed at its item's offset.
        for (k, len) in store.lengths(&indices).map_err(Fail::store)?.into_iter().enumerate() {
            if u64::from(len) != item {
                return Err(Fail::Data(format!(
                    "record {} is {len} bytes, not the {item}-byte item",
                    start + k as u64
                )));
            }
        }
        store.gather(&indices, &mut buf, &offsets).map_err(Fail::store)?;
        w.write_all(&buf).map_err(Fail::io(out))?;
        bar.set_position(end);
    }
    w.flush().map_err(Fail::io(out))?;
    bar.finish_and_clear();
    Ok(n)
}

/// Makes a new dense store at `dir` from the rows of the `.npy` file `input`, through the one
/// conversion session (`crate::Conversion`: its checks, rollback and schema).
pub(crate) fn convert(input: &Path, target: &str, codec: Codec, quiet: bool) -> Result<u64, Fail> {
    let mut r = BufReader::new(File::open(input).map_err(Fail::io(input))?);
    let header = Header::from_reader(&mut r).map_err(|e| Fail::Data(format!("{}: {e}", input.display())))?;
    let Py::String(descr) = &header.type_descriptor else {
        return Err(Fail::usage("structured .npy dtypes are not supported; convert each field separately"));
    };
    if !matches!(header.layout, Layout::Standard) {
        return Err(Fail::usage(
            "the .npy array is in Fortran order; save it C-contiguous (np.ascontiguousarray)",
        ));
    }
    let dtype: DType = descr.parse().map_err(Fail::data)?;
    let Some((&n, item_shape)) = header.shape.split_first() else {
        return Err(Fail::usage("a 0-d array has no rows to store"));
    };
    let item_shape: Vec<u64> = item_shape.iter().map(|&d| d as u64).collect();
    let schema = Schema::new(Kind::Dense, &dtype.to_numpy_str(), &item_shape, codec.name());
    let item = schema.item_bytes().map_err(Fail::data)?;
    let mut conversion = super::new_store(target, schema, codec)?;
    let rows = (BLOCK_BYTES / item).max(1);
    let bar = progress(n as u64, quiet, "converting");
    let mut buf = Vec::new();
    let mut done = 0u64;
    while done < n as u64 {
        let count = rows.min(n as u64 - done);
        buf.resize((count * item) as usize, 0);
        r.read_exact(&mut buf)
            .map_err(|e| Fail::Data(format!("{}: the data ends early ({e})", input.display())))?;
        let offsets: Vec<u64> = (0..count).map(|k| k * item).collect();
        conversion.append(&buf, &offsets).map_err(Fail::store)?;
        done += count;
        bar.set_position(done);
    }
    let written = conversion.finish().map_err(Fail::store)?;
    bar.finish_and_clear();
    Ok(written)
}
