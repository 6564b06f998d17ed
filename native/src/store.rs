//! Opening a store and the read path: `len`, `lengths`, `gather`, `stats`; the write path's
//! public methods, which check their arguments, take the locks and hand over to the writer
//! (`writer.rs`).
//!
//! Invariants:
//! * Opening follows core's open protocol (`loaderx_core::open`) and never writes, except to
//!   finish a delete that a crash interrupted (a `delete.journal` is present, no live writer
//!   holds the lock and the store is writable): a reader maps `meta.zr` and the chunk files
//!   read-only at their current sizes and takes no lock. Only the first mutating call upgrades
//!   the handle to a writer.
//! * When the open cannot finish such a delete (locked, or read-only), the handle reads the
//!   finished deletion in memory: its length is the journal's and the journal's entries come
//!   before the table's ([`Store::overlay`]), until its own upgrade finishes the delete on disk
//!   or the table's length shows a writer has moved past the journal.
//! * Before any byte reaches a caller's buffer, a read checks every index against the published
//!   length (`loaderx_core::plan::check_indices`), every table entry against the limits and the
//!   mapped size of its chunk file, and every destination range against the buffer. A failed
//!   check leaves the buffer untouched.
//! * Lock order, everywhere: `gate` → `writer` → `meta` → `chunks` → `dict` (the last three in
//!   [`Shared`]). `gate` is held shared by reads, appends and dictionary training, and
//!   exclusively by delete and compact.
//! * A handle's writer, once created, lives as long as the handle; no code path sees a mutating
//!   call without one ([`Store::with_writer`]).

use std::fs::{self, File};
use std::path::Path;

use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{self, entry_offset, Codec, Header, RecordLoc, HEADER_SIZE};
use loaderx_core::open::{self, Overlay};
use loaderx_core::plan::{check_indices, record_ranges};
use loaderx_core::schema::{Kind, Layout};

use crate::error::{Error, Result};
use crate::files::{self, chunk_path, meta_path, Chunk};
use crate::journal;
use crate::map::MetaMap;
use crate::shared::{Chunks, Shared};
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{self, Arc, Mutex, RwLock, RwLockReadGuard};
use crate::writer::Writer;

/// Below this many bytes a gather runs on the calling thread: the fan-out costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;
/// The same, while a pool helper is at hand ([`crate::fanout::helper_at_hand`]): handing it half
/// a batch costs a compare-and-swap, not a wake-up.
const LINGERING_MIN_BYTES: u64 = 64 << 10;
/// Blocks a parallel gather is cut into, per thread.
const BLOCKS_PER_THREAD: usize = 16;

/// What [`Store::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records checked.
    pub checked: u64,
    /// Records that failed, with the reason. A blank tail of the table (see [`Store::verify`])
    /// is one entry here, its first record, and the rest are counted in `unlisted`.
    pub bad: Vec<(u64, String)>,
    /// Bad records not listed in `bad`.
    pub unlisted: u64,
}

/// How [`Store::open_with`] treats a missing store.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Create the directory (with parents) and an empty store when there is none.
    pub create: bool,
}

pub use loaderx_core::stats::Stats;

/// A loaderx record store on disk.
///
/// `gather`, `lengths`, `stats` and `append` may run concurrently from many threads; `delete`
/// and `compact` take exclusive access (they wait for running calls and block new ones).
#[derive(Debug)]
pub struct Store {
    /// Held shared by reads, appends and training, exclusively by delete and compact.
    gate: RwLock<()>,
    /// `None` until the first mutating call upgrades the handle.
    writer: Mutex<Option<Writer>>,
    /// The directory, the maps and the dictionary readers and the writer share.
    shared: Shared,
    /// A delete journal this handle could not replay on disk, applied in memory (empty when
    /// none); `overlay_live` is cleared once this handle's writer has replayed it.
    overlay: Overlay,
    overlay_live: AtomicBool,
}

impl Store {
    /// Opens an existing store.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens a store, creating the directory and an empty store if there is none (as
    /// `Zrecord(path)` does).
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions { create: true })
    }

    /// Opens a store with explicit options. With `create`, a URL (`s3://b/x`, or `s3:/b/x` as
    /// a path type collapses it) is refused with [`Error::BadArgument`]: it never becomes a
    /// local directory.
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Store> {
        let dir = path.as_ref().to_path_buf();
        if options.create {
            crate::location::check_writable(&dir.to_string_lossy())?;
        }
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Error::NotADirectory(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && options.create => {
                fs::create_dir_all(&dir).map_err(Error::io("create directory", &dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NotFound(dir)),
            Err(e) => return Err(Error::io("stat", &dir)(e)),
        }
        let meta_path = meta_path(&dir);
        if !meta_path.exists() {
            if !options.create {
                return Err(Error::NotAStore { path: dir, reason: "it has no meta.zr".into() });
            }
            files::create_store(&dir)?;
        }
        let pending = files::journal_path(&dir).exists() && !journal::recover_interrupted_delete(&dir)?;
        let meta_file = File::open(&meta_path).map_err(Error::io("open", &meta_path))?;
        let meta_len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
        if meta_len < HEADER_SIZE {
            return Err(Error::corrupt_at(
                &meta_path,
                meta_len,
                format!("the file is {meta_len} bytes, shorter than the 16-byte header"),
            ));
        }
        // The header is read through the map, not the descriptor: on Windows a live writer's
        // lock on `meta.zr` is mandatory and refuses reads through other handles, but not
        // through maps.
        let meta = MetaMap::new(&meta_file, meta_len, false).map_err(Error::io("mmap", &meta_path))?;
        let header = meta.header();
        open::read_header(&header.to_bytes(), meta_len).map_err(|e| Error::classified(&dir, e))?;
        let overlay = if pending { journal::overlay(&dir, header.length)? } else { Overlay::default() };
        let chunks = (0..=header.tail_chunk)
            .map(|id| Ok(Chunk::open_read(&chunk_path(&dir, id))?.map(Arc::new)))
            .collect::<Result<Vec<_>>>()?;
        let dict = files::load_dict(&dir)?;
        Ok(Store {
            gate: RwLock::new(()),
            writer: Mutex::new(None),
            shared: Shared::new(dir, meta, chunks, dict),
            overlay_live: AtomicBool::new(!overlay.is_empty()),
            overlay,
        })
    }

    /// The journal applied in memory, while it stands: the handle has not replayed it itself and
    /// the table's length is one the journal applies to.
    fn overlay(&self, table_length: u32) -> Option<&Overlay> {
        let live = self.overlay_live.load(Ordering::Acquire);
        let applies = |o: &&Overlay| o.journal().is_some_and(|j| j.applies_to(table_length));
        Some(&self.overlay).filter(|_| live).filter(applies)
    }

    /// The effective header of `meta` (the journal rule applied).
    fn effective(&self, meta: &MetaMap) -> Header {
        let header = meta.header();
        self.overlay(header.length).map_or(header, |o| o.header(header))
    }

    /// Entry `index` under the journal rule.
    fn entry_of(&self, meta: &MetaMap, index: u64) -> Option<RecordLoc> {
        self.overlay(meta.length()).and_then(|o| o.entry(index)).or_else(|| meta.entry(index))
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        self.shared.dir()
    }

    /// Number of live records.
    pub fn len(&self) -> u64 {
        u64::from(self.effective(&self.shared.meta()).length)
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the header.
    pub fn header(&self) -> Header {
        self.effective(&self.shared.meta())
    }

    /// True if the store has a dictionary (`dict.zr`).
    pub fn has_dict(&self) -> bool {
        self.shared.has_dict()
    }

    /// The dictionary bytes, if the store has one.
    pub fn dict_bytes(&self) -> Option<Vec<u8>> {
        self.shared.dict().map(|d| d.bytes().to_vec())
    }

    /// Checked table entries for `indices`: every index below the length, every entry valid
    /// against the limits and its chunk file.
    fn locate(&self, indices: &[u64]) -> Result<Vec<(RecordLoc, Codec)>> {
        let dir = self.shared.dir();
        let meta = self.shared.meta();
        let table_length = meta.length();
        let overlay = self.overlay(table_length);
        check_indices(u64::from(overlay.map_or(table_length, |o| o.length(table_length))), indices)?;
        let chunks = self.shared.chunks();
        let chunk_len = |id: u16| chunks.get(usize::from(id))?.as_ref().map(|c| c.len());
        meta.touch_entries(indices);
        indices
            .iter()
            .map(|&index| {
                let loc = overlay.and_then(|o| o.entry(index)).or_else(|| meta.entry(index));
                let loc = loc.ok_or_else(|| entry_past_end(dir, index))?;
                let codec = loc.validate(index, chunk_len).map_err(|e| Error::classified(dir, e))?;
                Ok((loc, codec))
            })
            .collect()
    }

    /// The checked table entries of `indices` (where and how each record is stored).
    pub fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        let _gate = sync::read(&self.gate);
        Ok(self.locate(indices)?.into_iter().map(|(loc, _)| loc).collect())
    }

    /// Logical (decoded) length of each record.
    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        let _gate = sync::read(&self.gate);
        Ok(self.locate(indices)?.iter().map(|(loc, _)| loc.logic_length).collect())
    }

    /// Logical length of each record, each checked to fit `layout` ([`Layout::check`], the one
    /// rule of every front end). The first record that does not fit is an [`Error::Corrupt`]
    /// naming `meta.zr` and the offset of its table entry.
    pub fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        let _gate = sync::read(&self.gate);
        let locs = self.locate(indices)?;
        self.check_fit(indices, &locs, layout)?;
        Ok(locs.iter().map(|(loc, _)| loc.logic_length).collect())
    }

    /// [`Layout::check`] for every checked record.
    fn check_fit(&self, indices: &[u64], locs: &[(RecordLoc, Codec)], layout: Layout) -> Result<()> {
        let lens = locs.iter().map(|(loc, _)| loc.logic_length);
        check_fit(self.shared.dir(), indices.iter().copied().zip(lens), layout)
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]`.
    ///
    /// The destination ranges must lie inside `dst` and must not overlap. Work is split over
    /// the rayon pool in contiguous blocks, one zstd context per block, and each record is
    /// decoded (or copied) straight from the chunk mapping into `dst`.
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        check_offsets(indices, dst_offsets)?;
        self.gather_with(indices, None, |locs| {
            let lens: Vec<u64> = locs.iter().map(|(l, _)| u64::from(l.logic_length)).collect();
            split_dst(dst, dst_offsets, &lens)
        })
    }

    /// Decodes records `indices`, each exactly `stride` bytes long, back to back into `dst`
    /// (`dst.len() == indices.len() · stride`), as a dense dataset reads its fixed-size rows.
    /// A record of any other length is an [`Error::Corrupt`] (the dense rule of
    /// [`Layout::check`]), never a misaligned batch.
    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        let layout = fixed_layout(indices, dst, stride)?;
        self.gather_with(indices, Some(layout), |_| Ok(dst.chunks_exact_mut(stride as usize).collect()))
    }

    /// Decodes records `indices` into `pieces`, one slice per record of exactly its decoded
    /// length (a piece of another length is [`Error::BadArgument`]). How a gather over many
    /// stores hands each store its share of one destination.
    /// With `layout`, every record must fit it first (as [`Store::gather_fixed`] checks).
    pub fn gather_pieces(
        &self,
        indices: &[u64],
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        decode_planned(vec![self.plan_pieces(indices, pieces, layout)?])
    }

    /// [`Store::gather_pieces`] checked and cut into jobs but not yet decoded: how a gather over
    /// many stores decodes every store's share in one fan-out. Holds this store's read gate and
    /// chunk maps until it is dropped.
    pub(crate) fn plan_pieces<'d>(
        &self,
        indices: &[u64],
        pieces: Vec<&'d mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<Planned<'_, 'd>> {
        self.plan(indices, layout, |locs| {
            check_pieces(locs.iter().map(|(l, _)| l.logic_length), &pieces)?;
            Ok(pieces)
        })
    }

    /// The read path of every gather: checks the indices and entries (and that every record
    /// fits `layout`, if given) before `dsts` cuts the destinations, then decodes.
    fn gather_with<'d>(
        &self,
        indices: &[u64],
        layout: Option<Layout>,
        dsts: impl FnOnce(&[(RecordLoc, Codec)]) -> Result<Vec<&'d mut [u8]>>,
    ) -> Result<()> {
        decode_planned(vec![self.plan(indices, layout, dsts)?])
    }

    /// The checks of [`Store::gather_with`], and the jobs they leave to decode.
    fn plan<'d>(
        &self,
        indices: &[u64],
        layout: Option<Layout>,
        dsts: impl FnOnce(&[(RecordLoc, Codec)]) -> Result<Vec<&'d mut [u8]>>,
    ) -> Result<Planned<'_, 'd>> {
        let gate = sync::read(&self.gate);
        let locs = self.locate(indices)?;
        if let Some(layout) = layout {
            self.check_fit(indices, &locs, layout)?;
        }
        let dsts = dsts(&locs)?;
        let bytes = locs.iter().map(|(l, _)| u64::from(l.logic_length)).sum();
        let jobs = indices
            .iter()
            .zip(locs)
            .zip(dsts)
            .map(|((&index, (loc, codec)), dst)| Job { index, loc, codec, dst })
            .collect();
        let source = Source {
            _gate: gate,
            chunks: self.shared.chunks(),
            dict: self.shared.dict(),
            dir: self.shared.dir(),
        };
        Ok(Planned { source, jobs, bytes })
    }

    /// Decodes every record and checks its table entry, bounds and length. `progress` is called
    /// with (records done, total) after each block.
    ///
    /// Table entries are never blank (all zero) once written, so when the table ends in a run of
    /// blank entries the header's record count is damaged: that run is reported as one problem
    /// (its first record, the others counted in [`VerifyReport::unlisted`]), not decoded record
    /// by record (a damaged count can claim 2^24 records).
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> VerifyReport {
        const BLOCK: u64 = 4096;
        let total = self.len();
        let blank_from = self.blank_tail(total);
        let mut report = VerifyReport::default();
        let mut buf = vec![0u8; format::MAX_RECORD_LEN as usize];
        let mut start = 0;
        while start < blank_from {
            let end = (start + BLOCK).min(blank_from);
            for index in start..end {
                let result = self.entries(&[index]).and_then(|locs| {
                    let len = locs.first().map_or(0, |l| l.logic_length as usize);
                    self.gather(&[index], &mut buf[..len], &[0])
                });
                if let Err(e) = result {
                    report.bad.push((index, e.to_string()));
                }
            }
            report.checked = end;
            progress(end, total);
            start = end;
        }
        if blank_from < total {
            let why = format!(
                "{}: table entries {blank_from}..{total} are blank (never written), yet the header counts \
                 {total} records: the header's record count is damaged",
                meta_path(self.shared.dir()).display()
            );
            report.bad.push((blank_from, why));
            report.unlisted = total - blank_from - 1;
            report.checked = total;
            progress(total, total);
        }
        report
    }

    /// Where the run of blank (never written) table entries that ends the table starts: `length`
    /// when the last entry is not blank.
    fn blank_tail(&self, length: u64) -> u64 {
        let _gate = sync::read(&self.gate);
        let meta = self.shared.meta();
        let mut from = length;
        while from > 0 && self.entry_of(&meta, from - 1).is_some_and(|e| e.is_blank()) {
            from -= 1;
        }
        from
    }

    /// Storage usage.
    pub fn stats(&self) -> Result<Stats> {
        let _gate = sync::read(&self.gate);
        let meta = self.shared.meta();
        let header = self.effective(&meta);
        let entries = (0..u64::from(header.length))
            .map(|index| self.entry_of(&meta, index).ok_or_else(|| entry_past_end(self.shared.dir(), index)));
        let entries = entries.collect::<Result<Vec<_>>>()?;
        Ok(Stats::from_entries(&header, entries))
    }

    /// Runs `f` with this handle's writer, upgrading the handle on its first mutating call (see
    /// `writer.rs`) and first finishing a delete an I/O error left pending.
    fn with_writer<T>(&self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let mut guard = sync::lock(&self.writer);
        let writer = match guard.take() {
            Some(writer) => guard.insert(writer),
            None => {
                let writer = Writer::open(&self.shared)?;
                // The upgrade replayed any journal on disk: the table is the truth from now on.
                self.overlay_live.store(false, Ordering::Release);
                guard.insert(writer)
            }
        };
        writer.settle_pending(&self.shared)?;
        f(writer)
    }

    /// Appends the records packed in `src` (record `k` starts at `offsets[k]` and runs to the
    /// next offset or the end) with `codec`, and returns the index of the first one.
    ///
    /// All-or-nothing: on error nothing is visible and the length is unchanged.
    pub fn append(&self, src: &[u8], offsets: &[u64], codec: Codec) -> Result<u64> {
        let ranges = record_ranges(src.len(), offsets)?;
        let _gate = sync::read(&self.gate);
        self.with_writer(|w| w.append(&self.shared, src, &ranges, codec))
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
        let _gate = sync::write(&self.gate);
        check_indices(self.len(), indices)?;
        if indices.is_empty() {
            return Ok(());
        }
        self.with_writer(|w| w.delete(&self.shared, indices))
    }

    /// Rewrites the live records densely, in place, in physical order, and deletes chunk files
    /// past the new frontier. Safe to interrupt: re-running finishes the job. Takes exclusive
    /// access.
    pub fn compact(&self) -> Result<()> {
        let _gate = sync::write(&self.gate);
        self.with_writer(|w| {
            let indices: Vec<u64> = (0..self.len()).collect();
            let table: Vec<RecordLoc> = self.locate(&indices)?.into_iter().map(|(loc, _)| loc).collect();
            w.compact(&self.shared, &table)
        })
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
        let _gate = sync::read(&self.gate);
        self.with_writer(|w| w.train_dict(&self.shared, samples, sizes, capacity))
    }

    /// Makes everything appended so far durable: chunk data first, then the table, then the
    /// header. A handle that never wrote has nothing to sync.
    pub fn sync(&self) -> Result<()> {
        match sync::lock(&self.writer).as_mut() {
            Some(writer) => writer.sync(&self.shared),
            None => Ok(()),
        }
    }
}

/// `meta.zr` ends before table entry `index`.
fn entry_past_end(dir: &Path, index: u64) -> Error {
    Error::corrupt_at(
        meta_path(dir),
        entry_offset(index),
        format!("entry {index} lies past the end of the file"),
    )
}

/// One record of a gather.
struct Job<'a> {
    index: u64,
    loc: RecordLoc,
    codec: Codec,
    dst: &'a mut [u8],
}

/// What a store's jobs decode from: its chunk maps and dictionary, its read gate held.
struct Source<'s> {
    _gate: RwLockReadGuard<'s, ()>,
    chunks: RwLockReadGuard<'s, Chunks>,
    dict: Option<Arc<Dictionary>>,
    dir: &'s Path,
}

/// A store's checked share of a gather (see [`Store::plan_pieces`]).
pub(crate) struct Planned<'s, 'd> {
    source: Source<'s>,
    jobs: Vec<Job<'d>>,
    bytes: u64,
}

impl std::fmt::Debug for Planned<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned").field("dir", &self.source.dir).field("records", &self.jobs.len()).finish()
    }
}

/// Decodes planned records (of one store or several) into their destinations: on the calling
/// thread when the batch is small or other gathers already keep every core busy, else in blocks
/// over the calling thread and the rayon pool.
pub(crate) fn decode_planned(mut plans: Vec<Planned<'_, '_>>) -> Result<()> {
    let total: u64 = plans.iter().map(|p| p.bytes).sum();
    let records: usize = plans.iter().map(|p| p.jobs.len()).sum();
    let threads = rayon::current_num_threads();
    let run = |(source, jobs): (&Source<'_>, &mut [Job<'_>])| {
        run_shard(source.dir, &source.chunks, source.dict.as_deref(), jobs)
    };
    // Gathers already running on other threads (a loader's workers) keep the cores busy: then
    // splitting this one only adds switches between threads, so it runs where it was called.
    let active = crate::fanout::Active::enter();
    // A small batch is split only when a helper is at hand (lingering, or about to: batches are
    // coming back to back); waking one costs more than it saves. Only batches between the two
    // thresholds pay for the clock read behind `helper_at_hand`.
    let small =
        total < LINGERING_MIN_BYTES || (total < PARALLEL_MIN_BYTES && !crate::fanout::helper_at_hand());
    if small || threads < 2 || records < 2 || active.others >= threads - 1 {
        return plans.iter_mut().try_for_each(|p| run((&p.source, &mut p.jobs)));
    }
    // Many small blocks per thread, so the threads finish together: the last block is all
    // one thread can be left alone with.
    let block = records.div_ceil(threads * BLOCKS_PER_THREAD);
    let blocks: Vec<(&Source<'_>, &mut [Job<'_>])> = plans
        .iter_mut()
        .flat_map(|Planned { source, jobs, .. }| {
            let source = &*source;
            jobs.chunks_mut(block).map(move |c| (source, c))
        })
        .collect();
    crate::fanout::for_each_block(blocks, threads - 1, run)
}

fn run_shard(dir: &Path, chunks: &Chunks, dict: Option<&Dictionary>, jobs: &mut [Job<'_>]) -> Result<()> {
    let mut decoder = Decoder::new(dict);
    for job in jobs {
        let chunk = chunks.get(usize::from(job.loc.chunk_id)).and_then(Option::as_ref);
        let (id, offset) = (job.loc.chunk_id, u64::from(job.loc.offset));
        let src = chunk.and_then(|c| c.bytes(offset, job.loc.stored_len())).ok_or_else(|| {
            Error::corrupt_at(chunk_path(dir, id), offset, "record lies past the end of the file")
        })?;
        decoder.decode_into(job.codec, src, job.dst).map_err(|source| Error::Decode {
            index: job.index,
            file: chunk_path(dir, id),
            offset,
            source,
        })?;
    }
    Ok(())
}

/// Splits `dst` into the disjoint ranges `[offsets[k], offsets[k] + lens[k])`, in request order.
/// The argument rule of [`Store::gather_pieces`] (and the remote one): one piece per record,
/// of exactly its decoded length.
pub(crate) fn check_pieces(lens: impl ExactSizeIterator<Item = u32>, pieces: &[&mut [u8]]) -> Result<()> {
    let (n, m) = (lens.len(), pieces.len());
    if n != m {
        return Err(Error::BadArgument(format!("{n} records but {m} destination pieces")));
    }
    for (k, (len, piece)) in lens.zip(pieces).enumerate() {
        if piece.len() as u64 != u64::from(len) {
            return Err(Error::BadArgument(format!(
                "destination piece {k} is {} bytes but record {k} decodes to {len}",
                piece.len()
            )));
        }
    }
    Ok(())
}

/// The argument rule of [`Store::gather`] (and the remote one): one offset per index.
pub(crate) fn check_offsets(indices: &[u64], dst_offsets: &[u64]) -> Result<()> {
    let (n, m) = (indices.len(), dst_offsets.len());
    if n != m {
        return Err(Error::BadArgument(format!("{n} indices but {m} destination offsets")));
    }
    Ok(())
}

/// The argument rule of [`Store::gather_fixed`] (and the remote one): `dst` holds exactly
/// `indices.len()` records of `stride > 0` bytes. Returns the dense layout records must fit.
pub(crate) fn fixed_layout(indices: &[u64], dst: &[u8], stride: u64) -> Result<Layout> {
    let (n, size) = (indices.len(), dst.len());
    if stride == 0 || (n as u64).checked_mul(stride) != Some(size as u64) {
        let why = format!("buffer of {size} bytes does not hold {n} records of {stride} bytes");
        return Err(Error::BadArgument(why));
    }
    Ok(Layout { kind: Kind::Dense, item_bytes: stride })
}

/// The rows of `dst` (each `stride` bytes) at `positions`, in order: the destinations of a
/// gather that fills chosen rows of a batch (a mix fills each source's rows). Every position
/// must be a row of `dst`, and no row may be named twice.
pub(crate) fn rows_at<'d>(
    indices: &[u64],
    dst: &'d mut [u8],
    positions: &[u64],
    stride: u64,
) -> Result<(Vec<&'d mut [u8]>, Layout)> {
    if indices.len() != positions.len() {
        let why = format!("{} indices but {} row positions", indices.len(), positions.len());
        return Err(Error::BadArgument(why));
    }
    if stride == 0 || dst.len() as u64 % stride != 0 {
        let why = format!("buffer of {} bytes is not a whole number of {stride}-byte rows", dst.len());
        return Err(Error::BadArgument(why));
    }
    let mut rows: Vec<Option<&mut [u8]>> = dst.chunks_exact_mut(stride as usize).map(Some).collect();
    let n = rows.len();
    let pieces = positions
        .iter()
        .map(|&p| {
            usize::try_from(p).ok().and_then(|p| rows.get_mut(p)).and_then(Option::take).ok_or_else(|| {
                Error::BadArgument(format!("row position {p} is past the {n} rows or named twice"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((pieces, Layout { kind: Kind::Dense, item_bytes: stride }))
}

/// [`Layout::check`] for each `(index, decoded length)`, errors located at `at`.
pub(crate) fn check_fit(
    at: &Path,
    records: impl IntoIterator<Item = (u64, u32)>,
    layout: Layout,
) -> Result<()> {
    for (index, len) in records {
        layout.check(index, u64::from(len)).map_err(|e| Error::classified(at, e))?;
    }
    Ok(())
}

pub(crate) fn split_dst<'a>(dst: &'a mut [u8], offsets: &[u64], lens: &[u64]) -> Result<Vec<&'a mut [u8]>> {
    let size = dst.len() as u64;
    for (k, (&off, &len)) in offsets.iter().zip(lens).enumerate() {
        if off.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::BadArgument(format!(
                "buffer too small: record {k} needs bytes {off}..{} of a {size}-byte buffer",
                off.saturating_add(len)
            )));
        }
    }
    let mut order: Vec<usize> = (0..offsets.len()).collect();
    if !offsets.is_sorted() {
        order.sort_unstable_by_key(|&k| offsets[k]);
    }
    let mut pieces: Vec<(usize, &'a mut [u8])> = Vec::with_capacity(order.len());
    let mut rest = dst;
    let mut cursor = 0u64;
    for k in order {
        let (off, len) = (offsets[k], lens[k]);
        if off < cursor {
            return Err(Error::BadArgument(format!(
                "destination ranges overlap at record {k} (offset {off})"
            )));
        }
        // Both bounds were checked against the buffer size above.
        let (_, tail) = std::mem::take(&mut rest).split_at_mut((off - cursor) as usize);
        let (piece, tail) = tail.split_at_mut(len as usize);
        pieces.push((k, piece));
        rest = tail;
        cursor = off + len;
    }
    pieces.sort_unstable_by_key(|(k, _)| *k);
    Ok(pieces.into_iter().map(|(_, piece)| piece).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::error::Classify;

    #[test]
    fn records_that_do_not_fit_the_layout_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path().join("s")).unwrap();
        // Records of 12, 12 and 10 bytes.
        store.append(&[7u8; 34], &[0, 12, 24], Codec::Raw).unwrap();
        let rows = Layout { kind: Kind::Ragged, item_bytes: 4 };
        assert_eq!(store.lengths_fitting(&[1, 0], rows).unwrap(), vec![12, 12]);
        for layout in [rows, Layout { kind: Kind::Dense, item_bytes: 12 }] {
            let err = store.lengths_fitting(&[0, 2, 1], layout).unwrap_err();
            assert!(matches!(err, Error::Corrupt { ref file, .. } if file.ends_with("meta.zr")), "{err}");
            assert_eq!(err.offset(), Some(entry_offset(2)), "{err}");
            assert!(err.to_string().contains("record 2 is 10 bytes"), "{err}");
        }
        let err = store.lengths_fitting(&[3], rows).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { index: 3, length: 3 }), "{err}");

        let mut dst = [0u8; 24];
        let err = store.gather_fixed(&[0, 2], &mut dst, 12).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (loaderx_core::error::ErrorKind::Corrupt, Some(entry_offset(2)))
        );
        assert_eq!(dst, [0u8; 24], "a failed check leaves the buffer untouched");
        store.gather_fixed(&[1, 0], &mut dst, 12).unwrap();
        assert_eq!(dst, [7u8; 24]);
    }

    #[test]
    fn split_dst_checks_bounds_and_overlap() {
        let mut buf = [0u8; 10];
        let pieces = split_dst(&mut buf, &[6, 0, 3], &[4, 3, 3]).unwrap();
        assert_eq!(pieces.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![4, 3, 3]);
        assert!(split_dst(&mut buf, &[0, 8], &[3, 3]).is_err(), "past the end");
        assert!(split_dst(&mut buf, &[0, 2], &[3, 3]).is_err(), "overlap");
        assert!(split_dst(&mut buf, &[u64::MAX], &[3]).is_err(), "overflow");
        assert!(split_dst(&mut buf, &[], &[]).unwrap().is_empty());
    }

    #[test]
    fn split_dst_pieces_land_at_their_offsets() {
        let mut buf = [0u8; 6];
        let pieces = split_dst(&mut buf, &[4, 0], &[2, 2]).unwrap();
        for (k, piece) in pieces.into_iter().enumerate() {
            piece.fill(k as u8 + 1);
        }
        assert_eq!(buf, [2, 2, 0, 0, 1, 1]);
    }

    #[test]
    fn verify_reports_a_blank_table_tail_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::open_or_create(&path).unwrap();
        store.append(&[5u8; 30], &[0, 10, 20], Codec::Raw).unwrap();
        store.sync().unwrap();
        drop(store);
        let poke = |at: u64, value: u32| {
            use std::io::{Seek, SeekFrom, Write};
            let mut meta = fs::OpenOptions::new().write(true).open(meta_path(&path)).unwrap();
            meta.seek(SeekFrom::Start(at)).unwrap();
            meta.write_all(&value.to_le_bytes()).unwrap();
        };
        // A damaged record count: 1000 where 3 records were written.
        poke(12, 1000);
        let report = Store::open(&path).unwrap().verify(|_, _| {});
        assert_eq!((report.checked, report.bad.len(), report.unlisted), (1000, 1, 996));
        assert_eq!(report.bad[0].0, 3);
        assert!(report.bad[0].1.contains("record count is damaged"), "{}", report.bad[0].1);
        // One bad record inside the table is still reported as itself.
        poke(12, 3);
        poke(entry_offset(1) + 8, 0); // record 1's logical length
        let report = Store::open(&path).unwrap().verify(|_, _| {});
        assert_eq!((report.checked, report.unlisted), (3, 0));
        assert_eq!(report.bad.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn creating_a_store_at_a_url_is_refused_before_any_directory_exists() {
        let dir = tempfile::tempdir().unwrap();
        for url in ["s3://b/x", "http://user:pw@h/x?sig=s"] {
            let err = Store::open_or_create(url).unwrap_err();
            assert!(matches!(err, Error::BadArgument(_)), "{err}");
            assert!(!err.to_string().contains("pw") && !err.to_string().contains("sig=s"), "{err}");
        }
        // The form `pathlib.Path("s3://b/x")` takes: refused, never a local folder `s3:`.
        let err = Store::open_or_create("s3:/b/x").unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)) && err.to_string().contains("s3://b/x"), "{err}");
        assert!(!Path::new("s3:").exists());
        // Under a directory, `s3:` is only a folder name.
        assert!(Store::open_or_create(dir.path().join("s3:").join("b")).is_ok());
    }
}
