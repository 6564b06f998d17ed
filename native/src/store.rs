//! Opening a store and the read path: `len`, `lengths`, `gather`, `stats`.
//!
//! Invariants:
//! * Opening never writes, except to finish a delete that a crash interrupted (a
//!   `delete.journal` is present and no live writer holds the lock): a reader maps `meta.zr` and the chunk files read-only at their current
//!   sizes and takes no lock. Only the first mutating call upgrades the handle to a writer
//!   (see `write.rs`).
//! * Before any byte reaches a caller's buffer, a read checks every index against the published
//!   length, every table entry against the limits and the mapped size of its chunk file, and every
//!   destination range against the buffer. A failed check leaves the buffer untouched.
//! * Lock order, everywhere: `gate` → `writer` → `meta` → `chunks` → `dict`. `gate` is held
//!   shared by reads and appends and exclusively by delete and compact.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{self, Codec, Header, RecordLoc, HEADER_SIZE};

use crate::error::{Error, Result};
use crate::io;
use crate::map::{ChunkMap, MetaMap};
use crate::write::Writer;

/// Largest `dict.zr` a store will load.
pub(crate) const MAX_DICT_BYTES: u64 = 64 << 20;
/// Below this many bytes a gather runs on the calling thread: the fan-out costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;
/// Blocks a parallel gather is cut into, per thread.
const BLOCKS_PER_THREAD: usize = 16;

/// What [`Store::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records checked.
    pub checked: u64,
    /// Records that failed, with the reason.
    pub bad: Vec<(u64, String)>,
}

/// How [`Store::open_with`] treats a missing store.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Create the directory (with parents) and an empty store when there is none.
    pub create: bool,
}

pub use loaderx_core::stats::Stats;

/// A read-only view of one chunk file.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) map: ChunkMap,
}

impl Chunk {
    pub(crate) fn open_read(path: &Path) -> Result<Option<Chunk>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path)(e)),
        };
        let len = file.metadata().map_err(Error::io("stat", path))?.len();
        let map = ChunkMap::new(&file, len).map_err(Error::io("mmap", path))?;
        Ok(Some(Chunk { map }))
    }
}

/// A loaderx record store on disk.
///
/// `gather`, `lengths`, `stats` and `append` may run concurrently from many threads; `delete`
/// and `compact` take exclusive access (they wait for running calls and block new ones).
#[derive(Debug)]
pub struct Store {
    pub(crate) dir: PathBuf,
    pub(crate) gate: RwLock<()>,
    pub(crate) writer: Mutex<Option<Writer>>,
    pub(crate) meta: RwLock<MetaMap>,
    /// Indexed by chunk id; `None` where the file does not exist.
    pub(crate) chunks: RwLock<Vec<Option<Arc<Chunk>>>>,
    pub(crate) dict: RwLock<Option<Arc<Dictionary>>>,
}

/// Path of chunk file `id` in `dir`.
pub(crate) fn chunk_path(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("{id}.zr"))
}

pub(crate) fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // A panic while holding a lock cannot leave these structures half-updated: every writer
    // replaces whole values. So a poisoned lock is still safe to use.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// Opens an existing store.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens a store, creating the directory and an empty store if there is none (as
    /// `Zrecord(path)` does).
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions { create: true })
    }

    /// Opens a store with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Store> {
        let dir = path.as_ref().to_path_buf();
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Error::NotADirectory(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && options.create => {
                fs::create_dir_all(&dir).map_err(Error::io("create directory", &dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NotFound(dir)),
            Err(e) => return Err(Error::io("stat", &dir)(e)),
        }
        let meta_path = dir.join("meta.zr");
        if !meta_path.exists() {
            if !options.create {
                return Err(Error::NotAStore { path: dir, reason: "it has no meta.zr".into() });
            }
            crate::write::create_store(&dir)?;
        }
        if dir.join(loaderx_core::journal::JOURNAL_FILE).exists() {
            crate::write::recover_interrupted_delete(&dir)?;
        }
        let meta_file = File::open(&meta_path).map_err(Error::io("open", &meta_path))?;
        let meta_len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
        if meta_len < HEADER_SIZE {
            return Err(Error::corrupt(
                &meta_path,
                format!("the file is {meta_len} bytes, shorter than the 16-byte header"),
            ));
        }
        // The header is read through the map, not the descriptor: on Windows a live writer's
        // lock on `meta.zr` is mandatory and refuses reads through other handles, but not
        // through maps.
        let meta = MetaMap::new(&meta_file, meta_len, false).map_err(Error::io("mmap", &meta_path))?;
        let header = meta.header();
        header.validate(meta_len).map_err(|e| Error::format(&meta_path, e))?;
        let chunks = (0..=header.tail_chunk)
            .map(|id| Ok(Chunk::open_read(&chunk_path(&dir, id))?.map(Arc::new)))
            .collect::<Result<Vec<_>>>()?;
        let dict = load_dict(&dir)?.map(Arc::new);
        Ok(Store {
            dir,
            gate: RwLock::new(()),
            writer: Mutex::new(None),
            meta: RwLock::new(meta),
            chunks: RwLock::new(chunks),
            dict: RwLock::new(dict),
        })
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of live records.
    pub fn len(&self) -> u64 {
        u64::from(read_lock(&self.meta).length())
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the header.
    pub fn header(&self) -> Header {
        read_lock(&self.meta).header()
    }

    /// True if the store has a dictionary (`dict.zr`).
    pub fn has_dict(&self) -> bool {
        read_lock(&self.dict).is_some()
    }

    /// The dictionary bytes, if the store has one.
    pub fn dict_bytes(&self) -> Option<Vec<u8>> {
        read_lock(&self.dict).as_ref().map(|d| d.bytes().to_vec())
    }

    /// Checked table entries for `indices`: every index below the length, every entry valid
    /// against the limits and its chunk file.
    pub(crate) fn locate(&self, indices: &[u64]) -> Result<Vec<(RecordLoc, Codec)>> {
        let meta = read_lock(&self.meta);
        let length = u64::from(meta.length());
        if let Some(&index) = indices.iter().find(|&&i| i >= length) {
            return Err(Error::IndexOutOfRange { index, length });
        }
        let chunks = read_lock(&self.chunks);
        let chunk_len = |id: u16| chunks.get(usize::from(id))?.as_ref().map(|c| c.map.len());
        indices
            .iter()
            .map(|&index| {
                let loc = meta.entry(index).ok_or_else(|| {
                    Error::corrupt(
                        self.dir.join("meta.zr"),
                        format!("entry {index} lies past the end of the file"),
                    )
                })?;
                let codec = loc.validate(index, chunk_len).map_err(|e| self.entry_error(e))?;
                Ok((loc, codec))
            })
            .collect()
    }

    fn entry_error(&self, e: format::FormatError) -> Error {
        let file = match &e {
            format::FormatError::OutsideChunk { chunk, .. } => chunk_path(&self.dir, *chunk),
            _ => self.dir.join("meta.zr"),
        };
        Error::corrupt(file, e)
    }

    /// The checked table entries of `indices` (where and how each record is stored).
    pub fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        let _gate = read_lock(&self.gate);
        Ok(self.locate(indices)?.into_iter().map(|(loc, _)| loc).collect())
    }

    /// Logical (decoded) length of each record.
    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        let _gate = read_lock(&self.gate);
        Ok(self.locate(indices)?.iter().map(|(loc, _)| loc.logic_length).collect())
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]`.
    ///
    /// The destination ranges must lie inside `dst` and must not overlap. Work is split over
    /// the rayon pool in contiguous blocks, one zstd context per block, and each record is
    /// decoded (or copied) straight from the chunk mapping into `dst`.
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        if indices.len() != dst_offsets.len() {
            return Err(Error::BadArgument(format!(
                "{} indices but {} destination offsets",
                indices.len(),
                dst_offsets.len()
            )));
        }
        let _gate = read_lock(&self.gate);
        let locs = self.locate(indices)?;
        let lens: Vec<u64> = locs.iter().map(|(l, _)| u64::from(l.logic_length)).collect();
        let dsts = split_dst(dst, dst_offsets, &lens)?;
        self.decode_all(indices, locs, dsts)
    }

    /// Decodes records `indices`, each exactly `stride` bytes long, back to back into `dst`
    /// (`dst.len() == indices.len() · stride`), as a dense dataset reads its fixed-size rows.
    /// A record of any other length is an error, never a misaligned batch.
    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        let need = (indices.len() as u64).checked_mul(stride);
        if stride == 0 || need != Some(dst.len() as u64) {
            return Err(Error::BadArgument(format!(
                "buffer of {} bytes does not hold {} records of {stride} bytes",
                dst.len(),
                indices.len()
            )));
        }
        let _gate = read_lock(&self.gate);
        let locs = self.locate(indices)?;
        if let Some((k, (loc, _))) =
            locs.iter().enumerate().find(|(_, (l, _))| u64::from(l.logic_length) != stride)
        {
            return Err(Error::corrupt(
                self.dir.join("meta.zr"),
                format!(
                    "record {} is {} bytes, but the dataset's rows are {stride}",
                    indices[k], loc.logic_length
                ),
            ));
        }
        let dsts = dst.chunks_exact_mut(stride as usize).collect();
        self.decode_all(indices, locs, dsts)
    }

    /// Decodes checked records into their destination slices, sharded over the rayon pool.
    fn decode_all(&self, indices: &[u64], locs: Vec<(RecordLoc, Codec)>, dsts: Vec<&mut [u8]>) -> Result<()> {
        let total: u64 = locs.iter().map(|(l, _)| u64::from(l.logic_length)).sum();
        let mut jobs: Vec<Job<'_>> = indices
            .iter()
            .zip(locs)
            .zip(dsts)
            .map(|((&index, (loc, codec)), dst)| Job { index, loc, codec, dst })
            .collect();
        let chunks = read_lock(&self.chunks);
        let dict = read_lock(&self.dict).clone();
        let run = |jobs: &mut [Job<'_>]| run_shard(&self.dir, &chunks, dict.as_deref(), jobs);
        let threads = rayon::current_num_threads();
        if total < PARALLEL_MIN_BYTES || threads < 2 || jobs.len() < 2 {
            return run(&mut jobs);
        }
        // Many small blocks per thread, so the threads finish together: the last block is all
        // one thread can be left alone with.
        let block = jobs.len().div_ceil(threads * BLOCKS_PER_THREAD);
        crate::fanout::for_each_block(jobs.chunks_mut(block).collect(), threads - 1, run)
    }

    /// Decodes every record and checks its table entry, bounds and length. `progress` is called
    /// with (records done, total) after each block.
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> VerifyReport {
        const BLOCK: u64 = 4096;
        let total = self.len();
        let mut report = VerifyReport::default();
        let mut buf = vec![0u8; format::MAX_RECORD_LEN as usize];
        let mut start = 0;
        while start < total {
            let end = (start + BLOCK).min(total);
            for index in start..end {
                let result = self.entries(&[index]).and_then(|locs| {
                    let len = locs.first().map_or(0, |l| l.logic_length as usize);
                    self.gather(&[index], &mut buf[..len], &[0])
                });
                if let Err(e) = result {
                    report.bad.push((index, e.to_string()));
                }
            }
            report.checked = end;
            progress(end, total);
            start = end;
        }
        report
    }

    /// Storage usage.
    pub fn stats(&self) -> Result<Stats> {
        let _gate = read_lock(&self.gate);
        let meta = read_lock(&self.meta);
        let header = meta.header();
        let entries = (0..u64::from(header.length)).map(|index| {
            meta.entry(index).ok_or_else(|| {
                Error::corrupt(
                    self.dir.join("meta.zr"),
                    format!("entry {index} lies past the end of the file"),
                )
            })
        });
        let entries = entries.collect::<Result<Vec<_>>>()?;
        Ok(Stats::from_entries(&header, entries))
    }
}

fn load_dict(dir: &Path) -> Result<Option<Dictionary>> {
    let path = dir.join("dict.zr");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &path)(e)),
    };
    let len = file.metadata().map_err(Error::io("stat", &path))?.len();
    if len > MAX_DICT_BYTES {
        return Err(Error::corrupt(
            &path,
            format!("{len} bytes is larger than any dictionary loaderx writes"),
        ));
    }
    let mut bytes = vec![0u8; len as usize];
    io::read_exact_at(&file, &mut bytes, 0, &path)?;
    Ok(Some(Dictionary::new(bytes)))
}

/// One record of a gather.
struct Job<'a> {
    index: u64,
    loc: RecordLoc,
    codec: Codec,
    dst: &'a mut [u8],
}

fn run_shard(
    dir: &Path,
    chunks: &[Option<Arc<Chunk>>],
    dict: Option<&Dictionary>,
    jobs: &mut [Job<'_>],
) -> Result<()> {
    let mut decoder = Decoder::new(dict);
    for job in jobs {
        let chunk = chunks.get(usize::from(job.loc.chunk_id)).and_then(Option::as_ref);
        let src =
            chunk.and_then(|c| c.map.bytes(u64::from(job.loc.offset), job.loc.stored_len())).ok_or_else(
                || Error::corrupt(chunk_path(dir, job.loc.chunk_id), "record lies past the end of the file"),
            )?;
        decoder
            .decode_into(job.codec, src, job.dst)
            .map_err(|source| Error::Decode { index: job.index, source })?;
    }
    Ok(())
}

/// Splits `dst` into the disjoint ranges `[offsets[k], offsets[k] + lens[k])`, in request order.
fn split_dst<'a>(dst: &'a mut [u8], offsets: &[u64], lens: &[u64]) -> Result<Vec<&'a mut [u8]>> {
    let size = dst.len() as u64;
    for (k, (&off, &len)) in offsets.iter().zip(lens).enumerate() {
        if off.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::BadArgument(format!(
                "buffer too small: record {k} needs bytes {off}..{} of a {size}-byte buffer",
                off.saturating_add(len)
            )));
        }
    }
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    if !offsets.is_sorted() {
        order.sort_unstable_by_key(|&k| offsets[k]);
    }
    let mut pieces: Vec<(usize, &'a mut [u8])> = Vec::with_capacity(order.len());
    let mut rest = dst;
    let mut cursor = 0u64;
    for k in order {
        let (off, len) = (offsets[k], lens[k]);
        if off < cursor {
            return Err(Error::BadArgument(format!(
                "destination ranges overlap at record {k} (offset {off})"
            )));
        }
        // Both bounds were checked against the buffer size above.
        let (_, tail) = std::mem::take(&mut rest).split_at_mut((off - cursor) as usize);
        let (piece, tail) = tail.split_at_mut(len as usize);
        pieces.push((k, piece));
        rest = tail;
        cursor = off + len;
    }
    pieces.sort_unstable_by_key(|(k, _)| *k);
    Ok(pieces.into_iter().map(|(_, piece)| piece).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_dst_checks_bounds_and_overlap() {
        let mut buf = [0u8; 10];
        let pieces = split_dst(&mut buf, &[6, 0, 3], &[4, 3, 3]).unwrap();
        assert_eq!(pieces.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![4, 3, 3]);
        assert!(split_dst(&mut buf, &[0, 8], &[3, 3]).is_err(), "past the end");
        assert!(split_dst(&mut buf, &[0, 2], &[3, 3]).is_err(), "overlap");
        assert!(split_dst(&mut buf, &[u64::MAX], &[3]).is_err(), "overflow");
        assert!(split_dst(&mut buf, &[], &[]).unwrap().is_empty());
    }

    #[test]
    fn split_dst_pieces_land_at_their_offsets() {
        let mut buf = [0u8; 6];
        let pieces = split_dst(&mut buf, &[4, 0], &[2, 2]).unwrap();
        for (k, piece) in pieces.into_iter().enumerate() {
            piece.fill(k as u8 + 1);
        }
        assert_eq!(buf, [2, 2, 0, 0, 1, 1]);
    }
}
