//! `loaderx convert --images DIR STORE` and `loaderx verify --images`: stores of encoded images.
//!
//! Invariants: a directory converts in the order of its files' paths relative to it (sorted as
//! strings of `/`-separated components, as Python's `loaderx.converter.image_files` sorts), so
//! the tool and the Python converter write the same store from the same tree; a file that is
//! not an image (by its header) fails the conversion naming the file, and nothing is kept.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use loaderx_core::image::{header, Limits, Media};
use loaderx_core::schema::{Kind, Schema};

use super::{progress, Fail};
use crate::records::Records;
use crate::Codec;

/// The extensions taken from a directory (any case).
const SUFFIXES: [&str; 4] = ["jpg", "jpeg", "png", "webp"];

/// Records per block of a scan or a conversion.
const BLOCK: usize = 256;

/// The image files under `dir`, recursively, sorted by their `/`-joined path relative to it.
pub(crate) fn image_files(dir: &Path) -> Result<Vec<PathBuf>, Fail> {
    if !dir.is_dir() {
        return Err(Fail::usage(&format!("{} is not a directory of images", dir.display())));
    }
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).map_err(Fail::io(&d))? {
            let path = entry.map_err(Fail::io(&d))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| SUFFIXES.contains(&e.to_ascii_lowercase().as_str()))
            {
                let rel = path.strip_prefix(dir).unwrap_or(&path);
                let key: Vec<String> =
                    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                found.push((key.join("/"), path));
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Makes a new store at `target` (a path or URL) of the image files under `dir`; returns the
/// records written.
pub(crate) fn convert(dir: &Path, target: &str, codec: Codec, quiet: bool) -> Result<u64, Fail> {
    let files = image_files(dir)?;
    if files.is_empty() {
        return Err(Fail::usage(&format!("no .jpg, .jpeg, .png or .webp files under {}", dir.display())));
    }
    let schema = Schema::new(Kind::Ragged, "|u1", &[], codec.name());
    let mut conversion = super::new_store(target, schema, codec)?;
    let bar = progress(files.len() as u64, quiet, "converting");
    let mut seen: Vec<Media> = Vec::new();
    for block in files.chunks(BLOCK) {
        let (mut buf, mut offsets) = (Vec::new(), Vec::with_capacity(block.len()));
        for file in block {
            let bytes = std::fs::read(file).map_err(Fail::io(file))?;
            let h = header(&bytes).map_err(|e| Fail::Data(format!("{}: {e}", file.display())))?;
            if !seen.contains(&h.media) {
                seen.push(h.media);
            }
            offsets.push(buf.len() as u64);
            buf.extend_from_slice(&bytes);
        }
        conversion.append(&buf, &offsets).map_err(Fail::store)?;
        bar.inc(block.len() as u64);
    }
    conversion.set_schema_key("media", Media::schema_value(&seen)).map_err(Fail::store)?;
    let written = conversion.finish().map_err(Fail::store)?;
    bar.finish_and_clear();
    Ok(written)
}

/// Decodes every record but those of `skip` (records the store cannot read) as an image (under
/// `limits`) and returns the undecodable ones, with why, in index order.
pub(crate) fn undecodable_except(
    records: &dyn Records,
    limits: &Limits,
    skip: &HashSet<u64>,
    quiet: bool,
) -> Result<Vec<(u64, String)>, Fail> {
    let n = records.len();
    let bar = progress(n, quiet, "decoding images");
    let mut bad = Vec::new();
    let mut start = 0u64;
    while start < n {
        let end = (start + BLOCK as u64).min(n);
        let indices: Vec<u64> = (start..end).filter(|i| !skip.contains(i)).collect();
        let found = crate::images::undecodable(records, &indices, limits).map_err(Fail::store)?;
        bad.extend(found.into_iter().map(|(i, e)| (i, e.to_string())));
        bar.set_position(end);
        start = end;
    }
    bar.finish_and_clear();
    Ok(bad)
}
