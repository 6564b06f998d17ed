//! The on-disk format, version 3 (see `docs/format.md`).
//!
//! A store is `meta.zr` (a 16-byte [`Header`] followed by a table of 16-byte [`RecordLoc`]
//! entries) plus chunk files `0.zr`, `1.zr`, … holding the record bytes.
//!
//! Invariants this module states and checks:
//! * Both structs are `#[repr(C)]`, 16 bytes, alignment ≤ 4 and plain old data, so a front end
//!   can view a page-aligned mapping in place. All fields are little-endian on disk; on the
//!   little-endian hosts loaderx supports that is the native order.
//! * The limits are tied together at compile time: `MAX_CHUNKS · CHUNK_SIZE / MAX_RECORD_LEN ==
//!   MAX_RECORDS`, so the store can never run out of chunk space before it runs out of table slots.
//! * A record never straddles a chunk, and byte `0xFFFF_FFFF` of a chunk is never used
//!   ([`Tail::place`]).
//! * Every value read from disk is validated ([`Header::validate`], [`RecordLoc::validate`])
//!   before it is used to index anything, so a corrupt file yields a [`FormatError`], never a
//!   panic or an out-of-bounds access.

use bytemuck::{Pod, Zeroable};

use crate::error::{Classify, ErrorKind, Location, StoreFile};

/// `"ZREC"`.
pub const MAGIC: [u8; 4] = *b"ZREC";
/// The only format version this crate reads and writes.
pub const VERSION: u16 = 3;
/// Size of the header and of each table entry.
pub const ENTRY_SIZE: u64 = 16;
/// Size of the header.
pub const HEADER_SIZE: u64 = 16;
/// Largest number of chunk files.
pub const MAX_CHUNKS: u64 = 1 << 12;
/// Apparent size of a chunk file; offsets are `u32`, and byte `CHUNK_SIZE - 1` is never used.
pub const CHUNK_SIZE: u64 = 1 << 32;
/// Largest logical (decoded) record length. Records are at least 1 byte.
pub const MAX_RECORD_LEN: u64 = 1 << 20;
/// Largest number of records a store holds (table capacity).
pub const MAX_RECORDS: u64 = 1 << 24;
/// Apparent size of a full `meta.zr`: header plus a table for [`MAX_RECORDS`] entries.
pub const META_FULL_SIZE: u64 = HEADER_SIZE + MAX_RECORDS * ENTRY_SIZE;

const _: () = assert!(MAX_CHUNKS * CHUNK_SIZE / MAX_RECORD_LEN == MAX_RECORDS);
const _: () = assert!(std::mem::size_of::<Header>() == 16 && std::mem::size_of::<RecordLoc>() == 16);
const _: () = assert!(std::mem::align_of::<Header>() <= 4 && std::mem::align_of::<RecordLoc>() <= 4);

/// Errors found while validating format structures against limits and file sizes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The header's magic or version is not `ZREC`/3.
    #[error("not a loaderx store, or written by a newer version (magic {magic:02x?}, version {version})")]
    NotAStore { magic: [u8; 4], version: u16 },
    /// `meta.zr` is shorter than the header, or than the table its header promises.
    #[error("meta.zr is {actual} bytes, but {needed} are needed (header says {length} records)")]
    MetaTooShort { actual: u64, needed: u64, length: u64 },
    /// A header field is outside the format's limits.
    #[error("corrupt header: {0}")]
    BadHeader(&'static str),
    /// A table entry is invalid on its own or against the chunk files.
    #[error("corrupt table entry {index} (meta.zr offset {meta_offset}): {reason}")]
    BadEntry { index: u64, meta_offset: u64, reason: String },
    /// A table entry points outside its chunk file: the file is missing, or shorter than the
    /// record needs.
    #[error("table entry {index} (meta.zr offset {meta_offset}) points outside {chunk}.zr: {reason}")]
    OutsideChunk { index: u64, meta_offset: u64, chunk: u16, start: u64, reason: String },
}

impl Classify for FormatError {
    fn kind(&self) -> ErrorKind {
        match self {
            FormatError::NotAStore { .. } => ErrorKind::NotAStore,
            _ => ErrorKind::Corrupt,
        }
    }

    fn location(&self) -> Option<Location> {
        Some(match self {
            FormatError::NotAStore { .. } | FormatError::BadHeader(_) => Location::at(StoreFile::Meta, 0),
            FormatError::MetaTooShort { actual, .. } => Location::at(StoreFile::Meta, *actual),
            FormatError::BadEntry { meta_offset, .. } => Location::at(StoreFile::Meta, *meta_offset),
            FormatError::OutsideChunk { chunk, start, .. } => Location::at(StoreFile::Chunk(*chunk), *start),
        })
    }

    fn index(&self) -> Option<u64> {
        match self {
            FormatError::BadEntry { index, .. } | FormatError::OutsideChunk { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// Compression tag of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    Raw = 0,
    /// zstd, level 3, no dictionary.
    Zstd = 1,
    /// zstd, level 19, with the store's trained dictionary (`dict.zr`).
    ZstdDict = 2,
}

impl Codec {
    /// Every codec, in tag order.
    pub const ALL: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];

    /// The tag stored in a table entry, or `None` for an unknown tag.
    pub fn from_tag(tag: u8) -> Option<Codec> {
        Self::ALL.get(usize::from(tag)).copied()
    }

    /// The name used in `schema.msgpack` and by the Python API.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd_dict",
        }
    }

    /// Parses a codec name (`raw`, `zstd`, `zstd_dict`).
    pub fn from_name(name: &str) -> Option<Codec> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// The 16-byte header at the start of `meta.zr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Header {
    pub magic: [u8; 4],
    pub version: u16,
    /// Chunk currently appended to.
    pub tail_chunk: u16,
    /// Next free byte in `tail_chunk`.
    pub tail_offset: u32,
    /// Number of live records.
    pub length: u32,
}

impl Header {
    /// The header of an empty store.
    pub const EMPTY: Header =
        Header { magic: MAGIC, version: VERSION, tail_chunk: 0, tail_offset: 0, length: 0 };

    /// Reads a header from the first 16 bytes of `bytes` (any alignment).
    pub fn read(bytes: &[u8]) -> Result<Header, FormatError> {
        let raw = bytes.get(..HEADER_SIZE as usize).ok_or(FormatError::MetaTooShort {
            actual: bytes.len() as u64,
            needed: HEADER_SIZE,
            length: 0,
        })?;
        Ok(bytemuck::pod_read_unaligned(raw))
    }

    /// The on-disk bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        bytemuck::cast(*self)
    }

    /// Checks magic, version and limits, and that a `meta.zr` of `meta_len` bytes holds the
    /// whole table the header promises (a file cut to exactly `16 + 16·length` is valid).
    pub fn validate(&self, meta_len: u64) -> Result<(), FormatError> {
        if self.magic != MAGIC || self.version != VERSION {
            return Err(FormatError::NotAStore { magic: self.magic, version: self.version });
        }
        if u64::from(self.length) > MAX_RECORDS {
            return Err(FormatError::BadHeader("length exceeds 2^24 records"));
        }
        if u64::from(self.tail_chunk) >= MAX_CHUNKS {
            return Err(FormatError::BadHeader("tail chunk exceeds 4095"));
        }
        if u64::from(self.tail_offset) > CHUNK_SIZE - 1 {
            return Err(FormatError::BadHeader("tail offset past the usable chunk size"));
        }
        let needed = table_end(u64::from(self.length));
        if meta_len < needed {
            return Err(FormatError::MetaTooShort {
                actual: meta_len,
                needed,
                length: u64::from(self.length),
            });
        }
        Ok(())
    }

    /// The append frontier.
    pub fn tail(&self) -> Tail {
        Tail { chunk: self.tail_chunk, offset: self.tail_offset }
    }

    /// `tail_chunk · 2^32 + tail_offset`: how far the chunk files have grown.
    pub fn chunk_bytes(&self) -> u64 {
        self.tail().position()
    }
}

/// Byte offset of table entry `index` in `meta.zr`.
pub fn entry_offset(index: u64) -> u64 {
    HEADER_SIZE + ENTRY_SIZE * index
}

/// Size `meta.zr` needs to hold the header and `length` entries.
pub fn table_end(length: u64) -> u64 {
    entry_offset(length)
}

/// One 16-byte table entry: where a record lives and how it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Default)]
#[repr(C)]
pub struct RecordLoc {
    /// Byte offset in the chunk file.
    pub offset: u32,
    /// Stored bytes.
    pub phys_length: u32,
    /// Decoded bytes.
    pub logic_length: u32,
    pub chunk_id: u16,
    /// [`Codec`] tag.
    pub compress: u8,
    /// Written 0, ignored on read.
    pub reserved: u8,
}

impl RecordLoc {
    /// True for an entry that was never written (all zero): no valid record has one.
    pub fn is_blank(&self) -> bool {
        bytemuck::bytes_of(self).iter().all(|&b| b == 0)
    }

    /// Reads entry bytes (any alignment). `bytes` must hold at least 16 bytes.
    pub fn read(bytes: &[u8]) -> Option<RecordLoc> {
        bytes.get(..ENTRY_SIZE as usize).map(bytemuck::pod_read_unaligned)
    }

    /// The on-disk bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        bytemuck::cast(*self)
    }

    /// Bytes a read of this record takes from its chunk file: the logical length for raw
    /// records (the stored bytes are the record), the physical length otherwise.
    pub fn stored_len(&self) -> u64 {
        if self.compress == Codec::Raw as u8 {
            u64::from(self.logic_length)
        } else {
            u64::from(self.phys_length)
        }
    }

    /// One past the last chunk byte this record occupies.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + self.stored_len()
    }

    /// Checks the entry against the limits and, when known, the size of its chunk file.
    ///
    /// `chunk_len` returns the size of chunk `id`, or `None` if that chunk file does not exist.
    pub fn validate(
        &self,
        index: u64,
        chunk_len: impl FnOnce(u16) -> Option<u64>,
    ) -> Result<Codec, FormatError> {
        let bad = |reason: String| FormatError::BadEntry { index, meta_offset: entry_offset(index), reason };
        let codec = Codec::from_tag(self.compress)
            .ok_or_else(|| bad(format!("unknown codec tag {}", self.compress)))?;
        let logic = u64::from(self.logic_length);
        if logic == 0 || logic > MAX_RECORD_LEN {
            return Err(bad(format!("logical length {logic} outside 1..=2^20")));
        }
        if codec == Codec::Raw && self.phys_length != self.logic_length {
            return Err(bad(format!(
                "raw record with stored length {} != logical length {logic}",
                self.phys_length
            )));
        }
        if self.phys_length == 0 {
            return Err(bad("stored length 0".into()));
        }
        if u64::from(self.chunk_id) >= MAX_CHUNKS {
            return Err(bad(format!("chunk {} beyond the 4096-chunk limit", self.chunk_id)));
        }
        if self.end() > CHUNK_SIZE - 1 {
            return Err(bad("record runs past the usable chunk size".into()));
        }
        let outside = |reason: String| FormatError::OutsideChunk {
            index,
            meta_offset: entry_offset(index),
            chunk: self.chunk_id,
            start: u64::from(self.offset),
            reason,
        };
        match chunk_len(self.chunk_id) {
            None => Err(outside("the file is missing".into())),
            Some(len) if self.end() > len => Err(outside(format!(
                "the record needs bytes {}..{} of a {len}-byte file",
                self.offset,
                self.end()
            ))),
            Some(_) => Ok(codec),
        }
    }
}

/// The append frontier: the next free byte of the tail chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tail {
    pub chunk: u16,
    pub offset: u32,
}

impl Tail {
    /// Absolute position `chunk · 2^32 + offset`.
    pub fn position(&self) -> u64 {
        u64::from(self.chunk) * CHUNK_SIZE + u64::from(self.offset)
    }

    /// Places a record of `len` stored bytes (`1 ≤ len ≤ MAX_RECORD_LEN`) at the frontier,
    /// returning `(chunk, offset)` and advancing `self`.
    ///
    /// The record stays in the tail chunk iff `offset + len ≤ 2^32 − 1`; otherwise it starts the
    /// next chunk at offset 0. Returns `None`, leaving `self` unchanged, when that would need a
    /// chunk beyond [`MAX_CHUNKS`].
    pub fn place(&mut self, len: u32) -> Option<(u16, u32)> {
        // `offset + len <= 2^32 - 1`: the last byte of a chunk stays unused.
        let fits = u64::from(self.offset) + u64::from(len) < CHUNK_SIZE;
        let (chunk, offset) = if fits {
            (self.chunk, self.offset)
        } else {
            let next = self.chunk.checked_add(1).filter(|c| u64::from(*c) < MAX_CHUNKS)?;
            (next, 0)
        };
        *self = Tail { chunk, offset: offset + len };
        Some((chunk, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_header_bytes_match_reference() {
        let bytes = Header::EMPTY.to_bytes();
        assert_eq!(bytes, [0x5a, 0x52, 0x45, 0x43, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Header::read(&bytes).unwrap(), Header::EMPTY);
    }

    #[test]
    fn header_example_from_reference() {
        let h = Header { tail_offset: 168, length: 5, ..Header::EMPTY };
        assert_eq!(&h.to_bytes()[4..], &[3, 0, 0, 0, 0xa8, 0, 0, 0, 5, 0, 0, 0]);
    }

    #[test]
    fn entry_examples_from_reference() {
        let raw = RecordLoc::read(&[0x2b, 0, 0, 0, 0x64, 0, 0, 0, 0x64, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((raw.offset, raw.phys_length, raw.logic_length), (43, 100, 100));
        assert_eq!(raw.validate(0, |_| Some(143)), Ok(Codec::Raw));
        let z = RecordLoc::read(&[0, 0, 0, 0, 0x13, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 1, 0]).unwrap();
        assert_eq!((z.phys_length, z.logic_length, z.compress), (19, 1000, 1));
        let d = RecordLoc::read(&[0x10, 3, 0, 0, 3, 2, 0, 0, 0x10, 3, 0, 0, 0, 0, 2, 0]).unwrap();
        assert_eq!(d.validate(0, |_| Some(u64::MAX)), Ok(Codec::ZstdDict));
    }

    #[test]
    fn validate_rejects_bad_headers() {
        let mut h = Header::EMPTY;
        h.version = 2;
        assert!(matches!(h.validate(16), Err(FormatError::NotAStore { .. })));
        h.version = 4;
        assert!(matches!(h.validate(16), Err(FormatError::NotAStore { .. })));
        let h = Header { length: (1 << 24) + 1, ..Header::EMPTY };
        assert!(matches!(h.validate(META_FULL_SIZE), Err(FormatError::BadHeader(_))));
        let h = Header { length: 5, ..Header::EMPTY };
        assert!(matches!(h.validate(16 + 16 * 4), Err(FormatError::MetaTooShort { .. })));
        assert_eq!(h.validate(16 + 16 * 5), Ok(()));
        assert!(Header::read(&[0x5a, 0x52]).is_err());
    }

    #[test]
    fn validate_rejects_bad_entries() {
        let ok = RecordLoc { offset: 10, phys_length: 5, logic_length: 5, ..Default::default() };
        assert!(ok.validate(0, |_| Some(15)).is_ok());
        assert!(ok.validate(0, |_| Some(14)).is_err(), "past end of chunk");
        assert!(ok.validate(0, |_| None).is_err(), "missing chunk");
        let tag7 = RecordLoc { compress: 7, ..ok };
        assert!(tag7.validate(0, |_| Some(100)).is_err());
        let zero = RecordLoc { logic_length: 0, phys_length: 0, ..ok };
        assert!(zero.validate(0, |_| Some(100)).is_err());
        let big = RecordLoc { logic_length: (1 << 20) + 1, compress: 1, ..ok };
        assert!(big.validate(0, |_| Some(u64::MAX)).is_err());
        let reserved = RecordLoc { reserved: 5, ..ok };
        assert!(reserved.validate(0, |_| Some(15)).is_ok(), "reserved byte is ignored");
    }

    #[test]
    fn placement_matches_reference_experiments() {
        // `left` = 2^32 - tail_offset; docs/format.md "Placement".
        let with_left = |left: u32| Tail { chunk: 0, offset: u32::MAX - left + 1 };
        let mut t = with_left(156);
        assert_eq!(t.place(155), Some((0, u32::MAX - 155)));
        assert_eq!(t.offset, u32::MAX, "tail reaches 0xFFFFFFFF, that byte stays unused");
        assert_eq!(with_left(156).place(156), Some((1, 0)));
        assert_eq!(with_left(1).place(1), Some((1, 0)));
        assert_eq!(with_left(2).place(1), Some((0, u32::MAX - 1)));
        let mut t = Tail { chunk: 3, offset: 7 };
        assert_eq!(t.place(10), Some((3, 7)));
        assert_eq!(t, Tail { chunk: 3, offset: 17 });
        let mut last = Tail { chunk: 4095, offset: u32::MAX };
        assert_eq!(last.place(1), None);
        assert_eq!(last, Tail { chunk: 4095, offset: u32::MAX });
    }

    #[test]
    fn codec_names_round_trip() {
        for c in Codec::ALL {
            assert_eq!(Codec::from_name(c.name()), Some(c));
            assert_eq!(Codec::from_tag(c as u8), Some(c));
        }
        assert_eq!(Codec::from_tag(3), None);
        assert_eq!(Codec::from_name("lz4"), None);
    }
}
