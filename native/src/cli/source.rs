//! What a read command opens: a store, or a manifest's stores read as one ([`crate::Many`]).
//! The location decides which ([`crate::many::identify`], the core's one rule), so every read
//! command takes either, and reads a manifest in its one index space.

use std::path::Path;

use crate::many::{identify, Found};
use crate::{Many, RemoteOptions, Result, Schema, Stats, Store, VerifyReport};

/// A store or a manifest, open.
pub(crate) enum Source {
    One(Store),
    Many(Many),
}

impl Source {
    /// The store or manifest at `location` (inspecting never creates a store).
    pub(crate) fn open(location: &Path) -> Result<Source> {
        let remote = RemoteOptions::default();
        Ok(match identify(&location.to_string_lossy())? {
            Found::Store(at) => Source::One(Store::open_location(&at, false, &remote)?),
            Found::Manifest(file) => Source::Many(Many::open(&file, &remote)?),
        })
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Source::One(s) => s.len(),
            Source::Many(m) => m.len(),
        }
    }

    /// The schema (a manifest's stores all have the first one's layout).
    pub(crate) fn schema(&self) -> Result<Option<Schema>> {
        match self {
            Source::One(s) => s.schema(),
            Source::Many(m) => Ok(m.schema().cloned()),
        }
    }

    /// The stores read: one, or the manifest's in order.
    pub(crate) fn stores(&self) -> &[Store] {
        match self {
            Source::One(s) => std::slice::from_ref(s),
            Source::Many(m) => m.stores(),
        }
    }

    /// The records, as the read path's one interface.
    pub(crate) fn records(&self) -> &dyn crate::Records {
        match self {
            Source::One(s) => s,
            Source::Many(m) => m,
        }
    }

    pub(crate) fn stats(&self) -> Result<Stats> {
        match self {
            Source::One(s) => s.stats(),
            Source::Many(m) => m.stats(),
        }
    }

    pub(crate) fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        match self {
            Source::One(s) => s.lengths(indices),
            Source::Many(m) => m.lengths(indices),
        }
    }

    pub(crate) fn gather(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64]) -> Result<()> {
        match self {
            Source::One(s) => s.gather(indices, dst, offsets),
            Source::Many(m) => m.gather(indices, dst, offsets),
        }
    }

    pub(crate) fn verify(&self, deep: bool, progress: impl FnMut(u64, u64)) -> VerifyReport {
        match self {
            Source::One(s) => s.verify_with(deep, progress),
            Source::Many(m) => m.verify_with(deep, progress),
        }
    }

    /// The content digest: one store's, or a manifest's over its stores' digests in order
    /// (`None` unless every store has one).
    pub(crate) fn content_digest(&self) -> Result<Option<String>> {
        match self {
            Source::One(s) => s.content_digest(),
            Source::Many(m) => m.content_digest(),
        }
    }

    /// Records stored raw, with zstd and with the dictionary, over all stores.
    pub(crate) fn codec_counts(&self) -> Result<[u64; 3]> {
        let mut codecs = [0u64; 3];
        for store in self.stores() {
            let indices: Vec<u64> = (0..store.len()).collect();
            for loc in store.entries(&indices)? {
                codecs[usize::from(loc.compress.min(2))] += 1;
            }
        }
        Ok(codecs)
    }
}
