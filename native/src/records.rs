//! [`Records`]: the one read interface of an open store ([`Store`]) and of a manifest's stores
//! read as one ([`Many`]). Front ends (the Python binding) hold a `dyn Records` and declare each
//! read once, whatever they opened.
//!
//! [`Joined`] reads several of them (stores, manifests, joins) as one index space: how mixing
//! reads its sources.
//!
//! Invariants: every method of a store or a manifest behaves as the type's method of the same
//! name (the implementations only delegate), so a store and a manifest of that one store read
//! alike; a join reads record `e` of part `j` at `offsets[j] + e`, exactly as part `j` reads `e`.

use std::sync::Arc;

use loaderx_core::checksum::VerifyMode;
use loaderx_core::manifest::{split, Part};
use loaderx_core::plan::check_indices;
use loaderx_core::schema::{Layout, Schema};

use crate::error::Result;
use crate::many::Many;
use crate::reader::{check_offsets, fixed_layout, rows_at, split_dst};
use crate::store::{Stats, Store, VerifyReport};

/// See the module docs.
pub trait Records: Send + Sync + std::fmt::Debug {
    /// Number of records.
    fn len(&self) -> u64;

    /// True when there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the records are read over the network.
    fn is_remote(&self) -> bool;

    /// The schema, if there is one.
    fn schema(&self) -> Result<Option<Schema>>;

    /// The stores read, as a manifest lists them (path, records); empty for one store.
    fn listing(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Logical (decoded) length of each record.
    fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>>;

    /// Logical length of each record, each checked to fit `layout`.
    fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>>;

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]`.
    fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()>;

    /// Decodes records of exactly `stride` bytes back to back into `dst`.
    fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()>;

    /// Decodes records of exactly `stride` bytes into the rows `positions` of `dst`.
    fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()>;

    /// Storage usage.
    fn stats(&self) -> Result<Stats>;

    /// Decodes every record and reports the bad ones; `progress(done, total)` after each block.
    fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport {
        self.verify_with(true, progress)
    }

    /// [`Records::verify`]; unless `deep`, records their checksums verify are not decoded.
    fn verify_with(&self, deep: bool, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport;

    /// Sets which reads are checked against the stores' checksums.
    fn set_verify_mode(&self, mode: VerifyMode);

    /// The content digest (`None` unless checksums cover every record of every store).
    fn content_digest(&self) -> Result<Option<String>>;

    /// The identity exclusion masks are made for (`loaderx_core::mask`).
    fn mask_identity(&self) -> Result<[u8; 32]>;
}

pub use crate::reader::packed;

/// The methods both types have under the same names.
macro_rules! delegate {
    () => {
        fn len(&self) -> u64 {
            Self::len(self)
        }

        fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
            Self::lengths(self, indices)
        }

        fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
            Self::lengths_fitting(self, indices, layout)
        }

        fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
            Self::gather(self, indices, dst, dst_offsets)
        }

        fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
            Self::gather_fixed(self, indices, dst, stride)
        }

        fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()> {
            Self::gather_rows(self, indices, dst, positions, stride)
        }

        fn stats(&self) -> Result<Stats> {
            Self::stats(self)
        }

        fn verify_with(&self, deep: bool, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport {
            Self::verify_with(self, deep, progress)
        }

        fn set_verify_mode(&self, mode: VerifyMode) {
            Self::set_verify_mode(self, mode)
        }

        fn content_digest(&self) -> Result<Option<String>> {
            Self::content_digest(self)
        }

        fn mask_identity(&self) -> Result<[u8; 32]> {
            Self::mask_identity(self)
        }
    };
}

impl Records for Store {
    delegate!();

    fn is_remote(&self) -> bool {
        Store::is_remote(self)
    }

    fn schema(&self) -> Result<Option<Schema>> {
        Store::schema(self)
    }
}

impl Records for Many {
    delegate!();

    fn is_remote(&self) -> bool {
        self.stores().iter().any(Store::is_remote)
    }

    fn schema(&self) -> Result<Option<Schema>> {
        Ok(Many::schema(self).cloned())
    }

    fn listing(&self) -> Vec<(String, u64)> {
        self.manifest().stores().iter().map(|e| (e.path.clone(), e.length)).collect()
    }
}

/// Several sources read as one index space, in order: record `e` of part `j` is `offsets[j] + e`.
/// Each part reads its share of a request with its own fan-out; the parts go one after another.
#[derive(Debug)]
pub struct Joined {
    parts: Vec<Arc<dyn Records>>,
    /// Global index of each part's first record, plus the total at the end.
    offsets: Vec<u64>,
}

impl Joined {
    /// The parts, joined in order.
    pub fn new(parts: Vec<Arc<dyn Records>>) -> Joined {
        let mut offsets = vec![0u64];
        for p in &parts {
            offsets.push(offsets.last().copied().unwrap_or(0) + p.len());
        }
        Joined { parts, offsets }
    }

    /// `indices` checked against the total, split by part.
    fn split(&self, indices: &[u64]) -> Result<Vec<Part>> {
        check_indices(self.len(), indices)?;
        Ok(split(&self.offsets, indices))
    }

    /// Each part's share of `values` (one per requested index), in the part's request order.
    fn share<T: Copy>(part: &Part, values: &[T]) -> Vec<T> {
        part.positions.iter().map(|&k| values[k]).collect()
    }

    fn lengths_with(&self, indices: &[u64], layout: Option<Layout>) -> Result<Vec<u32>> {
        self.lengths_of(indices.len(), &self.split(indices)?, layout)
    }

    /// Decoded length of each record of `parts` (a split of `n` indices), in request order.
    fn lengths_of(&self, n: usize, parts: &[Part], layout: Option<Layout>) -> Result<Vec<u32>> {
        let mut lens = vec![0u32; n];
        for part in parts {
            let source = &self.parts[part.store];
            let found = match layout {
                Some(layout) => source.lengths_fitting(&part.local, layout)?,
                None => source.lengths(&part.local)?,
            };
            for (&k, len) in part.positions.iter().zip(found) {
                lens[k] = len;
            }
        }
        Ok(lens)
    }
}

impl Records for Joined {
    fn len(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0)
    }

    fn is_remote(&self) -> bool {
        self.parts.iter().any(|p| p.is_remote())
    }

    /// The first part's schema (a join's parts share their record layout).
    fn schema(&self) -> Result<Option<Schema>> {
        self.parts.first().map_or(Ok(None), |p| p.schema())
    }

    fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        self.lengths_with(indices, None)
    }

    fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        self.lengths_with(indices, Some(layout))
    }

    fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        check_offsets(indices, dst_offsets)?;
        let parts = self.split(indices)?;
        // Every record's destination is checked against the others before any part writes.
        let lens: Vec<u64> =
            self.lengths_of(indices.len(), &parts, None)?.into_iter().map(u64::from).collect();
        split_dst(dst, dst_offsets, &lens)?;
        for part in parts {
            self.parts[part.store].gather(&part.local, dst, &Self::share(&part, dst_offsets))?;
        }
        Ok(())
    }

    fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        fixed_layout(indices, dst, stride)?;
        let positions: Vec<u64> = (0..indices.len() as u64).collect();
        self.gather_rows(indices, dst, &positions, stride)
    }

    fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()> {
        rows_at(indices, dst, positions, stride)?;
        for part in self.split(indices)? {
            self.parts[part.store].gather_rows(&part.local, dst, &Self::share(&part, positions), stride)?;
        }
        Ok(())
    }

    fn stats(&self) -> Result<Stats> {
        self.parts.iter().map(|p| p.stats()).sum()
    }

    fn set_verify_mode(&self, mode: VerifyMode) {
        self.parts.iter().for_each(|p| p.set_verify_mode(mode));
    }

    /// The parts' digests combined in order (`loaderx_core::checksum::combined_digest`).
    fn content_digest(&self) -> Result<Option<String>> {
        crate::many::combined(self.parts.iter().map(|p| p.content_digest()))
    }

    /// The parts' identities combined in order (`loaderx_core::mask::combined_identity`).
    fn mask_identity(&self) -> Result<[u8; 32]> {
        let parts = self.parts.iter().map(|p| p.mask_identity()).collect::<Result<Vec<_>>>()?;
        Ok(loaderx_core::mask::combined_identity(parts))
    }

    fn verify_with(&self, deep: bool, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport {
        let total = self.len();
        let mut report = VerifyReport::default();
        for (part, &first) in self.parts.iter().zip(&self.offsets) {
            report.add_part(part.verify_with(deep, &mut |done, _| progress(first + done, total)), first);
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::RemoteOptions;
    use loaderx_core::format::Codec;

    #[test]
    fn a_store_and_a_manifest_of_it_read_alike() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path().join("s")).unwrap();
        store.append(b"abcdefghij", &[0, 3, 4], Codec::Zstd).unwrap();
        store.sync().unwrap();
        let manifest = dir.path().join("m.json");
        crate::commit(&manifest, &["s".to_owned()], &RemoteOptions::default()).unwrap();
        let many = Many::open(&manifest, &RemoteOptions::default()).unwrap();
        let both: [&dyn Records; 2] = [&store, &many];
        let read = |r: &dyn Records| {
            let mut dst = vec![0u8; 10];
            r.gather(&[2, 0, 1], &mut dst, &[0, 6, 9]).unwrap();
            (r.len(), r.lengths(&[2, 1, 0]).unwrap(), dst, r.stats().unwrap().records)
        };
        assert_eq!(read(both[0]), read(both[1]));
        assert_eq!(read(both[0]).2, b"efghijabcd");
        assert_eq!((both[0].listing(), both[1].listing()), (vec![], vec![("s".to_owned(), 3)]));
        assert_eq!(both[1].verify(&mut |_, _| {}).bad, vec![]);
    }

    #[test]
    fn a_join_reads_each_part_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, bytes: &[u8], offsets: &[u64]| -> Arc<dyn Records> {
            let store = Store::open_or_create(dir.path().join(name)).unwrap();
            store.append(bytes, offsets, Codec::Zstd).unwrap();
            Arc::new(store)
        };
        let a = make("a", b"aaaabbbb", &[0, 4]);
        let b = make("b", b"ccccddddeeee", &[0, 4, 8]);
        let joined = Joined::new(vec![a, make("empty", b"", &[]), b]);
        assert_eq!(joined.len(), 5);
        let mut rows = vec![0u8; 16];
        joined.gather_rows(&[4, 0, 2], &mut rows, &[3, 0, 1], 4).unwrap();
        assert_eq!(&rows, b"aaaacccc\0\0\0\0eeee");
        let mut fixed = vec![0u8; 8];
        joined.gather_fixed(&[3, 1], &mut fixed, 4).unwrap();
        assert_eq!(&fixed, b"ddddbbbb");
        let mut packed = vec![0u8; 8];
        joined.gather(&[2, 1], &mut packed, &[4, 0]).unwrap();
        assert_eq!(&packed, b"bbbbcccc");
        assert_eq!(joined.lengths(&[4, 0]).unwrap(), vec![4, 4]);
        assert!(joined.gather(&[2, 1], &mut packed, &[0, 2]).is_err(), "overlapping destinations");
        assert!(joined.lengths(&[5]).is_err());
        assert_eq!(joined.stats().unwrap().records, 5);
        assert_eq!(joined.verify(&mut |_, _| {}).checked, 5);
    }

    #[test]
    fn packed_records_follow_each_other() {
        assert_eq!(packed(&[3, 0, 5]), (vec![0, 3, 3], 8));
        assert_eq!(packed(&[]), (vec![], 0));
    }
}
