//! The native half of the delete journal (`loaderx_core::journal` holds the format and the
//! plan): committing a journal, applying it to the table, settling it, and finishing a delete a
//! crash interrupted.
//!
//! A delete's life: [`commit`] makes the journal durable (`delete.journal.tmp` written and
//! synced, renamed into place, directory synced), [`apply`] writes its entries into the mapped
//! table and publishes the new length, and [`settle`] makes the table durable and then removes
//! the journal. Any crash leaves either no journal (the delete did not happen) or a durable one,
//! which [`finish`] replays: replay writes only final values, so it is idempotent.
//!
//! Invariants:
//! * The table is changed only once the journal is durable, and the journal is removed only once
//!   the table is durable.
//! * The caller holds the store's writer lock (the `meta.zr` file lock) for every function here,
//!   and, within a handle, exclusive access (`gate`) while applying, so no reader sees the
//!   entries change.
//! * A journal that does not apply to the table's length, or does not parse, is corrupt data
//!   naming `delete.journal` (core's journal rule, `loaderx_core::open`); nothing is written
//!   then.
//! * A handle that cannot write (locked by a live writer, or read-only) never replays on disk:
//!   it reads through [`overlay`], the finished deletion in memory.

use std::io::ErrorKind;
use std::path::Path;

use loaderx_core::format::{entry_offset, META_FULL_SIZE};
use loaderx_core::journal::DeleteJournal;
use loaderx_core::open::{self, Overlay, JOURNAL_FILE};

use crate::error::{Error, Result};
use crate::files::{self, journal_path, meta_path};
use crate::io;
use crate::map::MetaMap;

/// Called by `open` when `delete.journal` exists: finishes the delete a crash interrupted and
/// lets go of the lock, and returns `true`; or, when it cannot write (a live writer holds the
/// lock, so its delete is still running, or the files or the file system are read-only),
/// returns `false` and leaves the journal for [`overlay`] to apply in memory.
pub(crate) fn recover_interrupted_delete(dir: &Path) -> Result<bool> {
    let (_file, meta, _) = match files::open_meta_for_writing(dir) {
        Ok(opened) => opened,
        Err(Error::Locked(_)) => return Ok(false),
        Err(Error::Io { source, .. })
            if matches!(source.kind(), ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) =>
        {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    finish(dir, &meta)?;
    Ok(true)
}

/// The journal rule in memory (`loaderx_core::open::Overlay`) for a table of `table_length`
/// entries, for a handle that could not finish the delete on disk. No journal (a live writer
/// finished and removed it meanwhile) is an empty overlay, and so is a journal that no longer
/// applies once it is gone; a journal still there that does not parse or apply is corrupt data
/// naming `delete.journal`.
pub(crate) fn overlay(dir: &Path, table_length: u32) -> Result<Overlay> {
    let path = journal_path(dir);
    let Some(bytes) = files::read_side(dir, JOURNAL_FILE)? else { return Ok(Overlay::default()) };
    match Overlay::parse(&bytes, table_length) {
        Ok(overlay) => Ok(overlay),
        // A live writer finished this delete and changed the table since it was read.
        Err(_) if !path.exists() => Ok(Overlay::default()),
        Err(e) => Err(Error::classified(dir, e)),
    }
}

/// Replays `delete.journal`, if there is one, makes the table durable and removes the journal.
pub(crate) fn finish(dir: &Path, meta: &MetaMap) -> Result<()> {
    let Some(bytes) = files::read_side(dir, JOURNAL_FILE)? else { return Ok(()) };
    let journal = DeleteJournal::parse(&bytes).map_err(|e| Error::classified(dir, e))?;
    apply(dir, meta, &journal)?;
    settle(dir, meta)
}

/// Makes `journal` durable as `delete.journal`. `Ok` means the journal is in place and the
/// caller applies it: it is durable, or an I/O error struck and it could not be taken back, so
/// the delete stands, as recovery would find it. `Err` means no journal is in place and the
/// delete has not happened.
pub(crate) fn commit(dir: &Path, journal: &DeleteJournal) -> Result<()> {
    let path = journal_path(dir);
    let committed = files::replace(&path, &journal.to_bytes(), 0).and_then(|()| io::sync_dir(dir));
    match committed {
        Ok(()) => Ok(()),
        // Taken back: the delete did not happen.
        Err(e) if io::remove(&path).is_ok() => Err(e),
        // The journal could not be taken back, so the delete stands.
        Err(_) => Ok(()),
    }
}

/// Writes the journal's entries and publishes its length (in memory; [`settle`] makes it
/// durable).
pub(crate) fn apply(dir: &Path, meta: &MetaMap, journal: &DeleteJournal) -> Result<()> {
    // The same journal rule as every reader's (`loaderx_core::open`).
    open::check_applies(journal, meta.length()).map_err(|e| Error::classified(dir, e))?;
    for (index, loc) in &journal.entries {
        let index = u64::from(*index);
        // Exclusive access (see the module docs): no reader reads these entries now.
        if !meta.set_entry(index, loc) {
            return Err(Error::corrupt_at(
                meta_path(dir),
                entry_offset(index),
                "table is shorter than its capacity",
            ));
        }
    }
    meta.publish_length(journal.new_length);
    Ok(())
}

/// Makes an applied journal's table durable, then removes the journal.
pub(crate) fn settle(dir: &Path, meta: &MetaMap) -> Result<()> {
    io::sync_with(&meta_path(dir), || meta.flush_range(0, META_FULL_SIZE))?;
    io::remove(&journal_path(dir))?;
    io::sync_dir(dir)
}
