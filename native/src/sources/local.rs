//! The mapped local directory as a [`ChunkSource`]: zero-copy, pieces borrow the chunk maps.
//!
//! Invariants:
//! * A view holds the handle's read gate for its whole life, so no delete or compaction of this
//!   handle runs meanwhile, and the chunk list it saw stays current (only the writer replaces
//!   maps, under the chunks lock the view holds shared). Appends may publish records past the
//!   length the view reported; the view never shows them.
//! * Table entries are copied out of the `meta.zr` map, never borrowed (other processes may
//!   write it; see `map.rs`).

use std::path::Path;

use loaderx_core::checksum::{SidecarError, SidecarHeader, Slot};
use loaderx_core::codec::Dictionary;
use loaderx_core::format::{Header, RecordLoc};
use loaderx_core::read::{self, PlanRules, ReadRange};
use loaderx_core::schema::Schema;

use crate::checksums::SidecarMap;
use crate::error::{Error, Result};
use crate::shared::{Chunks, Shared};
use crate::source::{ChunkSource, Piece, View};
use crate::sync::{self, Arc, RwLock, RwLockReadGuard};

/// A store directory's maps and dictionary, and the gate that orders its reads and writes.
#[derive(Debug)]
pub(crate) struct LocalDir {
    /// Held shared by reads, appends and training, exclusively by delete and compact.
    pub(crate) gate: RwLock<()>,
    /// The maps and the dictionary readers and the writer share.
    pub(crate) shared: Shared,
    shown: String,
}

impl LocalDir {
    pub(crate) fn new(shared: Shared) -> LocalDir {
        let shown = shared.dir().display().to_string();
        LocalDir { gate: RwLock::new(()), shared, shown }
    }

    /// The store directory.
    pub(crate) fn dir(&self) -> &Path {
        self.shared.dir()
    }

    /// Every live table entry, checked against the format rules and the chunk files, for a
    /// caller that already holds the gate exclusively (compaction).
    pub(crate) fn checked_table(&self) -> Result<Vec<RecordLoc>> {
        let meta = self.shared.meta();
        let chunks = self.shared.chunks();
        let lens: Vec<Option<u64>> = chunks.iter().map(|c| c.as_ref().map(|c| c.len())).collect();
        let at = self.dir();
        let entries = (0..u64::from(meta.length()))
            .map(|index| {
                meta.entry(index).map(|loc| (index, loc)).ok_or_else(|| Error::entry_past_end(at, index))
            })
            .collect::<Result<Vec<_>>>()?;
        let rules = PlanRules { chunk_lens: &lens, typed: None, max_gap: 0, max_out: u64::MAX };
        read::plan_in_place(&entries, &rules, false).map_err(|e| Error::classified(at, e))?;
        Ok(entries.into_iter().map(|(_, loc)| loc).collect())
    }
}

struct LocalView<'s> {
    _gate: RwLockReadGuard<'s, ()>,
    dir: &'s LocalDir,
    header: Header,
    chunks: RwLockReadGuard<'s, Chunks>,
    lens: Lens,
    dict: Option<Arc<Dictionary>>,
    sidecar: Option<Arc<SidecarMap>>,
}

/// The chunk files' sizes of one view, without a heap allocation for the usual few chunks.
enum Lens {
    Inline([Option<u64>; 8], usize),
    Heap(Vec<Option<u64>>),
}

impl Lens {
    fn of(chunks: &Chunks) -> Lens {
        let size = |c: &Option<Arc<crate::files::Chunk>>| c.as_ref().map(|c| c.len());
        if chunks.len() <= 8 {
            let mut inline = [None; 8];
            for (slot, chunk) in inline.iter_mut().zip(chunks.iter()) {
                *slot = size(chunk);
            }
            Lens::Inline(inline, chunks.len())
        } else {
            Lens::Heap(chunks.iter().map(size).collect())
        }
    }

    fn as_slice(&self) -> &[Option<u64>] {
        match self {
            Lens::Inline(lens, n) => &lens[..*n],
            Lens::Heap(lens) => lens,
        }
    }
}

impl ChunkSource for LocalDir {
    fn view(&self) -> Result<Box<dyn View + '_>> {
        let gate = sync::read(&self.gate);
        let header = self.shared.meta().header();
        let chunks = self.shared.chunks();
        let lens = Lens::of(&chunks);
        let dict = self.shared.dict();
        let sidecar = self.shared.sidecar();
        Ok(Box::new(LocalView { _gate: gate, dir: self, header, chunks, lens, dict, sidecar }))
    }

    fn in_place(&self) -> bool {
        true
    }

    fn shown(&self) -> &str {
        &self.shown
    }

    fn header(&self) -> Header {
        self.shared.meta().header()
    }

    fn dict(&self) -> Option<Arc<Dictionary>> {
        self.shared.dict()
    }

    fn schema(&self) -> Result<Option<Schema>> {
        crate::files::read_schema(self.shared.dir())
    }
}

impl View for LocalView<'_> {
    fn header(&self) -> Header {
        self.header
    }

    fn chunk_lens(&self) -> &[Option<u64>] {
        self.lens.as_slice()
    }

    fn dict(&self) -> Option<&Dictionary> {
        self.dict.as_deref()
    }

    fn entries(&self, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>> {
        let meta = self.dir.shared.meta();
        meta.touch_entries(indices);
        let at = self.dir.dir();
        indices
            .iter()
            .map(|&index| {
                meta.entry(index).map(|loc| (index, loc)).ok_or_else(|| Error::entry_past_end(at, index))
            })
            .collect()
    }

    fn sidecar_header(&self) -> Option<std::result::Result<SidecarHeader, SidecarError>> {
        self.sidecar.as_ref().map(|m| m.header())
    }

    fn slots(&self, indices: &[u64]) -> Result<Vec<Option<Slot>>> {
        Ok(match &self.sidecar {
            Some(m) => indices.iter().map(|&i| m.slot(i)).collect(),
            None => Vec::new(),
        })
    }

    fn stale_entry(&self) -> Result<Option<RecordLoc>> {
        Ok(crate::checksums::stale_entry(&self.dir.shared.meta()))
    }

    fn fetch(&self, ranges: &[ReadRange]) -> Result<Vec<Piece<'_>>> {
        Ok(ranges
            .iter()
            .map(|r| {
                let chunk = self.chunks.get(usize::from(r.chunk)).and_then(Option::as_ref);
                // Entries were checked against these maps' sizes, so the bytes are there; a
                // range that is not comes back empty, which the reader reports as short.
                Piece::Borrowed(chunk.and_then(|c| c.bytes(r.start, r.end - r.start)).unwrap_or(&[]))
            })
            .collect())
    }
}
