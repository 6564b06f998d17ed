//! The open protocol every reader follows: which files a store has, what is checked before a
//! record is read, and the delete-journal rule. No I/O: a front end (the mapped local reader,
//! the object-store reader, the wasm reader driven by JavaScript) fetches the bytes this module
//! names and hands them in, in two rounds:
//!
//! 1. `meta.zr`'s size and its first [`HEADER_SIZE`] bytes → [`read_header`];
//! 2. concurrently, the optional side files ([`SIDE_FILES`]: `schema.msgpack`, `dict.zr`,
//!    `delete.journal`, each at most [`max_side_bytes`], checked with [`check_side_size`] before
//!    it is fetched) and the sizes of chunk files [`chunk_ids`] → [`open`], which returns the
//!    validated [`StoreView`].
//!
//! Records are then located through [`Table`] (ranged readers) or [`Overlay::entry`] before the
//! table (the mapped reader), never through the bare table.
//!
//! The journal rule, the same in every reader: a `delete.journal` that parses and
//! [`applies_to`](DeleteJournal::applies_to) the table's length stands for the *finished*
//! deletion. The store's length is the journal's `new_length`, and the journal's entries take
//! the place of the table's. A reader that can write finishes the delete on disk instead (the
//! table then equals this view); a reader that cannot applies it in memory here. A journal that
//! does not parse or does not apply is [`OpenError::Journal`]/[`OpenError::JournalMismatch`]:
//! corrupt data naming `delete.journal`.
//!
//! Invariants:
//! * Every store file name comes from [`crate::names`] (re-exported here: [`META_FILE`],
//!   [`chunk_name`], [`DICT_FILE`], [`SCHEMA_FILE`], [`JOURNAL_FILE`], [`MANIFEST_FILE`]).
//! * [`StoreView::header`]'s length is the effective length (the journal's `new_length` when a
//!   journal stands), so every count a front end derives from it already follows the rule.
//! * No size read from a file is used to allocate before it is checked ([`check_side_size`]).

use crate::codec::Dictionary;
use crate::error::{Classify, ErrorKind, Location, StoreFile};
use crate::format::{FormatError, Header, RecordLoc, HEADER_SIZE, MAX_RECORDS};
use crate::journal::{DeleteJournal, JournalError};
use crate::read::{ReadError, TableCache};
use crate::schema::{Schema, SchemaError};

pub use crate::names::{
    chunk_id, chunk_name, CHECKSUM_FILE, DICT_FILE, JOURNAL_FILE, MANIFEST_FILE, META_FILE, SCHEMA_FILE,
};
/// The optional files fetched whole at open, after the header.
pub const SIDE_FILES: [&str; 3] = [SCHEMA_FILE, DICT_FILE, JOURNAL_FILE];

/// Largest `dict.zr` or `schema.msgpack` a reader loads.
pub const MAX_SIDE_BYTES: u64 = 64 << 20;
/// Largest `delete.journal` there can be: a delete from a full table leaves at most
/// [`MAX_RECORDS`] entries of 20 bytes, after a 20-byte head, plus an 8-byte checksum.
pub const MAX_JOURNAL_BYTES: u64 = 20 + 20 * MAX_RECORDS + 8;

/// Which store file `name` is (`None` for a name that is no store file's).
pub fn store_file(name: &str) -> Option<StoreFile> {
    Some(match name {
        META_FILE => StoreFile::Meta,
        DICT_FILE => StoreFile::Dict,
        SCHEMA_FILE => StoreFile::Schema,
        JOURNAL_FILE => StoreFile::Journal,
        CHECKSUM_FILE => StoreFile::Checksums,
        _ => StoreFile::Chunk(chunk_id(name)?),
    })
}

/// True for a file name that belongs to a store (not `*.tmp` leftovers, not a manifest).
pub fn is_store_file(name: &str) -> bool {
    store_file(name).is_some()
}

/// Largest size of side file `name` (one of [`SIDE_FILES`]) a reader fetches.
pub fn max_side_bytes(name: &str) -> u64 {
    if name == JOURNAL_FILE {
        MAX_JOURNAL_BYTES
    } else {
        MAX_SIDE_BYTES
    }
}

/// Checks a side file's size before it is fetched.
pub fn check_side_size(name: &str, len: u64) -> Result<(), OpenError> {
    let cap = max_side_bytes(name);
    if len > cap {
        return Err(OpenError::TooLarge { file: side_file(name), len, cap });
    }
    Ok(())
}

fn side_file(name: &str) -> StoreFile {
    match name {
        SCHEMA_FILE => StoreFile::Schema,
        JOURNAL_FILE => StoreFile::Journal,
        _ => StoreFile::Dict,
    }
}

/// Step 1: the header, from the first bytes of `meta.zr` (at least [`HEADER_SIZE`]; fewer is a
/// corrupt store) and `meta.zr`'s size, checked against the format's limits and that size.
pub fn read_header(head: &[u8], meta_len: u64) -> Result<Header, OpenError> {
    if meta_len < HEADER_SIZE || (head.len() as u64) < HEADER_SIZE {
        return Err(FormatError::MetaTooShort {
            actual: meta_len.min(head.len() as u64),
            needed: HEADER_SIZE,
            length: 0,
        }
        .into());
    }
    let header = Header::read(head)?;
    header.validate(meta_len)?;
    Ok(header)
}

/// The chunk files a store with `header` may hold records in: `0 ..= tail_chunk`.
pub fn chunk_ids(header: &Header) -> std::ops::RangeInclusive<u16> {
    0..=header.tail_chunk
}

/// What the second round fetched: each side file's bytes (`None` when it is missing) and the
/// size of each chunk file of [`chunk_ids`] (`None` when it is missing).
#[derive(Debug, Default)]
pub struct Fetched {
    pub schema: Option<Vec<u8>>,
    pub dict: Option<Vec<u8>>,
    pub journal: Option<Vec<u8>>,
    pub chunk_lens: Vec<Option<u64>>,
}

/// A store, validated and with the journal rule applied: what a reader reads through.
#[derive(Debug)]
pub struct StoreView {
    /// The header, its length the effective length (see the module docs).
    pub header: Header,
    /// The length `meta.zr`'s header holds (before the journal rule).
    pub table_length: u32,
    /// Entries that take the place of the table's (empty without a journal).
    pub overlay: Overlay,
    pub schema: Option<Schema>,
    pub dict: Option<Dictionary>,
    pub chunk_lens: Vec<Option<u64>>,
}

impl StoreView {
    /// An empty table cache over this view's effective length and overlay.
    pub fn table(&self) -> Table {
        Table::new(&self.header, self.overlay.clone())
    }
}

/// Step 2: validates what was fetched against `header` (from [`read_header`]).
pub fn open(header: Header, fetched: Fetched) -> Result<StoreView, OpenError> {
    let wanted = usize::from(header.tail_chunk) + 1;
    if fetched.chunk_lens.len() != wanted {
        return Err(OpenError::ChunkCount { given: fetched.chunk_lens.len(), wanted });
    }
    for (name, bytes) in SIDE_FILES.iter().zip([&fetched.schema, &fetched.dict, &fetched.journal]) {
        if let Some(bytes) = bytes {
            check_side_size(name, bytes.len() as u64)?;
        }
    }
    let schema = fetched.schema.map(|b| Schema::from_msgpack(&b)).transpose()?;
    let overlay = match &fetched.journal {
        Some(bytes) => Overlay::parse(bytes, header.length)?,
        None => Overlay::default(),
    };
    Ok(StoreView {
        header: overlay.header(header),
        table_length: header.length,
        overlay,
        schema,
        dict: fetched.dict.map(Dictionary::new),
        chunk_lens: fetched.chunk_lens,
    })
}

/// The journal rule's second half: `journal` applies to a table of `table_length` entries
/// ([`DeleteJournal::applies_to`]), else it is [`OpenError::JournalMismatch`].
pub fn check_applies(journal: &DeleteJournal, table_length: u32) -> Result<(), OpenError> {
    if journal.applies_to(table_length) {
        return Ok(());
    }
    Err(OpenError::JournalMismatch {
        old_length: journal.old_length,
        new_length: journal.new_length,
        table_length,
    })
}

/// The entries of a standing delete journal, which take the place of the table's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlay {
    journal: Option<DeleteJournal>,
}

impl Overlay {
    /// The journal rule for a table of `table_length` entries: the journal's bytes must parse
    /// and apply to that length.
    pub fn parse(bytes: &[u8], table_length: u32) -> Result<Overlay, OpenError> {
        let journal = DeleteJournal::parse(bytes)?;
        check_applies(&journal, table_length)?;
        Ok(Overlay { journal: Some(journal) })
    }

    /// True when no journal stands.
    pub fn is_empty(&self) -> bool {
        self.journal.is_none()
    }

    /// The journal, when one stands.
    pub fn journal(&self) -> Option<&DeleteJournal> {
        self.journal.as_ref()
    }

    /// The effective length of a table of `table_length` entries.
    pub fn length(&self, table_length: u32) -> u32 {
        self.journal.as_ref().map_or(table_length, |j| j.new_length)
    }

    /// `header` with the effective length.
    pub fn header(&self, header: Header) -> Header {
        Header { length: self.length(header.length), ..header }
    }

    /// The journal's entry for `index`, which takes the place of the table's; `None` when the
    /// table's entry stands.
    pub fn entry(&self, index: u64) -> Option<RecordLoc> {
        let entries = &self.journal.as_ref()?.entries;
        let index = u32::try_from(index).ok()?;
        entries.binary_search_by_key(&index, |&(i, _)| i).ok().map(|k| entries[k].1)
    }
}

/// The table as a ranged reader sees it: cached pages of `meta.zr` under the [`Overlay`].
/// Entries the overlay holds are never fetched.
#[derive(Debug)]
pub struct Table {
    cache: TableCache,
    overlay: Overlay,
}

impl Table {
    /// An empty cache for a store whose effective header is `header`.
    pub fn new(header: &Header, overlay: Overlay) -> Table {
        Table { cache: TableCache::new(u64::from(header.length)), overlay }
    }

    /// The `meta.zr` ranges holding the entries of `indices` that are neither cached nor in the
    /// overlay (see [`TableCache::missing`]).
    pub fn missing(&self, indices: impl IntoIterator<Item = u64>) -> Vec<std::ops::Range<u64>> {
        self.cache.missing(indices.into_iter().filter(|&i| self.overlay.entry(i).is_none()))
    }

    /// Stores table bytes read at `start` (see [`TableCache::insert`]).
    pub fn insert(&mut self, start: u64, bytes: &[u8]) -> Result<(), ReadError> {
        self.cache.insert(start, bytes)
    }

    /// The entry of a checked index: the overlay's, else the cached table's.
    pub fn entry(&self, index: u64) -> Option<RecordLoc> {
        self.overlay.entry(index).or_else(|| self.cache.entry(index))
    }

    /// Bytes of table held.
    pub fn cached_bytes(&self) -> usize {
        self.cache.cached_bytes()
    }

    /// Drops every cached page (the overlay stays).
    pub fn clear(&mut self) {
        self.cache.clear();
    }
}

/// Why a store does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The header is not a loaderx header or breaks the limits.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// `schema.msgpack` is not a schema map.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// `delete.journal` does not parse.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// `delete.journal` records a delete from another table length.
    #[error(
        "delete.journal is damaged: it records a delete from {old_length} to {new_length} records, \
         but the table holds {table_length}"
    )]
    JournalMismatch { old_length: u32, new_length: u32, table_length: u32 },
    /// A side file is larger than any loaderx writes.
    #[error("{} is {len} bytes, larger than any loaderx writes (at most {cap})", file.name())]
    TooLarge { file: StoreFile, len: u64, cap: u64 },
    /// The front end handed in the sizes of a different number of chunk files.
    #[error("{given} chunk sizes given, the header needs {wanted}")]
    ChunkCount { given: usize, wanted: usize },
}

impl Classify for OpenError {
    fn kind(&self) -> ErrorKind {
        match self {
            OpenError::Format(e) => e.kind(),
            OpenError::Schema(e) => e.kind(),
            OpenError::ChunkCount { .. } => ErrorKind::Argument,
            OpenError::Journal(_) | OpenError::JournalMismatch { .. } | OpenError::TooLarge { .. } => {
                ErrorKind::Corrupt
            }
        }
    }

    fn location(&self) -> Option<Location> {
        match self {
            OpenError::Format(e) => e.location(),
            OpenError::Schema(e) => e.location(),
            OpenError::Journal(e) => e.location(),
            OpenError::JournalMismatch { .. } => Some(Location::file(StoreFile::Journal)),
            OpenError::TooLarge { file, .. } => Some(Location::file(*file)),
            OpenError::ChunkCount { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::table_end;

    fn loc(k: u32) -> RecordLoc {
        RecordLoc { offset: k * 10, phys_length: 10, logic_length: 10, ..Default::default() }
    }

    /// A table of `length` entries `loc(i)`, as `meta.zr` bytes.
    fn meta(length: u32) -> Vec<u8> {
        let header = Header { length, tail_offset: length * 10, ..Header::EMPTY };
        let mut out = header.to_bytes().to_vec();
        (0..length).for_each(|i| out.extend_from_slice(&loc(i).to_bytes()));
        out
    }

    fn fetched(journal: Option<Vec<u8>>) -> Fetched {
        Fetched { journal, chunk_lens: vec![Some(1000)], ..Fetched::default() }
    }

    /// Reads every live entry of `view` through its table, from `meta` bytes.
    fn entries(view: &StoreView, meta: &[u8]) -> Vec<RecordLoc> {
        let mut table = view.table();
        let all = 0..u64::from(view.header.length);
        for r in table.missing(all.clone()) {
            table.insert(r.start, &meta[r.start as usize..r.end as usize]).unwrap();
        }
        all.map(|i| table.entry(i).unwrap()).collect()
    }

    #[test]
    fn file_names_come_from_one_place() {
        assert_eq!((chunk_name(0), chunk_name(4095)), ("0.zr".to_owned(), "4095.zr".to_owned()));
        assert_eq!((chunk_id("17.zr"), chunk_id("007.zr")), (Some(17), Some(7)));
        for bad in ["meta.zr", ".zr", "dict.zr", "4096.zr", "1.zr.tmp", "-1.zr", "99999.zr"] {
            assert_eq!(chunk_id(bad), None, "{bad}");
        }
        for name in [META_FILE, DICT_FILE, SCHEMA_FILE, JOURNAL_FILE, "3.zr"] {
            assert!(is_store_file(name), "{name}");
        }
        assert!(!is_store_file(MANIFEST_FILE) && !is_store_file("delete.journal.tmp"));
        for file in
            [StoreFile::Meta, StoreFile::Dict, StoreFile::Schema, StoreFile::Journal, StoreFile::Chunk(9)]
        {
            assert!(is_store_file(&file.name()), "{file:?}");
        }
    }

    #[test]
    fn header_is_checked_against_the_size_of_meta() {
        let bytes = meta(3);
        assert_eq!(read_header(&bytes, bytes.len() as u64).unwrap().length, 3);
        assert!(matches!(
            read_header(&bytes, table_end(3) - 1),
            Err(OpenError::Format(FormatError::MetaTooShort { .. }))
        ));
        assert!(matches!(
            read_header(&bytes[..10], 10),
            Err(OpenError::Format(FormatError::MetaTooShort { .. }))
        ));
        let mut other = bytes.clone();
        other[0] = b'X';
        let err = read_header(&other, other.len() as u64).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotAStore);
    }

    #[test]
    fn without_a_journal_the_table_stands() {
        let bytes = meta(5);
        let header = read_header(&bytes, bytes.len() as u64).unwrap();
        let view = open(header, fetched(None)).unwrap();
        assert_eq!((view.header, view.table_length), (header, 5));
        assert!(view.overlay.is_empty());
        assert_eq!(entries(&view, &bytes), (0..5).map(loc).collect::<Vec<_>>());
    }

    #[test]
    fn a_standing_journal_reads_as_the_finished_delete() {
        // Delete 1 and 3 from 6, largest first, each hole filled with the last: 5 fills 3, then
        // 4 fills 1; length 4.
        let journal = DeleteJournal::plan(6, &[1, 3], |i| Some(loc(i as u32))).unwrap().unwrap();
        let finished = vec![loc(0), loc(4), loc(2), loc(5)];
        // Nothing replayed yet, and every part-replayed table (length published last).
        let untouched = meta(6);
        let mut replayed = meta(6);
        for (index, entry) in &journal.entries {
            let at = crate::format::entry_offset(u64::from(*index)) as usize;
            replayed[at..at + 16].copy_from_slice(&entry.to_bytes());
        }
        replayed[12..16].copy_from_slice(&4u32.to_le_bytes());
        for bytes in [untouched, replayed] {
            let header = read_header(&bytes, bytes.len() as u64).unwrap();
            let view = open(header, fetched(Some(journal.to_bytes()))).unwrap();
            assert_eq!(view.header.length, 4);
            assert_eq!(view.header.tail_offset, header.tail_offset);
            assert_eq!(entries(&view, &bytes), finished);
        }
    }

    #[test]
    fn overlay_entries_are_never_fetched() {
        let journal = DeleteJournal::plan(600, &[0], |i| Some(loc(i as u32))).unwrap().unwrap();
        let overlay = Overlay::parse(&journal.to_bytes(), 600).unwrap();
        let table = Table::new(&overlay.header(Header { length: 600, ..Header::EMPTY }), overlay);
        assert!(table.missing([0]).is_empty());
        assert_eq!(table.entry(0), Some(loc(599)));
        assert_eq!(table.missing([1]), vec![0..4096]);
        assert_eq!(table.entry(1), None, "not cached");
    }

    #[test]
    fn a_journal_that_does_not_parse_or_apply_is_corrupt_naming_it() {
        let journal = DeleteJournal::plan(6, &[1], |i| Some(loc(i as u32))).unwrap().unwrap().to_bytes();
        let mut flipped = journal.clone();
        flipped[9] ^= 1;
        let bytes = meta(4);
        let header = read_header(&bytes, bytes.len() as u64).unwrap();
        for bad in [flipped, journal[..journal.len() - 1].to_vec(), Vec::new(), journal] {
            let err = open(header, fetched(Some(bad))).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
            assert_eq!(err.location(), Some(Location::file(StoreFile::Journal)), "{err}");
            assert!(err.to_string().contains("delete.journal is damaged"), "{err}");
        }
    }

    #[test]
    fn side_files_and_chunk_sizes_are_checked() {
        let bytes = meta(1);
        let header = read_header(&bytes, bytes.len() as u64).unwrap();
        let err = open(header, Fetched { chunk_lens: vec![], ..Fetched::default() }).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Argument);
        let err = check_side_size(DICT_FILE, MAX_SIDE_BYTES + 1).unwrap_err();
        assert_eq!(err.location(), Some(Location::file(StoreFile::Dict)));
        assert!(check_side_size(JOURNAL_FILE, MAX_SIDE_BYTES + 1).is_ok());
        let err = open(header, Fetched { schema: Some(b"\xc1".to_vec()), ..fetched(None) }).unwrap_err();
        assert_eq!(err.location(), Some(Location::file(StoreFile::Schema)));
        let view = open(header, Fetched { dict: Some(vec![1, 2, 3]), ..fetched(None) }).unwrap();
        assert_eq!(view.dict.map(|d| d.bytes().to_vec()), Some(vec![1, 2, 3]));
    }
}
