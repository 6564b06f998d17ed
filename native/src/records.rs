//! [`Records`]: the one read interface of an open store ([`Store`]) and of a manifest's stores
//! read as one ([`Many`]). Front ends (the Python binding) hold a `dyn Records` and declare each
//! read once, whatever they opened.
//!
//! Invariant: every method behaves as the implementing type's method of the same name (the
//! implementations only delegate), so a store and a manifest of that one store read alike.

use loaderx_core::schema::{Layout, Schema};

use crate::error::Result;
use crate::many::Many;
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
    fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport;
}

/// Where each record of decoded lengths `lens` starts when they are packed back to back into one
/// buffer, and the buffer's size (u32 lengths summed in u64 cannot overflow).
pub fn packed(lens: &[u32]) -> (Vec<u64>, u64) {
    let mut total = 0u64;
    let offsets = lens
        .iter()
        .map(|&n| {
            let at = total;
            total += u64::from(n);
            at
        })
        .collect();
    (offsets, total)
}

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

        fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> VerifyReport {
            Self::verify(self, progress)
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
    fn packed_records_follow_each_other() {
        assert_eq!(packed(&[3, 0, 5]), (vec![0, 3, 3], 8));
        assert_eq!(packed(&[]), (vec![], 0));
    }
}
