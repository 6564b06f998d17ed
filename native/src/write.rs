//! The write path: create, append, delete, compact, train_dict and sync.
//!
//! Commit protocol (see `docs/design.md`): record bytes are written to the chunk files first,
//! then their table entries, then the tail, and the length is published last. A writer killed at
//! any point therefore leaves the store at its previous length, or at its new one, never at a
//! length whose entries or bytes are missing. `sync` makes everything appended so far durable,
//! chunk data before the table and the table before the header.
//!
//! Invariants:
//! * Every argument is validated before the first byte is written; on error the store is as it
//!   was and stays usable.
//! * One writer per store: the first mutating call of a handle takes an advisory exclusive lock
//!   (`flock`) on `meta.zr` and keeps it for the life of the handle. Readers take no lock.
//! * The first mutating call also restores the full sparse sizes of `meta.zr` and the chunk files
//!   (stores copied without sparse support, or cut to their used length, read fine but must be
//!   full-size before anything is written past their ends).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

use loaderx_core::codec::{Dictionary, Encoded, Encoder};
use loaderx_core::format::{
    entry_offset, Codec, Header, RecordLoc, CHUNK_SIZE, HEADER_SIZE, MAX_RECORDS, MAX_RECORD_LEN,
    META_FULL_SIZE,
};
use loaderx_core::plan::{delete_swaps, place_append, plan_compact, PlanError};
use rayon::prelude::*;

use crate::error::{Error, Result};
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
    let mut file = File::create(&tmp).map_err(Error::io("create", &tmp))?;
    file.write_all(&Header::EMPTY.to_bytes()).map_err(Error::io("write", &tmp))?;
    file.set_len(META_FULL_SIZE).map_err(Error::io("resize", &tmp))?;
    file.sync_all().map_err(Error::io("sync", &tmp))?;
    // meta.zr appears whole (header written) or not at all. A crash before 0.zr exists is
    // repaired by the first write, which creates a missing tail chunk of an empty store.
    fs::rename(&tmp, dir.join("meta.zr")).map_err(Error::io("rename", &tmp))?;
    let chunk = chunk_path(dir, 0);
    File::create(&chunk).and_then(|f| f.set_len(CHUNK_SIZE)).map_err(Error::io("create", &chunk))?;
    sync_dir(dir)
}

fn is_chunk_name(name: &str) -> bool {
    name.strip_suffix(".zr").is_some_and(|stem| !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(Error::io("sync", dir))
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
        Ok(guard)
    }

    fn upgrade(&self) -> Result<Writer> {
        let meta_path = self.dir.join("meta.zr");
        let meta_file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&meta_path)
            .map_err(Error::io("open for writing", &meta_path))?;
        match meta_file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(self.dir.clone())),
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &meta_path)(e)),
        }
        let len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
        let mut head = [0u8; HEADER_SIZE as usize];
        meta_file.read_exact_at(&mut head, 0).map_err(Error::io("read", &meta_path))?;
        let header = Header::read(&head).map_err(|e| Error::format(&meta_path, e))?;
        header.validate(len).map_err(|e| Error::format(&meta_path, e))?;
        if len < META_FULL_SIZE {
            meta_file.set_len(META_FULL_SIZE).map_err(Error::io("resize", &meta_path))?;
        }
        let map = MetaMap::new(&meta_file, META_FULL_SIZE, true).map_err(Error::io("mmap", &meta_path))?;
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
                file.set_len(CHUNK_SIZE).map_err(Error::io("resize", &path))?;
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
        file.set_len(CHUNK_SIZE).map_err(Error::io("resize", &path))?;
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
            file.write_all_at(bytes, u64::from(offset)).map_err(Error::io("write", chunk_path(&self.dir, id)))
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
    pub fn delete(&self, indices: &[u64]) -> Result<()> {
        let _gate = write_lock(&self.gate);
        let length = self.len();
        let swaps = delete_swaps(length, indices)?;
        if swaps.is_empty() {
            return Ok(());
        }
        let _guard = self.writer()?;
        let meta = read_lock(&self.meta);
        for &(hole, last) in &swaps {
            let entry = meta
                .entry(last)
                .ok_or_else(|| Error::corrupt(self.dir.join("meta.zr"), "table cut short"))?;
            meta.set_entry(hole, &entry);
        }
        meta.publish_length((length - swaps.len() as u64) as u32);
        Ok(())
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
        // Drop chunk files past the new frontier.
        let mut chunks = write_lock(&self.chunks);
        let keep = usize::from(plan.tail.chunk) + 1;
        for id in (keep..chunks.len().max(writer.chunk_files.len())).rev() {
            let path = chunk_path(&self.dir, id as u16);
            match fs::remove_file(&path) {
                Ok(()) => writer.dir_dirty = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", &path)(e)),
            }
        }
        chunks.truncate(keep);
        writer.chunk_files.truncate(keep);
        writer.dirty.retain(|&id| usize::from(id) < keep);
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
        file.write_all_at(bytes, u64::from(loc.offset)).map_err(Error::io("write", &path))?;
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
        let mut file = File::create(&tmp).map_err(Error::io("create", &tmp))?;
        file.write_all(&bytes).and_then(|()| file.sync_all()).map_err(Error::io("write", &tmp))?;
        fs::rename(&tmp, &path).map_err(Error::io("rename", &tmp))?;
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
        for &id in &writer.dirty {
            if let Some(Some(file)) = writer.chunk_files.get(usize::from(id)) {
                file.sync_data().map_err(Error::io("sync", chunk_path(&self.dir, id)))?;
            }
        }
        writer.dirty.clear();
        if writer.dir_dirty {
            sync_dir(&self.dir)?;
            writer.dir_dirty = false;
        }
        let meta = read_lock(&self.meta);
        let meta_path = self.dir.join("meta.zr");
        let length = u64::from(meta.length());
        let page = 4096u64;
        let from = entry_offset(writer.synced_length.min(length)).max(page);
        let to = entry_offset(length);
        if to > from {
            meta.flush_range(from, to - from).map_err(Error::io("sync", &meta_path))?;
        }
        meta.flush_range(0, page).map_err(Error::io("sync", &meta_path))?;
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
