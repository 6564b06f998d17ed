//! Batches of pictures from a store of encoded images: the records are read through the one
//! read path ([`Records::gather`]: checksums, caches, remote sources), then decoded, cropped,
//! resized and mirrored by core's [`render`] on this process's rayon pool, each straight into
//! its row of the caller's `(B, H, W, 3)` buffer.
//!
//! Invariants: row `k` of a batch is a pure function of record `indices[k]`'s bytes, the spec
//! and `(seed, step, indices[k])`, whatever the thread count or the order the rows run in; a
//! record that does not render fails the whole call with an [`Error::Image`] naming it (the
//! lowest such row when several fail), and never leaves a wrong picture.

use loaderx_core::image::{render, ImageError, Render};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::process;
use crate::records::{packed, Records};

/// Renders records `indices` of `records` into `out`, `spec.output_bytes()` bytes per record.
pub fn read_images(
    records: &dyn Records,
    indices: &[u64],
    spec: &Render,
    seed: u64,
    step: u64,
    out: &mut [u8],
) -> Result<()> {
    spec.validate().map_err(|e| Error::BadArgument(e.to_string()))?;
    let row = spec.output_bytes();
    if out.len() != row * indices.len() {
        return Err(Error::BadArgument(format!(
            "the output holds {} bytes; {} pictures of {}x{}x3 need {}",
            out.len(),
            indices.len(),
            spec.height,
            spec.width,
            row * indices.len()
        )));
    }
    let (offsets, buffer) = read_encoded(records, indices)?;
    let encoded = |k: usize| &buffer[offsets[k] as usize..offsets[k + 1] as usize];
    process::run(|| {
        out.par_chunks_mut(row).enumerate().try_for_each(|(k, dst)| {
            render(encoded(k), spec, (seed, step, indices[k]), dst)
                .map_err(|source| Error::Image { index: indices[k], source })
        })
    })
}

/// Decodes every pixel of records `indices` (with `limits`) and returns those that fail, with
/// why, in index order.
pub fn undecodable(
    records: &dyn Records,
    indices: &[u64],
    limits: &loaderx_core::image::Limits,
) -> Result<Vec<(u64, ImageError)>> {
    let (offsets, buffer) = read_encoded(records, indices)?;
    let bad: Vec<Option<(u64, ImageError)>> = process::run(|| {
        (0..indices.len())
            .into_par_iter()
            .map(|k| {
                let bytes = &buffer[offsets[k] as usize..offsets[k + 1] as usize];
                loaderx_core::image::decode(bytes, limits).err().map(|e| (indices[k], e))
            })
            .collect()
    });
    Ok(bad.into_iter().flatten().collect())
}

/// Records `indices`, decoded from the store's codec, back to back: `offsets` has one more entry
/// than `indices`, the last the buffer's length.
fn read_encoded(records: &dyn Records, indices: &[u64]) -> Result<(Vec<u64>, Vec<u8>)> {
    let lens = records.lengths(indices)?;
    let (mut offsets, total) = packed(&lens);
    let size = usize::try_from(total).map_err(|_| Error::BadArgument("batch too large".into()))?;
    let mut buffer = vec![0u8; size];
    records.gather(indices, &mut buffer, &offsets)?;
    offsets.push(total);
    Ok((offsets, buffer))
}
