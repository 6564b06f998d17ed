//! Exclusion masks: records of one store that training skips, without rewriting the store.
//!
//! A mask file (`.lxmask`, docs/format.md "Exclusion masks") is a bitmap over a store's records
//! (bit `i` set: record `i` is excluded) with the store's [identity](Identity): a SHA-256 of its
//! schema, its table and its content: the content digest when checksums cover every record, else
//! the decoded bytes of [`SAMPLES`] records spread over the store ([`sampled`]). A mask made for
//! one store's content is refused by any other (a store appended to, rewritten or compacted has
//! another table). Without checksums two stores of equal schema, table and sampled records are
//! taken as the same. Layout, little-endian:
//!
//! ```text
//! 0   8   magic "LXMASK\x01\0"
//! 8   8   length: records of the store
//! 16  8   excluded: set bits
//! 24  32  identity
//! 56  ..  bitmap: ceil(length / 64) u64 words, record i at bit i % 64 of word i / 64
//! end 8   xxh3-64 of every byte before it
//! ```
//!
//! [`Kept`] maps the dense index space of the kept records onto record indices: `select(j)` is
//! the `j`-th kept record, found by a binary search over per-block counts (one `u64` per 512
//! records) and a scan of at most 8 words, O(log n). A sampler drawing from `0..kept()` and
//! mapped through `select` skips the excluded records deterministically, so seek, resume,
//! sharding and mixing keep their guarantees over the kept records.
//!
//! Invariants: a parsed mask's bits past `length` are zero and its `excluded` count equals the
//! set bits (both checked, with the checksum); nothing here panics on any bytes.

use sha2::{Digest, Sha256};
use thiserror::Error;
use twox_hash::XxHash3_64;

/// The first 8 bytes of a mask file.
pub const MAGIC: [u8; 8] = *b"LXMASK\x01\0";
const HEAD: usize = 56;
/// Records per block of [`Kept`]'s counts.
const BLOCK_WORDS: usize = 8;

/// Why a mask cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MaskError {
    #[error("not a loaderx mask: {0}")]
    Corrupt(String),
    #[error("the mask is for another store's content (mask identity {mask}, store identity {store})")]
    OtherStore { mask: String, store: String },
    #[error("record {index} is outside the store's {length} records")]
    OutOfRange { index: u64, length: u64 },
    #[error("the mask excludes every record of the store: nothing is left to sample")]
    Empty,
    #[error("a mask covers at most {max} records (a store's most), not {0}", max = crate::format::MAX_RECORDS)]
    TooLong(u64),
}

impl crate::error::Classify for MaskError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            MaskError::Corrupt(_) => crate::error::ErrorKind::Corrupt,
            MaskError::OutOfRange { .. } => crate::error::ErrorKind::Index,
            MaskError::TooLong(_) => crate::error::ErrorKind::TooLarge,
            _ => crate::error::ErrorKind::Argument,
        }
    }
}

/// Records read for a store's identity when checksums do not cover it.
pub const SAMPLES: u64 = 16;

/// The records whose bytes go into the identity of a store of `length` records without a
/// content digest: up to [`SAMPLES`] indices spread evenly, first and last included.
pub fn sampled(length: u64) -> Vec<u64> {
    if length <= SAMPLES {
        return (0..length).collect();
    }
    (0..SAMPLES).map(|k| k * (length - 1) / (SAMPLES - 1)).collect()
}

/// A store's identity for masks: SHA-256 of the schema bytes, the table entries and the content
/// (its digest, or sampled records), fed in that order.
#[derive(Debug, Clone)]
pub struct Identity(Sha256);

impl Identity {
    /// Starts with the store's `schema.msgpack` (`None`: the store has none).
    pub fn new(schema: Option<&[u8]>) -> Identity {
        let mut h = Sha256::new();
        h.update(b"loaderx mask identity v1\0");
        match schema {
            Some(s) => {
                h.update([1u8]);
                h.update((s.len() as u64).to_le_bytes());
                h.update(s);
            }
            None => h.update([0u8]),
        }
        Identity(h)
    }

    /// Adds table entries (16 bytes each, as `meta.zr` holds them), in record order.
    pub fn table(&mut self, entries: &[u8]) {
        self.0.update(entries);
    }

    /// The content, by the store's content digest (`sha256:...`, every record covered).
    pub fn digest(&mut self, digest: &str) {
        self.0.update([2u8]);
        self.0.update(digest.as_bytes());
    }

    /// The content, by one of the [`sampled`] records' decoded bytes (in their order).
    pub fn record(&mut self, bytes: &[u8]) {
        self.0.update([3u8]);
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    pub fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// The identity of stores read as one (a manifest, a join), from theirs in order.
pub fn combined_identity(parts: impl IntoIterator<Item = [u8; 32]>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"loaderx mask identity of many v1\0");
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// `sha256:<hex>` of an identity.
pub fn identity_text(id: &[u8; 32]) -> String {
    crate::checksum::sha256_text(id)
}

/// An exclusion mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    length: u64,
    identity: [u8; 32],
    words: Vec<u64>,
    excluded: u64,
}

impl Mask {
    /// A mask over `length` records of the store with `identity`, excluding `indices` (any
    /// order, repeats allowed).
    pub fn new(
        length: u64,
        identity: [u8; 32],
        indices: impl IntoIterator<Item = u64>,
    ) -> Result<Mask, MaskError> {
        let mut words = vec![0u64; length.div_ceil(64) as usize];
        for i in indices {
            if i >= length {
                return Err(MaskError::OutOfRange { index: i, length });
            }
            words[(i / 64) as usize] |= 1 << (i % 64);
        }
        let excluded = words.iter().map(|w| u64::from(w.count_ones())).sum();
        Ok(Mask { length, identity, words, excluded })
    }

    /// Parses a mask file.
    pub fn from_bytes(bytes: &[u8]) -> Result<Mask, MaskError> {
        let bad = |why: &str| MaskError::Corrupt(why.to_owned());
        if bytes.len() < HEAD + 8 || bytes[..8] != MAGIC {
            return Err(bad("the file does not start with a loaderx mask header"));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
        let (length, excluded) = (u64_at(8), u64_at(16));
        if length > crate::format::MAX_RECORDS {
            return Err(MaskError::TooLong(length));
        }
        let n = length.div_ceil(64);
        let want = (HEAD as u64)
            .checked_add(n.checked_mul(8).ok_or_else(|| bad("length overflows"))?)
            .and_then(|v| v.checked_add(8));
        if want != Some(bytes.len() as u64) {
            return Err(bad(&format!("{} bytes, but a mask of {length} records has {want:?}", bytes.len())));
        }
        let body = bytes.len() - 8;
        if XxHash3_64::oneshot(&bytes[..body]) != u64_at(body) {
            return Err(bad("checksum mismatch: the file is damaged"));
        }
        let mut identity = [0u8; 32];
        identity.copy_from_slice(&bytes[24..56]);
        let words: Vec<u64> = bytes[HEAD..body]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        if length % 64 != 0 && words.last().is_some_and(|w| w >> (length % 64) != 0) {
            return Err(bad("bits set past the last record"));
        }
        let mask = Mask { length, identity, words, excluded };
        if mask.words.iter().map(|w| u64::from(w.count_ones())).sum::<u64>() != excluded {
            return Err(bad("the excluded count does not match the bitmap"));
        }
        Ok(mask)
    }

    /// The mask file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD + self.words.len() * 8 + 8);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.excluded.to_le_bytes());
        out.extend_from_slice(&self.identity);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        let sum = XxHash3_64::oneshot(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    pub fn length(&self) -> u64 {
        self.length
    }

    pub fn excluded(&self) -> u64 {
        self.excluded
    }

    pub fn identity(&self) -> &[u8; 32] {
        &self.identity
    }

    /// Whether record `i` is excluded (false past the end).
    pub fn is_excluded(&self, i: u64) -> bool {
        i < self.length && self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Checks that this mask is for a store of `length` records with `identity`.
    pub fn check(&self, length: u64, identity: &[u8; 32]) -> Result<(), MaskError> {
        if self.length != length || &self.identity != identity {
            return Err(MaskError::OtherStore {
                mask: identity_text(&self.identity),
                store: identity_text(identity),
            });
        }
        Ok(())
    }

    /// The index of the kept records, for sampling.
    pub fn kept(&self) -> Result<Kept, MaskError> {
        Kept::new(self)
    }
}

/// The kept records of a mask, in order: rank/select over its bitmap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Kept bits (inverted mask words; bits past the end clear).
    words: Vec<u64>,
    /// Kept records before each block of [`BLOCK_WORDS`] words.
    before: Vec<u64>,
    kept: u64,
}

impl Kept {
    fn new(mask: &Mask) -> Result<Kept, MaskError> {
        let tail = mask.length % 64;
        let last = mask.words.len().saturating_sub(1);
        let words: Vec<u64> = mask
            .words
            .iter()
            .enumerate()
            .map(|(k, w)| if k == last && tail != 0 { !w & ((1u64 << tail) - 1) } else { !w })
            .collect();
        let mut before = Vec::with_capacity(words.len().div_ceil(BLOCK_WORDS));
        let mut total = 0u64;
        for block in words.chunks(BLOCK_WORDS) {
            before.push(total);
            total += block.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        }
        if total == 0 {
            return Err(MaskError::Empty);
        }
        Ok(Kept { words, before, kept: total })
    }

    /// Records kept.
    pub fn count(&self) -> u64 {
        self.kept
    }

    /// The `j`-th kept record (`j < count()`), or `None` past the end.
    pub fn select(&self, j: u64) -> Option<u64> {
        if j >= self.kept {
            return None;
        }
        // The last block whose count before it is <= j.
        let b = self.before.partition_point(|&c| c <= j) - 1;
        let mut left = j - self.before[b];
        for (k, &w) in self.words.iter().enumerate().skip(b * BLOCK_WORDS).take(BLOCK_WORDS) {
            let ones = u64::from(w.count_ones());
            if left < ones {
                let mut w = w;
                for _ in 0..left {
                    w &= w - 1; // drop the lowest set bit
                }
                return Some(k as u64 * 64 + u64::from(w.trailing_zeros()));
            }
            left -= ones;
        }
        None
    }

    /// The position among the kept records of record `r`, or `None` when it is excluded or past
    /// the end (the inverse of [`Kept::select`]).
    pub fn rank(&self, r: u64) -> Option<u64> {
        let w = usize::try_from(r / 64).ok()?;
        let word = *self.words.get(w)?;
        let bit = 1u64 << (r % 64);
        if word & bit == 0 {
            return None;
        }
        let b = w / BLOCK_WORDS;
        let whole: u64 = self.words[b * BLOCK_WORDS..w].iter().map(|x| u64::from(x.count_ones())).sum();
        Some(self.before[b] + whole + u64::from((word & (bit - 1)).count_ones()))
    }

    /// Maps kept-space indices to record indices in place (indices past the end are left as
    /// they are; callers draw them from `0..count()`).
    pub fn map(&self, idx: &mut [u64]) {
        for i in idx {
            if let Some(r) = self.select(*i) {
                *i = r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let m = Mask::new(130, [7; 32], [0, 5, 129, 5]).unwrap();
        assert_eq!(m.excluded(), 3);
        let bytes = m.to_bytes();
        assert_eq!(Mask::from_bytes(&bytes).unwrap(), m);
        for at in [0, 9, 20, 30, 60, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(matches!(Mask::from_bytes(&bad), Err(MaskError::Corrupt(_))), "byte {at}");
        }
        assert!(Mask::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        assert!(matches!(Mask::new(10, [0; 32], [10]), Err(MaskError::OutOfRange { index: 10, length: 10 })));
    }

    #[test]
    fn a_mask_for_other_content_is_refused() {
        let m = Mask::new(4, [1; 32], [2]).unwrap();
        assert!(m.check(4, &[1; 32]).is_ok());
        assert!(matches!(m.check(4, &[2; 32]), Err(MaskError::OtherStore { .. })));
        assert!(matches!(m.check(5, &[1; 32]), Err(MaskError::OtherStore { .. })));
    }

    #[test]
    fn excluding_everything_leaves_nothing_to_sample() {
        let m = Mask::new(3, [0; 32], [0, 1, 2]).unwrap();
        assert_eq!(m.kept(), Err(MaskError::Empty));
    }

    #[test]
    fn identity_depends_on_schema_and_table() {
        let id = |schema: Option<&[u8]>, table: &[u8]| {
            let mut h = Identity::new(schema);
            h.table(table);
            h.finish()
        };
        let a = id(Some(b"s"), &[0; 32]);
        assert_eq!(a, id(Some(b"s"), &[0; 32]));
        assert_ne!(a, id(Some(b"t"), &[0; 32]));
        assert_ne!(a, id(None, &[0; 32]));
        assert_ne!(a, id(Some(b"s"), &[0; 48]));
        assert!(identity_text(&a).starts_with("sha256:"));
        let with = |f: &dyn Fn(&mut Identity)| {
            let mut h = Identity::new(None);
            f(&mut h);
            h.finish()
        };
        assert_ne!(with(&|h| h.record(b"ab")), with(&|h| h.record(b"ac")));
        assert_ne!(with(&|h| h.digest("sha256:00")), with(&|h| h.record(b"sha256:00")));
    }

    #[test]
    fn samples_spread_over_the_store() {
        assert_eq!(sampled(3), [0, 1, 2]);
        let s = sampled(1000);
        assert_eq!((s.len(), s[0], s[15]), (16, 0, 999));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    proptest! {
        /// select(j) is the j-th index whose bit is clear, for any bitmap, and rank inverts it.
        #[test]
        fn select_is_the_jth_kept_record(length in 1u64..3000, picks in proptest::collection::vec(0u64..3000, 0..400)) {
            let excluded: Vec<u64> = picks.into_iter().filter(|&i| i < length).collect();
            let m = Mask::new(length, [0; 32], excluded.iter().copied()).unwrap();
            let want: Vec<u64> = (0..length).filter(|&i| !m.is_excluded(i)).collect();
            match m.kept() {
                Err(MaskError::Empty) => prop_assert!(want.is_empty()),
                Err(e) => prop_assert!(false, "{e}"),
                Ok(k) => {
                    prop_assert_eq!(k.count(), want.len() as u64);
                    for (j, &r) in want.iter().enumerate() {
                        prop_assert_eq!(k.select(j as u64), Some(r));
                    }
                    prop_assert_eq!(k.select(want.len() as u64), None);
                    for r in 0..length + 70 {
                        let rank = want.binary_search(&r).ok().map(|j| j as u64);
                        prop_assert_eq!(k.rank(r), rank, "record {}", r);
                    }
                }
            }
        }
    }
}
