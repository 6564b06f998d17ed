//! The read path, written once for every source (`source.rs`): checks, planning, decoding on the
//! one fan-out, verify and stats.
//!
//! A call takes one [`View`] of the source, then:
//! 1. checks every index against the length (the delete journal's, where one is applied in
//!    memory) and reads the table entries, overlaid by the journal's;
//! 2. plans with core (`loaderx_core::read`): every entry is checked against the format rules
//!    and the chunk sizes, and records become byte ranges (one per record for a map; merged
//!    neighbours for a remote source);
//! 3. checks the layout and cuts the caller's buffer into one destination per record;
//! 4. fetches the ranges and decodes every record into its destination, on the calling thread or
//!    over it and the rayon pool together ([`decode_planned`]).
//!
//! Invariants:
//! * Nothing reaches the caller's buffer before steps 1 to 3 passed for every record: a failed
//!   check leaves the buffer untouched. A failure while decoding (damaged bytes) may leave
//!   records decoded before it; the call still fails, never reports a wrong record as good.
//! * A delete journal this handle could not finish on disk is read through core's journal rule
//!   (`loaderx_core::open::Overlay`): length `new_length`, the journal's entries in place of the
//!   table's. It stands while this handle has no writer (a writer finishes the journal on disk
//!   when it opens, see `journal.rs`) and while the table's length is one it applies to.

use std::path::{Path, PathBuf};

use std::collections::HashMap;

use loaderx_core::checksum::{self, Coverage, Standing, TableState, TableSum, Verdict, VerifyMode};
use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{Header, RecordLoc, MAX_RECORD_LEN};
use loaderx_core::open::{chunk_name, Overlay, META_FILE};
use loaderx_core::read::{self, GatherPlan, PlanRules, ReadError, ReadRange, Slot};
use loaderx_core::schema::{Kind, Layout, Schema};
use loaderx_core::stats::Stats;

use crate::error::{Error, Result};
use crate::source::{ChunkSource, Piece, View};
use crate::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use crate::sync::{self, Arc, Mutex};

/// Below this many bytes a gather runs on the calling thread: the fan-out costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 256 << 10;
/// The same, while a pool helper is at hand ([`crate::fanout::helper_at_hand`]): handing it half
/// a batch costs a compare-and-swap, not a wake-up.
const LINGERING_MIN_BYTES: u64 = 64 << 10;
/// Blocks a parallel gather is cut into, per thread.
const BLOCKS_PER_THREAD: usize = 16;
/// Records a remote source merges into one request when their gap is at most this.
const MAX_GAP: u64 = 64 << 10;
/// Largest decoded output of one call.
const MAX_OUT: u64 = 4 << 30;
/// Records verified per round.
const VERIFY_BLOCK: u64 = 4096;

/// What [`Reader::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Records checked.
    pub checked: u64,
    /// Records that failed, with the reason. A blank tail of the table (see [`Reader::verify`])
    /// is one entry here, its first record, and the rest are counted in `unlisted`.
    pub bad: Vec<(u64, String)>,
    /// Bad records not listed in `bad`.
    pub unlisted: u64,
    /// How many records checksums cover and verify (`checksums.lx`).
    pub coverage: Coverage,
}

impl VerifyReport {
    /// Adds the report of a part whose first record is `first` in the whole (a manifest's
    /// store, a join's part), its bad records renumbered.
    pub(crate) fn add_part(&mut self, part: VerifyReport, first: u64) {
        self.checked += part.checked;
        self.bad.extend(part.bad.into_iter().map(|(i, why)| (first + i, why)));
        self.unlisted += part.unlisted;
        self.coverage.add(part.coverage);
    }
}

/// A delete journal applied in memory (core's journal rule, see the module docs).
#[derive(Debug)]
struct Applied {
    overlay: Overlay,
    /// Cleared when this handle's writer finished the journal on disk.
    live: AtomicBool,
}

/// One store's reads, over any source.
#[derive(Debug)]
pub(crate) struct Reader {
    source: Arc<dyn ChunkSource>,
    /// Where errors say the store is (a directory, or a URL without its secrets).
    at: PathBuf,
    overlay: Option<Applied>,
    /// Which reads are checked against `checksums.lx` ([`VerifyMode`], by position in `ALL`).
    verify: AtomicU8,
    /// The table header for which a mismatch was found to be no damage (another writer changed
    /// the table since the checksums were written): reads skip the checks while it stands.
    changed: Mutex<Option<Header>>,
}

/// One record of a gather: its slot in the plan, its destination, and the checksum that covers
/// it when it is checked.
struct Job<'d> {
    slot: Slot,
    dst: &'d mut [u8],
    expected: Option<u64>,
}

/// A store's checked share of a gather, fetched and ready to decode.
pub(crate) struct Planned<'v, 'd> {
    reader: &'v Reader,
    view: &'v dyn View,
    at: &'v Path,
    ranges: Vec<ReadRange>,
    pieces: Vec<Piece<'v>>,
    dict: Option<&'v Dictionary>,
    jobs: Vec<Job<'d>>,
    bytes: u64,
}

impl std::fmt::Debug for Planned<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planned").field("at", &self.at).field("records", &self.jobs.len()).finish()
    }
}

impl Reader {
    /// A reader over `source`, with `overlay` (a delete journal found at open that this handle
    /// could not finish on disk; empty when there is none) applied in memory.
    pub(crate) fn new(source: Arc<dyn ChunkSource>, overlay: Overlay) -> Reader {
        let at = PathBuf::from(source.shown());
        let overlay = (!overlay.is_empty()).then(|| Applied { overlay, live: AtomicBool::new(true) });
        let verify = AtomicU8::new(
            VerifyMode::ALL.iter().position(|&m| m == VerifyMode::default()).unwrap_or(0) as u8,
        );
        Reader { source, at, overlay, verify, changed: Mutex::new(None) }
    }

    /// Which reads are checked against the store's checksums.
    pub(crate) fn verify_mode(&self) -> VerifyMode {
        VerifyMode::ALL.get(usize::from(self.verify.load(Ordering::Relaxed))).copied().unwrap_or_default()
    }

    /// Sets which reads are checked.
    pub(crate) fn set_verify_mode(&self, mode: VerifyMode) {
        let at = VerifyMode::ALL.iter().position(|&m| m == mode).unwrap_or(0);
        self.verify.store(at as u8, Ordering::Relaxed);
    }

    /// True when reads through `view` are checked: the mode asks for it, and the table is not
    /// one another writer changed since the checksums were written.
    fn checks(&self, view: &dyn View) -> bool {
        self.verify_mode().checks(!self.source.in_place())
            && *sync::lock(&self.changed) != Some(view.header())
            && matches!(view.sidecar_header(), Some(Ok(_)))
    }

    /// Whether a checksum mismatch in `view` is damage: the table (the file's, before any
    /// journal) is in a state the sidecar's writer left ([`loaderx_core::checksum::Standing`]).
    /// Reads the whole table: it runs only once a mismatch was found.
    pub(crate) fn standing(&self, view: &dyn View) -> Result<Standing> {
        const STEP: u64 = 1 << 16;
        let Some(Ok(head)) = view.sidecar_header() else { return Ok(Standing::Changed) };
        let header = view.header();
        let length = u64::from(header.length);
        let mut sum = TableSum::default();
        let mut start = 0;
        while start < length {
            let indices: Vec<u64> = (start..(start + STEP).min(length)).collect();
            view.entries(&indices)?.iter().for_each(|(i, loc)| sum.add(*i, loc));
            start += STEP;
        }
        let stale = view.stale_entry()?;
        let standing = head.standing_with(&TableState::new(&header, stale, sum), stale.is_some());
        if standing == Standing::Changed {
            *sync::lock(&self.changed) = Some(header);
        }
        Ok(standing)
    }

    /// The checksum covering each planned record of `entries` (request order, strict plan),
    /// `None` where none does; empty when reads through `view` are not checked.
    fn expected(
        &self,
        view: &dyn View,
        entries: &[(u64, RecordLoc)],
        slots: &[Slot],
    ) -> Result<Vec<Option<u64>>> {
        if !self.checks(view) {
            return Ok(Vec::new());
        }
        let indices: Vec<u64> = slots.iter().map(|s| s.index).collect();
        let found = view.slots(&indices)?;
        Ok(entries
            .iter()
            .zip(found)
            .map(|((_, loc), slot)| slot.filter(|s| s.covers(loc)).map(|s| s.hash))
            .collect())
    }

    /// Where errors say the store is.
    pub(crate) fn at(&self) -> &Path {
        &self.at
    }

    /// The source.
    pub(crate) fn source(&self) -> &dyn ChunkSource {
        &*self.source
    }

    /// Stops applying the journal: this handle's writer finished it on disk.
    pub(crate) fn drop_overlay(&self) {
        if let Some(o) = &self.overlay {
            o.live.store(false, Ordering::Release);
        }
    }

    /// The journal applied in memory, while it stands: this handle has not finished it on
    /// disk, and the table's length is one it applies to (a writer elsewhere may have moved on).
    fn overlay(&self, table_length: u32) -> Option<&Overlay> {
        let applied = self.overlay.as_ref().filter(|a| a.live.load(Ordering::Acquire))?;
        applied.overlay.journal().filter(|j| j.applies_to(table_length))?;
        Some(&applied.overlay)
    }

    /// A table header with the journal rule applied.
    fn effective(&self, header: Header) -> Header {
        self.overlay(header.length).map_or(header, |o| o.header(header))
    }

    /// The length a view shows, after the journal.
    fn length_of(&self, view: &dyn View) -> u64 {
        u64::from(self.effective(view.header()).length)
    }

    /// Number of live records.
    pub(crate) fn len(&self) -> u64 {
        u64::from(self.header().length)
    }

    /// A snapshot of the header (its length after the journal).
    pub(crate) fn header(&self) -> Header {
        self.effective(self.source.header())
    }

    /// True if the store has a dictionary.
    pub(crate) fn has_dict(&self) -> bool {
        self.source.dict().is_some()
    }

    /// The store's schema, if it has one.
    pub(crate) fn schema(&self) -> Result<Option<Schema>> {
        self.source.schema()
    }

    /// The dictionary bytes, if the store has one.
    pub(crate) fn dict_bytes(&self) -> Option<Vec<u8>> {
        self.source.dict().map(|d| d.bytes().to_vec())
    }

    /// Table entries of `indices` checked against the length, overlaid by the journal, each
    /// `None` where `meta.zr` ends first.
    fn raw_entries(&self, view: &dyn View, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>> {
        let table_length = view.header().length;
        let overlay = self.overlay(table_length);
        let length = overlay.map_or(table_length, |o| o.length(table_length));
        read::check_indices(indices, u64::from(length)).map_err(|e| match e {
            ReadError::Index { index, length } => Error::IndexOutOfRange { index, length },
            other => Error::classified(&self.at, other),
        })?;
        let Some(overlay) = overlay else {
            return view.entries(indices);
        };
        // The journal's entries take the place of the table's, which are not read for them.
        let moved: Vec<Option<RecordLoc>> = indices.iter().map(|&i| overlay.entry(i)).collect();
        let rest: Vec<u64> =
            indices.iter().zip(&moved).filter(|(_, m)| m.is_none()).map(|(&i, _)| i).collect();
        let mut found = view.entries(&rest)?.into_iter().map(|(_, loc)| loc);
        Ok(indices
            .iter()
            .zip(moved)
            // `found` holds exactly one entry for each index the overlay does not hold.
            .filter_map(|(&index, moved)| Some((index, moved.or_else(|| found.next())?)))
            .collect())
    }

    /// Plans `entries` with core: in place (one range a record) or merged, checked against the
    /// format rules and the chunk sizes; strict unless `lenient`.
    fn plan_entries(
        &self,
        view: &dyn View,
        entries: &[(u64, RecordLoc)],
        lenient: bool,
    ) -> Result<GatherPlan> {
        let in_place = self.source.in_place();
        let max_gap = if in_place { 0 } else { self.source.max_gap().unwrap_or(MAX_GAP) };
        let rules = PlanRules { chunk_lens: view.chunk_lens(), typed: None, max_gap, max_out: MAX_OUT };
        let plan = if in_place {
            read::plan_in_place(entries, &rules, lenient)
        } else {
            read::plan_gather(entries, &rules, lenient)
        };
        plan.map_err(|e| Error::classified(&self.at, e))
    }

    /// The checked table entries of `indices`.
    pub(crate) fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        let view = self.source.view()?;
        let entries = self.raw_entries(&*view, indices)?;
        let plan = self.plan_entries(&*view, &entries, false);
        drop(plan?);
        Ok(entries.into_iter().map(|(_, loc)| loc).collect())
    }

    /// Logical (decoded) length of each record, each checked to fit `layout` if given.
    pub(crate) fn lengths_with(&self, indices: &[u64], layout: Option<Layout>) -> Result<Vec<u32>> {
        let view = self.source.view()?;
        let entries = self.raw_entries(&*view, indices)?;
        let plan = self.plan_entries(&*view, &entries, false)?;
        if let Some(layout) = layout {
            check_fit(&self.at, plan.slots.iter().map(|s| (s.index, s.logic)), layout)?;
        }
        Ok(plan.slots.iter().map(|s| s.logic).collect())
    }

    /// Checks `indices` (and that each record fits `layout`, if given), cuts the destinations
    /// with `dsts` (given each record's decoded length) and fetches the bytes: everything but
    /// the decoding, which [`decode_planned`] does.
    pub(crate) fn plan<'v, 'd>(
        &'v self,
        view: &'v dyn View,
        indices: &[u64],
        layout: Option<Layout>,
        dsts: impl FnOnce(&[u32]) -> Result<Vec<&'d mut [u8]>>,
    ) -> Result<Planned<'v, 'd>> {
        let entries = self.raw_entries(view, indices)?;
        let GatherPlan { ranges, slots, .. } = self.plan_entries(view, &entries, false)?;
        if let Some(layout) = layout {
            check_fit(&self.at, slots.iter().map(|s| (s.index, s.logic)), layout)?;
        }
        let lens: Vec<u32> = slots.iter().map(|s| s.logic).collect();
        let expected = self.expected(view, &entries, &slots)?;
        let dsts = dsts(&lens)?;
        let bytes = lens.iter().map(|&n| u64::from(n)).sum();
        let pieces = view.fetch(&ranges)?;
        let read: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        crate::meter::add(|m| m.read_bytes = m.read_bytes.wrapping_add(read));
        let jobs = slots
            .into_iter()
            .zip(dsts)
            .enumerate()
            .map(|(k, (slot, dst))| Job { slot, dst, expected: expected.get(k).copied().flatten() })
            .collect();
        Ok(Planned { reader: self, view, at: &self.at, ranges, pieces, dict: view.dict(), jobs, bytes })
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]`. The
    /// destination ranges must lie inside `dst` and must not overlap.
    pub(crate) fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        check_offsets(indices, dst_offsets)?;
        let view = self.source.view()?;
        let planned = self.plan(&*view, indices, None, |lens| {
            let lens: Vec<u64> = lens.iter().map(|&n| u64::from(n)).collect();
            split_dst(dst, dst_offsets, &lens)
        })?;
        decode_planned(vec![planned])
    }

    /// Decodes records `indices`, each exactly `stride` bytes, back to back into `dst`.
    pub(crate) fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        let layout = fixed_layout(indices, dst, stride)?;
        let view = self.source.view()?;
        let planned = self
            .plan(&*view, indices, Some(layout), |_| Ok(dst.chunks_exact_mut(stride as usize).collect()))?;
        decode_planned(vec![planned])
    }

    /// Decodes records `indices` into `pieces`, one slice per record of exactly its decoded
    /// length; with `layout`, every record must fit it first.
    pub(crate) fn gather_pieces(
        &self,
        indices: &[u64],
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        let view = self.source.view()?;
        let planned = self.plan(&*view, indices, layout, |lens| {
            check_pieces(lens.iter().copied(), &pieces)?;
            Ok(pieces)
        })?;
        decode_planned(vec![planned])
    }

    /// The digest of the store's content (`loaderx_core::checksum::content_digest`): `None`
    /// unless checksums cover every live record and the table is as their writer left it.
    /// Reads the table and the checksums, never a record.
    pub(crate) fn content_digest(&self) -> Result<Option<String>> {
        const STEP: u64 = 1 << 16;
        let view = self.source.view()?;
        if !matches!(view.sidecar_header(), Some(Ok(_))) {
            return Ok(None);
        }
        let length = self.length_of(&*view);
        let mut records = Vec::with_capacity(length as usize);
        let mut start = 0;
        while start < length {
            let indices: Vec<u64> = (start..(start + STEP).min(length)).collect();
            let entries = self.raw_entries(&*view, &indices)?;
            let slots = view.slots(&indices)?;
            for ((_, loc), slot) in entries.iter().zip(slots.iter().chain(std::iter::repeat(&None))) {
                match slot.filter(|s| s.covers(loc)) {
                    Some(s) => records.push(checksum::Covered {
                        logic_length: loc.logic_length,
                        compress: loc.compress,
                        hash: s.hash,
                    }),
                    None => return Ok(None),
                }
            }
            start += STEP;
        }
        if self.standing(&*view)? != Standing::Sealed {
            return Ok(None);
        }
        let schema = self.source.schema()?.map(|s| s.to_msgpack());
        let dict = view.dict().map(|d| d.bytes().to_vec());
        Ok(Some(checksum::content_digest(schema.as_deref(), dict.as_deref(), records)))
    }

    /// The store's identity for exclusion masks (`loaderx_core::mask::Identity`): its schema,
    /// its table entries as read (the delete journal applied), and its content digest, or when
    /// checksums do not cover it, the bytes of the sampled records.
    pub(crate) fn mask_identity(&self) -> Result<[u8; 32]> {
        const STEP: u64 = 1 << 16;
        let view = self.source.view()?;
        let length = self.length_of(&*view);
        let schema = self.source.schema()?.map(|s| s.to_msgpack());
        let mut id = loaderx_core::mask::Identity::new(schema.as_deref());
        let mut start = 0;
        while start < length {
            let indices: Vec<u64> = (start..(start + STEP).min(length)).collect();
            let bytes: Vec<u8> =
                self.raw_entries(&*view, &indices)?.iter().flat_map(|(_, loc)| loc.to_bytes()).collect();
            id.table(&bytes);
            start += STEP;
        }
        drop(view);
        match self.content_digest()? {
            Some(digest) => id.digest(&digest),
            None => {
                let picks = loaderx_core::mask::sampled(length);
                let lens = self.lengths_with(&picks, None)?;
                let (offsets, total) = packed(&lens);
                let mut buf = vec![0u8; total as usize];
                self.gather(&picks, &mut buf, &offsets)?;
                let mut at = 0usize;
                for &len in &lens {
                    id.record(&buf[at..at + len as usize]);
                    at += len as usize;
                }
            }
        }
        Ok(id.finish())
    }

    /// Storage usage, from the whole table.
    pub(crate) fn stats(&self) -> Result<Stats> {
        const STEP: u64 = 1 << 16;
        let view = self.source.view()?;
        let header = self.effective(view.header());
        let length = u64::from(header.length);
        let mut all = Vec::with_capacity(length as usize);
        let mut start = 0;
        while start < length {
            let indices: Vec<u64> = (start..(start + STEP).min(length)).collect();
            all.extend(self.raw_entries(&*view, &indices)?.into_iter().map(|(_, loc)| loc));
            start += STEP;
        }
        Ok(Stats::from_entries(&header, all))
    }

    /// Decodes every record and checks its table entry, bounds and length, in blocks (one round
    /// of reads each). `progress(done, total)` after each block.
    ///
    /// Table entries are never blank (all zero) once written, so when the table ends in a run of
    /// blank entries the header's record count is damaged: that run is reported as one problem
    /// (its first record, the others counted in [`VerifyReport::unlisted`]), not decoded record
    /// by record (a damaged count can claim 2^24 records).
    ///
    /// Unless `deep`, a record whose checksum covers and matches it is not decoded: the bytes are
    /// the ones its writer wrote (and decoded when it wrote them).
    pub(crate) fn verify(&self, deep: bool, mut progress: impl FnMut(u64, u64)) -> VerifyReport {
        let mut report = VerifyReport::default();
        let view = match self.source.view() {
            Ok(v) => v,
            Err(e) => {
                report.bad.push((0, e.to_string()));
                return report;
            }
        };
        let total = self.length_of(&*view);
        let blank_from = self.blank_tail(&*view, total);
        let mut buf = Vec::new();
        let mut standing = None;
        let mut start = 0;
        while start < blank_from {
            let end = (start + VERIFY_BLOCK).min(blank_from);
            let indices: Vec<u64> = (start..end).collect();
            if let Err(e) = self.verify_block(&*view, &indices, deep, &mut buf, &mut standing, &mut report) {
                // The block's table could not be read: each record on its own, to name them.
                drop(e);
                for &index in &indices {
                    if let Err(e) =
                        self.verify_block(&*view, &[index], deep, &mut buf, &mut standing, &mut report)
                    {
                        report.bad.push((index, e.to_string()));
                    }
                }
            }
            report.checked = end;
            progress(end, total);
            start = end;
        }
        if blank_from < total {
            let meta = self.at.join(META_FILE);
            let why =
                loaderx_core::verify::blank_tail_problem(&meta.display().to_string(), blank_from, total);
            report.bad.push((blank_from, why));
            report.unlisted = total - blank_from - 1;
            report.checked = total;
            progress(total, total);
        }
        report
    }

    /// Verifies records `indices`: bad entries and records that fail to decode go to `report`;
    /// an error is returned only when the block could not be read at all.
    fn verify_block(
        &self,
        view: &dyn View,
        indices: &[u64],
        deep: bool,
        buf: &mut Vec<u8>,
        standing: &mut Option<Standing>,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let entries = self.raw_entries(view, indices)?;
        let plan = self.plan_entries(view, &entries, true)?;
        let mut bad: Vec<(u64, String)> =
            plan.bad.iter().map(|(i, e)| (*i, Error::classified(&self.at, e.clone()).to_string())).collect();
        let pieces = view.fetch(&plan.ranges)?;
        let mut decoder = Decoder::new(view.dict());
        buf.resize(MAX_RECORD_LEN as usize, 0);
        // Checksums first (over the stored bytes), then the decode check.
        let found = if matches!(view.sidecar_header(), Some(Ok(_))) {
            view.slots(&plan.slots.iter().map(|s| s.index).collect::<Vec<_>>())?
        } else {
            Vec::new()
        };
        let locs: HashMap<u64, RecordLoc> = entries.iter().copied().collect();
        for (k, slot) in plan.slots.iter().enumerate() {
            let range = &plan.ranges[slot.range];
            let stored =
                pieces[slot.range].get(slot.at as usize..(slot.at + u64::from(slot.stored)) as usize);
            if let (Some(loc), Some(stored)) = (locs.get(&slot.index), stored) {
                let covering = found.get(k).copied().flatten();
                let verdict = checksum::check(covering.as_ref(), loc, stored);
                if let Verdict::Mismatch { expected, found } = verdict {
                    if *standing.get_or_insert_with(|| self.standing(view).unwrap_or(Standing::Changed))
                        == Standing::Sealed
                    {
                        let file = self.at.join(chunk_name(range.chunk));
                        let offset = range.start + slot.at;
                        let e = Error::Checksum { index: slot.index, file, offset, expected, found };
                        bad.push((slot.index, e.to_string()));
                    }
                }
                report.coverage.count(verdict, standing.unwrap_or(Standing::Sealed));
                if verdict == Verdict::Verified && !deep {
                    continue;
                }
            }
            let dst = &mut buf[..slot.logic as usize];
            if let Err(e) = decode_one(&self.at, &plan.ranges, &pieces, &mut decoder, slot, None, dst) {
                bad.push((slot.index, e.to_string()));
            }
        }
        bad.sort_by_key(|(i, _)| *i);
        report.bad.extend(bad);
        Ok(())
    }

    /// Where the run of blank (never written) table entries that ends the table starts: `length`
    /// when the last entry is not blank (core's scan, `loaderx_core::verify`).
    fn blank_tail(&self, view: &dyn View, length: u64) -> u64 {
        let mut from = length;
        while let Some(window) = loaderx_core::verify::scan_window(from) {
            let indices: Vec<u64> = window.clone().collect();
            let Ok(entries) = self.raw_entries(view, &indices) else { return from };
            let entries: Vec<RecordLoc> = entries.into_iter().map(|(_, e)| e).collect();
            match loaderx_core::verify::written_end(window.start, &entries) {
                Some(end) => return end,
                None => from = window.start,
            }
        }
        0
    }
}

/// Decodes one slot from its fetched range into `dst`, checking its stored bytes against
/// `expected` first when given; a failure names the chunk file and the byte the record starts at.
fn decode_one(
    at: &Path,
    ranges: &[ReadRange],
    pieces: &[Piece<'_>],
    decoder: &mut Decoder<'_>,
    slot: &Slot,
    expected: Option<u64>,
    dst: &mut [u8],
) -> Result<()> {
    let range = &ranges[slot.range];
    read::decode_slot(slot, range, &pieces[slot.range], decoder, None, expected, dst).map_err(|e| match e {
        ReadError::Checksum { index, chunk, start, expected, found } => {
            Error::Checksum { index, file: at.join(chunk_name(chunk)), offset: start, expected, found }
        }
        ReadError::Decode { index, source } => Error::Decode {
            index,
            file: at.join(chunk_name(range.chunk)),
            offset: range.start + slot.at,
            source,
        },
        ReadError::Short { chunk, start, .. } => {
            Error::corrupt_at(at.join(chunk_name(chunk)), start, "record lies past the end of the file")
        }
        other => Error::classified(at, other),
    })
}

/// Decodes planned records (of one store or several) into their destinations, checking the
/// stored bytes of checked records against their checksums.
///
/// A checksum mismatch is settled before it is reported: a remote store's bytes are fetched
/// once more, past any cache (a transfer may have damaged them); if they still do not match,
/// the mismatch is damage only while the store's table is as the checksums' writer left it
/// ([`Reader::standing`]); otherwise the store's records are read unchecked. Fetched bytes are
/// kept in a cache only once every checked record of the call matched.
pub(crate) fn decode_planned(plans: Vec<Planned<'_, '_>>) -> Result<()> {
    crate::meter::timed(|m| &mut m.decode_ns, || decode_settled(plans))
}

/// [`decode_planned`], unmetered.
fn decode_settled(mut plans: Vec<Planned<'_, '_>>) -> Result<()> {
    let mut refetched = false;
    loop {
        let error = match decode_all(&mut plans) {
            Ok(()) => {
                plans.iter().for_each(|p| p.view.settle(true));
                return Ok(());
            }
            Err(e) => e,
        };
        plans.iter().for_each(|p| p.view.settle(false));
        let Error::Checksum { file, .. } = &error else { return Err(error) };
        let Some(p) = plans.iter_mut().find(|p| file.parent() == Some(p.at)) else { return Err(error) };
        if !p.reader.source.in_place() && !refetched {
            refetched = true;
            p.view.forget(&p.ranges);
            p.pieces = p.view.fetch(&p.ranges)?;
            continue;
        }
        if p.reader.standing(p.view)? == Standing::Sealed {
            return Err(error);
        }
        p.jobs.iter_mut().for_each(|j| j.expected = None);
    }
}

/// One decoding round of [`decode_planned`]: on the calling thread when the batch is small or
/// other gathers already keep every core busy, else in blocks over the calling thread and this
/// process's rayon pool.
fn decode_all(plans: &mut [Planned<'_, '_>]) -> Result<()> {
    let total: u64 = plans.iter().map(|p| p.bytes).sum();
    let records: usize = plans.iter().map(|p| p.jobs.len()).sum();
    let threads = crate::process::threads();
    let run = |(p, jobs): (&Shared<'_, '_>, &mut [Job<'_>])| {
        let mut decoder = Decoder::new(p.dict);
        jobs.iter_mut().try_for_each(|job| {
            decode_one(p.at, p.ranges, p.pieces, &mut decoder, &job.slot, job.expected, job.dst)
        })
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
        return plans.iter_mut().try_for_each(|Planned { at, ranges, pieces, dict, jobs, .. }| {
            run((&Shared { at, ranges, pieces, dict: *dict }, jobs))
        });
    }
    let mut heads = Vec::with_capacity(plans.len());
    let mut lists = Vec::with_capacity(plans.len());
    for Planned { at, ranges, pieces, dict, jobs, .. } in plans.iter_mut() {
        heads.push(Shared { at, ranges, pieces, dict: *dict });
        lists.push(jobs);
    }
    // Many small blocks per thread, so the threads finish together: the last block is all
    // one thread can be left alone with.
    let block = records.div_ceil(threads * BLOCKS_PER_THREAD);
    let blocks: Vec<(&Shared<'_, '_>, &mut [Job<'_>])> = heads
        .iter()
        .zip(lists)
        .flat_map(|(head, jobs)| jobs.chunks_mut(block).map(move |c| (head, c)))
        .collect();
    crate::fanout::for_each_block(blocks, threads - 1, run)
}

/// The read-only half of a [`Planned`], which every block of it shares.
struct Shared<'a, 'v> {
    at: &'a Path,
    ranges: &'a [ReadRange],
    pieces: &'a [Piece<'v>],
    dict: Option<&'a Dictionary>,
}

/// The argument rule of [`Reader::gather_pieces`]: one piece per record, of exactly its decoded
/// length.
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

/// The argument rule of [`Reader::gather`]: one offset per index.
pub(crate) fn check_offsets(indices: &[u64], dst_offsets: &[u64]) -> Result<()> {
    let (n, m) = (indices.len(), dst_offsets.len());
    if n != m {
        return Err(Error::BadArgument(format!("{n} indices but {m} destination offsets")));
    }
    Ok(())
}

/// The argument rule of [`Reader::gather_fixed`]: `dst` holds exactly `indices.len()` records of
/// `stride > 0` bytes. Returns the dense layout records must fit.
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

/// Splits `dst` into the disjoint ranges `[offsets[k], offsets[k] + lens[k])`, in request order.
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

/// Where each record of decoded lengths `lens` starts when they are packed back to back into one
/// buffer, and the buffer's size (u32 lengths summed in u64 cannot overflow).
pub fn packed(lens: &[u32]) -> (Vec<u64>, u64) {
    let mut total = 0u64;
    let offsets = lens
        .iter()
        .map(|&n| {
            let at = total;
            total += u64::from(n);
            at
        })
        .collect();
    (offsets, total)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
