//! Packed rows read from a store: core's [`Packer`] says which tokens of which documents fill
//! each row, this module gathers those documents (each once per call, whatever rows it spans)
//! and fills the rows with [`fill_rows`].
//!
//! Invariants: a call reads each document it needs once, through the same read path as every
//! other read (checksums, caches, remote sources); a document whose stored length no longer
//! matches the plan (the store changed under the loader) is an error naming it, never a
//! truncated row.

use loaderx_core::pack::{fill_rows, Packer, Rows};

use crate::error::{Error, Result};
use crate::records::{packed, Records};

/// Fills `out` with rows `first..first + rows` of `packer`'s stream over `records`, whose
/// tokens are `elem` bytes each.
pub fn read_rows(
    records: &dyn Records,
    packer: &Packer,
    first: u64,
    rows: u64,
    elem: usize,
    out: Rows<'_>,
) -> Result<()> {
    let n =
        usize::try_from(rows).map_err(|_| Error::BadArgument(format!("{rows} rows do not fit in memory")))?;
    let segments = packer.segments(first, rows).map_err(|e| Error::BadArgument(e.to_string()))?;
    let mut docs: Vec<u64> = segments.iter().map(|g| g.doc).collect();
    docs.sort_unstable();
    docs.dedup();
    let lens = records.lengths(&docs)?;
    for (&d, &got) in docs.iter().zip(&lens) {
        let want = u64::from(packer.record_tokens(d).unwrap_or(0)) * elem as u64;
        if u64::from(got) != want {
            return Err(Error::BadArgument(format!(
                "record {d} holds {got} bytes, but the packing plan was made when it held {want}: the store changed under the loader; make a new one"
            )));
        }
    }
    let (offsets, total) = packed(&lens);
    let total = usize::try_from(total).map_err(|_| Error::BadArgument("batch too large".into()))?;
    let mut buffer = vec![0u8; total];
    records.gather(&docs, &mut buffer, &offsets)?;
    let bytes = |d: u64| {
        let k = docs.binary_search(&d).ok()?;
        let at = offsets[k] as usize;
        buffer.get(at..at + lens[k] as usize)
    };
    let seq_len = packer.spec().seq_len;
    fill_rows(&segments, first, n, seq_len, elem, bytes, out)
        .map_err(|d| Error::BadArgument(format!("record {d} is shorter than its packing plan")))
}
