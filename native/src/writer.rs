//! The writer half of a handle: append, delete, compact, train_dict and sync.
//!
//! A [`Writer`] exists only once a handle has made its first mutating call: creating one takes
//! the store's writer lock and prepares the files, so every method here may write. The store
//! (`store.rs`) checks arguments, takes its `gate` and its `writer` mutex, and hands the
//! [`Shared`] state to these methods.
//!
//! Commit protocol (see `docs/design.md`): record bytes are written to the chunk files first,
//! then their table entries, then the tail, and the length is published last. A writer killed at
//! any point therefore leaves the store at its previous length, or at its new one, never at a
//! length whose entries or bytes are missing. `sync` makes everything appended so far durable,
//! chunk data before the table and the table before the header. A delete first makes its outcome
//! durable in `delete.journal` (see `journal.rs`), then changes the table; a journal left by a
//! crash is replayed by the next open or write.
//!
//! Invariants:
//! * Every argument is validated before the first byte is written; on error the store is as it
//!   was and stays usable. (One exception: an I/O error after a delete's journal is in place
//!   leaves the delete applied, and the next mutating call makes it durable.)
//! * Every call that changes a file goes through `crate::io`, the I/O and fault-injection seam.
//! * One writer per store: creating a [`Writer`] takes an exclusive lock on `meta.zr`
//!   (`File::try_lock`: `flock` on unix, `LockFileEx` on Windows, where it is mandatory for
//!   reads through other descriptors but not for maps), and the writer keeps it for the life of
//!   the handle. Readers take no lock and read `meta.zr` only through maps.
//! * Creating a writer also restores the full sparse sizes of `meta.zr` and the chunk files
//!   (stores copied without sparse support, or cut to their used length, read fine but must be
//!   full-size before anything is written past their ends), and finishes a delete whose journal
//!   a crash left.
//! * Table entries are written through a shared guard of the `meta.zr` mapping, only at indices
//!   no reader may read (see `shared.rs`): past the published length (append), or while the
//!   store's `gate` is held exclusively (delete, compact).

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::ops::Range;

use loaderx_core::checksum::{record_hash, Slot, Standing, TableState, TableSum, ENTRY_MARK};
use loaderx_core::codec::{Dictionary, Encoded, Encoder};
use loaderx_core::format::{entry_offset, Codec, Header, RecordLoc, CHUNK_SIZE, MAX_RECORDS};
use loaderx_core::journal::{DeleteJournal, JournalPlanError};
use loaderx_core::plan::{delete_swaps, place_append, plan_compact, write_runs, PlanError};
use rayon::prelude::*;

use crate::checksums::{stale_entry, SidecarMap, SidecarWriter};
use crate::error::{Error, Result};
use crate::files::{self, chunk_path, dict_path, meta_path, Chunk};
use crate::io;
use crate::journal;
use crate::map::MetaMap;
use crate::shared::{set_slot, Chunks, Shared};
use crate::sync::Arc;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Holds the advisory lock for as long as the handle lives.
    _meta_file: File,
    /// Writable chunk files, indexed by chunk id.
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
    /// `checksums.lx`, kept in step with every commit (`checksums.rs`).
    sidecar: SidecarWriter,
}

impl Writer {
    /// Upgrades a handle: takes the writer lock, finishes an interrupted delete, installs a
    /// writable `meta.zr` mapping and restores full sparse file sizes.
    pub(crate) fn open(shared: &Shared) -> Result<Writer> {
        let dir = shared.dir();
        let (meta_file, map, _) = files::open_meta_for_writing(dir)?;
        journal::finish(dir, &map)?;
        let header = map.header();
        let (sidecar, created) = SidecarWriter::open(dir, &map)?;
        shared.replace_meta(map);
        // A new or regrown sidecar: map it again, so readers see every slot.
        if created || shared.sidecar().is_none_or(|m| !m.is_full()) {
            if let Some(m) = SidecarMap::open(dir)? {
                shared.set_sidecar(m);
            }
        }
        let chunk_files = shared.update_chunks(|chunks| open_chunks(shared, &header, chunks))?;
        Ok(Writer {
            _meta_file: meta_file,
            chunk_files,
            dirty: BTreeSet::new(),
            synced_length: u64::from(header.length),
            dir_dirty: created,
            journal_pending: false,
            sidecar,
        })
    }

    /// Finishes a delete whose journal an I/O error left in place. Every mutating call runs this
    /// first.
    pub(crate) fn settle_pending(&mut self, shared: &Shared) -> Result<()> {
        if self.journal_pending {
            journal::settle(shared.dir(), &shared.meta())?;
            self.journal_pending = false;
        }
        Ok(())
    }

    /// Creates chunk file `id` (sparse, full size) for writing and registers it for readers.
    fn add_chunk(&mut self, shared: &Shared, id: u16) -> Result<()> {
        if self.chunk_files.get(usize::from(id)).is_some_and(Option::is_some) {
            return Ok(());
        }
        let path = chunk_path(shared.dir(), id);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(Error::io("create", &path))?;
        io::set_len(&file, CHUNK_SIZE, &path)?;
        let chunk = Chunk::open_read(&path)?.map(Arc::new);
        shared.update_chunks(|chunks| set_slot(chunks, id, chunk));
        set_slot(&mut self.chunk_files, id, Some(file));
        self.dir_dirty = true;
        Ok(())
    }

    /// Appends the records `ranges` of `src` (checked by the caller) with `codec`; returns the
    /// index of the first. All-or-nothing: on error nothing is visible and the length is
    /// unchanged.
    pub(crate) fn append(
        &mut self,
        shared: &Shared,
        src: &[u8],
        ranges: &[Range<usize>],
        codec: Codec,
    ) -> Result<u64> {
        let dir = shared.dir();
        let header = shared.meta().header();
        let length = u64::from(header.length);
        if ranges.is_empty() {
            return Ok(length);
        }
        if length + ranges.len() as u64 > MAX_RECORDS {
            return Err(Error::Full(format!("{length} records + {} would exceed 2^24", ranges.len())));
        }
        let dict = shared.dict();
        if codec == Codec::ZstdDict && dict.is_none() {
            return Err(Error::Dictionary("codec zstd_dict needs a dictionary: train one first".into()));
        }
        // A compressed record's frame is hashed as it is made, while it is in cache; raw records
        // are hashed while their bytes are written (below), on the core the write leaves idle.
        let encoded: Vec<(Encoded, u64)> = ranges
            .par_iter()
            .map_init(
                || Encoder::new(dict.as_deref()),
                |enc, r| {
                    let e = enc.encode(&src[r.clone()], codec)?;
                    let hash = match &e {
                        Encoded::Raw => 0,
                        Encoded::Compressed(_, frame) => record_hash(frame),
                    };
                    Ok::<_, loaderx_core::codec::CodecError>((e, hash))
                },
            )
            .collect::<Result<_, _>>()?;
        let stored: Vec<(Codec, &[u8])> = encoded
            .iter()
            .zip(ranges)
            .map(|((e, _), r)| match e {
                Encoded::Raw => (Codec::Raw, &src[r.clone()]),
                Encoded::Compressed(c, frame) => (*c, frame.as_slice()),
            })
            .collect();
        let (places, tail) = place_append(header.tail(), length, stored.iter().map(|(_, b)| b.len() as u32))?;
        for id in header.tail_chunk..=tail.chunk {
            self.add_chunk(shared, id)?;
        }
        // 1. The record bytes, one write per run of records that lie back to back (see
        // `write_runs`). Raw records that are neighbours in `src` too are written straight from
        // it; other runs are staged into one buffer first.
        let files = &self.chunk_files;
        let lens: Vec<u32> = stored.iter().map(|(_, b)| b.len() as u32).collect();
        let hash_raw = || -> Vec<u64> {
            stored
                .par_iter()
                .zip(&encoded)
                .map(|((c, b), (_, h))| if *c == Codec::Raw { record_hash(b) } else { *h })
                .collect()
        };
        let write = || {
            write_runs(&places, &lens).par_iter().try_for_each(|run| {
                let (id, offset) = places[run.start];
                let path = chunk_path(dir, id);
                let file = files.get(usize::from(id)).and_then(Option::as_ref);
                let file = file.ok_or_else(|| Error::corrupt(&path, "chunk file missing"))?;
                let (first, last) = (run.start, run.end - 1);
                let from_src = (first..last).all(|k| {
                    stored[k].0 == Codec::Raw
                        && stored[k + 1].0 == Codec::Raw
                        && ranges[k].end == ranges[k + 1].start
                });
                let staged: Vec<u8>;
                let bytes = if run.len() == 1 {
                    stored[first].1
                } else if from_src {
                    &src[ranges[first].start..ranges[last].end]
                } else {
                    let mut buf = Vec::with_capacity(lens[run.clone()].iter().map(|&n| n as usize).sum());
                    stored[run.clone()].iter().for_each(|(_, b)| buf.extend_from_slice(b));
                    staged = buf;
                    &staged
                };
                io::write_all_at(file, bytes, u64::from(offset), &path)
            })
        };
        let (written, hashes) = rayon::join(write, hash_raw);
        written?;
        let locs: Vec<RecordLoc> = places
            .iter()
            .zip(&stored)
            .zip(ranges)
            .map(|((&(chunk_id, offset), (codec, bytes)), r)| RecordLoc {
                offset,
                phys_length: bytes.len() as u32,
                logic_length: r.len() as u32,
                chunk_id,
                compress: *codec as u8,
                reserved: ENTRY_MARK,
            })
            .collect();
        // 2. Their checksums, then the sidecar header naming the table before and after.
        let slots: Vec<Slot> = locs.iter().zip(&hashes).map(|(loc, hash)| Slot::new(loc, *hash)).collect();
        self.sidecar.write_slots(length, &slots)?;
        let meta = shared.meta();
        let new_length = length + places.len() as u64;
        let mut sum = self.sidecar.sum();
        if let Some(sum) = &mut sum {
            locs.iter().enumerate().for_each(|(k, loc)| sum.add(length + k as u64, loc));
        }
        let after_header =
            Header { tail_chunk: tail.chunk, tail_offset: tail.offset, length: new_length as u32, ..header };
        let after_stale = (new_length < MAX_RECORDS).then(|| meta.entry(new_length)).flatten();
        self.commit_states(&meta, after_header, after_stale, sum, locs[0].to_bytes())?;
        // 3. Their entries, at indices past the published length, which no reader reads.
        for (k, loc) in locs.iter().enumerate() {
            let index = length + k as u64;
            if !meta.set_entry(index, loc) {
                return Err(table_cut_short(shared, index));
            }
        }
        // 4. The tail, and 5. the length, last.
        meta.set_tail(tail);
        meta.publish_length(new_length as u32);
        self.sidecar.set_sum(sum);
        self.dirty.extend(places.iter().map(|&(id, _)| id));
        Ok(length)
    }

    /// Deletes `indices` (see `Store::delete`). The caller holds the `gate` exclusively.
    pub(crate) fn delete(&mut self, shared: &Shared, indices: &[u64]) -> Result<()> {
        let dir = shared.dir();
        let meta = shared.meta();
        let length = u64::from(meta.length());
        let journal = DeleteJournal::plan(length, indices, |i| meta.entry(i)).map_err(|e| match e {
            JournalPlanError::Plan(p) => Error::from(p),
            unreadable => Error::classified(dir, unreadable),
        })?;
        let Some(journal) = journal else { return Ok(()) };
        // The checksums move with the entries: each hole gets the slot of the entry that fills it.
        let sidecar = shared.sidecar();
        let mut moved: HashMap<u64, Slot> = HashMap::new();
        for (hole, last) in delete_swaps(length, indices)? {
            let slot = moved.get(&last).copied().or_else(|| sidecar.as_ref().and_then(|m| m.slot(last)));
            moved.insert(hole, slot.unwrap_or_default());
        }
        let new_length = u64::from(journal.new_length);
        let mut holes: Vec<(u64, Slot)> = moved.into_iter().filter(|(i, _)| *i < new_length).collect();
        holes.sort_unstable_by_key(|(i, _)| *i);
        for (index, slot) in &holes {
            self.sidecar.write_slots(*index, std::slice::from_ref(slot))?;
        }
        let mut sum = self.sidecar.sum();
        if let Some(sum) = &mut sum {
            for i in new_length..length {
                sum.remove(i, &meta.entry(i).unwrap_or_default());
            }
            for (i, loc) in &journal.entries {
                let i = u64::from(*i);
                sum.remove(i, &meta.entry(i).unwrap_or_default());
                sum.add(i, loc);
            }
        }
        let after_header = Header { length: journal.new_length, ..meta.header() };
        let before_stale = stale_entry(&meta).unwrap_or_default().to_bytes();
        self.commit_states(&meta, after_header, meta.entry(new_length), sum, before_stale)?;
        journal::commit(dir, &journal)?;
        journal::apply(dir, &meta, &journal)?;
        self.sidecar.set_sum(sum);
        self.journal_pending = true;
        drop(meta);
        self.settle_pending(shared)
    }

    /// Compacts the live table `table` (checked entries, index = position) in place. The caller
    /// holds the `gate` exclusively.
    pub(crate) fn compact(&mut self, shared: &Shared, table: &[RecordLoc]) -> Result<()> {
        let dir = shared.dir();
        let plan = plan_compact(table).map_err(|e| match e {
            PlanError::Overlap { .. } => Error::classified(dir, e),
            other => other.into(),
        })?;
        // The whole table is at hand: the writer vouches for the slots exactly when the table is
        // in a state the sidecar names (an earlier change by another writer ends that).
        let sidecar = shared.sidecar();
        {
            let meta = shared.meta();
            let now = TableState::new(&meta.header(), stale_entry(&meta), TableSum::of(table));
            let sealed = sidecar.as_ref().and_then(|m| m.header().ok()).map(|h| h.standing(&now));
            self.sidecar.set_sum((sealed == Some(Standing::Sealed)).then_some(now.sum));
            // A moved record keeps its checksum under its new entry; a slot that did not cover
            // it is cleared, so it cannot come to cover the new entry by chance.
            let mut sum = self.sidecar.sum();
            for m in &plan.moves {
                let old = sidecar.as_ref().and_then(|s| s.slot(m.index)).filter(|s| s.covers(&m.from));
                let slot = old.map(|s| Slot::new(&m.to, s.hash)).unwrap_or_default();
                self.sidecar.write_slots(m.index, std::slice::from_ref(&slot))?;
                if let Some(sum) = &mut sum {
                    sum.remove(m.index, &m.from);
                    sum.add(m.index, &m.to);
                }
            }
            let header = meta.header();
            let after_header =
                Header { tail_chunk: plan.tail.chunk, tail_offset: plan.tail.offset, ..header };
            let stale = stale_entry(&meta);
            self.commit_states(&meta, after_header, stale, sum, stale.unwrap_or_default().to_bytes())?;
            self.sidecar.set_sum(sum);
        }
        for m in &plan.moves {
            let bytes = read_stored(shared, &m.from)?;
            if m.overlaps {
                // Stage the record past the frontier first, so it exists whole somewhere at
                // every instant, then move it down.
                let mut tail = shared.meta().header().tail();
                let (chunk_id, offset) = tail
                    .place(bytes.len() as u32)
                    .ok_or_else(|| Error::Full("no room to stage a record for compaction".into()))?;
                self.add_chunk(shared, chunk_id)?;
                let staged = RecordLoc { chunk_id, offset, ..m.from };
                self.write_at(shared, &staged, &bytes)?;
                let meta = shared.meta();
                meta.set_tail(tail);
                if !meta.set_entry(m.index, &staged) {
                    return Err(table_cut_short(shared, m.index));
                }
            }
            self.write_at(shared, &m.to, &bytes)?;
            if !shared.meta().set_entry(m.index, &m.to) {
                return Err(table_cut_short(shared, m.index));
            }
        }
        shared.meta().set_tail(plan.tail);
        // Delete chunk files past the new frontier. They hold no live record now, so their maps
        // and descriptors are dropped first: Windows does not remove a file its own process
        // still maps. A removal that fails leaves a file no reader opens (it lies past the
        // tail), which a later append reuses or a re-run removes.
        let keep = usize::from(plan.tail.chunk) + 1;
        let end = shared.update_chunks(|chunks| {
            let end = chunks.len().max(self.chunk_files.len());
            chunks.truncate(keep);
            end
        });
        self.chunk_files.truncate(keep);
        self.dirty.retain(|&id| usize::from(id) < keep);
        for id in (keep..end).rev() {
            if io::remove(&chunk_path(dir, id as u16))? {
                self.dir_dirty = true;
            }
        }
        Ok(())
    }

    /// Writes the sidecar header for a commit: the table as it is now (with the running sum)
    /// and as it will be (`after_header`, `after_stale`, `after_sum`); `pending` is the entry the
    /// commit writes first at the old length. The running sum is the caller's to update once
    /// the table changed.
    fn commit_states(
        &mut self,
        meta: &MetaMap,
        after_header: Header,
        after_stale: Option<RecordLoc>,
        after_sum: Option<TableSum>,
        pending: [u8; 16],
    ) -> Result<()> {
        let before = self.sidecar.state(meta.header(), stale_entry(meta));
        let after = TableState::new(&after_header, after_stale, after_sum.unwrap_or_default());
        self.sidecar.write_header(before, after, pending)
    }

    /// Covers every live record of `table` (checked entries, index = position) that no checksum
    /// covers, and seals the sidecar. A covering checksum that does not match is damage while the
    /// sidecar is sealed: it is kept (reads keep failing on it) and listed, unless `adopt`;
    /// in a table another writer changed, the record's current bytes are taken as they are.
    pub(crate) fn add_checksums(
        &mut self,
        shared: &Shared,
        table: &[RecordLoc],
        adopt: bool,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Backfill> {
        let sidecar = shared.sidecar();
        let meta = shared.meta();
        let now = TableState::new(&meta.header(), stale_entry(&meta), TableSum::of(table));
        let standing = sidecar.as_ref().and_then(|m| m.header().ok()).map(|h| h.standing(&now));
        let sealed = standing == Some(Standing::Sealed);
        // Every entry gets the mark, and its checksum is written for the marked entry; the
        // table is unsealed until the last entry is marked.
        let marked: Vec<RecordLoc> = table.iter().map(|l| RecordLoc { reserved: ENTRY_MARK, ..*l }).collect();
        let after = TableState::new(&meta.header(), stale_entry(&meta), TableSum::of(&marked));
        self.sidecar.set_sum(None);
        self.sidecar.write_header(now, after, now.stale)?;
        let mut report = Backfill::default();
        let total = table.len() as u64;
        for (block, locs) in table.chunks(4096).enumerate() {
            let first = block as u64 * 4096;
            let hashes: Vec<u64> = locs
                .par_iter()
                .map(|loc| read_stored(shared, loc).map(|b| record_hash(&b)))
                .collect::<Result<_>>()?;
            for (k, (loc, hash)) in locs.iter().zip(hashes).enumerate() {
                let index = first + k as u64;
                let slot = sidecar.as_ref().and_then(|m| m.slot(index)).filter(|s| s.covers(loc));
                let keep = match slot {
                    Some(s) if s.hash == hash => {
                        report.verified += 1;
                        s.hash
                    }
                    Some(s) if sealed && !adopt => {
                        report.mismatched.push(index);
                        s.hash
                    }
                    Some(_) => {
                        report.replaced += 1;
                        hash
                    }
                    None => {
                        report.added += 1;
                        hash
                    }
                };
                let marked = &marked[index as usize];
                self.sidecar.write_slots(index, &[Slot::new(marked, keep)])?;
                if marked != loc && !meta.set_entry(index, marked) {
                    return Err(table_cut_short(shared, index));
                }
            }
            progress(first + locs.len() as u64, total);
        }
        // Entries below the synced length changed: the next sync flushes the whole table.
        self.synced_length = 0;
        self.sidecar.set_sum(Some(after.sum));
        self.sidecar.write_header(after, after, after.stale)?;
        drop(meta);
        self.sync(shared)?;
        Ok(report)
    }

    fn write_at(&mut self, shared: &Shared, loc: &RecordLoc, bytes: &[u8]) -> Result<()> {
        let path = chunk_path(shared.dir(), loc.chunk_id);
        let file = self.chunk_files.get(usize::from(loc.chunk_id)).and_then(Option::as_ref);
        let file = file.ok_or_else(|| Error::corrupt(&path, "chunk file missing"))?;
        io::write_all_at(file, bytes, u64::from(loc.offset), &path)?;
        self.dirty.insert(loc.chunk_id);
        Ok(())
    }

    /// Trains and installs a dictionary (see `Store::train_dict`); `sizes` add up to
    /// `samples.len()` (checked by the caller).
    pub(crate) fn train_dict(
        &mut self,
        shared: &Shared,
        samples: &[u8],
        sizes: &[usize],
        capacity: usize,
    ) -> Result<usize> {
        let users = {
            let meta = shared.meta();
            (0..u64::from(meta.length()))
                .filter(|&i| meta.entry(i).is_some_and(|e| e.compress == Codec::ZstdDict as u8))
                .count()
        };
        if users > 0 {
            return Err(Error::Dictionary(format!(
                "the store holds {users} zstd_dict records; replacing the dictionary would make them unreadable"
            )));
        }
        let bytes = loaderx_core::codec::train_dictionary(samples, sizes, capacity)?;
        files::replace(&dict_path(shared.dir()), &bytes, 0)?;
        self.dir_dirty = true;
        let len = bytes.len();
        shared.set_dict(Dictionary::new(bytes));
        Ok(len)
    }

    /// Makes everything appended so far durable: chunk data first, then the table, then the
    /// header.
    pub(crate) fn sync(&mut self, shared: &Shared) -> Result<()> {
        let dir = shared.dir();
        self.settle_pending(shared)?;
        for &id in &self.dirty {
            if let Some(Some(file)) = self.chunk_files.get(usize::from(id)) {
                io::sync_data(file, &chunk_path(dir, id))?;
            }
        }
        self.dirty.clear();
        self.sidecar.sync()?;
        if self.dir_dirty {
            io::sync_dir(dir)?;
            self.dir_dirty = false;
        }
        let meta = shared.meta();
        let meta_path = meta_path(dir);
        let length = u64::from(meta.length());
        let page = 4096u64;
        let from = entry_offset(self.synced_length.min(length)).max(page);
        let to = entry_offset(length);
        if to > from {
            io::sync_with(&meta_path, || meta.flush_range(from, to - from))?;
        }
        io::sync_with(&meta_path, || meta.flush_range(0, page))?;
        self.synced_length = length;
        Ok(())
    }
}

/// What `loaderx checksum add` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backfill {
    /// Records whose checksum was there and matched.
    pub verified: u64,
    /// Records that had none and got one.
    pub added: u64,
    /// Records whose checksum no longer matched, in a store another writer changed (or with
    /// `adopt`), that got one for their current bytes.
    pub replaced: u64,
    /// Records whose checksum does not match in a sealed store: damage, left as it is.
    pub mismatched: Vec<u64>,
}

/// Opens the chunk files up to the tail for writing, creating a missing tail chunk of an empty
/// store, grows each to its full sparse size, and (re)maps those that grew or were not mapped.
fn open_chunks(shared: &Shared, header: &Header, chunks: &mut Chunks) -> Result<Vec<Option<File>>> {
    let mut chunk_files = Vec::new();
    for id in 0..=header.tail_chunk {
        let path = chunk_path(shared.dir(), id);
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
                return Err(Error::corrupt(path, "missing, but the header says records were appended to it"))
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
            set_slot(chunks, id, chunk);
        }
        chunk_files.push(Some(file));
    }
    Ok(chunk_files)
}

/// The stored bytes of a checked entry.
fn read_stored(shared: &Shared, loc: &RecordLoc) -> Result<Vec<u8>> {
    let chunks = shared.chunks();
    let chunk = chunks.get(usize::from(loc.chunk_id)).and_then(Option::as_ref);
    chunk.and_then(|c| c.bytes(u64::from(loc.offset), loc.stored_len())).map(<[u8]>::to_vec).ok_or_else(
        || {
            Error::corrupt_at(
                chunk_path(shared.dir(), loc.chunk_id),
                u64::from(loc.offset),
                "record lies past the end of the file",
            )
        },
    )
}

/// `meta.zr` does not reach entry `index` (it is shorter than its full size).
fn table_cut_short(shared: &Shared, index: u64) -> Error {
    Error::corrupt_at(meta_path(shared.dir()), entry_offset(index), "table is shorter than its capacity")
}
