//! What a handle's readers and its writer share: the current mapping of `meta.zr`, the chunk
//! maps and the dictionary, each behind its own lock.
//!
//! Invariants:
//! * Each lock guards *which* value is current, not the bytes behind it. Only the writer
//!   replaces a value (a writable `meta.zr` mapping at upgrade, a chunk map when a chunk file is
//!   created or grown, the chunk list when compaction drops files, the dictionary when one is
//!   trained), and it does so under the exclusive lock.
//! * The writer changes `meta.zr`'s *bytes* through a shared guard of `meta`. That is sound
//!   because [`MetaMap`] never hands out references to its bytes: header words are atomics,
//!   and a table entry is written only while no reader may read it (its index is at or past the
//!   published length, during an append, or the store's `gate` is held exclusively, during a
//!   delete or compaction; see `map.rs`). Taking `meta` exclusively for those writes would buy
//!   nothing and would stall every reader for the whole write.
//! * Chunk maps are read-only and shared as `Arc`s, so replacing one never invalidates a slice a
//!   running read holds (reads hold the `chunks` guard while they copy anyway).
//! * Lock order, everywhere: the store's `gate` → its `writer` → `meta` → `chunks` → `dict` → `sidecar`.
//!   `gate` and `writer` are held across a whole call; guards of the three here are held for
//!   short sections only, and never while taking `gate` or `writer`.

use std::path::{Path, PathBuf};

use loaderx_core::codec::Dictionary;

use crate::checksums::SidecarMap;
use crate::files::Chunk;
use crate::map::MetaMap;
use crate::sync::{self, Arc, RwLock, RwLockReadGuard};

/// The chunk maps, indexed by chunk id; `None` where the file does not exist.
pub(crate) type Chunks = Vec<Option<Arc<Chunk>>>;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Shared {
    dir: PathBuf,
    /// The lock guards which mapping is current; the mapping's bytes are written through shared
    /// guards (see the module docs).
    meta: RwLock<MetaMap>,
    chunks: RwLock<Chunks>,
    dict: RwLock<Option<Arc<Dictionary>>>,
    /// The map of `checksums.lx`, when the store has one (`checksums.rs`).
    sidecar: RwLock<Option<Arc<SidecarMap>>>,
}

impl Shared {
    pub(crate) fn new(
        dir: PathBuf,
        meta: MetaMap,
        chunks: Chunks,
        dict: Option<Dictionary>,
        sidecar: Option<SidecarMap>,
    ) -> Shared {
        Shared {
            dir,
            meta: RwLock::new(meta),
            chunks: RwLock::new(chunks),
            dict: RwLock::new(dict.map(Arc::new)),
            sidecar: RwLock::new(sidecar.map(Arc::new)),
        }
    }

    /// The store directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current `meta.zr` mapping. Writers may write entries and header words through it
    /// under the rules of the module docs.
    pub(crate) fn meta(&self) -> RwLockReadGuard<'_, MetaMap> {
        sync::read(&self.meta)
    }

    /// The current chunk maps.
    pub(crate) fn chunks(&self) -> RwLockReadGuard<'_, Chunks> {
        sync::read(&self.chunks)
    }

    /// The current dictionary.
    pub(crate) fn dict(&self) -> Option<Arc<Dictionary>> {
        sync::read(&self.dict).clone()
    }

    /// Makes `map` the current `meta.zr` mapping (the writer's, at upgrade).
    pub(crate) fn replace_meta(&self, map: MetaMap) {
        *sync::write(&self.meta) = map;
    }

    /// Runs `f` with exclusive access to the chunk maps (to add, replace or drop maps).
    pub(crate) fn update_chunks<T>(&self, f: impl FnOnce(&mut Chunks) -> T) -> T {
        f(&mut sync::write(&self.chunks))
    }

    /// The current map of `checksums.lx`.
    pub(crate) fn sidecar(&self) -> Option<Arc<SidecarMap>> {
        sync::read(&self.sidecar).clone()
    }

    /// Installs the map of a `checksums.lx` the writer created.
    pub(crate) fn set_sidecar(&self, map: SidecarMap) {
        *sync::write(&self.sidecar) = Some(Arc::new(map));
    }

    /// Installs a dictionary.
    pub(crate) fn set_dict(&self, dict: Dictionary) {
        *sync::write(&self.dict) = Some(Arc::new(dict));
    }
}

/// Sets `slots[id]`, growing the list with `None` as needed.
pub(crate) fn set_slot<T>(slots: &mut Vec<Option<T>>, id: u16, value: Option<T>) {
    let id = usize::from(id);
    if slots.len() <= id {
        slots.resize_with(id + 1, || None);
    }
    slots[id] = value;
}
