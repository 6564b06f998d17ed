//! A store reader whose I/O lives in JavaScript: it holds the header, schema, dictionary, chunk
//! sizes and cached table pages, plans each call's ranged reads ([`Plan`]) and decodes the bytes
//! JavaScript brings back.
//!
//! Invariants: every index, table entry and returned range is checked before use (see
//! `loaderx_core::read`); a call's decoded output is capped at [`MAX_OUT`] bytes; no error path
//! panics, so a failed call leaves the module usable.

use loaderx_core::checksum::{
    self, Covered, SidecarError, SidecarHeader, SlotCache, Standing, TableState, TableSum, VerifyMode,
};
use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{entry_offset, Header, RecordLoc, ENTRY_SIZE, MAX_CHUNKS, MAX_RECORDS};
use loaderx_core::open::{self, Overlay, Table};
use loaderx_core::read::{self, GatherPlan, PlanRules, ReadError, ReadRange, Slot};
use loaderx_core::schema::{Layout, Schema};
use loaderx_core::stats::Stats;
use loaderx_core::view::ElementView;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

use crate::error::{argument, js, to_js};

/// Largest decoded output of one call (512 MiB).
pub const MAX_OUT: u64 = 512 << 20;
/// Table pages kept before the cache starts over (64 MiB, four million entries).
const TABLE_CACHE_CAP: usize = 64 << 20;

/// The schema facts a reader uses.
#[derive(Debug)]
struct Typed {
    schema: Schema,
    layout: Layout,
    view: ElementView,
    item_shape: Vec<u64>,
}

/// An open store, minus its I/O.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Reader {
    header: Header,
    chunk_lens: Vec<Option<u64>>,
    /// Shared with decodes running on the thread pool (threaded build).
    pub(crate) dict: Option<Arc<Dictionary>>,
    typed: Option<Typed>,
    /// The table under the journal rule.
    table: Table,
    /// The header as `meta.zr` holds it (before any journal): what checksums' states name.
    raw_header: Header,
    /// A delete journal is applied: the table on disk is not the one read, so a checksum
    /// mismatch is never taken for damage.
    journaled: bool,
    /// `checksums.lx`, when the store has one: its header, and the slot pages read so far.
    sidecar: Option<(Result<SidecarHeader, SidecarError>, SlotCache)>,
    /// Which reads are checked, and whether this store's bytes come over the network.
    verify: VerifyMode,
    fetched: bool,
    /// A mismatch was found to be no damage (another writer changed the table): unchecked since.
    changed: bool,
}

/// Sidecar ranges are coalesced up to this many bytes.
const SLOT_RANGE: u64 = 1 << 20;

/// A JavaScript number that must be a whole count (a length, an index): exact up to 2^53.
pub(crate) fn size(x: f64, what: &str) -> Result<u64, JsValue> {
    if x >= 0.0 && x.fract() == 0.0 && x <= 2f64.powi(53) {
        Ok(x as u64)
    } else {
        Err(argument(&format!("{what} must be a non-negative integer, got {x}")))
    }
}

fn set(obj: &js_sys::Object, key: &str, value: impl Into<JsValue>) {
    // Defining a property on a plain fresh object cannot fail.
    let _ = js_sys::Reflect::set(obj, &key.into(), &value.into());
}

#[wasm_bindgen]
impl Reader {
    /// Opens a store from the first bytes of `meta.zr` (at least 16; fewer is a corrupt store)
    /// and the size of `meta.zr` (core's open protocol, `loaderx_core::open`). Add
    /// `schema.msgpack`, `dict.zr`, `delete.journal` and the chunk sizes next.
    #[wasm_bindgen(constructor)]
    pub fn new(header: &[u8], meta_len: f64) -> Result<Reader, JsValue> {
        let meta_len = size(meta_len, "meta.zr size")?;
        let header = open::read_header(header, meta_len).map_err(js)?;
        Ok(Reader {
            header,
            chunk_lens: Vec::new(),
            dict: None,
            typed: None,
            table: Table::new(&header, Overlay::default()),
            raw_header: header,
            journaled: false,
            sidecar: None,
            verify: VerifyMode::default(),
            fetched: false,
            changed: false,
        })
    }

    /// Loads the first bytes of `checksums.lx` (its header: up to 128) and its size. A header
    /// that cannot be used leaves every record uncovered (reads are then unchecked).
    #[wasm_bindgen(js_name = setSidecar)]
    pub fn set_sidecar(&mut self, head: &[u8], file_size: f64) -> Result<(), JsValue> {
        let len = size(file_size, "checksums.lx size")?;
        self.sidecar = Some((SidecarHeader::parse(head), SlotCache::new(len)));
        Ok(())
    }

    /// Which reads are checked: `mode` is `off`, `fetched` (the default) or `always`; `fetched`
    /// says whether this store's bytes come over the network.
    #[wasm_bindgen(js_name = setVerify)]
    pub fn set_verify(&mut self, mode: &str, fetched: bool) -> Result<(), JsValue> {
        self.verify = VerifyMode::from_name(mode)
            .ok_or_else(|| argument(&format!("verify must be 'off', 'fetched' or 'always', not {mode:?}")))?;
        self.fetched = fetched;
        Ok(())
    }

    /// The verify mode's name.
    #[wasm_bindgen(getter, js_name = verifyMode)]
    pub fn verify_mode(&self) -> String {
        self.verify.name().into()
    }

    /// Whether the store has a usable `checksums.lx`.
    #[wasm_bindgen(getter, js_name = hasChecksums)]
    pub fn has_checksums(&self) -> bool {
        matches!(self.sidecar, Some((Ok(_), _)))
    }

    /// `[start, end, …]` byte ranges of `checksums.lx` holding the slots of `indices` that are
    /// not loaded yet: empty when reads of them are not checked (see `plan`), or `all`.
    #[wasm_bindgen(js_name = slotRanges)]
    pub fn slot_ranges(&self, indices: &[f64], all: bool) -> Result<Vec<f64>, JsValue> {
        if !(all || self.checks()) {
            return Ok(Vec::new());
        }
        let Some((Ok(_), cache)) = &self.sidecar else { return Ok(Vec::new()) };
        let idx = indices.iter().map(|&i| size(i, "index")).collect::<Result<Vec<_>, _>>()?;
        Ok(cache.missing(idx, SLOT_RANGE).iter().flat_map(|r| [r.start as f64, r.end as f64]).collect())
    }

    /// [`slotRanges`](Self::slot_ranges) for records `start..end`, whatever the mode.
    #[wasm_bindgen(js_name = slotRangesSpan)]
    pub fn slot_ranges_span(&self, start: f64, end: f64) -> Result<Vec<f64>, JsValue> {
        let Some((Ok(_), cache)) = &self.sidecar else { return Ok(Vec::new()) };
        let (start, end) = (size(start, "start")?, size(end, "end")?);
        Ok(cache
            .missing(start..end, SLOT_RANGE)
            .iter()
            .flat_map(|r| [r.start as f64, r.end as f64])
            .collect())
    }

    /// Stores bytes read from `checksums.lx` at `start` (a range `slotRanges` named).
    #[wasm_bindgen(js_name = addSlots)]
    pub fn add_slots(&mut self, start: f64, bytes: &[u8]) -> Result<(), JsValue> {
        if let Some((_, cache)) = &mut self.sidecar {
            cache.insert(size(start, "start")?, bytes);
        }
        Ok(())
    }

    /// The byte range `[start, end]` of `meta.zr` holding the entry just past the live table,
    /// which the checksums' states name (`standing`, `contentDigest`); none when the table is full.
    #[wasm_bindgen(js_name = staleRange)]
    pub fn stale_range(&self) -> Option<Vec<f64>> {
        let length = u64::from(self.raw_header.length);
        (length < MAX_RECORDS).then(|| {
            let at = entry_offset(length);
            vec![at as f64, (at + ENTRY_SIZE) as f64]
        })
    }

    /// Whether a checksum mismatch is damage: the table (every page of it loaded, see
    /// `tableRangesSpan`) is as the checksums' writer left it. `stale` is the entry past the
    /// live table (`staleRange`), or undefined where `meta.zr` ends first. When it is not,
    /// later reads are unchecked (the records are unverified, not damaged). Returns `true` for
    /// damage.
    /// A table not loaded whole (too large for the table cache) is never taken for damage.
    pub fn standing(&mut self, stale: Option<Vec<u8>>) -> Result<bool, JsValue> {
        let sealed = matches!(self.standing_of(stale.as_deref()), Ok(Standing::Sealed));
        if !sealed {
            self.changed = true;
        }
        Ok(sealed)
    }

    /// Records whose checksum covers them, of those whose table page and slot are loaded.
    #[wasm_bindgen(js_name = coveredCount)]
    pub fn covered_count(&self) -> f64 {
        let Some((Ok(_), cache)) = &self.sidecar else { return 0.0 };
        let covered = (0..u64::from(self.header.length))
            .filter(|&i| {
                let (Some(loc), Some(Some(slot))) = (self.table.entry(i), cache.slot(i)) else {
                    return false;
                };
                slot.covers(&loc)
            })
            .count();
        covered as f64
    }

    /// The digest of the store's content (`loaderx_core::checksum::content_digest`), from the
    /// schema, dictionary, table and checksums (every table page and slot loaded), or undefined
    /// unless checksums cover every record and the table is as their writer left it.
    #[wasm_bindgen(js_name = contentDigest)]
    pub fn content_digest(&self, stale: Option<Vec<u8>>) -> Result<Option<String>, JsValue> {
        let Some((Ok(_), cache)) = &self.sidecar else { return Ok(None) };
        let length = u64::from(self.header.length);
        let mut records = Vec::with_capacity(length as usize);
        for i in 0..length {
            let loc = self.loaded_entry(i)?;
            let slot = cache.slot(i).ok_or_else(|| argument("load every slot first (slotRangesSpan)"))?;
            match slot.filter(|s| s.covers(&loc)) {
                Some(s) => records.push(Covered {
                    logic_length: loc.logic_length,
                    compress: loc.compress,
                    hash: s.hash,
                }),
                None => return Ok(None),
            }
        }
        if self.standing_of(stale.as_deref())? != Standing::Sealed {
            return Ok(None);
        }
        let schema = self.typed.as_ref().map(|t| t.schema.to_msgpack());
        let dict = self.dict.as_ref().map(|d| d.bytes().to_vec());
        Ok(Some(checksum::content_digest(schema.as_deref(), dict.as_deref(), records)))
    }

    /// The names of a store's files, from core's open protocol: `{meta, dict, schema, journal,
    /// manifest}`, and `maxSide` (the largest schema or dictionary) and `maxJournal` in bytes.
    #[wasm_bindgen(js_name = storeFiles)]
    pub fn store_files() -> JsValue {
        let o = js_sys::Object::new();
        set(&o, "meta", open::META_FILE);
        set(&o, "dict", open::DICT_FILE);
        set(&o, "schema", open::SCHEMA_FILE);
        set(&o, "journal", open::JOURNAL_FILE);
        set(&o, "checksums", open::CHECKSUM_FILE);
        set(&o, "manifest", open::MANIFEST_FILE);
        set(&o, "maxSide", JsValue::from_f64(open::MAX_SIDE_BYTES as f64));
        set(&o, "maxJournal", JsValue::from_f64(open::MAX_JOURNAL_BYTES as f64));
        o.into()
    }

    /// Chunk file `id`'s name (`<id>.zr`).
    #[wasm_bindgen(js_name = chunkName)]
    pub fn chunk_name(id: u16) -> String {
        open::chunk_name(id)
    }

    /// Applies the bytes of `delete.journal` (a delete a native writer did not finish): the
    /// store then reads as the finished deletion. A journal that does not parse or does not
    /// apply to the table is a corrupt-store error naming `delete.journal`. Call it once, before
    /// reading any table entry.
    #[wasm_bindgen(js_name = setJournal)]
    pub fn set_journal(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        let overlay = Overlay::parse(bytes, self.header.length).map_err(js)?;
        self.header = overlay.header(self.header);
        self.table = Table::new(&self.header, overlay);
        self.journaled = true;
        Ok(())
    }

    /// Parses and checks the bytes of `schema.msgpack`.
    #[wasm_bindgen(js_name = setSchema)]
    pub fn set_schema(&mut self, bytes: &[u8]) -> Result<(), JsValue> {
        self.typed = Some(parse_schema(bytes).map_err(crate::error::schema)?);
        Ok(())
    }

    /// Loads the bytes of `dict.zr` (prepared once for every later decode).
    #[wasm_bindgen(js_name = setDict)]
    pub fn set_dict(&mut self, bytes: Vec<u8>) {
        self.dict = Some(Arc::new(Dictionary::new(bytes)));
    }

    /// Live records.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        f64::from(self.header.length)
    }

    /// The last chunk file the store uses; files `0.zr ..= tailChunk.zr` may hold records.
    #[wasm_bindgen(getter, js_name = tailChunk)]
    pub fn tail_chunk(&self) -> u16 {
        self.header.tail_chunk
    }

    /// The header fields.
    pub fn header(&self) -> JsValue {
        let o = js_sys::Object::new();
        set(&o, "version", self.header.version);
        set(&o, "tailChunk", self.header.tail_chunk);
        set(&o, "tailOffset", self.header.tail_offset);
        set(&o, "length", self.header.length);
        o.into()
    }

    /// Sizes of chunk files `0..n` (a negative size means the file is missing).
    #[wasm_bindgen(js_name = setChunkLens)]
    pub fn set_chunk_lens(&mut self, lens: &[f64]) -> Result<(), JsValue> {
        if lens.len() as u64 > MAX_CHUNKS {
            return Err(argument("more chunk sizes than the 4096-chunk limit"));
        }
        self.chunk_lens = lens
            .iter()
            .map(|&x| (x >= 0.0).then(|| size(x, "chunk size")).transpose())
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// `{kind, dtype, itemShape, codec, arrayType, extraDim, itemBytes}`, plus `media` for a
    /// store of encoded images (`"jpeg"`, `"png"`, `"webp"` or `"mixed"`), or `null` for a store
    /// without `schema.msgpack` (records are then plain bytes).
    pub fn schema(&self) -> JsValue {
        let Some(t) = &self.typed else { return JsValue::NULL };
        let o = js_sys::Object::new();
        set(&o, "kind", t.layout.kind.as_str());
        set(&o, "dtype", t.schema.dtype_str().unwrap_or_default());
        let shape: js_sys::Array = t.item_shape.iter().map(|&d| JsValue::from_f64(d as f64)).collect();
        set(&o, "itemShape", shape);
        set(&o, "codec", t.schema.codec().map_or(JsValue::NULL, JsValue::from));
        set(&o, "arrayType", t.view.array.name());
        set(&o, "extraDim", t.view.extra_dim.map_or(JsValue::NULL, |d| JsValue::from_f64(d as f64)));
        set(&o, "itemBytes", JsValue::from_f64(t.layout.item_bytes as f64));
        if let Some(media) = t.schema.get_str("media") {
            set(&o, "media", media);
        }
        o.into()
    }

    /// Whether the store has a dictionary (`dict.zr`).
    #[wasm_bindgen(getter, js_name = hasDict)]
    pub fn has_dict(&self) -> bool {
        self.dict.is_some()
    }

    /// Checks `indices` and returns the `meta.zr` ranges (`[start, end, start, end, …]`) that
    /// must be read, and given to [`addTable`](Self::add_table), before planning them.
    #[wasm_bindgen(js_name = tableRanges)]
    pub fn table_ranges(&mut self, indices: &[f64]) -> Result<Vec<f64>, JsValue> {
        let checked = self.indices(indices)?;
        Ok(self.missing(checked))
    }

    /// The uncached `meta.zr` ranges for records `start..end` (clipped to the length).
    #[wasm_bindgen(js_name = tableRangesSpan)]
    pub fn table_ranges_span(&mut self, start: f64, end: f64) -> Result<Vec<f64>, JsValue> {
        let len = u64::from(self.header.length);
        let (start, end) = (size(start, "start")?.min(len), size(end, "end")?.min(len));
        Ok(self.missing(start..end))
    }

    /// Caches table bytes read from `meta.zr` at `start`.
    #[wasm_bindgen(js_name = addTable)]
    pub fn add_table(&mut self, start: f64, bytes: &[u8]) -> Result<(), JsValue> {
        self.table.insert(size(start, "start")?, bytes).map_err(js)
    }

    /// Logical lengths (bytes) of records whose table pages are cached.
    pub fn lengths(&self, indices: &[f64]) -> Result<Vec<f64>, JsValue> {
        let entries = self.entries(indices)?;
        Ok(entries.iter().map(|(_, loc)| f64::from(loc.logic_length)).collect())
    }

    /// Plans reading `indices`. `typed` converts records to the schema's typed elements;
    /// `lenient` (for verification) sets bad records aside instead of failing.
    pub fn plan(&self, indices: &[f64], max_gap: f64, lenient: bool, typed: bool) -> Result<Plan, JsValue> {
        let entries = self.entries(indices)?;
        let view = if typed { self.typed.as_ref().map(|t| t.view) } else { None };
        let rules = PlanRules {
            chunk_lens: &self.chunk_lens,
            // Raw reads return records as stored; typed reads need every dense record whole.
            typed: self.typed.as_ref().filter(|_| typed).map(|t| (t.layout, t.view)),
            max_gap: size(max_gap, "maxGap")?,
            max_out: MAX_OUT,
        };
        let inner = read::plan_gather(&entries, &rules, lenient).map_err(js)?;
        // Checked reads: each planned record's covering checksum (verification checks every
        // record that has one, whatever the mode).
        let expected = match &self.sidecar {
            Some((Ok(_), cache)) if lenient || self.checks() => {
                let locs: std::collections::HashMap<u64, RecordLoc> = entries.iter().copied().collect();
                inner
                    .slots
                    .iter()
                    .map(|s| {
                        let slot = cache.slot(s.index).flatten()?;
                        locs.get(&s.index).filter(|loc| slot.covers(loc)).map(|_| slot.hash)
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        Ok(Plan { inner, view, lenient, expected, counts: [0; 3], input: Vec::new(), output: Vec::new() })
    }

    /// Decodes a plan from the bytes read for its ranges. `data` holds the ranges at their planned
    /// positions (range `k` starts after the planned sizes of ranges `0..k`, see
    /// [`Plan::data_len`]), and `got[k]` is how many bytes range `k` returned (fewer than planned
    /// when a file ends early). Returns the records' output bytes back to back (see
    /// [`Plan::out_lengths`]).
    pub fn decode(&self, plan: &mut Plan, data: &[u8], got: &[f64]) -> Result<Vec<u8>, JsValue> {
        self.decode_from(plan, data, got)
    }

    /// [`decode`](Self::decode) from the plan's own input buffer, which JavaScript filled in
    /// place (see [`Plan::input_address`]); the buffer is freed.
    #[wasm_bindgen(js_name = decodeInput)]
    pub fn decode_input(&self, plan: &mut Plan, got: &[f64]) -> Result<Vec<u8>, JsValue> {
        let input = std::mem::take(&mut plan.input);
        if input.len() != plan.input_len() {
            return Err(argument("the plan's input buffer was not allocated (call inputAddress first)"));
        }
        self.decode_from(plan, &input, got)
    }

    /// [`decodeInput`](Self::decode_input) that keeps the output in the plan instead of
    /// returning it, for JavaScript to copy from [`Plan::output_address`] into a buffer of its
    /// own (one it allocated ahead of time).
    #[wasm_bindgen(js_name = decodeInputKept)]
    pub fn decode_input_kept(&self, plan: &mut Plan, got: &[f64]) -> Result<(), JsValue> {
        plan.output = self.decode_input(plan, got)?;
        Ok(())
    }
}

impl Reader {
    fn decode_from(&self, plan: &mut Plan, data: &[u8], got: &[f64]) -> Result<Vec<u8>, JsValue> {
        let bounds = piece_bounds(&plan.inner.ranges, data.len(), got)?;
        let (out, results) = decode_pieces(
            &plan.inner.slots,
            &plan.inner.ranges,
            data,
            &bounds,
            self.dict.as_deref(),
            plan.view.as_ref(),
            &plan.expected,
        );
        plan.settle(results)?;
        Ok(out)
    }

    /// True when reads are checked against the checksums now.
    fn checks(&self) -> bool {
        self.verify.checks(self.fetched) && !self.changed && matches!(self.sidecar, Some((Ok(_), _)))
    }

    /// A loaded table entry (the page must be cached).
    fn loaded_entry(&self, index: u64) -> Result<RecordLoc, JsValue> {
        self.table.entry(index).ok_or_else(|| argument("load the whole table first (tableRangesSpan)"))
    }

    fn standing_of(&self, stale: Option<&[u8]>) -> Result<Standing, JsValue> {
        let Some((Ok(head), _)) = &self.sidecar else { return Ok(Standing::Changed) };
        if self.journaled {
            return Ok(Standing::Changed);
        }
        let length = u64::from(self.raw_header.length);
        let mut sum = TableSum::default();
        for i in 0..length {
            sum.add(i, &self.loaded_entry(i)?);
        }
        let stale = stale.and_then(RecordLoc::read);
        Ok(head.standing_with(&TableState::new(&self.raw_header, stale, sum), stale.is_some()))
    }
}

/// Decodes every slot from `data`, whose ranges sit at `bounds` (from [`piece_bounds`]), into a
/// new output buffer; returns it with each slot's result (for [`Plan::settle`]).
pub(crate) fn decode_pieces(
    slots: &[Slot],
    ranges: &[ReadRange],
    data: &[u8],
    bounds: &[(usize, usize)],
    dict: Option<&Dictionary>,
    view: Option<&ElementView>,
    expected: &[Option<u64>],
) -> (Vec<u8>, Vec<Result<(), ReadError>>) {
    let pieces: Vec<&[u8]> = bounds.iter().map(|&(at, n)| &data[at..at + n]).collect();
    let mut out = vec![0u8; out_len(slots)];
    let results =
        decode_all(slots, ranges, &pieces, dict, view, expected, read::split_outputs(slots, &mut out));
    (out, results)
}

/// Where each range's returned bytes sit in a buffer of `data_len` bytes: `(offset, count)`,
/// range `k` at the planned sizes of ranges `0..k`, `got[k]` bytes of it (at most planned).
pub(crate) fn piece_bounds(
    ranges: &[ReadRange],
    data_len: usize,
    got: &[f64],
) -> Result<Vec<(usize, usize)>, JsValue> {
    if got.len() != ranges.len() {
        return Err(argument("one returned length per planned range is needed"));
    }
    let mut bounds = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    for (&n, r) in got.iter().zip(ranges) {
        let n = size(n, "returned length")?.min(r.end - r.start) as usize;
        if at.checked_add(n).is_none_or(|end| end > data_len) {
            return Err(argument("returned lengths exceed the data"));
        }
        bounds.push((at, n));
        at += (r.end - r.start) as usize;
    }
    Ok(bounds)
}

/// Output bytes of a plan's records.
fn out_len(slots: &[Slot]) -> usize {
    slots.iter().map(|s| s.out).sum::<u64>() as usize
}

impl Reader {
    /// The store's `schema.msgpack` as core encodes it (what the native engine hashes), or
    /// `None` without a schema.
    pub(crate) fn schema_bytes(&self) -> Option<Vec<u8>> {
        self.typed.as_ref().map(|t| t.schema.to_msgpack())
    }

    /// The table entries of records `start..end` (clamped to the store), whose table pages must
    /// be cached (`tableRangesSpan(start, end)`), and `start` as clamped.
    pub(crate) fn entries_in(&self, start: f64, end: f64) -> Result<(u64, Vec<RecordLoc>), JsValue> {
        let len = u64::from(self.header.length);
        let (start, end) = (size(start, "start")?.min(len), size(end, "end")?.min(len));
        let entries = (start..end)
            .map(|i| {
                self.table
                    .entry(i)
                    .ok_or_else(|| argument("table entries not loaded (call tableRangesSpan first)"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((start, entries))
    }
}

#[wasm_bindgen]
impl Reader {
    /// `[stored, decoded]` byte sums of the entries of records `start..end`, whose table pages
    /// must be cached (`tableRangesSpan(start, end)`).
    #[wasm_bindgen(js_name = entrySums)]
    pub fn entry_sums(&self, start: f64, end: f64) -> Result<Vec<f64>, JsValue> {
        let (_, entries) = self.entries_in(start, end)?;
        let live: u64 = entries.iter().map(|e| u64::from(e.phys_length)).sum();
        let logical: u64 = entries.iter().map(|e| u64::from(e.logic_length)).sum();
        Ok(vec![live as f64, logical as f64])
    }

    /// After the table pages of records `start..end` are cached (`tableRangesSpan`): where the
    /// run of blank (never written) entries that ends the table starts, if this window holds a
    /// written entry, else -1 (the scan goes on before `start`). Core's scan
    /// (`loaderx_core::verify`), which `blankScanWindow` steps through.
    #[wasm_bindgen(js_name = writtenEnd)]
    pub fn written_end(&self, start: f64, end: f64) -> Result<f64, JsValue> {
        let (start, entries) = self.entries_in(start, end)?;
        Ok(loaderx_core::verify::written_end(start, &entries).map_or(-1.0, |e| e as f64))
    }

    /// The bytes of store file `name`, of apparent size `file_size`, that hold data (core's rule,
    /// `loaderx_core::stats::file_used`: the live table of `meta.zr`, the written part of each
    /// chunk, all of any other file).
    #[wasm_bindgen(js_name = fileUsed)]
    pub fn file_used(&self, name: &str, file_size: f64) -> Result<f64, JsValue> {
        Ok(loaderx_core::stats::file_used(name, size(file_size, "size")?, &self.header) as f64)
    }

    /// Storage usage `{records, liveBytes, logicalBytes, chunkBytes, reclaimable}`, from the
    /// [`entrySums`](Self::entry_sums) of every live record.
    pub fn stats(&self, live_bytes: f64, logical_bytes: f64) -> Result<JsValue, JsValue> {
        let (live, logical) = (size(live_bytes, "liveBytes")?, size(logical_bytes, "logicalBytes")?);
        let s = Stats::from_sums(&self.header, live, logical);
        let o = js_sys::Object::new();
        for (k, v) in [
            ("records", s.records),
            ("liveBytes", s.live_bytes),
            ("logicalBytes", s.logical_bytes),
            ("chunkBytes", s.chunk_bytes),
            ("reclaimable", s.reclaimable),
        ] {
            set(&o, k, JsValue::from_f64(v as f64));
        }
        Ok(o.into())
    }
}

impl Reader {
    fn missing(&mut self, indices: impl IntoIterator<Item = u64>) -> Vec<f64> {
        if self.table.cached_bytes() > TABLE_CACHE_CAP {
            self.table.clear();
        }
        self.table.missing(indices).into_iter().flat_map(|r| [r.start as f64, r.end as f64]).collect()
    }

    /// JavaScript numbers as store indices: whole and non-negative here (the edge), below the
    /// length by core's one rule.
    fn indices(&self, xs: &[f64]) -> Result<Vec<u64>, JsValue> {
        crate::error::indices(xs, u64::from(self.header.length))
    }

    fn entries(&self, indices: &[f64]) -> Result<Vec<(u64, loaderx_core::format::RecordLoc)>, JsValue> {
        self.indices(indices)?
            .into_iter()
            .map(|i| {
                let loc = self
                    .table
                    .entry(i)
                    .ok_or_else(|| argument("table entries not loaded (call tableRanges first)"))?;
                Ok((i, loc))
            })
            .collect()
    }
}

fn parse_schema(bytes: &[u8]) -> Result<Typed, loaderx_core::schema::SchemaError> {
    let schema = Schema::from_msgpack(bytes)?;
    schema.validate(None)?;
    let layout = Layout::of(&schema)?;
    let view = ElementView::of(&schema.dtype()?);
    let item_shape = schema.item_shape()?;
    Ok(Typed { schema, layout, view, item_shape })
}

/// A planned read: the chunk ranges to fetch and where each record lands.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Plan {
    pub(crate) inner: GatherPlan,
    pub(crate) view: Option<ElementView>,
    lenient: bool,
    /// The checksum covering each planned record, where reads are checked (empty otherwise).
    pub(crate) expected: Vec<Option<u64>>,
    /// Records whose checksum `[matched, did not match]`, and that had none, once decoded.
    counts: [u64; 3],
    /// The bytes read for the ranges, when JavaScript reads them straight into wasm memory or
    /// hands them over for a decode on the thread pool.
    pub(crate) input: Vec<u8>,
    /// The output `decodeInputKept` or `decodeFinish` left here.
    pub(crate) output: Vec<u8>,
}

impl Plan {
    /// Bytes of the planned ranges, back to back.
    fn input_len(&self) -> usize {
        self.inner.ranges.iter().map(|r| (r.end - r.start) as usize).sum()
    }

    /// Records each slot's decode result: a failure is the call's error, or (lenient plans) sets
    /// the record aside.
    pub(crate) fn settle(&mut self, results: Vec<Result<(), ReadError>>) -> Result<(), JsValue> {
        for (k, (slot, result)) in self.inner.slots.iter().zip(results).enumerate() {
            let covered = self.expected.get(k).copied().flatten().is_some();
            match (&result, covered) {
                (Err(ReadError::Checksum { .. }), _) => self.counts[1] += 1,
                (Err(ReadError::Short { .. }), _) => {}
                (_, true) => self.counts[0] += 1,
                (_, false) => self.counts[2] += 1,
            }
            match result {
                Ok(()) => {}
                Err(e) if self.lenient => self.inner.bad.push((slot.index, e)),
                Err(e) => return Err(read_error(&e)),
            }
        }
        Ok(())
    }
}

#[wasm_bindgen]
impl Plan {
    /// `[chunk, start, end, …]` for every range to read, in file order.
    pub fn ranges(&self) -> Vec<f64> {
        self.inner.ranges.iter().flat_map(|r| [f64::from(r.chunk), r.start as f64, r.end as f64]).collect()
    }

    /// Bytes of the buffer the planned ranges are read into: their sizes, back to back.
    #[wasm_bindgen(js_name = dataLen)]
    pub fn data_len(&self) -> f64 {
        self.input_len() as f64
    }

    /// Allocates the plan's input buffer ([`dataLen`](Self::data_len) bytes, zeroed) and returns
    /// its address in wasm memory, for JavaScript to fill in place (a `Uint8Array` over
    /// `wasmMemory().buffer`) and hand to `Reader.decodeInput`. The view is valid only until the next
    /// call into this module that allocates (memory may grow), so it is filled synchronously.
    #[wasm_bindgen(js_name = inputAddress)]
    pub fn input_address(&mut self) -> usize {
        self.input = vec![0; self.input_len()];
        self.input.as_mut_ptr() as usize
    }

    /// Takes the bytes read for the ranges (laid out as for `Reader.decode`) as the plan's input
    /// buffer, for `Reader.decodeStart`.
    #[wasm_bindgen(js_name = setInput)]
    pub fn set_input(&mut self, data: Vec<u8>) {
        self.input = data;
    }

    /// Address in wasm memory of the output `Reader.decodeInputKept` or `Reader.decodeFinish`
    /// left in the plan (the records back to back, as `decode` returns them); valid until the
    /// next call into this module that allocates.
    #[wasm_bindgen(js_name = outputAddress)]
    pub fn output_address(&self) -> usize {
        self.output.as_ptr() as usize
    }

    /// Bytes of that output.
    #[wasm_bindgen(getter, js_name = outputLength)]
    pub fn output_length(&self) -> usize {
        self.output.len()
    }

    /// Store indices of the planned records, in request order.
    pub fn indices(&self) -> Vec<f64> {
        self.inner.slots.iter().map(|s| s.index as f64).collect()
    }

    /// Output bytes of each planned record, in request order.
    #[wasm_bindgen(js_name = outLengths)]
    pub fn out_lengths(&self) -> Vec<f64> {
        self.inner.slots.iter().map(|s| s.out as f64).collect()
    }

    /// `[verified, mismatched, uncovered]`: how the decoded records stood against their
    /// checksums.
    #[wasm_bindgen(js_name = checksumCounts)]
    pub fn checksum_counts(&self) -> Vec<f64> {
        self.counts.iter().map(|&n| n as f64).collect()
    }

    /// Records set aside as bad (lenient plans), as `LoaderxError`s with `index` and `code`.
    pub fn bad(&self) -> js_sys::Array {
        self.inner.bad.iter().map(|(_, e)| read_error(e)).collect()
    }
}

/// A read error as a JS error; a checksum mismatch also carries `checksum: true` (it is a
/// LOADERX_CORRUPT error, told apart so a reader can fetch the bytes again first).
fn read_error(e: &ReadError) -> JsValue {
    let err = to_js(e);
    if matches!(e, ReadError::Checksum { .. }) {
        let _ = js_sys::Reflect::set(&err, &"checksum".into(), &true.into());
    }
    err
}

/// Decodes every slot into its output slice: on the wasm-bindgen-rayon pool in the threaded
/// build, one after another otherwise.
fn decode_all(
    slots: &[Slot],
    ranges: &[ReadRange],
    pieces: &[&[u8]],
    dict: Option<&Dictionary>,
    view: Option<&ElementView>,
    expected: &[Option<u64>],
    outs: Vec<&mut [u8]>,
) -> Vec<Result<(), ReadError>> {
    let one = |decoder: &mut Decoder<'_>, (k, (s, dst)): (usize, (&Slot, &mut [u8]))| {
        let want = expected.get(k).copied().flatten();
        read::decode_slot(s, &ranges[s.range], pieces[s.range], decoder, view, want, dst)
    };
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        use rayon::prelude::*;
        slots.par_iter().zip(outs).enumerate().with_min_len(4).map_init(|| Decoder::new(dict), one).collect()
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
    {
        let mut decoder = Decoder::new(dict);
        slots.iter().zip(outs).enumerate().map(|pair| one(&mut decoder, pair)).collect()
    }
}

/// The digest of several stores read as one (a manifest), from their content digests in order
/// (`loaderx_core::checksum::combined_digest`).
#[wasm_bindgen(js_name = combinedDigest)]
pub fn combined_digest(parts: Vec<String>) -> String {
    checksum::combined_digest(parts.iter().map(String::as_str))
}

/// The next window `[start, end]` of table entries verify's blank-tail scan looks at, when every
/// entry from `from` on is blank (start with the record count); undefined at the table's start.
#[wasm_bindgen(js_name = blankScanWindow)]
pub fn blank_scan_window(from: f64) -> Result<Option<Vec<f64>>, JsValue> {
    Ok(loaderx_core::verify::scan_window(size(from, "from")?).map(|w| vec![w.start as f64, w.end as f64]))
}

/// The problem verify reports at record `blank_from` when table entries `blank_from..total` of
/// `meta` (the `meta.zr` shown) are blank.
#[wasm_bindgen(js_name = blankTailProblem)]
pub fn blank_tail_problem(meta: &str, blank_from: f64, total: f64) -> Result<String, JsValue> {
    let (from, total) = (size(blank_from, "blankFrom")?, size(total, "total")?);
    Ok(loaderx_core::verify::blank_tail_problem(meta, from, total))
}
