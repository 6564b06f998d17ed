//! The write path: create, append, delete, compact, train_dict and sync.
//!
//! Commit protocol (see `docs/design.md`): record bytes are written to the chunk files first,
//! then their table entries, then the tail, and the length is published last. A writer killed at
//! any point therefore leaves the store at its previous length, or at its new one, never at a
//! length whose entries or bytes are missing. `sync` makes everything appended so far durable,
//! chunk data before the table and the table before the header. A delete first makes its outcome
//! durable in `delete.journal` (see `loaderx_core::journal`), then changes the table; a journal
//! left by a crash is replayed by the next open or write.
//!
//! Invariants:
//! * Every argument is validated before the first byte is written; on error the store is as it
//!   was and stays usable. (One exception: an I/O error after a delete's journal is in place
//!   leaves the delete applied, and the next mutating call makes it durable.)
//! * Every call that changes a file goes through `crate::io`, the I/O and fault-injection seam.
//! * One writer per store: the first mutating call of a handle takes an exclusive lock on
//!   `meta.zr` (`File::try_lock`: `flock` on unix, `LockFileEx` on Windows, where it is mandatory
//!   for reads through other descriptors but not for maps) and keeps it for the life of the
//!   handle. Readers take no lock and read `meta.zr` only through maps.
//! * The first mutating call also restores the full sparse sizes of `meta.zr` and the chunk files
//!   (stores copied without sparse support, or cut to their used length, read fine but must be
//!   full-size before anything is written past their ends).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

use loaderx_core::codec::{Dictionary, Encoded, Encoder};
use loaderx_core::format::{
    entry_offset, Codec, Header, RecordLoc, CHUNK_SIZE, HEADER_SIZE, MAX_RECORDS, MAX_RECORD_LEN,
    META_FULL_SIZE,
};
use loaderx_core::journal::{DeleteJournal, JournalPlanError, JOURNAL_FILE};
use loaderx_core::plan::{place_append, plan_compact, PlanError};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::io;
use crate::map::MetaMap;
use crate::store::{chunk_path, read_lock, write_lock, Chunk, Store};

/// The writer half of a handle: the locked `meta.zr` descriptor and writable chunk files.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Holds the advisory lock for as long as the handle lives.
    _meta_file: File,
    /// Indexed by chunk id.
    chunk_files: Vec<Option<File>>,
    /// Chunks written since the last `sync`.
    dirty: BTreeSet<u16>,
    /// Table entries below this index were durable at the last `sync`.
    synced_length: u64,
    /// The directory gained or lost files since the last `sync`.
    dir_dirty: bool,
    /// A delete was applied but its journal could not yet be made durable and removed (an I/O
    /// error); the next mutating call finishes that first.
    journal_pending: bool,
}

/// Creates an empty store in `dir`: `meta.zr` (written whole, then renamed into place) and `0.zr`.
pub(crate) fn create_store(dir: &Path) -> Result<()> {
    let has_store_files = fs::read_dir(dir)
        .map_err(Error::io("list", dir))?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_str().is_some_and(|n| n == "dict.zr" || is_chunk_name(n)));
    if has_store_files {
        return Err(Error::corrupt(
            dir.join("meta.zr"),
            "missing, but the directory holds chunk files; refusing to start a new store over them",
        ));
    }
    let tmp = dir.join("meta.zr.tmp");
    if let Err(e) = io::write_new(&tmp, &Header::EMPTY.to_bytes(), META_FULL_SIZE) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // meta.zr appears whole (header written) or not at all. A crash before 0.zr exists is
    // repaired by the first write, which creates a missing tail chunk of an empty store.
    io::rename(&tmp, &dir.join("meta.zr"))?;
    let chunk = chunk_path(dir, 0);
    let file = File::create(&chunk).map_err(Error::io("create", &chunk))?;
    io::set_len(&file, CHUNK_SIZE, &chunk)?;
    io::sync_dir(dir)
}

fn is_chunk_name(name: &str) -> bool {
    name.strip_suffix(".zr").is_some_and(|stem| !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
}

/// `meta.zr` opened for writing: locked, validated, grown to full size and mapped.
fn open_meta_for_writing(dir: &Path) -> Result<(File, MetaMap, Header)> {
    let meta_path = dir.join("meta.zr");
    let meta_file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&meta_path)
        .map_err(Error::io("open for writing", &meta_path))?;
    match meta_file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &meta_path)(e)),
    }
    let len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
    let mut head = [0u8; HEADER_SIZE as usize];
    io::read_exact_at(&meta_file, &mut head, 0, &meta_path)?;
    let header = Header::read(&head).map_err(|e| Error::format(&meta_path, e))?;
    header.validate(len).map_err(|e| Error::format(&meta_path, e))?;
    if len < META_FULL_SIZE {
        io::set_len(&meta_file, META_FULL_SIZE, &meta_path)?;
    }
    let map = MetaMap::new(&meta_file, META_FULL_SIZE, true).map_err(Error::io("mmap", &meta_path))?;
    Ok((meta_file, map, header))
}

/// Called by `open` when `delete.journal` exists: unless a live writer holds the lock (its
/// delete is still running), finishes the delete a crash interrupted, then lets go of the lock.
pub(crate) fn recover_interrupted_delete(dir: &Path) -> Result<()> {
    let (_file, meta, _) = match open_meta_for_writing(dir) {
        Ok(opened) => opened,
        Err(Error::Locked(_)) => return Ok(()),
        Err(Error::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            return Err(Error::corrupt(
                dir.join(JOURNAL_FILE),
                "a delete was interrupted; finishing it needs write access to the store",
            ))
        }
        Err(e) => return Err(e),
    };
    finish_journal(dir, &meta)
}

/// Replays `delete.journal`, if there is one, makes the table durable and removes the journal.
fn finish_journal(dir: &Path, meta: &MetaMap) -> Result<()> {
    let path = dir.join(JOURNAL_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read", &path)(e)),
    };
    let journal = DeleteJournal::parse(&bytes).map_err(|e| Error::corrupt(&path, e))?;
    apply_journal(dir, meta, &journal)?;
    settle_journal(dir, meta)
}

/// Writes the journal's entries and publishes its length (memory only).
fn apply_journal(dir: &Path, meta: &MetaMap, journal: &DeleteJournal) -> Result<()> {
    let length = meta.length();
    if !journal.applies_to(length) {
        return Err(Error::corrupt(
            dir.join(JOURNAL_FILE),
            format!(
                "it records a delete from {} to {} records, but the table holds {length}",
                journal.old_length, journal.new_length
            ),
        ));
    }
    for (index, loc) in &journal.entries {
        if !meta.set_entry(u64::from(*index), loc) {
            return Err(Error::corrupt(dir.join("meta.zr"), "table is shorter than its capacity"));
        }
    }
    meta.publish_length(journal.new_length);
    Ok(())
}

/// Makes an applied journal's table durable, then removes the journal.
fn settle_journal(dir: &Path, meta: &MetaMap) -> Result<()> {
    io::sync_with(&dir.join("meta.zr"), || meta.flush_range(0, META_FULL_SIZE))?;
    io::remove(&dir.join(JOURNAL_FILE))?;
    io::sync_dir(dir)
}

/// Byte ranges of the records packed in a source buffer of `src_len` bytes: record `k` runs from
/// `offsets[k]` to `offsets[k + 1]`, the last one to the end.
pub fn record_ranges(src_len: usize, offsets: &[u64]) -> Result<Vec<Range<usize>>> {
    let src_len = src_len as u64;
    if let Some((k, &off)) = offsets.iter().enumerate().find(|(_, &o)| o > src_len) {
        return Err(Error::BadArgument(format!(
            "buffer too small: record {k} starts at byte {off} of a {src_len}-byte source"
        )));
    }
    let ends = offsets.iter().skip(1).copied().chain(std::iter::once(src_len));
    offsets
        .iter()
        .zip(ends)
        .enumerate()
        .map(|(position, (&start, end))| {
            let len = end.wrapping_sub(start);
            if end <= start || len > MAX_RECORD_LEN {
                let len = if end < start { u64::MAX } else { len };
                return Err(Error::RecordSize { position, len });
            }
            Ok(start as usize..end as usize)
        })
        .collect()
}

impl Store {
    /// The writer, upgrading this handle on first use: takes the advisory lock and restores
    /// full sparse file sizes.
    fn writer(&self) -> Result<MutexGuard<'_, Option<Writer>>> {
        let mut guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(self.upgrade()?);
        }
        if let Some(writer) = guard.as_mut() {
            self.settle_pending(writer)?;
        }
        Ok(guard)
    }

    /// Finishes a delete whose journal an I/O error left in place.
    fn settle_pending(&self, writer: &mut Writer) -> Result<()> {
        if writer.journal_pending {
            settle_journal(&self.dir, &read_lock(&self.meta))?;
            writer.journal_pending = false;
        }
        Ok(())
    }

    fn upgrade(&self) -> Result<Writer> {
        let (meta_file, map, _) = open_meta_for_writing(&self.dir)?;
        finish_journal(&self.dir, &map)?;
        let header = map.header();
        *write_lock(&self.meta) = map;

        let mut chunk_files = Vec::new();
        let mut chunks = write_lock(&self.chunks);
        for id in 0..=header.tail_chunk {
            let path = chunk_path(&self.dir, id);
            let file = match fs::OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(Error::io("open for writing", &path)(e)),
            };
            let file = match file {
                Some(f) => f,
                None if id == header.tail_chunk && header.tail_offset == 0 => {
                    File::create_new(&path).map_err(Error::io("create", &path))?
                }
                None if id == header.tail_chunk => {
                    return Err(Error::corrupt(
                        path,
                        "missing, but the header says records were appended to it",
                    ))
                }
                None => {
                    chunk_files.push(None);
                    continue;
                }
            };
            let len = file.metadata().map_err(Error::io("stat", &path))?.len();
            if len < CHUNK_SIZE {
                io::set_len(&file, CHUNK_SIZE, &path)?;
            }
            if len < CHUNK_SIZE || chunks.get(usize::from(id)).is_none_or(Option::is_none) {
                let chunk = Chunk::open_read(&path)?.map(Arc::new);
                set_slot(&mut chunks, id, chunk);
            }
            chunk_files.push(Some(file));
        }
        Ok(Writer {
            _meta_file: meta_file,
            chunk_files,
            dirty: BTreeSet::new(),
            synced_length: u64::from(header.length),
            dir_dirty: false,
            journal_pending: false,
        })
    }

    /// Creates chunk file `id` (sparse, full size) for writing and registers it for readers.
    fn add_chunk(&self, writer: &mut Writer, id: u16) -> Result<()> {
        if writer.chunk_files.get(usize::from(id)).is_some_and(Option::is_some) {
            return Ok(());
        }
        let path = chunk_path(&self.dir, id);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(Error::io("create", &path))?;
        io::set_len(&file, CHUNK_SIZE, &path)?;
        let chunk = Chunk::open_read(&path)?.map(Arc::new);
        set_slot(&mut write_lock(&self.chunks), id, chunk);
        set_slot(&mut writer.chunk_files, id, Some(file));
        writer.dir_dirty = true;
        Ok(())
    }

    /// Appends the records packed in `src` (record `k` starts at `offsets[k]` and runs to the
    /// next offset or the end) with `codec`, and returns the index of the first one.
    ///
    /// All-or-nothing: on error nothing is visible and the length is unchanged.
    pub fn append(&self, src: &[u8], offsets: &[u64], codec: Codec) -> Result<u64> {
        let ranges = record_ranges(src.len(), offsets)?;
        let _gate = read_lock(&self.gate);
        let mut guard = self.writer()?;
        let writer = guard.as_mut().ok_or_else(|| Error::BadArgument("writer unavailable".into()))?;
        let header = read_lock(&self.meta).header();
        let length = u64::from(header.length);
        if ranges.is_empty() {
            return Ok(length);
        }
        if length + ranges.len() as u64 > MAX_RECORDS {
            return Err(Error::Full(format!("{length} records + {} would exceed 2^24", ranges.len())));
        }
        let dict = read_lock(&self.dict).clone();
        if codec == Codec::ZstdDict && dict.is_none() {
            return Err(Error::Dictionary("codec zstd_dict needs a dictionary: train one first".into()));
        }
        let encoded: Vec<Encoded> = ranges
            .par_iter()
            .map_init(|| Encoder::new(dict.as_deref()), |enc, r| enc.encode(&src[r.clone()], codec))
            .collect::<Result<_, _>>()?;
        let stored: Vec<(Codec, &[u8])> = encoded
            .iter()
            .zip(&ranges)
            .map(|(e, r)| match e {
                Encoded::Raw => (Codec::Raw, &src[r.clone()]),
                Encoded::Compressed(c, frame) => (*c, frame.as_slice()),
            })
            .collect();
        let (places, tail) = place_append(header.tail(), length, stored.iter().map(|(_, b)| b.len() as u32))
            .map_err(|e| Error::Full(e.to_string()))?;
        for id in header.tail_chunk..=tail.chunk {
            self.add_chunk(writer, id)?;
        }
        let files = &writer.chunk_files;
        places.par_iter().zip(&stored).try_for_each(|(&(id, offset), (_, bytes))| {
            let file = files.get(usize::from(id)).and_then(Option::as_ref);
            let file = file.ok_or_else(|| Error::corrupt(chunk_path(&self.dir, id), "chunk file missing"))?;
            io::write_all_at(file, bytes, u64::from(offset), &chunk_path(&self.dir, id))
        })?;
        let meta = read_lock(&self.meta);
        for (k, (&(chunk_id, offset), (codec, bytes))) in places.iter().zip(&stored).enumerate() {
            let range = &ranges[k];
            let loc = RecordLoc {
                offset,
                phys_length: bytes.len() as u32,
                logic_length: range.len() as u32,
                chunk_id,
                compress: *codec as u8,
                reserved: 0,
            };
            if !meta.set_entry(length + k as u64, &loc) {
                return Err(Error::corrupt(self.dir.join("meta.zr"), "table is shorter than its capacity"));
            }
        }
        meta.set_tail(tail);
        meta.publish_length((length + places.len() as u64) as u32);
        writer.dirty.extend(places.iter().map(|&(id, _)| id));
        Ok(length)
    }

    /// Removes records, keeping the live index space dense: duplicates are dropped and the rest
    /// applied in descending order, each hole filled with the current last record.
    /// Only the table changes; `compact` reclaims the bytes. Takes exclusive access.
    ///
    /// Crash-atomic: the outcome is written to `delete.journal` (synced, renamed into place)
    /// before the table changes, and a crash after that point is finished by the next open.
    /// If an I/O error strikes after the journal is in place, the delete has still happened
    /// (the error says it could not be made durable) and the next mutating call retries that.
    pub fn delete(&self, indices: &[u64]) -> Result<()> {
        let _gate = write_lock(&self.gate);
        let length = self.len();
        loaderx_core::plan::delete_order(length, indices)?;
        if indices.is_empty() {
            return Ok(());
        }
        let mut guard = self.writer()?;
        let writer = guard.as_mut().ok_or_else(|| Error::BadArgument("writer unavailable".into()))?;
        let meta = read_lock(&self.meta);
        let journal = DeleteJournal::plan(length, indices, |i| meta.entry(i)).map_err(|e| match e {
            JournalPlanError::Plan(p) => Error::from(p),
            unreadable => Error::corrupt(self.dir.join("meta.zr"), unreadable),
        })?;
        let Some(journal) = journal else { return Ok(()) };
        let path = self.dir.join(JOURNAL_FILE);
        let tmp = self.dir.join("delete.journal.tmp");
        let committed = io::write_new(&tmp, &journal.to_bytes(), 0)
            .and_then(|()| io::rename(&tmp, &path))
            .and_then(|()| io::sync_dir(&self.dir));
        if let Err(e) = committed {
            let _ = fs::remove_file(&tmp);
            if io::remove(&path).is_ok() {
                return Err(e);
            }
            // The journal could not be taken back, so the delete stands: apply it now, as
            // recovery would.
        }
        apply_journal(&self.dir, &meta, &journal)?;
        writer.journal_pending = true;
        drop(meta);
        self.settle_pending(writer)
    }

    /// Rewrites the live records densely, in place, in physical order, and deletes chunk files
    /// past the new frontier. Safe to interrupt: re-running finishes the job. Takes exclusive
    /// access.
    pub fn compact(&self) -> Result<()> {
        let _gate = write_lock(&self.gate);
        let mut guard = self.writer()?;
        let writer = guard.as_mut().ok_or_else(|| Error::BadArgument("writer unavailable".into()))?;
        let indices: Vec<u64> = (0..self.len()).collect();
        let table: Vec<RecordLoc> = self.locate(&indices)?.into_iter().map(|(loc, _)| loc).collect();
        let plan = plan_compact(&table).map_err(|e| match e {
            PlanError::Overlap { .. } => Error::corrupt(self.dir.join("meta.zr"), e),
            other => other.into(),
        })?;
        let meta_path = self.dir.join("meta.zr");
        for m in &plan.moves {
            let bytes = self.read_stored(&m.from)?;
            if m.overlaps {
                // Stage the record past the frontier first, so it exists whole somewhere at
                // every instant, then move it down.
                let mut tail = read_lock(&self.meta).header().tail();
                let (chunk_id, offset) = tail
                    .place(bytes.len() as u32)
                    .ok_or_else(|| Error::Full("no room to stage a record for compaction".into()))?;
                self.add_chunk(writer, chunk_id)?;
                let staged = RecordLoc { chunk_id, offset, ..m.from };
                self.write_at(writer, &staged, &bytes)?;
                let meta = read_lock(&self.meta);
                meta.set_tail(tail);
                meta.set_entry(m.index, &staged);
            }
            self.write_at(writer, &m.to, &bytes)?;
            if !read_lock(&self.meta).set_entry(m.index, &m.to) {
                return Err(Error::corrupt(&meta_path, "table cut short"));
            }
        }
        read_lock(&self.meta).set_tail(plan.tail);
        // Delete chunk files past the new frontier. They hold no live record now, so their maps
        // and descriptors are dropped first: Windows does not remove a file its own process
        // still maps. A removal that fails leaves a file no reader opens (it lies past the
        // tail), which a later append reuses or a re-run removes.
        let mut chunks = write_lock(&self.chunks);
        let keep = usize::from(plan.tail.chunk) + 1;
        let end = chunks.len().max(writer.chunk_files.len());
        chunks.truncate(keep);
        writer.chunk_files.truncate(keep);
        writer.dirty.retain(|&id| usize::from(id) < keep);
        for id in (keep..end).rev() {
            if io::remove(&chunk_path(&self.dir, id as u16))? {
                writer.dir_dirty = true;
            }
        }
        Ok(())
    }

    fn read_stored(&self, loc: &RecordLoc) -> Result<Vec<u8>> {
        let chunks = read_lock(&self.chunks);
        let chunk = chunks.get(usize::from(loc.chunk_id)).and_then(Option::as_ref);
        chunk
            .and_then(|c| c.map.bytes(u64::from(loc.offset), loc.stored_len()))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                Error::corrupt(chunk_path(&self.dir, loc.chunk_id), "record lies past the end of the file")
            })
    }

    fn write_at(&self, writer: &mut Writer, loc: &RecordLoc, bytes: &[u8]) -> Result<()> {
        let path = chunk_path(&self.dir, loc.chunk_id);
        let file = writer.chunk_files.get(usize::from(loc.chunk_id)).and_then(Option::as_ref);
        let file = file.ok_or_else(|| Error::corrupt(&path, "chunk file missing"))?;
        io::write_all_at(file, bytes, u64::from(loc.offset), &path)?;
        writer.dirty.insert(loc.chunk_id);
        Ok(())
    }

    /// Trains a dictionary of at most `capacity` bytes on the samples packed in `samples`
    /// (lengths `sizes`), stores it as `dict.zr` and installs it. Returns its size.
    ///
    /// Refused when live records already use the current dictionary: replacing it would make
    /// them unreadable.
    pub fn train_dict(&self, samples: &[u8], sizes: &[usize], capacity: usize) -> Result<usize> {
        let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
        if total != Some(samples.len()) {
            return Err(Error::BadArgument(format!(
                "sample sizes add up to {total:?} bytes, but {} sample bytes were given",
                samples.len()
            )));
        }
        let _gate = read_lock(&self.gate);
        let mut guard = self.writer()?;
        let writer = guard.as_mut().ok_or_else(|| Error::BadArgument("writer unavailable".into()))?;
        let indices: Vec<u64> = (0..self.len()).collect();
        let users = {
            let meta = read_lock(&self.meta);
            indices
                .iter()
                .filter(|&&i| meta.entry(i).is_some_and(|e| e.compress == Codec::ZstdDict as u8))
                .count()
        };
        if users > 0 {
            return Err(Error::Dictionary(format!(
                "the store holds {users} zstd_dict records; replacing the dictionary would make them unreadable"
            )));
        }
        let bytes = loaderx_core::codec::train_dictionary(samples, sizes, capacity)?;
        let path = self.dir.join("dict.zr");
        let tmp = self.dir.join("dict.zr.tmp");
        if let Err(e) = io::write_new(&tmp, &bytes, 0).and_then(|()| io::rename(&tmp, &path)) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        writer.dir_dirty = true;
        let len = bytes.len();
        *write_lock(&self.dict) = Some(Arc::new(Dictionary::new(bytes)));
        Ok(len)
    }

    /// Makes everything appended so far durable: chunk data first, then the table, then the
    /// header.
    pub fn sync(&self) -> Result<()> {
        let mut guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(writer) = guard.as_mut() else { return Ok(()) };
        self.settle_pending(writer)?;
        for &id in &writer.dirty {
            if let Some(Some(file)) = writer.chunk_files.get(usize::from(id)) {
                io::sync_data(file, &chunk_path(&self.dir, id))?;
            }
        }
        writer.dirty.clear();
        if writer.dir_dirty {
            io::sync_dir(&self.dir)?;
            writer.dir_dirty = false;
        }
        let meta = read_lock(&self.meta);
        let meta_path = self.dir.join("meta.zr");
        let length = u64::from(meta.length());
        let page = 4096u64;
        let from = entry_offset(writer.synced_length.min(length)).max(page);
        let to = entry_offset(length);
        if to > from {
            io::sync_with(&meta_path, || meta.flush_range(from, to - from))?;
        }
        io::sync_with(&meta_path, || meta.flush_range(0, page))?;
        writer.synced_length = length;
        Ok(())
    }
}

fn set_slot<T>(slots: &mut Vec<Option<T>>, id: u16, value: Option<T>) {
    let id = usize::from(id);
    if slots.len() <= id {
        slots.resize_with(id + 1, || None);
    }
    slots[id] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ranges_follow_the_reference_rules() {
        assert_eq!(record_ranges(10, &[0, 4]).unwrap(), vec![0..4, 4..10]);
        assert_eq!(
            record_ranges(10, &[2, 4]).unwrap(),
            vec![2..4, 4..10],
            "bytes before offsets[0] are ignored"
        );
        assert!(record_ranges(10, &[]).unwrap().is_empty());
        assert!(matches!(record_ranges(10, &[0, 11]), Err(Error::BadArgument(_))));
        assert!(matches!(record_ranges(10, &[0, 0]), Err(Error::RecordSize { position: 0, len: 0 })));
        assert!(matches!(record_ranges(10, &[5, 2]), Err(Error::RecordSize { position: 0, .. })));
        assert!(matches!(record_ranges(10, &[10]), Err(Error::RecordSize { position: 0, len: 0 })));
        let big = (MAX_RECORD_LEN + 1) as usize;
        assert!(matches!(record_ranges(big, &[0]), Err(Error::RecordSize { .. })));
        assert!(record_ranges(MAX_RECORD_LEN as usize, &[0]).is_ok());
    }

    #[test]
    fn chunk_names() {
        assert!(is_chunk_name("0.zr") && is_chunk_name("17.zr"));
        assert!(!is_chunk_name("meta.zr") && !is_chunk_name(".zr") && !is_chunk_name("dict.zr"));
    }
}
