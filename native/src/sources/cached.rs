//! A [`ChunkSource`] decorator that keeps another source's chunk bytes in the local disk cache
//! (`cache.rs`), in whole [`BLOCK`]s.
//!
//! A view cuts each planned range from the blocks of its chunk file, mapped from the cache
//! (zero-copy unless a range spans two blocks). Blocks not cached are fetched whole from the
//! inner source first (neighbouring ones together, up to [`FETCH_SPAN`] bytes a request, at most
//! [`MAX_FETCHES`] requests at once), stored, and mapped. Blocks stay mapped across calls, up to
//! [`MAX_MAPPED`] of them. Everything else (header, table, dictionary, schema) is the inner
//! source's.
//!
//! Invariants:
//! * Fetched blocks enter the cache only once the call that fetched them settled its bytes as
//!   good (`View::settle`: every checked record matched its checksum), or ended without a check
//!   failing; [`View::forget`] drops blocks whose bytes failed, so they are fetched again.
//! * A block's identity is its object's (URL, version, size: [`ChunkSource::cache_identity`]), so
//!   a store replaced remotely never reads the old version's blocks.
//! * A range past the object's end comes back short, as a direct read would.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use loaderx_core::checksum::{SidecarError, SidecarHeader, Slot};
use loaderx_core::codec::Dictionary;
use loaderx_core::format::{Header, RecordLoc};
use loaderx_core::read::ReadRange;
use loaderx_core::schema::Schema;

use crate::cache::{DiskCache, ObjectKey, BLOCK};
use crate::error::Result;
use crate::source::{ChunkSource, Piece, View};

/// Cache blocks held mapped per store; past this the set is dropped and mapped again on use.
const MAX_MAPPED: usize = 256;
/// A block held mapped is marked recently used in the cache at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(10);
/// Block requests in flight at once.
const MAX_FETCHES: usize = 16;
/// Most bytes asked for in one request: neighbouring missing blocks are fetched together up to
/// this (the range size AWS recommends for parallel ranged GETs).
const FETCH_SPAN: u64 = 16 << 20;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct CachedSource {
    inner: Box<dyn ChunkSource>,
    cache: DiskCache,
    /// Cache blocks mapped by earlier calls, by (chunk, block), with when each was last marked
    /// used.
    mapped: Mutex<HashMap<(u16, u64), (Bytes, Instant)>>,
}

impl CachedSource {
    pub(crate) fn new(inner: Box<dyn ChunkSource>, cache: DiskCache) -> CachedSource {
        CachedSource { inner, cache, mapped: Mutex::new(HashMap::new()) }
    }

    /// The cache identity of chunk file `chunk` of `size` bytes.
    fn key(&self, chunk: u16, size: u64) -> ObjectKey {
        let (url, version) = self.inner.cache_identity(chunk).unwrap_or_else(|| {
            (format!("{}/{}", self.inner.shown(), loaderx_core::open::chunk_name(chunk)), None)
        });
        ObjectKey::new(&url, version.as_deref(), size)
    }

    fn remember(mapped: &mut HashMap<(u16, u64), (Bytes, Instant)>, id: (u16, u64), bytes: Bytes) {
        if mapped.len() >= MAX_MAPPED {
            mapped.clear();
        }
        mapped.insert(id, (bytes, Instant::now()));
    }
}

impl ChunkSource for CachedSource {
    fn view(&self) -> Result<Box<dyn View + '_>> {
        Ok(Box::new(CachedView { src: self, inner: self.inner.view()?, pending: Mutex::new(Vec::new()) }))
    }

    fn in_place(&self) -> bool {
        false
    }

    fn shown(&self) -> &str {
        self.inner.shown()
    }

    fn header(&self) -> Header {
        self.inner.header()
    }

    fn dict(&self) -> Option<Arc<Dictionary>> {
        self.inner.dict()
    }

    fn schema(&self) -> Result<Option<Schema>> {
        self.inner.schema()
    }

    /// Through the cache nothing is read twice, so records are not merged across gaps.
    fn max_gap(&self) -> Option<u64> {
        Some(0)
    }

    fn cache_identity(&self, chunk: u16) -> Option<(String, Option<String>)> {
        self.inner.cache_identity(chunk)
    }
}

struct CachedView<'s> {
    src: &'s CachedSource,
    inner: Box<dyn View + 's>,
    /// Blocks fetched by this view and not stored yet: they go into the cache once the reader
    /// settles them as good ([`View::settle`]), or when the view ends unsettled.
    pending: Mutex<Vec<((u16, u64), Bytes)>>,
}

impl CachedView<'_> {
    /// Stores the pending blocks in the cache and maps them for later calls.
    fn store_pending(&self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if pending.is_empty() {
            return;
        }
        let src = self.src;
        let mut mapped = src.mapped.lock().unwrap_or_else(|e| e.into_inner());
        for ((chunk, b), bytes) in pending {
            let key = src.key(chunk, self.size(chunk));
            src.cache.put(&key, b, &bytes);
            if let Some(m) = src.cache.map(&key, b, bytes.len() as u64) {
                CachedSource::remember(&mut mapped, (chunk, b), m);
            }
        }
        drop(mapped);
        src.cache.evict();
    }

    fn size(&self, chunk: u16) -> u64 {
        self.chunk_lens().get(usize::from(chunk)).copied().flatten().unwrap_or(0)
    }
}

impl Drop for CachedView<'_> {
    fn drop(&mut self) {
        self.store_pending();
    }
}

impl View for CachedView<'_> {
    fn header(&self) -> Header {
        self.inner.header()
    }

    fn sidecar_header(&self) -> Option<std::result::Result<SidecarHeader, SidecarError>> {
        self.inner.sidecar_header()
    }

    fn slots(&self, indices: &[u64]) -> Result<Vec<Option<Slot>>> {
        self.inner.slots(indices)
    }

    fn stale_entry(&self) -> Result<Option<RecordLoc>> {
        self.inner.stale_entry()
    }

    fn settle(&self, keep: bool) {
        if keep {
            self.store_pending();
        } else {
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Drops the blocks under `ranges` from the cache and from this source's maps, so the next
    /// fetch goes to the origin.
    fn forget(&self, ranges: &[ReadRange]) {
        let src = self.src;
        let mut mapped = src.mapped.lock().unwrap_or_else(|e| e.into_inner());
        for r in ranges.iter().filter(|r| r.end > r.start) {
            for b in r.start / BLOCK..=(r.end - 1) / BLOCK {
                mapped.remove(&(r.chunk, b));
                src.cache.remove(&src.key(r.chunk, self.size(r.chunk)), b);
            }
        }
    }

    fn chunk_lens(&self) -> &[Option<u64>] {
        self.inner.chunk_lens()
    }

    fn dict(&self) -> Option<&Dictionary> {
        self.inner.dict()
    }

    fn entries(&self, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>> {
        self.inner.entries(indices)
    }

    fn fetch(&self, ranges: &[ReadRange]) -> Result<Vec<Piece<'_>>> {
        let src = self.src;
        let size = |chunk: u16| self.chunk_lens().get(usize::from(chunk)).copied().flatten().unwrap_or(0);
        let block_len = |chunk: u16, b: u64| BLOCK.min(size(chunk).saturating_sub(b * BLOCK));
        // Reads past the object's end come back short, as a direct read would.
        let clipped: Vec<ReadRange> = ranges
            .iter()
            .map(|r| ReadRange {
                chunk: r.chunk,
                start: r.start.min(size(r.chunk)),
                end: r.end.min(size(r.chunk)),
            })
            .collect();
        let mut blocks: BTreeMap<(u16, u64), Bytes> = BTreeMap::new();
        let mut missing = Vec::new();
        {
            let mut mapped = src.mapped.lock().unwrap_or_else(|e| e.into_inner());
            for r in clipped.iter().filter(|r| r.end > r.start) {
                for b in r.start / BLOCK..=(r.end - 1) / BLOCK {
                    let id = (r.chunk, b);
                    if blocks.contains_key(&id) || missing.contains(&id) {
                        continue;
                    }
                    if let Some((bytes, touched)) = mapped.get_mut(&id) {
                        if touched.elapsed() > TOUCH_EVERY {
                            src.cache.touch(&src.key(r.chunk, size(r.chunk)), b);
                            *touched = Instant::now();
                        }
                        blocks.insert(id, bytes.clone());
                    } else if let Some(bytes) =
                        src.cache.map(&src.key(r.chunk, size(r.chunk)), b, block_len(r.chunk, b))
                    {
                        CachedSource::remember(&mut mapped, id, bytes.clone());
                        blocks.insert(id, bytes);
                    } else {
                        missing.push(id);
                    }
                }
            }
        }
        let (hits, misses) = (blocks.len() as u64, missing.len() as u64);
        crate::meter::add(|m| {
            m.cache_hits = m.cache_hits.wrapping_add(hits);
            m.cache_misses = m.cache_misses.wrapping_add(misses);
        });
        if !missing.is_empty() {
            // Neighbouring missing blocks of a chunk go in one request, up to FETCH_SPAN bytes.
            missing.sort_unstable();
            let mut runs: Vec<(u16, u64, u64)> = Vec::new(); // (chunk, first block, blocks)
            for &(chunk, b) in &missing {
                match runs.last_mut() {
                    Some((c, first, n))
                        if *c == chunk && *first + *n == b && (*n + 1) * BLOCK <= FETCH_SPAN =>
                    {
                        *n += 1
                    }
                    _ => runs.push((chunk, b, 1)),
                }
            }
            let wanted: Vec<ReadRange> = runs
                .iter()
                .map(|&(chunk, first, n)| ReadRange {
                    chunk,
                    start: first * BLOCK,
                    end: (first + n - 1) * BLOCK + block_len(chunk, first + n - 1),
                })
                .collect();
            let mut got = Vec::with_capacity(wanted.len());
            for group in wanted.chunks(MAX_FETCHES) {
                got.extend(self.inner.fetch(group)?.into_iter().map(|p| match p {
                    Piece::Owned(bytes) => bytes,
                    Piece::Borrowed(b) => Bytes::copy_from_slice(b),
                }));
            }
            // Served from the fetched copy now; stored in the cache once settled as good.
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            for (&(chunk, first, n), bytes) in runs.iter().zip(got) {
                for b in first..first + n {
                    let from = ((b - first) * BLOCK) as usize;
                    let piece = bytes
                        .slice(from.min(bytes.len())..(from + block_len(chunk, b) as usize).min(bytes.len()));
                    pending.push(((chunk, b), piece.clone()));
                    blocks.insert((chunk, b), piece);
                }
            }
        }
        Ok(clipped
            .iter()
            .map(|r| {
                if r.end <= r.start {
                    return Piece::Owned(Bytes::new());
                }
                let (first, last) = (r.start / BLOCK, (r.end - 1) / BLOCK);
                let cut = |b: u64, from: u64, to: u64| {
                    blocks[&(r.chunk, b)].slice((from - b * BLOCK) as usize..(to - b * BLOCK) as usize)
                };
                if first == last {
                    return Piece::Owned(cut(first, r.start, r.end));
                }
                let mut out = Vec::with_capacity((r.end - r.start) as usize);
                for b in first..=last {
                    out.extend_from_slice(&cut(b, r.start.max(b * BLOCK), r.end.min((b + 1) * BLOCK)));
                }
                Piece::Owned(Bytes::from(out))
            })
            .collect())
    }
}
