//! Per-record checksums: `checksums.lx`, an optional extension of format v3 that the reference
//! 0.9.11 neither reads nor writes (see `docs/format.md`, "checksums.lx").
//!
//! The file is a [`SIDECAR_HEADER`]-byte header, then one [`SLOT_SIZE`]-byte [`Slot`] per table
//! index, at [`slot_offset`]. A slot is a copy of the 16-byte table entry it was written for,
//! then the xxh3-64 ([`record_hash`]) of that record's *stored* bytes (the frame for a
//! compressed record), so a check runs before decoding and needs no dictionary.
//!
//! The header records the table's [`TableState`] before and after the last commit of a writer
//! that kept the file up to date: the 16 header bytes of `meta.zr`, the (stale) entry just past
//! the live table, and a [`TableSum`] of the live entries with their indices.
//!
//! Invariants, which make a checksum error mean damage and nothing else:
//! * A slot vouches for a record only while it [covers](Slot::covers) it: its entry equals the
//!   record's table entry byte for byte. Any other slot (blank, past the file's end, or written
//!   for an entry the table no longer holds) leaves the record *uncovered*, never in error. The
//!   reference moves entries on delete and compact without touching this file, so this is what
//!   its changes look like.
//! * A covering slot whose hash differs is damage only while the store is [sealed]
//!   (Standing::Sealed): the table is exactly as the last checksum-aware commit left it (or
//!   as it was just before that commit, if the commit never landed). The reference can move one
//!   record's bytes under another record's old entry (delete, then compact), so in any other
//!   table a mismatch only makes the record *unverified*.
//! * Slots are written and made visible before the table entries they cover; the header's
//!   `before`/`after` states are written before the table changes. A writer killed at any point
//!   leaves records covered correctly or uncovered, and a store sealed or not sealed, never a
//!   covered record with a wrong checksum under a sealed store.
//! * Nothing here allocates from a size read from a file.

use std::collections::HashMap;
use std::ops::Range;

use sha2::{Digest, Sha256};
use twox_hash::XxHash3_64;

use crate::error::{Classify, ErrorKind, Location, StoreFile};
use crate::format::{Header, RecordLoc, ENTRY_SIZE, MAX_RECORDS};

/// `"LXCS"`.
pub const SIDECAR_MAGIC: [u8; 4] = *b"LXCS";
/// The sidecar version this crate reads and writes.
pub const SIDECAR_VERSION: u16 = 1;
/// Hash id 1: XXH3 64-bit, seed 0, over a record's stored bytes.
pub const HASH_XXH3_64: u16 = 1;
/// Size of the sidecar header.
pub const SIDECAR_HEADER: u64 = 128;
/// Size of one slot: a table entry and a 64-bit hash.
pub const SLOT_SIZE: u64 = 24;
/// Apparent size of a full sidecar (a writer keeps it sparse, like `meta.zr`).
pub const SIDECAR_FULL_SIZE: u64 = SIDECAR_HEADER + SLOT_SIZE * MAX_RECORDS;
/// Bytes of the sidecar a ranged reader fetches and caches at a time: 256 slots.
pub const SLOT_PAGE: u64 = 256 * SLOT_SIZE;

/// The reserved byte (15) of every table entry a checksum-aware writer writes. The reference
/// writes 0 there and ignores it on read, and its delete and compact carry it along; so after
/// the reference's own appends the table can never again equal, byte for byte, a table this
/// writer sealed, even when the reference deleted records, compacted and appended records of
/// the same sizes into the same places (the one change the entries' other bytes cannot show).
pub const ENTRY_MARK: u8 = 1;

/// Where the header checksum starts: it covers every header byte before it.
const HEADER_SUM_AT: usize = SIDECAR_HEADER as usize - 8;
/// Header flag: the writer vouches for every covering slot (see [`Standing`]).
const FLAG_SEALED: u32 = 1;

/// The checksum of a record's stored bytes.
pub fn record_hash(stored: &[u8]) -> u64 {
    XxHash3_64::oneshot(stored)
}

/// Byte offset of slot `index` in the sidecar.
pub fn slot_offset(index: u64) -> u64 {
    SIDECAR_HEADER + SLOT_SIZE * index
}

/// One slot: the table entry the checksum was written for, and the checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Slot {
    /// The entry's 16 bytes as they were in `meta.zr`.
    pub entry: [u8; 16],
    /// [`record_hash`] of the record's stored bytes.
    pub hash: u64,
}

impl Slot {
    /// The slot for record `loc` whose stored bytes hash to `hash`.
    pub fn new(loc: &RecordLoc, hash: u64) -> Slot {
        Slot { entry: loc.to_bytes(), hash }
    }

    /// Reads a slot from its bytes; `None` when fewer than [`SLOT_SIZE`] are given.
    pub fn read(bytes: &[u8]) -> Option<Slot> {
        let bytes = bytes.get(..SLOT_SIZE as usize)?;
        let mut entry = [0; 16];
        entry.copy_from_slice(&bytes[..16]);
        let hash = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
        Some(Slot { entry, hash })
    }

    /// The on-disk bytes.
    pub fn to_bytes(&self) -> [u8; SLOT_SIZE as usize] {
        let mut out = [0; SLOT_SIZE as usize];
        out[..16].copy_from_slice(&self.entry);
        out[16..].copy_from_slice(&self.hash.to_le_bytes());
        out
    }

    /// True when this slot vouches for record `loc`: it was written for exactly this entry.
    /// A blank slot (never written) covers nothing.
    pub fn covers(&self, loc: &RecordLoc) -> bool {
        self.entry == loc.to_bytes() && !loc.is_blank()
    }
}

/// An order-sensitive sum of the live table: the wrapping sum over live entries of the xxh3 of
/// (index as u64, entry bytes). A commit updates it with the entries it changes, so no writer
/// rereads the table to keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TableSum(pub u64);

impl TableSum {
    fn term(index: u64, loc: &RecordLoc) -> u64 {
        let mut bytes = [0u8; 24];
        bytes[..8].copy_from_slice(&index.to_le_bytes());
        bytes[8..].copy_from_slice(&loc.to_bytes());
        XxHash3_64::oneshot(&bytes)
    }

    /// The sum of `entries`, entry `k` at index `k`.
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a RecordLoc>) -> TableSum {
        let mut sum = TableSum::default();
        for (index, loc) in entries.into_iter().enumerate() {
            sum.add(index as u64, loc);
        }
        sum
    }

    /// Entry `loc` is now live at `index`.
    pub fn add(&mut self, index: u64, loc: &RecordLoc) {
        self.0 = self.0.wrapping_add(Self::term(index, loc));
    }

    /// Entry `loc` is no longer live at `index`.
    pub fn remove(&mut self, index: u64, loc: &RecordLoc) {
        self.0 = self.0.wrapping_sub(Self::term(index, loc));
    }
}

/// What the table looked like at one moment, as far as checksums care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TableState {
    /// `meta.zr`'s 16 header bytes (the table's own, before any delete journal).
    pub header: [u8; 16],
    /// The entry just past the live table (index `length`): blank where the file ends first or
    /// the table is full. The reference's appends write it, so it tells an append followed by
    /// deletes from the table the writer left.
    pub stale: [u8; 16],
    /// The live entries' [`TableSum`].
    pub sum: TableSum,
}

impl TableState {
    /// The state of a table with `header`, live entries `sum` and `stale` past them.
    pub fn new(header: &Header, stale: Option<RecordLoc>, sum: TableSum) -> TableState {
        TableState { header: header.to_bytes(), stale: stale.unwrap_or_default().to_bytes(), sum }
    }

    const BYTES: usize = 40;

    fn write(&self, out: &mut [u8]) {
        out[..16].copy_from_slice(&self.header);
        out[16..32].copy_from_slice(&self.stale);
        out[32..40].copy_from_slice(&self.sum.0.to_le_bytes());
    }

    fn read(bytes: &[u8]) -> TableState {
        let mut state = TableState::default();
        state.header.copy_from_slice(&bytes[..16]);
        state.stale.copy_from_slice(&bytes[16..32]);
        let mut sum = [0; 8];
        sum.copy_from_slice(&bytes[32..40]);
        state.sum = TableSum(u64::from_le_bytes(sum));
        state
    }
}

/// Whether a covering slot's mismatch is damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The table is as a checksum-aware commit left it: a mismatch is damage.
    Sealed,
    /// Something else changed the table since (the reference, or a copy tool that rewrote it),
    /// or no writer vouched for the file: a mismatch leaves the record unverified.
    Changed,
}

/// The sidecar header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SidecarHeader {
    /// The writer vouches for every covering slot while the table is in one of the states.
    pub sealed: bool,
    /// The table before the last commit began.
    pub before: TableState,
    /// The table once the last commit landed.
    pub after: TableState,
    /// The first entry an append writes, at the old length, before it publishes the new one: an
    /// append killed after writing it leaves `before` with this as its stale entry.
    pub pending: [u8; 16],
}

impl SidecarHeader {
    /// Parses and checks a header.
    pub fn parse(bytes: &[u8]) -> Result<SidecarHeader, SidecarError> {
        let Some(bytes) = bytes.get(..SIDECAR_HEADER as usize) else {
            return Err(SidecarError::Short { len: bytes.len() as u64 });
        };
        if bytes[..4] != SIDECAR_MAGIC {
            return Err(SidecarError::NotChecksums);
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != SIDECAR_VERSION {
            return Err(SidecarError::Version(version));
        }
        let hash = u16::from_le_bytes([bytes[6], bytes[7]]);
        if hash != HASH_XXH3_64 {
            return Err(SidecarError::Hash(hash));
        }
        let stored = u64::from_le_bytes(bytes[HEADER_SUM_AT..].try_into().unwrap_or_default());
        if stored != XxHash3_64::oneshot(&bytes[..HEADER_SUM_AT]) {
            return Err(SidecarError::Torn);
        }
        let flags = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        Ok(SidecarHeader {
            sealed: flags & FLAG_SEALED != 0,
            before: TableState::read(&bytes[16..16 + TableState::BYTES]),
            after: TableState::read(&bytes[56..56 + TableState::BYTES]),
            pending: bytes[96..112].try_into().unwrap_or_default(),
        })
    }

    /// The on-disk bytes.
    pub fn to_bytes(&self) -> [u8; SIDECAR_HEADER as usize] {
        let mut out = [0u8; SIDECAR_HEADER as usize];
        out[..4].copy_from_slice(&SIDECAR_MAGIC);
        out[4..6].copy_from_slice(&SIDECAR_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&HASH_XXH3_64.to_le_bytes());
        let flags = if self.sealed { FLAG_SEALED } else { 0 };
        out[8..12].copy_from_slice(&flags.to_le_bytes());
        self.before.write(&mut out[16..56]);
        self.after.write(&mut out[56..96]);
        out[96..112].copy_from_slice(&self.pending);
        let sum = XxHash3_64::oneshot(&out[..HEADER_SUM_AT]);
        out[HEADER_SUM_AT..].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// How a mismatch reads against the table as it is now (`current`).
    pub fn standing(&self, current: &TableState) -> Standing {
        self.standing_with(current, true)
    }

    /// [`SidecarHeader::standing`] for a table whose stale entry cannot be read (`meta.zr` cut
    /// to its live table, as uploads cut it) when `stale_known` is false: the stale entries are
    /// not compared then.
    pub fn standing_with(&self, current: &TableState, stale_known: bool) -> Standing {
        let a = &self.after;
        let after =
            current.header == a.header && current.sum == a.sum && (!stale_known || current.stale == a.stale);
        if self.sealed && (after || self.is_before(current, stale_known)) {
            Standing::Sealed
        } else {
            Standing::Changed
        }
    }

    /// True when `state` is the table before the last commit (its stale entry either the one
    /// it had or the one the commit began to write).
    fn is_before(&self, state: &TableState, stale_known: bool) -> bool {
        let b = &self.before;
        state.header == b.header
            && state.sum == b.sum
            && (!stale_known || state.stale == b.stale || state.stale == self.pending)
    }

    /// The state a writer continues from: the sum it kept, if the table is still in the state
    /// the header names (compared by header and stale entry, which a writer reads cheaply).
    /// `None` when another writer changed the table since: the new commit cannot be sealed.
    pub fn resume(&self, header: &Header, stale: Option<RecordLoc>) -> Option<TableSum> {
        let now = TableState::new(header, stale, TableSum::default());
        if !self.sealed {
            None
        } else if self.after.header == now.header && self.after.stale == now.stale {
            Some(self.after.sum)
        } else if self.before.header == now.header
            && (self.before.stale == now.stale || self.pending == now.stale)
        {
            Some(self.before.sum)
        } else {
            None
        }
    }
}

/// A sidecar that cannot be used. Readers then treat every record as uncovered and
/// `loaderx verify` reports the file; writers refuse a version they do not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SidecarError {
    /// The file is shorter than its header.
    #[error("checksums.lx is {len} bytes, shorter than its {SIDECAR_HEADER}-byte header")]
    Short { len: u64 },
    /// The magic is not `LXCS`.
    #[error("checksums.lx does not start with LXCS")]
    NotChecksums,
    /// A version this crate does not know.
    #[error("checksums.lx has version {0}; this loaderx reads version {SIDECAR_VERSION}")]
    Version(u16),
    /// A hash this crate does not know.
    #[error("checksums.lx uses hash id {0}; this loaderx knows id {HASH_XXH3_64} (xxh3-64)")]
    Hash(u16),
    /// The header's own checksum does not match (a torn or damaged header).
    #[error("checksums.lx header fails its own checksum")]
    Torn,
}

impl Classify for SidecarError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Corrupt
    }

    fn location(&self) -> Option<Location> {
        Some(Location::at(StoreFile::Checksums, 0))
    }
}

/// What checking one record found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A covering slot, and the bytes hash to its checksum.
    Verified,
    /// No slot covers the record (see the module docs).
    Uncovered,
    /// A covering slot, and the bytes hash to something else.
    Mismatch { expected: u64, found: u64 },
}

/// Checks record `loc`'s stored bytes against its slot (`None`: past the file's end).
pub fn check(slot: Option<&Slot>, loc: &RecordLoc, stored: &[u8]) -> Verdict {
    match slot {
        Some(slot) if slot.covers(loc) => {
            let found = record_hash(stored);
            if found == slot.hash {
                Verdict::Verified
            } else {
                Verdict::Mismatch { expected: slot.hash, found }
            }
        }
        _ => Verdict::Uncovered,
    }
}

/// Which reads are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum VerifyMode {
    /// None.
    Off,
    /// Bytes that come over the network (a remote store, or its local cache of fetched blocks).
    #[default]
    Fetched,
    /// Every read, local ones too.
    Always,
}

impl VerifyMode {
    /// Every mode, in order.
    pub const ALL: [VerifyMode; 3] = [VerifyMode::Off, VerifyMode::Fetched, VerifyMode::Always];

    /// The mode's name: `off`, `fetched`, `always`.
    pub fn name(self) -> &'static str {
        match self {
            VerifyMode::Off => "off",
            VerifyMode::Fetched => "fetched",
            VerifyMode::Always => "always",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<VerifyMode> {
        VerifyMode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// True when reads from a source that is `remote` are checked.
    pub fn checks(self, remote: bool) -> bool {
        match self {
            VerifyMode::Off => false,
            VerifyMode::Fetched => remote,
            VerifyMode::Always => true,
        }
    }
}

/// How many records of a store are covered and verified (`loaderx verify --deep`, the viewer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coverage {
    /// Records whose bytes matched their checksum.
    pub verified: u64,
    /// Records no slot covers: written without checksums, or changed by another writer.
    pub uncovered: u64,
    /// Records whose checksum did not match, in a table another writer changed since (not
    /// counted as damage, see the module docs).
    pub unverified: u64,
    /// Records whose checksum did not match in a sealed store: damage.
    pub mismatched: u64,
}

impl Coverage {
    /// Adds one record's verdict under `standing`.
    pub fn count(&mut self, verdict: Verdict, standing: Standing) {
        match (verdict, standing) {
            (Verdict::Verified, _) => self.verified += 1,
            (Verdict::Uncovered, _) => self.uncovered += 1,
            (Verdict::Mismatch { .. }, Standing::Changed) => self.unverified += 1,
            (Verdict::Mismatch { .. }, Standing::Sealed) => self.mismatched += 1,
        }
    }

    /// Adds another count (a manifest's stores, a join's parts).
    pub fn add(&mut self, other: Coverage) {
        self.verified += other.verified;
        self.uncovered += other.uncovered;
        self.unverified += other.unverified;
        self.mismatched += other.mismatched;
    }
}

/// Cached pages of a sidecar, for readers that fetch it by range (remote, wasm). Slots past the
/// file's end are uncovered, not errors: a sidecar may trail the table.
#[derive(Debug, Default)]
pub struct SlotCache {
    /// The sidecar's size.
    len: u64,
    pages: HashMap<u64, Box<[u8]>>,
}

impl SlotCache {
    /// An empty cache for a sidecar of `len` bytes.
    pub fn new(len: u64) -> SlotCache {
        SlotCache { len, pages: HashMap::new() }
    }

    fn page_range(&self, page: u64) -> Range<u64> {
        let start = SIDECAR_HEADER + page * SLOT_PAGE;
        start..(start + SLOT_PAGE).min(self.len)
    }

    /// The sidecar byte ranges holding the slots of `indices` that are not cached and lie in
    /// the file, as whole pages, sorted and coalesced up to `max_range` bytes.
    pub fn missing(&self, indices: impl IntoIterator<Item = u64>, max_range: u64) -> Vec<Range<u64>> {
        let pages = indices
            .into_iter()
            .filter(|&i| slot_offset(i) + SLOT_SIZE <= self.len)
            .map(|i| i * SLOT_SIZE / SLOT_PAGE)
            .filter(|p| !self.pages.contains_key(p));
        crate::plan::page_ranges(pages, |p| self.page_range(p), max_range)
    }

    /// Stores bytes read at `start` (a page start, as [`SlotCache::missing`] gives). Pages the
    /// bytes do not hold whole are left out (a shorter answer than asked for).
    pub fn insert(&mut self, start: u64, bytes: &[u8]) {
        if start < SIDECAR_HEADER || (start - SIDECAR_HEADER) % SLOT_PAGE != 0 {
            return;
        }
        let mut page = (start - SIDECAR_HEADER) / SLOT_PAGE;
        let mut rest = bytes;
        loop {
            let want = self.page_range(page);
            let len = want.end.saturating_sub(want.start) as usize;
            if len == 0 {
                break;
            }
            let Some(chunk) = rest.get(..len) else { break };
            self.pages.insert(page, chunk.into());
            rest = &rest[len..];
            page += 1;
        }
    }

    /// Slot `index`: `Some(None)` past the file's end, `None` when its page is not cached.
    pub fn slot(&self, index: u64) -> Option<Option<Slot>> {
        if slot_offset(index) + SLOT_SIZE > self.len {
            return Some(None);
        }
        let at = index * SLOT_SIZE;
        let page = self.pages.get(&(at / SLOT_PAGE))?;
        let off = (at % SLOT_PAGE) as usize;
        Some(Slot::read(page.get(off..)?))
    }
}

/// The record facts a content digest covers: decoded length, codec tag and checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Covered {
    pub logic_length: u32,
    pub compress: u8,
    pub hash: u64,
}

/// A digest of a store's content, from its schema, dictionary and the checksums of its records
/// in index order, without reading a record: the same for two stores that read back the same
/// (whatever their chunk layout, so compaction keeps it), different when any record's stored
/// bytes, order, codec or the schema differ. SHA-256, written `sha256:<hex>`.
pub fn content_digest(
    schema: Option<&[u8]>,
    dict: Option<&[u8]>,
    records: impl IntoIterator<Item = Covered>,
) -> String {
    let mut h = Sha256::new();
    h.update(b"loaderx content v1\0");
    for part in [schema, dict] {
        match part {
            Some(bytes) => {
                h.update([1u8]);
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(bytes);
            }
            None => h.update([0u8]),
        }
    }
    let mut count = 0u64;
    for r in records {
        h.update(r.logic_length.to_le_bytes());
        h.update([r.compress]);
        h.update(r.hash.to_le_bytes());
        count += 1;
    }
    h.update(count.to_le_bytes());
    sha256_text(&h.finalize())
}

/// `sha256:<hex>` of a SHA-256 digest: how digests and identities are written.
pub fn sha256_text(digest: &[u8]) -> String {
    let mut out = String::with_capacity(7 + 2 * digest.len());
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The digest of several stores read as one (a manifest, a join), from their content digests
/// in order.
pub fn combined_digest<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    h.update(b"loaderx stores v1\0");
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    sha256_text(&h.finalize())
}

const _: () = assert!(ENTRY_SIZE == 16 && SLOT_SIZE == 24 && 16 + 2 * TableState::BYTES as u64 + 16 <= 120);

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(offset: u32, len: u32) -> RecordLoc {
        RecordLoc { offset, phys_length: len, logic_length: len, chunk_id: 0, compress: 0, reserved: 0 }
    }

    fn header(length: u32, tail: u32) -> Header {
        Header { length, tail_offset: tail, ..Header::EMPTY }
    }

    #[test]
    fn xxh3_is_the_published_function() {
        // XXH3_64bits("") and XXH3_64bits("abc") from the xxHash reference implementation.
        assert_eq!(record_hash(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(record_hash(b"abc"), 0x78af_5f94_892f_3950);
    }

    #[test]
    fn slots_round_trip_and_cover_only_their_entry() {
        let a = loc(0, 100);
        let slot = Slot::new(&a, 7);
        assert_eq!(Slot::read(&slot.to_bytes()), Some(slot));
        assert!(slot.covers(&a));
        assert!(!slot.covers(&loc(100, 100)));
        assert!(!Slot::default().covers(&RecordLoc::default()));
        assert_eq!(Slot::read(&[0; 23]), None);
    }

    #[test]
    fn check_tells_verified_uncovered_and_mismatch() {
        let a = loc(0, 3);
        let good = Slot::new(&a, record_hash(b"abc"));
        assert_eq!(check(Some(&good), &a, b"abc"), Verdict::Verified);
        assert!(matches!(check(Some(&good), &a, b"abd"), Verdict::Mismatch { .. }));
        assert_eq!(check(Some(&good), &loc(3, 3), b"abd"), Verdict::Uncovered);
        assert_eq!(check(None, &a, b"abd"), Verdict::Uncovered);
    }

    #[test]
    fn header_round_trips_and_refuses_damage() {
        let h = SidecarHeader {
            sealed: true,
            before: TableState::new(&header(1, 10), None, TableSum(5)),
            after: TableState::new(&header(2, 20), Some(loc(20, 4)), TableSum(9)),
            pending: loc(10, 10).to_bytes(),
        };
        let bytes = h.to_bytes();
        assert_eq!(SidecarHeader::parse(&bytes), Ok(h));
        for at in 0..bytes.len() {
            let mut bad = bytes;
            bad[at] ^= 0x40;
            assert!(SidecarHeader::parse(&bad).is_err(), "flip at {at} accepted");
        }
        assert_eq!(SidecarHeader::parse(&bytes[..127]), Err(SidecarError::Short { len: 127 }));
    }

    #[test]
    fn sums_follow_appends_swaps_and_moves() {
        let table = [loc(0, 1), loc(1, 2), loc(3, 3)];
        let mut sum = TableSum::of(&table[..2]);
        sum.add(2, &table[2]);
        assert_eq!(sum, TableSum::of(&table));
        // Swap-delete of index 0: entry 2 moves to 0.
        sum.remove(0, &table[0]);
        sum.remove(2, &table[2]);
        sum.add(0, &table[2]);
        assert_eq!(sum, TableSum::of(&[table[2], table[1]]));
        // Order matters: the same entries at other indices sum differently.
        assert_ne!(TableSum::of(&[table[1], table[2]]), TableSum::of(&[table[2], table[1]]));
    }

    #[test]
    fn standing_is_sealed_only_in_the_states_the_writer_left() {
        let before = TableState::new(&header(1, 10), None, TableSum(5));
        let after = TableState::new(&header(2, 20), None, TableSum(9));
        let h = SidecarHeader { sealed: true, before, after, pending: loc(10, 2).to_bytes() };
        assert_eq!(h.standing(&after), Standing::Sealed);
        assert_eq!(h.standing(&before), Standing::Sealed);
        let moved = TableState { sum: TableSum(10), ..after };
        assert_eq!(h.standing(&moved), Standing::Changed);
        let stale = TableState { stale: loc(20, 1).to_bytes(), ..after };
        assert_eq!(h.standing(&stale), Standing::Changed);
        assert_eq!(h.standing_with(&stale, false), Standing::Sealed, "a cut table has no stale entry");
        assert_eq!(h.standing_with(&moved, false), Standing::Changed);
        assert_eq!(SidecarHeader { sealed: false, ..h }.standing(&after), Standing::Changed);
        assert_eq!(h.resume(&header(2, 20), None), Some(TableSum(9)));
        assert_eq!(h.resume(&header(1, 10), None), Some(TableSum(5)));
        assert_eq!(h.resume(&header(2, 21), None), None);
        // An append killed after writing its first entry: `before`, with that entry stale.
        let killed = TableState { stale: loc(10, 2).to_bytes(), ..before };
        assert_eq!(h.standing(&killed), Standing::Sealed);
        assert_eq!(h.resume(&header(1, 10), Some(loc(10, 2))), Some(TableSum(5)));
    }

    #[test]
    fn slot_cache_pages_and_a_short_file() {
        // A file holding 300 whole slots and part of one more.
        let len = slot_offset(300) + 5;
        let mut cache = SlotCache::new(len);
        assert_eq!(cache.slot(299), None);
        assert_eq!(cache.slot(300), Some(None), "a slot the file cuts is uncovered");
        let missing = cache.missing([0, 299, 300, 5000], 1 << 20);
        assert_eq!(missing, vec![SIDECAR_HEADER..len]);
        let file: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for r in &missing {
            cache.insert(r.start, &file[r.start as usize..r.end as usize]);
        }
        let at = slot_offset(299) as usize;
        assert_eq!(cache.slot(299), Some(Slot::read(&file[at..])));
        assert_eq!(cache.slot(0), Some(Slot::read(&file[SIDECAR_HEADER as usize..])));
        assert!(cache.missing([1, 298], 1 << 20).is_empty());
    }

    #[test]
    fn content_digest_ignores_layout_but_not_content() {
        let r = |h| Covered { logic_length: 3, compress: 0, hash: h };
        let d = content_digest(Some(b"s"), None, [r(1), r(2)]);
        assert_eq!(d, content_digest(Some(b"s"), None, [r(1), r(2)]));
        assert!(d.starts_with("sha256:") && d.len() == 71);
        assert_ne!(d, content_digest(Some(b"s"), None, [r(2), r(1)]));
        assert_ne!(d, content_digest(None, None, [r(1), r(2)]));
        assert_ne!(d, content_digest(Some(b"s"), Some(b""), [r(1), r(2)]));
        assert_ne!(d, content_digest(Some(b"s"), None, [r(1)]));
        let e = content_digest(None, None, [r(3)]);
        assert_ne!(combined_digest([d.as_str(), e.as_str()]), combined_digest([e.as_str(), d.as_str()]));
        assert_ne!(combined_digest([d.as_str()]), d);
    }

    #[test]
    fn modes_by_name() {
        for m in VerifyMode::ALL {
            assert_eq!(VerifyMode::from_name(m.name()), Some(m));
        }
        assert_eq!(VerifyMode::default(), VerifyMode::Fetched);
        assert!(!VerifyMode::Fetched.checks(false) && VerifyMode::Fetched.checks(true));
        assert!(VerifyMode::Always.checks(false) && !VerifyMode::Off.checks(true));
    }
}
