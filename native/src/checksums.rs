//! `checksums.lx` on local disk: the read-only map every local reader uses, and the writer's
//! half, which keeps the file in step with each commit (`loaderx_core::checksum` holds the
//! format and the rules).
//!
//! The writer's protocol, per commit (append, delete, compact, backfill):
//! 1. the slots the commit needs are written (positional writes, visible to maps at once);
//! 2. the header is written with the table's state before and after the commit;
//! 3. only then does the table change (entries, tail, length).
//!
//! `sync` makes the file durable after the chunk files and before `meta.zr`.
//!
//! Invariants:
//! * A slot that covers a live entry was written, and visible, before that entry was; so a
//!   killed writer leaves records covered correctly or not covered, never covered wrongly.
//! * The header is sealed only while the writer knows the running [`TableSum`]: it created the
//!   file, or the table is still in a state the header names ([`SidecarHeader::resume`]), or it
//!   reread the whole table and found such a state (compaction, backfill). Otherwise every
//!   header it writes says "not sealed", so a mismatch stays a non-error until a backfill
//!   rechecks every record.
//! * The file is created at its full sparse size, so one read map covers every slot.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use loaderx_core::checksum::{
    SidecarError, SidecarHeader, Slot, TableState, TableSum, SIDECAR_FULL_SIZE, SIDECAR_HEADER, SLOT_SIZE,
};
use loaderx_core::format::{Header, RecordLoc, MAX_RECORDS};
use loaderx_core::names::CHECKSUM_FILE;

use crate::error::{Error, Result};
use crate::files::Chunk;
use crate::io;
use crate::map::MetaMap;

/// `checksums.lx` in `dir`.
pub(crate) fn checksum_path(dir: &Path) -> PathBuf {
    dir.join(CHECKSUM_FILE)
}

/// A read-only map of `checksums.lx`, as long as the file was when mapped.
#[derive(Debug)]
pub(crate) struct SidecarMap {
    map: Chunk,
}

impl SidecarMap {
    /// Maps the sidecar of the store in `dir`; `None` when it has none.
    pub(crate) fn open(dir: &Path) -> Result<Option<SidecarMap>> {
        Ok(Chunk::open_read(&checksum_path(dir))?.map(|map| SidecarMap { map }))
    }

    /// The header, parsed now (a writer may have changed it since the last call).
    pub(crate) fn header(&self) -> std::result::Result<SidecarHeader, SidecarError> {
        match self.map.bytes(0, SIDECAR_HEADER) {
            Some(bytes) => SidecarHeader::parse(bytes),
            None => Err(SidecarError::Short { len: self.map.len() }),
        }
    }

    /// True when the map covers a full-size sidecar (every slot).
    pub(crate) fn is_full(&self) -> bool {
        self.map.len() >= SIDECAR_FULL_SIZE
    }

    /// Slot `index`; `None` past the mapped end.
    pub(crate) fn slot(&self, index: u64) -> Option<Slot> {
        Slot::read(self.map.bytes(loaderx_core::checksum::slot_offset(index), SLOT_SIZE)?)
    }
}

/// The entry just past the live table of `meta` (`None` when the table is full or the file ends).
pub(crate) fn stale_entry(meta: &MetaMap) -> Option<RecordLoc> {
    let length = u64::from(meta.length());
    (length < MAX_RECORDS).then(|| meta.entry(length)).flatten()
}

/// The writer's handle on the sidecar. See the module docs.
#[derive(Debug)]
pub(crate) struct SidecarWriter {
    file: File,
    path: PathBuf,
    /// The live table's running sum, while the writer can vouch for every covering slot.
    sum: Option<TableSum>,
    dirty: bool,
}

impl SidecarWriter {
    /// Opens the sidecar of the store in `dir` for writing, creating it (sealed, every existing
    /// record uncovered) when there is none. `meta` is the writable table, journal finished.
    /// Returns the writer and whether it created the file.
    pub(crate) fn open(dir: &Path, meta: &MetaMap) -> Result<(SidecarWriter, bool)> {
        let path = checksum_path(dir);
        let existing = match fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("open for writing", &path)(e)),
        };
        if let Some(file) = existing {
            let len = file.metadata().map_err(Error::io("stat", &path))?.len();
            let mut head = vec![0u8; SIDECAR_HEADER.min(len) as usize];
            io::read_exact_at(&file, &mut head, 0, &path)?;
            let sum = match SidecarHeader::parse(&head) {
                Ok(h) => h.resume(&meta.header(), stale_entry(meta)),
                Err(e @ (SidecarError::Version(_) | SidecarError::Hash(_))) => {
                    let why =
                        format!("{e}: written by a newer loaderx, so this one does not change the store");
                    return Err(Error::corrupt_at(path, 0, why));
                }
                // A damaged header: the slots are kept, unsealed, until a backfill rechecks them.
                Err(_) => None,
            };
            if len < SIDECAR_FULL_SIZE {
                io::set_len(&file, SIDECAR_FULL_SIZE, &path)?;
            }
            return Ok((SidecarWriter { file, path, sum, dirty: false }, false));
        }
        let file = File::create_new(&path).map_err(Error::io("create", &path))?;
        io::set_len(&file, SIDECAR_FULL_SIZE, &path)?;
        let length = u64::from(meta.length());
        let entries: Vec<RecordLoc> = (0..length).map_while(|i| meta.entry(i)).collect();
        let mut writer = SidecarWriter { file, path, sum: Some(TableSum::of(&entries)), dirty: true };
        let now = writer.state(meta.header(), stale_entry(meta));
        writer.write_header(now, now, [0; 16])?;
        Ok((writer, true))
    }

    /// The running sum, if the writer vouches for the slots.
    pub(crate) fn sum(&self) -> Option<TableSum> {
        self.sum
    }

    /// Sets the running sum: `None` when the writer can no longer vouch for the slots.
    pub(crate) fn set_sum(&mut self, sum: Option<TableSum>) {
        self.sum = sum;
    }

    /// A state with the running sum (zero when there is none: the header is unsealed then).
    pub(crate) fn state(&self, header: Header, stale: Option<RecordLoc>) -> TableState {
        TableState::new(&header, stale, self.sum.unwrap_or_default())
    }

    /// Writes slots `first..` back to back.
    pub(crate) fn write_slots(&mut self, first: u64, slots: &[Slot]) -> Result<()> {
        let mut bytes = Vec::with_capacity(slots.len() * SLOT_SIZE as usize);
        slots.iter().for_each(|s| bytes.extend_from_slice(&s.to_bytes()));
        io::write_all_at(&self.file, &bytes, loaderx_core::checksum::slot_offset(first), &self.path)?;
        self.dirty = true;
        Ok(())
    }

    /// Writes the header: the table `before` the commit and `after` it, and the entry the commit
    /// writes first at the old length (`pending`); sealed while the writer knows the sum.
    pub(crate) fn write_header(
        &mut self,
        before: TableState,
        after: TableState,
        pending: [u8; 16],
    ) -> Result<()> {
        let header = SidecarHeader { sealed: self.sum.is_some(), before, after, pending };
        io::write_all_at(&self.file, &header.to_bytes(), 0, &self.path)?;
        self.dirty = true;
        Ok(())
    }

    /// Makes the slots and header written so far durable.
    pub(crate) fn sync(&mut self) -> Result<()> {
        if self.dirty {
            io::sync_data(&self.file, &self.path)?;
            self.dirty = false;
        }
        Ok(())
    }
}
