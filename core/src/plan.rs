//! The pure half of the executor: where appended records go, what a delete does to the table,
//! and which records a compaction moves. Front ends carry the plans out with their own I/O.
//!
//! Invariants:
//! * Append placement follows [`Tail::place`]: records are back to back in append order, never
//!   straddle a chunk, and never use byte `0xFFFF_FFFF`.
//! * Delete drops duplicate indices and applies the rest in descending order, each as
//!   `entry[i] = entry[length − 1]; length −= 1`, so the live records stay exactly `0..length`.
//!   All indices are checked before anything changes.
//! * Compaction visits live records in physical order `(chunk, offset)` and packs them from
//!   chunk 0, offset 0. A record never moves to a higher address, so writing it can only overwrite
//!   garbage or its own old bytes; records already in place are not moved. A move whose target
//!   overlaps its source is flagged, so the executor can stage it and stay crash-safe.

use std::ops::Range;

use crate::error::{Classify, ErrorKind, Location, StoreFile};
use crate::format::{entry_offset, RecordLoc, Tail, MAX_RECORDS, MAX_RECORD_LEN};

/// Errors from planning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// An index is not below the store's length.
    #[error("index {index} out of range for a store of {length} records")]
    IndexOutOfRange { index: u64, length: u64 },
    /// The append would exceed 2^24 records or 4096 chunks.
    #[error("store is full: {length} records + {adding} would exceed the limits")]
    Full { length: u64, adding: u64 },
    /// Live records overlap on disk, so compaction would move one upwards.
    #[error("corrupt table: record {index} overlaps another record on disk")]
    Overlap { index: u64 },
    /// A record offset lies past the end of the packed source.
    #[error("buffer too small: record {position} starts at byte {offset} of a {len}-byte source")]
    OffsetPastEnd { position: usize, offset: u64, len: u64 },
    /// A record to append is empty or longer than [`MAX_RECORD_LEN`] (`len` is `u64::MAX` when
    /// its offsets run backwards).
    #[error("record {position} is {len} bytes; records must be 1..=1048576 bytes")]
    RecordSize { position: usize, len: u64 },
}

impl Classify for PlanError {
    fn kind(&self) -> ErrorKind {
        match self {
            PlanError::IndexOutOfRange { .. } => ErrorKind::Index,
            PlanError::Full { .. } => ErrorKind::TooLarge,
            PlanError::Overlap { .. } => ErrorKind::Corrupt,
            PlanError::OffsetPastEnd { .. } => ErrorKind::Argument,
            PlanError::RecordSize { .. } => ErrorKind::RecordSize,
        }
    }

    fn location(&self) -> Option<Location> {
        match self {
            PlanError::Overlap { index } => Some(Location::at(StoreFile::Meta, entry_offset(*index))),
            _ => None,
        }
    }

    fn index(&self) -> Option<u64> {
        match self {
            PlanError::IndexOutOfRange { index, .. } | PlanError::Overlap { index } => Some(*index),
            _ => None,
        }
    }
}

/// The one index check of every front end: each index must be below `length`. Front ends turn
/// their own number types (negative Python ints, JavaScript doubles) into `u64` first.
pub fn check_indices(length: u64, indices: &[u64]) -> Result<(), PlanError> {
    match indices.iter().find(|&&i| i >= length) {
        Some(&index) => Err(PlanError::IndexOutOfRange { index, length }),
        None => Ok(()),
    }
}

/// Byte ranges of the records packed in a source of `src_len` bytes: record `k` runs from
/// `offsets[k]` to `offsets[k + 1]`, the last one to the end (bytes before `offsets[0]` are
/// ignored, as the reference does). Every record must be 1..=[`MAX_RECORD_LEN`] bytes.
pub fn record_ranges(src_len: usize, offsets: &[u64]) -> Result<Vec<Range<usize>>, PlanError> {
    let len = src_len as u64;
    if let Some((position, &offset)) = offsets.iter().enumerate().find(|(_, &o)| o > len) {
        return Err(PlanError::OffsetPastEnd { position, offset, len });
    }
    let ends = offsets.iter().skip(1).copied().chain(std::iter::once(len));
    offsets
        .iter()
        .zip(ends)
        .enumerate()
        .map(|(position, (&start, end))| {
            let size = end.wrapping_sub(start);
            if end <= start || size > MAX_RECORD_LEN {
                let len = if end < start { u64::MAX } else { size };
                return Err(PlanError::RecordSize { position, len });
            }
            // Both ends are at most `src_len`, so they fit in usize.
            Ok(start as usize..end as usize)
        })
        .collect()
}

/// Places records of the given stored lengths after `tail`. Returns each record's
/// `(chunk, offset)` and the new tail, or [`PlanError::Full`] when the table or the chunks run
/// out (nothing is placed then).
pub fn place_append(
    tail: Tail,
    length: u64,
    stored_lens: impl ExactSizeIterator<Item = u32>,
) -> Result<(Vec<(u16, u32)>, Tail), PlanError> {
    let adding = stored_lens.len() as u64;
    let full = PlanError::Full { length, adding };
    if length.checked_add(adding).is_none_or(|n| n > MAX_RECORDS) {
        return Err(full);
    }
    let mut tail = tail;
    let places = stored_lens.map(|len| tail.place(len)).collect::<Option<Vec<_>>>().ok_or(full)?;
    Ok((places, tail))
}

/// Most bytes [`write_runs`] puts in one run.
pub const WRITE_RUN_BYTES: u64 = 8 << 20;

/// Splits placed records into runs that can each be one write: records `run` lie back to back in
/// one chunk, in order, together at most [`WRITE_RUN_BYTES`] (a single larger record is a run of
/// its own). `places` and `lens` are the chunk, offset and stored length of each record, as
/// [`place_append`] returns them.
///
/// Few large writes let the page cache hold a new chunk in large folios, which later mmap reads
/// cross with fewer TLB misses than the 4 KiB pages that one write per record leaves behind.
pub fn write_runs(places: &[(u16, u32)], lens: &[u32]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for k in 0..places.len().min(lens.len()) {
        if k > start {
            let ((prev_chunk, prev_offset), (chunk, offset)) = (places[k - 1], places[k]);
            let follows =
                chunk == prev_chunk && u64::from(prev_offset) + u64::from(lens[k - 1]) == u64::from(offset);
            if !follows || bytes + u64::from(lens[k]) > WRITE_RUN_BYTES {
                runs.push(start..k);
                (start, bytes) = (k, 0);
            }
        }
        bytes += u64::from(lens[k]);
    }
    if start < places.len().min(lens.len()) {
        runs.push(start..places.len().min(lens.len()));
    }
    runs
}

/// Checks `indices` against `length` and returns them deduplicated, in descending order.
pub fn delete_order(length: u64, indices: &[u64]) -> Result<Vec<u64>, PlanError> {
    check_indices(length, indices)?;
    let mut order = indices.to_vec();
    order.sort_unstable_by(|a, b| b.cmp(a));
    order.dedup();
    Ok(order)
}

/// Plans a delete: the entry copies `(hole, last)` to apply in order, each as
/// `entry[hole] = entry[last]`, after which the length is `length − copies.len()`.
/// Entries at and past the new length keep stale values, as on disk.
pub fn delete_swaps(length: u64, indices: &[u64]) -> Result<Vec<(u64, u64)>, PlanError> {
    let order = delete_order(length, indices)?;
    // Each step removes the largest remaining index, so `hole <= last` always holds.
    Ok(order.into_iter().enumerate().map(|(k, hole)| (hole, length - 1 - k as u64)).collect())
}

/// One record a compaction moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Table index of the record.
    pub index: u64,
    /// The entry as it is now.
    pub from: RecordLoc,
    /// The entry once the record sits at its packed place.
    pub to: RecordLoc,
    /// The target range overlaps the source range, so a crash mid-copy would lose the record
    /// unless the executor first stages it elsewhere.
    pub overlaps: bool,
}

/// What a compaction does: the moves, in the order to perform them, and the packed frontier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactPlan {
    pub moves: Vec<Move>,
    pub tail: Tail,
}

/// Plans an in-place compaction of the live table `table` (index = table position).
pub fn plan_compact(table: &[RecordLoc]) -> Result<CompactPlan, PlanError> {
    let mut order: Vec<u64> = (0..table.len() as u64).collect();
    let at = |i: u64| table[i as usize];
    order.sort_unstable_by_key(|&i| (at(i).chunk_id, at(i).offset));
    let mut tail = Tail::default();
    let mut moves = Vec::new();
    for index in order {
        let from = at(index);
        let len = from.stored_len() as u32;
        let (chunk_id, offset) =
            tail.place(len).ok_or(PlanError::Full { length: table.len() as u64, adding: 0 })?;
        let to = RecordLoc { chunk_id, offset, ..from };
        if to == from {
            continue;
        }
        let (old, new) = ((from.chunk_id, from.offset), (chunk_id, offset));
        if new > old {
            return Err(PlanError::Overlap { index });
        }
        let overlaps =
            chunk_id == from.chunk_id && u64::from(offset) + u64::from(len) > u64::from(from.offset);
        moves.push(Move { index, from, to, overlaps });
    }
    Ok(CompactPlan { moves, tail })
}

/// The byte ranges of `pages` (any order, repeats allowed), each page's range from `range`,
/// sorted and with touching pages merged up to `max_range` bytes: what a ranged reader fetches
/// for the pages of a file it caches (the table cache of `read`, the slot cache of `checksum`).
pub fn page_ranges(
    pages: impl IntoIterator<Item = u64>,
    range: impl Fn(u64) -> Range<u64>,
    max_range: u64,
) -> Vec<Range<u64>> {
    let mut pages: Vec<u64> = pages.into_iter().collect();
    pages.sort_unstable();
    pages.dedup();
    let mut out: Vec<Range<u64>> = Vec::new();
    for page in pages {
        let r = range(page);
        match out.last_mut() {
            Some(last) if last.end == r.start && r.end - last.start <= max_range => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn write_runs_join_back_to_back_records_within_a_chunk_and_the_size_cap() {
        let places = [(0, 0), (0, 10), (0, 30), (0, 100), (1, 0), (1, 5)];
        let lens = [10, 20, 5, 7, 5, 1];
        assert_eq!(write_runs(&places, &lens), vec![0..3, 3..4, 4..6]);
        assert!(write_runs(&[], &[]).is_empty());
        let big = (WRITE_RUN_BYTES / 3) as u32;
        let places: Vec<(u16, u32)> = (0..7).map(|k| (0, k * big)).collect();
        let runs = write_runs(&places, &[big; 7]);
        assert_eq!(runs, vec![0..3, 3..6, 6..7]);
        let over = (WRITE_RUN_BYTES + 1) as u32;
        assert_eq!(write_runs(&[(0, 0), (0, over)], &[over, 1]), vec![0..1, 1..2]);
    }

    #[test]
    fn record_ranges_follow_the_reference_rules() {
        assert_eq!(record_ranges(10, &[0, 4]).unwrap(), vec![0..4, 4..10]);
        assert_eq!(
            record_ranges(10, &[2, 4]).unwrap(),
            vec![2..4, 4..10],
            "bytes before offsets[0] are ignored"
        );
        assert!(record_ranges(10, &[]).unwrap().is_empty());
        assert!(matches!(
            record_ranges(10, &[0, 11]),
            Err(PlanError::OffsetPastEnd { position: 1, offset: 11, len: 10 })
        ));
        assert_eq!(record_ranges(10, &[0, 0]), Err(PlanError::RecordSize { position: 0, len: 0 }));
        assert_eq!(record_ranges(10, &[5, 2]), Err(PlanError::RecordSize { position: 0, len: u64::MAX }));
        assert_eq!(record_ranges(10, &[10]), Err(PlanError::RecordSize { position: 0, len: 0 }));
        let big = (MAX_RECORD_LEN + 1) as usize;
        assert!(matches!(record_ranges(big, &[0]), Err(PlanError::RecordSize { .. })));
        assert!(record_ranges(MAX_RECORD_LEN as usize, &[0]).is_ok());
    }

    #[test]
    fn check_indices_names_the_first_bad_index() {
        assert_eq!(check_indices(3, &[0, 2, 1]), Ok(()));
        assert_eq!(check_indices(3, &[0, 5, 3]), Err(PlanError::IndexOutOfRange { index: 5, length: 3 }));
        assert_eq!(check_indices(0, &[]), Ok(()));
        assert_eq!(PlanError::IndexOutOfRange { index: 5, length: 3 }.kind(), ErrorKind::Index);
    }

    use super::*;
    use crate::format::{Codec, CHUNK_SIZE};
    use proptest::prelude::*;

    fn loc(chunk: u16, offset: u32, len: u32) -> RecordLoc {
        RecordLoc { offset, phys_length: len, logic_length: len, chunk_id: chunk, ..Default::default() }
    }

    #[test]
    fn delete_orders_match_reference() {
        let cases: &[(&[u64], &[u32])] = &[
            (&[1, 3], &[0, 4, 2, 5]),
            (&[3, 1], &[0, 4, 2, 5]),
            (&[1, 1, 3], &[0, 4, 2, 5]),
            (&[1, 3, 3, 1], &[0, 4, 2, 5]),
            (&[0], &[5, 1, 2, 3, 4]),
            (&[5], &[0, 1, 2, 3, 4]),
            (&[0, 5], &[4, 1, 2, 3]),
            (&[5, 0], &[4, 1, 2, 3]),
            (&[2, 4], &[0, 1, 5, 3]),
            (&[4, 5], &[0, 1, 2, 3]),
            (&[0, 1, 2, 3, 4, 5], &[]),
            (&[], &[0, 1, 2, 3, 4, 5]),
        ];
        for (delete, expected) in cases {
            let mut table: Vec<u32> = (0..6).collect();
            let swaps = delete_swaps(6, delete).unwrap();
            for &(hole, last) in &swaps {
                table[hole as usize] = table[last as usize];
            }
            let order = &table[..6 - swaps.len()];
            assert_eq!(&order, expected, "delete {delete:?}");
        }
    }

    #[test]
    fn delete_out_of_range_is_refused() {
        assert_eq!(delete_swaps(6, &[1, 6]), Err(PlanError::IndexOutOfRange { index: 6, length: 6 }));
        assert_eq!(delete_swaps(0, &[]), Ok(vec![]));
    }

    #[test]
    fn append_places_back_to_back_and_rolls_over() {
        let (places, tail) = place_append(Tail::default(), 0, [5u32, 7, 1].into_iter()).unwrap();
        assert_eq!(places, vec![(0, 0), (0, 5), (0, 12)]);
        assert_eq!(tail, Tail { chunk: 0, offset: 13 });
        let near = Tail { chunk: 2, offset: u32::MAX - 10 };
        let (places, tail) = place_append(near, 9, [8u32, 8].into_iter()).unwrap();
        assert_eq!(places, vec![(2, u32::MAX - 10), (3, 0)]);
        assert_eq!(tail, Tail { chunk: 3, offset: 8 });
        assert!(matches!(
            place_append(Tail::default(), MAX_RECORDS - 1, [1u32, 1].into_iter()),
            Err(PlanError::Full { .. })
        ));
        let last = Tail { chunk: 4095, offset: u32::MAX - 3 };
        assert!(place_append(last, 0, [8u32].into_iter()).is_err());
    }

    #[test]
    fn compact_skips_records_in_place_and_flags_overlaps() {
        // Physical layout: [a:0..10][hole 10..20][b:20..40][c:40..45]; table order c, a, b.
        let table = [loc(0, 40, 5), loc(0, 0, 10), loc(0, 20, 20)];
        let plan = plan_compact(&table).unwrap();
        assert_eq!(plan.tail, Tail { chunk: 0, offset: 35 });
        assert_eq!(plan.moves.len(), 2, "record a is already in place");
        assert_eq!((plan.moves[0].index, plan.moves[0].to.offset, plan.moves[0].overlaps), (2, 10, true));
        assert_eq!((plan.moves[1].index, plan.moves[1].to.offset, plan.moves[1].overlaps), (0, 30, false));
        assert!(plan_compact(&table[1..2]).unwrap().moves.is_empty());
    }

    #[test]
    fn compact_detects_overlapping_records() {
        let table = [loc(0, 0, 10), loc(0, 5, 10)];
        assert_eq!(plan_compact(&table), Err(PlanError::Overlap { index: 1 }));
    }

    proptest! {
        #[test]
        fn compact_never_moves_up_and_packs_densely(
            lens in prop::collection::vec(1u32..5000, 1..60),
            keep in prop::collection::vec(any::<bool>(), 60),
            shuffle_seed in any::<u64>(),
        ) {
            // Lay records out as appends would (with a small fake chunk size via big gaps),
            // keep a subset, shuffle table order as swap-last deletes would.
            let mut tail = Tail::default();
            let mut table: Vec<RecordLoc> = lens.iter().map(|&l| {
                let (c, o) = tail.place(l).unwrap();
                RecordLoc { compress: Codec::Raw as u8, ..loc(c, o, l) }
            }).collect();
            let mut i = 0;
            table.retain(|_| { i += 1; keep[i - 1] });
            let n = table.len();
            for k in 0..n {
                let j = (shuffle_seed.wrapping_mul(k as u64 + 1) >> 7) as usize % n.max(1);
                table.swap(k, j);
            }
            let plan = plan_compact(&table).unwrap();
            let live: u64 = table.iter().map(|e| e.stored_len()).sum();
            prop_assert_eq!(plan.tail.position(), live);
            prop_assert!(plan.tail.position() < CHUNK_SIZE);
            for m in &plan.moves {
                prop_assert!((m.to.chunk_id, m.to.offset) < (m.from.chunk_id, m.from.offset));
                prop_assert_eq!(m.to.stored_len(), m.from.stored_len());
            }
        }
    }
}
