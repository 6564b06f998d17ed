//! Document lengths kept in 2 bytes each: a packing plan looks every document's length up, and
//! a store of 10 M documents then keeps 20 MB of them rather than 40.
//!
//! Invariants:
//! * [`Lengths::get`] returns exactly the length given, for every length up to `u32::MAX`.
//! * A length below `u16::MAX` is its own 2-byte entry; a longer one is `u16::MAX` there and its
//!   value sits in a side table sorted by document (12 bytes each: few documents are that long).

/// Document lengths, indexed by document. See the module docs.
#[derive(Debug, Clone)]
pub struct Lengths {
    short: Vec<u16>,
    /// `(document, length)` of the lengths of `u16::MAX` tokens and more, by document.
    long: Vec<(u64, u32)>,
}

impl Lengths {
    /// The lengths of `lengths`.
    pub fn new(lengths: &[u32]) -> Lengths {
        let mut long = Vec::new();
        let short = lengths
            .iter()
            .enumerate()
            .map(|(d, &n)| match u16::try_from(n) {
                Ok(s) if s != u16::MAX => s,
                _ => {
                    long.push((d as u64, n));
                    u16::MAX
                }
            })
            .collect();
        Lengths { short, long }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.short.len()
    }

    /// True when there are no documents.
    pub fn is_empty(&self) -> bool {
        self.short.is_empty()
    }

    /// The length of document `doc` (`doc < len()`).
    #[inline]
    pub fn get(&self, doc: usize) -> u32 {
        match self.short[doc] {
            u16::MAX => self.long_of(doc),
            s => u32::from(s),
        }
    }

    #[cold]
    fn long_of(&self, doc: usize) -> u32 {
        let k = self.long.partition_point(|&(d, _)| d < doc as u64);
        self.long.get(k).map_or(u32::from(u16::MAX), |&(_, n)| n)
    }

    /// The bytes these lengths take.
    pub fn bytes(&self) -> usize {
        self.short.len() * 2 + self.long.len() * std::mem::size_of::<(u64, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_length_reads_back(lengths in proptest::collection::vec(
            prop_oneof![0u32..70_000, Just(u32::from(u16::MAX)), Just(u32::from(u16::MAX) - 1), Just(u32::MAX)], 0..300)) {
            let l = Lengths::new(&lengths);
            prop_assert_eq!(l.len(), lengths.len());
            for (d, &n) in lengths.iter().enumerate() {
                prop_assert_eq!(l.get(d), n);
            }
        }
    }

    #[test]
    fn short_lengths_take_two_bytes_each() {
        let l = Lengths::new(&[1, 300, 65_534, 0]);
        assert_eq!(l.bytes(), 8);
        let l = Lengths::new(&[1, 65_535, 1 << 20]);
        assert_eq!((l.get(1), l.get(2)), (65_535, 1 << 20));
        assert!(l.bytes() > 6);
    }
}
