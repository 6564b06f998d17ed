//! Reading a store through ranged reads: the pure half of a reader whose I/O is asynchronous or
//! remote (wasm in Node and browsers, over files, blobs or HTTP).
//!
//! The front end owns the I/O; this module decides what to read and turns the bytes into
//! records:
//! 1. [`TableCache::missing`] names the `meta.zr` byte ranges a call needs that are not cached
//!    yet (whole [`TABLE_PAGE`]s, coalesced). The front end reads them and hands each to
//!    [`TableCache::insert`].
//! 2. [`plan_gather`] checks every entry against the format rules and the chunk sizes, then
//!    coalesces the records into [`ReadRange`]s of chunk bytes.
//! 3. The front end reads the ranges; [`decode_slot`] decodes each record from its range into
//!    its own slice of the output ([`split_outputs`]), so slots can run on any number of threads.
//!
//! Invariants:
//! * Nothing is read past `16 + 16·length` of `meta.zr`, and only the chunk bytes of the records
//!   asked for (plus gaps of at most `max_gap` bytes between them, when that saves a read).
//! * Every table entry is validated before it is used; every range the front end returns may be
//!   short (a trimmed or truncated file), and a record whose bytes are not all there is an
//!   [`ReadError::Short`] error, never a partial record.
//! * No size read from a file is allocated before it is checked against the format's limits.

use std::collections::HashMap;
use std::ops::Range;

use crate::codec::{CodecError, Decoder};
use crate::error::{Classify, ErrorKind, Location, StoreFile};
use crate::format::{entry_offset, table_end, Codec, FormatError, RecordLoc, ENTRY_SIZE};
use crate::schema::{Layout, Misfit};
use crate::view::ElementView;

/// Bytes of `meta.zr` per cached table page: 256 entries. Pages start at multiples of this
/// size, and since entries start at multiples of 16, no entry straddles two pages.
pub const TABLE_PAGE: u64 = 4096;

/// Largest coalesced read. A record (at most 1 MiB stored) is never split, so a range holding a
/// single record may be larger than this.
pub const MAX_RANGE: u64 = 8 << 20;

/// Errors from ranged reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// An entry or the header breaks the format rules.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// An index is not below the store's length.
    #[error("index {index} out of range for a store of {length} records")]
    Index { index: u64, length: u64 },
    /// A stored record failed to decode.
    #[error("record {index}: {source}")]
    Decode { index: u64, source: CodecError },
    /// A read returned fewer bytes than the record needs: the file ends early.
    #[error("record {index} needs bytes {start}..{end} of {chunk}.zr, but the file ends at {available}")]
    Short { index: u64, chunk: u16, start: u64, end: u64, available: u64 },
    /// A table read came back shorter than the table the header promises.
    #[error("meta.zr ends at byte {available}, inside the table (which needs {needed} bytes)")]
    ShortTable { available: u64, needed: u64 },
    /// A record does not fit the schema ([`Layout::check`]).
    #[error(transparent)]
    Shape(#[from] Misfit),
    /// A table read was handed over at an offset that is not a multiple of [`TABLE_PAGE`].
    #[error("table bytes must start at a multiple of {TABLE_PAGE}, not at {start}")]
    Unaligned { start: u64 },
    /// A record's stored bytes do not hash to the checksum that covers it (`crate::checksum`).
    #[error("record {index}: checksum mismatch in {chunk}.zr at byte {start} (stored xxh3 {expected:016x}, read {found:016x})")]
    Checksum { index: u64, chunk: u16, start: u64, expected: u64, found: u64 },
    /// The decoded batch would exceed the caller's memory cap.
    #[error("batch of {bytes} decoded bytes exceeds the {cap}-byte limit; ask for fewer records")]
    TooLarge { bytes: u64, cap: u64 },
}

impl Classify for ReadError {
    fn kind(&self) -> ErrorKind {
        match self {
            ReadError::Format(e) => e.kind(),
            ReadError::Index { .. } => ErrorKind::Index,
            ReadError::TooLarge { .. } => ErrorKind::TooLarge,
            ReadError::Unaligned { .. } => ErrorKind::Argument,
            ReadError::Decode { .. }
            | ReadError::Short { .. }
            | ReadError::ShortTable { .. }
            | ReadError::Shape(_)
            | ReadError::Checksum { .. } => ErrorKind::Corrupt,
        }
    }

    fn location(&self) -> Option<Location> {
        match self {
            ReadError::Format(e) => e.location(),
            ReadError::Short { chunk, available, .. } => {
                Some(Location::at(StoreFile::Chunk(*chunk), *available))
            }
            ReadError::ShortTable { available, .. } => Some(Location::at(StoreFile::Meta, *available)),
            ReadError::Checksum { chunk, start, .. } => Some(Location::at(StoreFile::Chunk(*chunk), *start)),
            ReadError::Shape(m) => m.location(),
            _ => None,
        }
    }

    fn index(&self) -> Option<u64> {
        match self {
            ReadError::Format(e) => e.index(),
            ReadError::Decode { index, .. }
            | ReadError::Short { index, .. }
            | ReadError::Checksum { index, .. } => Some(*index),
            ReadError::Shape(m) => Some(m.index),
            _ => None,
        }
    }
}

/// Cached pages of the live table.
#[derive(Debug, Default)]
pub struct TableCache {
    /// `16 + 16·length`: the end of the live table in `meta.zr`.
    end: u64,
    pages: HashMap<u64, Box<[u8]>>,
}

impl TableCache {
    /// An empty cache for a store of `length` records.
    pub fn new(length: u64) -> Self {
        TableCache { end: table_end(length), pages: HashMap::new() }
    }

    fn page_range(&self, page: u64) -> Range<u64> {
        page * TABLE_PAGE..((page + 1) * TABLE_PAGE).min(self.end)
    }

    /// The `meta.zr` byte ranges holding the entries of `indices` that are not cached, as whole
    /// pages, sorted and coalesced. Indices must already be checked against the length.
    pub fn missing(&self, indices: impl IntoIterator<Item = u64>) -> Vec<Range<u64>> {
        let pages =
            indices.into_iter().map(|i| entry_offset(i) / TABLE_PAGE).filter(|p| !self.pages.contains_key(p));
        crate::plan::page_ranges(pages, |p| self.page_range(p), MAX_RANGE)
    }

    /// Stores `bytes` read from `meta.zr` at `start` (a multiple of [`TABLE_PAGE`]). Every page
    /// the bytes cover must be complete; a read cut short by the end of the file is an error.
    pub fn insert(&mut self, start: u64, bytes: &[u8]) -> Result<(), ReadError> {
        if start % TABLE_PAGE != 0 {
            return Err(ReadError::Unaligned { start });
        }
        let mut page = start / TABLE_PAGE;
        let mut rest = bytes;
        while !rest.is_empty() && page * TABLE_PAGE < self.end {
            let want = self.page_range(page);
            let len = (want.end - want.start) as usize;
            let Some(chunk) = rest.get(..len) else {
                return Err(ReadError::ShortTable {
                    available: start + bytes.len() as u64,
                    needed: self.end,
                });
            };
            self.pages.insert(page, chunk.into());
            rest = &rest[len..];
            page += 1;
        }
        Ok(())
    }

    /// The entry of a checked index, if its page is cached.
    pub fn entry(&self, index: u64) -> Option<RecordLoc> {
        let at = entry_offset(index);
        let page = self.pages.get(&(at / TABLE_PAGE))?;
        let off = (at % TABLE_PAGE) as usize;
        RecordLoc::read(page.get(off..off + ENTRY_SIZE as usize)?)
    }

    /// Bytes held.
    pub fn cached_bytes(&self) -> usize {
        self.pages.values().map(|p| p.len()).sum()
    }

    /// Drops every cached page.
    pub fn clear(&mut self) {
        self.pages.clear();
    }
}

/// Checks indices against the length ([`crate::plan::check_indices`], the one index rule).
pub fn check_indices(indices: &[u64], length: u64) -> Result<(), ReadError> {
    crate::plan::check_indices(length, indices).map_err(|_| {
        // The plan check failed, so some index is not below the length.
        let index = indices.iter().copied().find(|&i| i >= length).unwrap_or(length);
        ReadError::Index { index, length }
    })
}

/// A run of chunk bytes to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRange {
    pub chunk: u16,
    pub start: u64,
    pub end: u64,
}

/// One requested record: where its bytes sit in the ranges and where its output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Store index.
    pub index: u64,
    /// Index into [`GatherPlan::ranges`].
    pub range: usize,
    /// Offset of the record's bytes within that range.
    pub at: u64,
    /// Stored bytes.
    pub stored: u32,
    /// Decoded bytes.
    pub logic: u32,
    pub codec: Codec,
    /// Output bytes (after the element conversion).
    pub out: u64,
}

/// What to read for a batch and how to decode it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatherPlan {
    /// Chunk ranges, sorted by `(chunk, start)`, not overlapping.
    pub ranges: Vec<ReadRange>,
    /// The good records, in request order.
    pub slots: Vec<Slot>,
    /// Records left out in lenient mode, with the reason.
    pub bad: Vec<(u64, ReadError)>,
}

/// What a plan checks records against.
#[derive(Debug, Clone, Copy)]
pub struct PlanRules<'a> {
    /// Size of each chunk file by id; `None` when the file does not exist.
    pub chunk_lens: &'a [Option<u64>],
    /// For typed reads: the schema's layout every record must fit, and the element view the
    /// records are converted with. `None` reads records as stored.
    pub typed: Option<(Layout, ElementView)>,
    /// Merge neighbouring records whose gap is at most this many bytes.
    pub max_gap: u64,
    /// Largest total output in bytes.
    pub max_out: u64,
}

impl PlanRules<'_> {
    fn check(&self, index: u64, loc: &RecordLoc) -> Result<Codec, ReadError> {
        let codec = loc.validate(index, |c| self.chunk_lens.get(usize::from(c)).copied().flatten())?;
        if let Some((layout, _)) = &self.typed {
            layout.check(index, u64::from(loc.logic_length))?;
        }
        Ok(codec)
    }

    fn view(&self) -> Option<ElementView> {
        self.typed.map(|(_, view)| view)
    }
}

/// Plans a gather of `entries` (index and entry, in request order).
///
/// Strict mode fails on the first bad entry; lenient mode (for verification) moves bad records
/// to [`GatherPlan::bad`] and plans the rest.
pub fn plan_gather(
    entries: &[(u64, RecordLoc)],
    rules: &PlanRules<'_>,
    lenient: bool,
) -> Result<GatherPlan, ReadError> {
    let mut plan = GatherPlan::default();
    let mut good: Vec<(u64, RecordLoc, Codec)> = Vec::with_capacity(entries.len());
    let mut total_out = 0u64;
    for &(index, loc) in entries {
        match rules.check(index, &loc) {
            Ok(codec) => {
                let logic = u64::from(loc.logic_length);
                total_out += rules.view().map_or(logic, |v| v.out_len(logic as usize) as u64);
                good.push((index, loc, codec));
            }
            Err(e) if lenient => plan.bad.push((index, e)),
            Err(e) => return Err(e),
        }
    }
    if total_out > rules.max_out {
        return Err(ReadError::TooLarge { bytes: total_out, cap: rules.max_out });
    }
    // Coalesce in physical order, then map each record back to its range.
    let mut order: Vec<usize> = (0..good.len()).collect();
    order.sort_unstable_by_key(|&k| (good[k].1.chunk_id, good[k].1.offset));
    let mut range_of = vec![0usize; good.len()];
    for &k in &order {
        let loc = good[k].1;
        let (start, end) = (u64::from(loc.offset), loc.end());
        match plan.ranges.last_mut() {
            Some(r)
                if r.chunk == loc.chunk_id
                    && start <= r.end.saturating_add(rules.max_gap)
                    && end.max(r.end) - r.start <= MAX_RANGE =>
            {
                r.end = r.end.max(end);
            }
            _ => plan.ranges.push(ReadRange { chunk: loc.chunk_id, start, end }),
        }
        range_of[k] = plan.ranges.len() - 1;
    }
    plan.slots = good
        .iter()
        .zip(range_of)
        .map(|(&(index, loc, codec), range)| {
            let logic = loc.logic_length;
            Slot {
                index,
                range,
                at: u64::from(loc.offset) - plan.ranges[range].start,
                stored: loc.stored_len() as u32,
                logic,
                codec,
                out: rules.view().map_or(u64::from(logic), |v| v.out_len(logic as usize) as u64),
            }
        })
        .collect();
    Ok(plan)
}

/// Plans a gather for a source that reads in place (a map): one range per record, in request
/// order, nothing merged or sorted (reading a range costs nothing there, so merging would only
/// add work). Checks and lenient mode as [`plan_gather`].
pub fn plan_in_place(
    entries: &[(u64, RecordLoc)],
    rules: &PlanRules<'_>,
    lenient: bool,
) -> Result<GatherPlan, ReadError> {
    let mut plan = GatherPlan {
        ranges: Vec::with_capacity(entries.len()),
        slots: Vec::with_capacity(entries.len()),
        bad: Vec::new(),
    };
    let mut total_out = 0u64;
    for &(index, loc) in entries {
        let codec = match rules.check(index, &loc) {
            Ok(codec) => codec,
            Err(e) if lenient => {
                plan.bad.push((index, e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let logic = loc.logic_length;
        let out = rules.view().map_or(u64::from(logic), |v| v.out_len(logic as usize) as u64);
        total_out += out;
        let start = u64::from(loc.offset);
        let slot = Slot {
            index,
            range: plan.ranges.len(),
            at: 0,
            stored: loc.stored_len() as u32,
            logic,
            codec,
            out,
        };
        plan.ranges.push(ReadRange { chunk: loc.chunk_id, start, end: loc.end() });
        plan.slots.push(slot);
    }
    if total_out > rules.max_out {
        return Err(ReadError::TooLarge { bytes: total_out, cap: rules.max_out });
    }
    Ok(plan)
}

/// Cuts `out` into one slice per slot, in slot order. `out` must be at least the sum of the
/// slots' output sizes.
pub fn split_outputs<'o>(slots: &[Slot], mut out: &'o mut [u8]) -> Vec<&'o mut [u8]> {
    slots
        .iter()
        .map(|s| {
            let rest = std::mem::take(&mut out);
            let (head, tail) = rest.split_at_mut((s.out as usize).min(rest.len()));
            out = tail;
            head
        })
        .collect()
}

/// Decodes one slot from the bytes read for its range (`data`, possibly short) into `dst`
/// (`slot.out` bytes), converting elements when a view is given.
///
/// With `expected` (the checksum that covers the record, `crate::checksum`), the stored bytes
/// are checked first, before anything is written to `dst`, raw records too: hashing the source
/// brings it into cache, so the copy after it reads from cache; copying first and hashing the
/// copy was measured slower, 0.75-0.83x of an unchecked gather against 0.84-0.88x
/// (docs/benchmarks.md). A mismatch is [`ReadError::Checksum`], with `dst` untouched.
pub fn decode_slot(
    slot: &Slot,
    range: &ReadRange,
    data: &[u8],
    decoder: &mut Decoder<'_>,
    view: Option<&ElementView>,
    expected: Option<u64>,
    dst: &mut [u8],
) -> Result<(), ReadError> {
    let end = slot.at + u64::from(slot.stored);
    let stored = data.get(slot.at as usize..end as usize).ok_or(ReadError::Short {
        index: slot.index,
        chunk: range.chunk,
        start: range.start + slot.at,
        end: range.start + end,
        available: range.start + data.len() as u64,
    })?;
    let check = |bytes: &[u8]| match expected {
        Some(expected) => {
            let found = crate::checksum::record_hash(bytes);
            if found == expected {
                Ok(())
            } else {
                let start = range.start + slot.at;
                Err(ReadError::Checksum { index: slot.index, chunk: range.chunk, start, expected, found })
            }
        }
        None => Ok(()),
    };
    let decode_err = |source| ReadError::Decode { index: slot.index, source };
    check(stored)?;
    match view {
        Some(v) if v.out_len(slot.logic as usize) != slot.logic as usize => {
            let mut tmp = vec![0u8; slot.logic as usize];
            decoder.decode_into(slot.codec, stored, &mut tmp).map_err(decode_err)?;
            v.convert(&tmp, dst);
        }
        _ => {
            decoder.decode_into(slot.codec, stored, dst).map_err(decode_err)?;
            if let Some(v) = view {
                v.convert_in_place(dst);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(chunk: u16, offset: u32, len: u32) -> RecordLoc {
        RecordLoc { offset, phys_length: len, logic_length: len, chunk_id: chunk, compress: 0, reserved: 0 }
    }

    fn rules(lens: &[Option<u64>]) -> PlanRules<'_> {
        PlanRules { chunk_lens: lens, typed: None, max_gap: 0, max_out: u64::MAX }
    }

    #[test]
    fn table_pages_are_whole_coalesced_and_clipped_to_the_table() {
        let mut cache = TableCache::new(600); // table ends at 16 + 9600 = 9616
        assert_eq!(cache.missing([0, 1, 254]), vec![0..4096]);
        assert_eq!(cache.missing([255]), vec![4096..8192]);
        assert_eq!(cache.missing([300, 0, 599]), vec![0..9616]);
        cache.insert(0, &vec![0u8; 4096]).unwrap();
        assert_eq!(cache.missing([0, 599]), vec![8192..9616]);
        assert!(matches!(cache.insert(8192, &[0u8; 100]), Err(ReadError::ShortTable { .. })));
        cache.insert(4096, &vec![7u8; 4096 + 1424]).unwrap();
        assert_eq!(cache.missing(0..600), vec![]);
        assert_eq!(cache.entry(599).unwrap().offset, 0x0707_0707);
        assert_eq!(cache.insert(100, &[0u8; 16]), Err(ReadError::Unaligned { start: 100 }));
    }

    #[test]
    fn records_coalesce_within_the_gap_and_keep_request_order() {
        let lens = [Some(10_000)];
        let entries = [(0, loc(0, 500, 100)), (1, loc(0, 0, 100)), (2, loc(0, 150, 50)), (3, loc(0, 0, 100))];
        let mut r = rules(&lens);
        r.max_gap = 50;
        let plan = plan_gather(&entries, &r, false).unwrap();
        assert_eq!(
            plan.ranges,
            vec![ReadRange { chunk: 0, start: 0, end: 200 }, ReadRange { chunk: 0, start: 500, end: 600 }]
        );
        let at: Vec<(usize, u64)> = plan.slots.iter().map(|s| (s.range, s.at)).collect();
        assert_eq!(at, vec![(1, 0), (0, 0), (0, 150), (0, 0)]);
    }

    #[test]
    fn bad_entries_fail_strict_and_are_listed_lenient() {
        let lens = [Some(1000)];
        let entries = [(0, loc(0, 0, 10)), (1, loc(0, 995, 10)), (2, loc(3, 0, 10))];
        assert!(plan_gather(&entries, &rules(&lens), false).is_err());
        let plan = plan_gather(&entries, &rules(&lens), true).unwrap();
        assert_eq!(plan.slots.len(), 1);
        let bad: Vec<u64> = plan.bad.iter().map(|(i, _)| *i).collect();
        assert_eq!(bad, vec![1, 2]);
        assert!(plan.bad.iter().all(|(i, e)| e.index() == Some(*i)));
    }

    #[test]
    fn short_reads_are_errors_not_partial_records() {
        let lens = [Some(1000)];
        let plan = plan_gather(&[(0, loc(0, 10, 20))], &rules(&lens), false).unwrap();
        let mut dst = [0u8; 20];
        let mut dec = Decoder::new(None);
        let err = decode_slot(&plan.slots[0], &plan.ranges[0], &[1u8; 15], &mut dec, None, None, &mut dst);
        assert!(matches!(err, Err(ReadError::Short { available: 25, .. })));
        decode_slot(&plan.slots[0], &plan.ranges[0], &[1u8; 20], &mut dec, None, None, &mut dst).unwrap();
        assert_eq!(dst, [1u8; 20]);
    }

    #[test]
    fn dense_length_and_output_cap_are_enforced() {
        let lens = [Some(1000)];
        let mut r = rules(&lens);
        let view = ElementView::of(&"|u1".parse().unwrap());
        r.typed = Some((Layout { kind: crate::schema::Kind::Dense, item_bytes: 10 }, view));
        let err = plan_gather(&[(0, loc(0, 0, 12))], &r, false).unwrap_err();
        assert!(matches!(&err, ReadError::Shape(m) if m.index == 0 && m.len == 12), "{err}");
        assert_eq!((err.kind(), err.location().map(|l| l.offset)), (ErrorKind::Corrupt, Some(Some(16))));
        r.typed = None;
        r.max_out = 11;
        assert!(matches!(plan_gather(&[(0, loc(0, 0, 12))], &r, false), Err(ReadError::TooLarge { .. })));
    }

    #[test]
    fn in_place_plans_keep_request_order_and_check_like_merged_ones() {
        let lens = [Some(1000)];
        let entries = [(4, loc(0, 500, 100)), (1, loc(0, 0, 100)), (2, loc(0, 100, 50))];
        let plan = plan_in_place(&entries, &rules(&lens), false).unwrap();
        let ranges: Vec<(u64, u64)> = plan.ranges.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(ranges, vec![(500, 600), (0, 100), (100, 150)]);
        let slots: Vec<(u64, usize, u64)> = plan.slots.iter().map(|s| (s.index, s.range, s.at)).collect();
        assert_eq!(slots, vec![(4, 0, 0), (1, 1, 0), (2, 2, 0)]);
        let bad = [(0, loc(0, 0, 10)), (1, loc(0, 995, 10))];
        assert!(plan_in_place(&bad, &rules(&lens), false).is_err());
        let lenient = plan_in_place(&bad, &rules(&lens), true).unwrap();
        assert_eq!((lenient.slots.len(), lenient.bad.len(), lenient.bad[0].0), (1, 1, 1));
        let mut capped = rules(&lens);
        capped.max_out = 150;
        assert!(matches!(plan_in_place(&entries, &capped, false), Err(ReadError::TooLarge { .. })));
    }

    #[test]
    fn outputs_split_per_slot() {
        let lens = [Some(1000)];
        let plan = plan_gather(&[(0, loc(0, 0, 3)), (1, loc(0, 3, 5))], &rules(&lens), false).unwrap();
        let mut out = [0u8; 8];
        let parts = split_outputs(&plan.slots, &mut out);
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![3, 5]);
    }

    #[test]
    fn indices_must_be_in_range() {
        assert_eq!(check_indices(&[0, 4], 5), Ok(()));
        assert_eq!(check_indices(&[0, 7, 5], 5), Err(ReadError::Index { index: 7, length: 5 }));
    }
}
