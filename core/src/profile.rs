//! Whole-store statistics (a "profile"): what the viewer's statistics panel and `loaderx-qa`
//! report, computed from decoded record bytes that a front end streams in, in record order.
//!
//! One pass ([`Profile::add`]) gives, per channel (the last axis of a record when it has at
//! least two axes and that axis has at most [`MAX_CHANNELS`] entries; else the whole record is one
//! channel): the count of finite values, min, max, mean, standard deviation, and the NaN, +Inf
//! and -Inf counts; the value counts of integer scalar streams (labels); the length (rows) of
//! every ragged record; the records holding a NaN; and exact duplicates, by a 128-bit content
//! hash (xxh3) of each record's decoded bytes. Table entries give the stored and decoded bytes
//! per codec ([`CodecTally`]). Value histograms need the finite range first, so they take a
//! second pass ([`Profile::add_histogram`]) when [`Profile::needs_values_again`] says so.
//!
//! Invariants and numerics:
//! * Values are taken as `f64` (exact for every integer up to 2^53 and every float);
//!   moments are merged batch by batch with Chan's update (each batch's mean and squared
//!   deviations computed about its own mean), so a float32 stream of millions of values keeps
//!   the accuracy of a float64 two-pass computation (NumPy's `np.mean`/`np.std` in float64).
//!   `std` is the population deviation (NumPy's `ddof=0`).
//! * Histograms are NumPy's `np.histogram(values_as_float64, bins, range=(min, max))` over the
//!   finite values: `bins` equal bins with edges `min + k * (max - min) / bins` (the last edge is
//!   `max`), each `[lo, hi)` but the last `[lo, hi]`; a constant stream gets the range
//!   `(v - 0.5, v + 0.5)`, as NumPy gives it. Length histograms are the same over the lengths.
//! * Nothing panics on any bytes: a record whose length is not a whole number of rows is counted
//!   in [`Summary::misfit`] and left out of value statistics (verify reports it).
//! * Listings are capped ([`MAX_LISTED`]); counts never are.

use std::collections::BTreeMap;

use serde::Serialize;
use twox_hash::XxHash3_128;

use crate::dtype::{ByteOrder, DKind, DType};
use crate::format::{Codec, RecordLoc};
use crate::schema::{Kind, Schema};

/// The most channels a record's last axis may have to be reported per channel (RGBA, stereo...).
pub const MAX_CHANNELS: u64 = 8;
/// Distinct values counted for a scalar integer stream; past this the counts are dropped.
pub const MAX_DISTINCT: usize = 1024;
/// Record indices and duplicate groups listed, at most (their counts are exact).
pub const MAX_LISTED: usize = 1000;
/// Histogram bins by default.
pub const DEFAULT_BINS: usize = 20;

/// How record bytes become numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
}

impl Elem {
    fn of(d: &DType) -> Option<Elem> {
        Some(match (d.kind, d.itemsize) {
            (DKind::Bool, 1) => Elem::Bool,
            (DKind::Int, 1) => Elem::I8,
            (DKind::UInt, 1) => Elem::U8,
            (DKind::Int, 2) => Elem::I16,
            (DKind::UInt, 2) => Elem::U16,
            (DKind::Int, 4) => Elem::I32,
            (DKind::UInt, 4) => Elem::U32,
            (DKind::Int, 8) => Elem::I64,
            (DKind::UInt, 8) => Elem::U64,
            (DKind::Float, 2) => Elem::F16,
            (DKind::Float, 4) => Elem::F32,
            (DKind::Float, 8) => Elem::F64,
            _ => return None,
        })
    }

    fn is_float(self) -> bool {
        matches!(self, Elem::F16 | Elem::F32 | Elem::F64)
    }
}

/// Appends the elements of `bytes` (whole elements; the caller checks) to `out` as `f64`.
fn widen(elem: Elem, big: bool, bytes: &[u8], out: &mut Vec<f64>) {
    macro_rules! each {
        ($n:literal, $conv:expr) => {
            out.extend(bytes.chunks_exact($n).map(|c| {
                let mut a = [0u8; $n];
                a.copy_from_slice(c);
                if big {
                    a.reverse();
                }
                #[allow(clippy::redundant_closure_call)]
                $conv(a)
            }))
        };
    }
    match elem {
        Elem::Bool => out.extend(bytes.iter().map(|&b| f64::from(u8::from(b != 0)))),
        Elem::U8 => out.extend(bytes.iter().map(|&b| f64::from(b))),
        Elem::I8 => out.extend(bytes.iter().map(|&b| f64::from(b as i8))),
        Elem::I16 => each!(2, |a| f64::from(i16::from_le_bytes(a))),
        Elem::U16 => each!(2, |a| f64::from(u16::from_le_bytes(a))),
        Elem::I32 => each!(4, |a| f64::from(i32::from_le_bytes(a))),
        Elem::U32 => each!(4, |a| f64::from(u32::from_le_bytes(a))),
        Elem::I64 => each!(8, |a| i64::from_le_bytes(a) as f64),
        Elem::U64 => each!(8, |a| u64::from_le_bytes(a) as f64),
        Elem::F16 => each!(2, |a| f64::from(half::f16::from_le_bytes(a).to_f32())),
        Elem::F32 => each!(4, |a| f64::from(f32::from_le_bytes(a))),
        Elem::F64 => each!(8, f64::from_le_bytes),
    }
}

/// What a profile reads out of a store's records, from its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    elem: Option<Elem>,
    big: bool,
    itemsize: usize,
    /// Bytes of one row: a dense record, or one row of a ragged record.
    row_bytes: usize,
    ragged: bool,
    channels: usize,
    /// Dense records of one integer or bool value: counted by value.
    scalar_ints: bool,
    bins: usize,
}

impl Spec {
    /// The spec of a store with `schema` (`None`: no schema, records are bytes). Value statistics
    /// are skipped for encoded media (`media` in the schema) and non-numeric dtypes.
    pub fn of(schema: Option<&Schema>, bins: usize) -> Spec {
        let bytes = Spec {
            elem: None,
            big: false,
            itemsize: 1,
            row_bytes: 1,
            ragged: true,
            channels: 1,
            scalar_ints: false,
            bins: bins.max(1),
        };
        let Some(s) = schema else { return bytes };
        let (Ok(kind), Ok(dtype), Ok(shape)) = (s.kind(), s.dtype(), s.item_shape()) else { return bytes };
        let ragged = kind == Kind::Ragged;
        let itemsize = (dtype.itemsize as usize).max(1);
        let Some(row_bytes) = shape.iter().try_fold(itemsize as u64, |a, &d| a.checked_mul(d)) else {
            return bytes;
        };
        let elem = if s.get("media").is_some() { None } else { Elem::of(&dtype) };
        // The record's axes: (rows, *item_shape) for ragged records, item_shape for dense ones.
        let axes = shape.len() + usize::from(ragged);
        let last = shape.last().copied().unwrap_or(1);
        let channels =
            if elem.is_some() && axes >= 2 && (1..=MAX_CHANNELS).contains(&last) { last as usize } else { 1 };
        let scalar_ints =
            !ragged && shape.iter().product::<u64>() == 1 && elem.is_some_and(|e| !e.is_float());
        Spec {
            elem,
            big: dtype.order == ByteOrder::Big,
            itemsize,
            row_bytes: usize::try_from(row_bytes).unwrap_or(usize::MAX),
            ragged,
            channels,
            scalar_ints,
            bins: bins.max(1),
        }
    }
}

/// One channel's running moments (Chan et al.'s parallel update).
#[derive(Debug, Clone, Copy)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
    nan: u64,
    pos_inf: u64,
    neg_inf: u64,
}

impl Default for Moments {
    fn default() -> Moments {
        Moments {
            n: 0,
            mean: 0.0,
            m2: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
        }
    }
}

impl Moments {
    /// Adds the finite values of `v` (non-finite ones are counted apart), in one batch.
    fn add(&mut self, v: impl Iterator<Item = f64> + Clone) {
        let (mut n, mut sum) = (0u64, 0.0);
        for x in v.clone() {
            if x.is_finite() {
                n += 1;
                sum += x;
                self.min = self.min.min(x);
                self.max = self.max.max(x);
            } else if x.is_nan() {
                self.nan += 1;
            } else if x > 0.0 {
                self.pos_inf += 1;
            } else {
                self.neg_inf += 1;
            }
        }
        if n == 0 {
            return;
        }
        let mean = sum / n as f64;
        let m2: f64 = v.filter(|x| x.is_finite()).map(|x| (x - mean) * (x - mean)).sum();
        let total = self.n + n;
        let delta = mean - self.mean;
        self.mean += delta * n as f64 / total as f64;
        self.m2 += m2 + delta * delta * (self.n as f64) * (n as f64) / total as f64;
        self.n = total;
    }
}

/// `bins` equal bins over `[lo, hi]`, NumPy's way (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    /// `bins + 1` edges.
    pub edges: Vec<f64>,
    pub counts: Vec<u64>,
    /// `bins / (hi - lo)`: the first guess of a value's bin (corrected against the edges).
    #[serde(skip)]
    per_unit: f64,
}

impl Histogram {
    fn over(lo: f64, hi: f64, bins: usize) -> Histogram {
        let (lo, hi) = if lo == hi { (lo - 0.5, hi + 0.5) } else { (lo, hi) };
        let step = (hi - lo) / bins as f64;
        let mut edges: Vec<f64> = (0..=bins).map(|k| k as f64 * step + lo).collect();
        edges[bins] = hi;
        Histogram { edges, counts: vec![0; bins], per_unit: bins as f64 / (hi - lo) }
    }

    /// Counts `x` if it lies within the edges.
    fn add(&mut self, x: f64) {
        let bins = self.counts.len();
        let (lo, hi) = (self.edges[0], self.edges[bins]);
        if !(x >= lo && x <= hi) {
            return;
        }
        let mut k = ((x - lo) * self.per_unit) as usize;
        k = k.min(bins - 1);
        // The arithmetic guess, corrected against the edges themselves (NumPy does the same).
        if k > 0 && x < self.edges[k] {
            k -= 1;
        } else if k + 1 < bins && x >= self.edges[k + 1] {
            k += 1;
        }
        self.counts[k] += 1;
    }
}

/// One channel's statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    /// Finite values.
    pub count: u64,
    pub nan: u64,
    pub pos_inf: u64,
    pub neg_inf: u64,
    /// Over the finite values; `None` when there are none.
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    pub std: Option<f64>,
    /// After the second pass; `None` before it or without finite values.
    pub histogram: Option<Histogram>,
}

/// Records of one codec: how many, their stored and their decoded bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct CodecBytes {
    pub codec: String,
    pub records: u64,
    pub stored_bytes: u64,
    pub decoded_bytes: u64,
}

/// Table entries summed by codec tag.
#[derive(Debug, Clone, Default)]
pub struct CodecTally(BTreeMap<u8, CodecBytes>);

impl CodecTally {
    /// Counts one entry (an unknown tag is named by its number).
    pub fn add(&mut self, e: RecordLoc) {
        let c = self.0.entry(e.compress).or_insert_with(|| CodecBytes {
            codec: Codec::from_tag(e.compress)
                .map_or_else(|| format!("tag {}", e.compress), |c| c.name().to_owned()),
            ..CodecBytes::default()
        });
        c.records += 1;
        c.stored_bytes += u64::from(e.phys_length);
        c.decoded_bytes += u64::from(e.logic_length);
    }

    /// The sums, in tag order.
    pub fn sums(&self) -> Vec<CodecBytes> {
        self.0.values().cloned().collect()
    }
}

/// A listing of record indices: the exact count and the first [`MAX_LISTED`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Listed {
    pub count: u64,
    pub indices: Vec<u64>,
}

impl Listed {
    fn push(&mut self, i: u64) {
        self.count += 1;
        if self.indices.len() < MAX_LISTED {
            self.indices.push(i);
        }
    }
}

/// Exact duplicates: groups of records with equal decoded bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Duplicates {
    /// Groups of two or more equal records.
    pub groups: u64,
    /// Records equal to an earlier record (the sum over groups of their size minus one).
    pub extra_records: u64,
    /// The first [`MAX_LISTED`] groups (each in index order), by their first record.
    pub listed: Vec<Vec<u64>>,
}

/// Lengths of ragged records, in rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lengths {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub histogram: Histogram,
}

/// A finished profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Records seen.
    pub records: u64,
    /// Per channel (empty when the records are not numbers).
    pub channels: Vec<Channel>,
    /// Value → count, for scalar integer streams with at most [`MAX_DISTINCT`] distinct values.
    pub value_counts: Option<Vec<(f64, u64)>>,
    /// Distinct values of a scalar integer stream, when it had more than [`MAX_DISTINCT`].
    pub distinct_over: bool,
    /// Ragged streams: lengths in rows.
    pub lengths: Option<Lengths>,
    pub nan_records: Listed,
    pub duplicates: Duplicates,
    /// Records whose byte length is not a whole number of rows (left out of value statistics).
    pub misfit: Listed,
}

/// A profile being accumulated.
#[derive(Debug, Clone)]
pub struct Profile {
    spec: Spec,
    records: u64,
    moments: Vec<Moments>,
    histograms: Vec<Option<Histogram>>,
    counts: BTreeMap<i128, u64>,
    distinct_over: bool,
    lengths: Vec<u32>,
    nan_records: Listed,
    misfit: Listed,
    /// `(hash high, hash low, record)`.
    hashes: Vec<(u64, u64, u32)>,
    scratch: Vec<f64>,
}

impl Profile {
    pub fn new(spec: Spec) -> Profile {
        let channels = spec.channels;
        Profile {
            spec,
            records: 0,
            moments: vec![Moments::default(); channels],
            histograms: vec![None; channels],
            counts: BTreeMap::new(),
            distinct_over: false,
            lengths: Vec::new(),
            nan_records: Listed::default(),
            misfit: Listed::default(),
            hashes: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The first pass over records `first..first + lens.len()`, whose decoded bytes lie back to
    /// back in `data` (`lens[k]` bytes each). Batches must come in record order. The values of
    /// a batch are gathered, then each channel's moments are updated once per batch.
    pub fn add(&mut self, first: u64, data: &[u8], lens: &[u64]) -> Result<(), String> {
        check_lens(data, lens)?;
        self.scratch.clear();
        let mut at = 0usize;
        for (k, &len) in lens.iter().enumerate() {
            let i = first + k as u64;
            let rec = &data[at..at + len as usize];
            at += len as usize;
            self.records += 1;
            let h = XxHash3_128::oneshot(rec);
            self.hashes.push(((h >> 64) as u64, h as u64, i as u32));
            let whole = self.spec.row_bytes > 0 && rec.len() % self.spec.row_bytes == 0;
            let fits = whole && (self.spec.ragged || rec.len() == self.spec.row_bytes);
            if self.spec.ragged {
                let rows =
                    if whole { rec.len() / self.spec.row_bytes } else { rec.len() / self.spec.itemsize };
                self.lengths.push(u32::try_from(rows).unwrap_or(u32::MAX));
            }
            if !fits {
                self.misfit.push(i);
                continue;
            }
            let Some(elem) = self.spec.elem else { continue };
            let start = self.scratch.len();
            widen(elem, self.spec.big, rec, &mut self.scratch);
            let values = &self.scratch[start..];
            if elem.is_float() && values.iter().any(|x| x.is_nan()) {
                self.nan_records.push(i);
            }
            if self.spec.scalar_ints && !self.distinct_over {
                let v = values[0] as i128;
                if self.counts.len() < MAX_DISTINCT || self.counts.contains_key(&v) {
                    *self.counts.entry(v).or_insert(0) += 1;
                } else {
                    self.distinct_over = true;
                    self.counts.clear();
                }
            }
        }
        let c = self.spec.channels;
        for (ch, m) in self.moments.iter_mut().enumerate() {
            m.add(self.scratch.get(ch..).unwrap_or_default().iter().step_by(c).copied());
        }
        Ok(())
    }

    /// Whether value histograms need a second pass ([`Profile::add_histogram`]) over the records.
    pub fn needs_values_again(&self) -> bool {
        self.spec.elem.is_some() && self.moments.iter().any(|m| m.n > 0)
    }

    /// The second pass: the same records, in the same batches or others, in record order.
    pub fn add_histogram(&mut self, data: &[u8], lens: &[u64]) -> Result<(), String> {
        check_lens(data, lens)?;
        let Some(elem) = self.spec.elem else { return Ok(()) };
        let bins = self.spec.bins;
        for (h, m) in self.histograms.iter_mut().zip(&self.moments) {
            if h.is_none() && m.n > 0 {
                *h = Some(Histogram::over(m.min, m.max, bins));
            }
        }
        let row = self.spec.row_bytes;
        self.scratch.clear();
        let mut at = 0usize;
        for &len in lens {
            let rec = &data[at..at + len as usize];
            at += len as usize;
            if row > 0 && rec.len() % row == 0 && (self.spec.ragged || rec.len() == row) {
                widen(elem, self.spec.big, rec, &mut self.scratch);
            }
        }
        let c = self.spec.channels;
        for (ch, h) in self.histograms.iter_mut().enumerate() {
            if let Some(h) = h {
                self.scratch.get(ch..).unwrap_or_default().iter().step_by(c).for_each(|&x| h.add(x));
            }
        }
        Ok(())
    }

    /// The statistics so far.
    pub fn summary(&self) -> Summary {
        let channels = if self.spec.elem.is_some() {
            self.moments
                .iter()
                .zip(&self.histograms)
                .map(|(m, h)| {
                    let some = m.n > 0;
                    Channel {
                        count: m.n,
                        nan: m.nan,
                        pos_inf: m.pos_inf,
                        neg_inf: m.neg_inf,
                        min: some.then_some(m.min),
                        max: some.then_some(m.max),
                        mean: some.then_some(m.mean),
                        std: some.then(|| (m.m2 / m.n as f64).sqrt()),
                        histogram: h.clone(),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let value_counts = (self.spec.scalar_ints && !self.distinct_over)
            .then(|| self.counts.iter().map(|(&v, &n)| (v as f64, n)).collect());
        let lengths = (self.spec.ragged && !self.lengths.is_empty()).then(|| {
            let min = self.lengths.iter().copied().min().unwrap_or(0);
            let max = self.lengths.iter().copied().max().unwrap_or(0);
            let mut histogram = Histogram::over(f64::from(min), f64::from(max), self.spec.bins);
            let mut sum = 0u64;
            for &l in &self.lengths {
                histogram.add(f64::from(l));
                sum += u64::from(l);
            }
            Lengths {
                min: u64::from(min),
                max: u64::from(max),
                mean: sum as f64 / self.lengths.len() as f64,
                histogram,
            }
        });
        Summary {
            records: self.records,
            channels,
            value_counts,
            distinct_over: self.distinct_over,
            lengths,
            nan_records: self.nan_records.clone(),
            duplicates: duplicates(&self.hashes),
            misfit: self.misfit.clone(),
        }
    }
}

fn check_lens(data: &[u8], lens: &[u64]) -> Result<(), String> {
    let total = lens.iter().try_fold(0u64, |a, &l| a.checked_add(l));
    if total != Some(data.len() as u64) {
        return Err(format!("the record lengths sum to {total:?}, but {} bytes were given", data.len()));
    }
    Ok(())
}

/// Groups equal hashes: every group of two or more records, ordered by its first record.
fn duplicates(hashes: &[(u64, u64, u32)]) -> Duplicates {
    let mut sorted = hashes.to_vec();
    sorted.sort_unstable();
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut out = Duplicates::default();
    for run in sorted.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
        if run.len() < 2 {
            continue;
        }
        out.groups += 1;
        out.extra_records += run.len() as u64 - 1;
        groups.push(run.iter().map(|r| u64::from(r.2)).collect());
    }
    groups.sort_unstable_by_key(|g| g[0]);
    groups.truncate(MAX_LISTED);
    out.listed = groups;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(dtype: &str, shape: &[u64]) -> Spec {
        Spec::of(Some(&Schema::new(Kind::Dense, dtype, shape, "raw")), 4)
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn moments_min_max_and_non_finite_counts_per_channel() {
        let mut p = Profile::new(dense("<f4", &[2, 2]));
        assert_eq!(p.spec.channels, 2);
        let rec = f32s(&[1.0, f32::NAN, 3.0, f32::INFINITY]);
        let rec2 = f32s(&[5.0, 10.0, 7.0, f32::NEG_INFINITY]);
        let data = [rec.clone(), rec2].concat();
        p.add(0, &data, &[16, 16]).unwrap();
        let s = p.summary();
        let (a, b) = (&s.channels[0], &s.channels[1]);
        assert_eq!((a.count, a.min, a.max, a.mean), (4, Some(1.0), Some(7.0), Some(4.0)));
        assert_eq!(a.std, Some(5f64.sqrt()));
        assert_eq!((b.count, b.nan, b.pos_inf, b.neg_inf, b.mean), (1, 1, 1, 1, Some(10.0)));
        assert_eq!(s.nan_records, Listed { count: 1, indices: vec![0] });
    }

    #[test]
    fn batches_merge_to_the_two_pass_result() {
        let v: Vec<f32> = (0..10_000).map(|i| 1e6 + (i as f32 * 0.37).sin()).collect();
        let bytes = f32s(&v);
        let mut p = Profile::new(dense("<f4", &[]));
        for (k, part) in bytes.chunks(4 * 777).enumerate() {
            p.add(k as u64 * 777, part, &vec![4; part.len() / 4]).unwrap();
        }
        let s = p.summary();
        let xs: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((s.channels[0].mean.unwrap() - mean).abs() < 1e-9);
        assert!((s.channels[0].std.unwrap() - var.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn histograms_follow_numpy_edges_and_closed_last_bin() {
        let mut p = Profile::new(dense("<i4", &[]));
        let vals = [0i32, 1, 2, 3, 4, 4, 8];
        let data: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        p.add(0, &data, &[4; 7]).unwrap();
        assert!(p.needs_values_again());
        p.add_histogram(&data, &[4; 7]).unwrap();
        let s = p.summary();
        let h = s.channels[0].histogram.as_ref().unwrap();
        assert_eq!(h.edges, [0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(h.counts, [2, 2, 2, 1]);
        assert_eq!(s.value_counts.unwrap(), [(0.0, 1), (1.0, 1), (2.0, 1), (3.0, 1), (4.0, 2), (8.0, 1)]);
    }

    #[test]
    fn a_constant_stream_gets_numpys_unit_range() {
        let h = Histogram::over(3.0, 3.0, 2);
        assert_eq!(h.edges, [2.5, 3.0, 3.5]);
    }

    #[test]
    fn duplicates_are_grouped_in_index_order() {
        let mut p = Profile::new(Spec::of(None, 4));
        let data = b"abcabxyzab";
        p.add(0, data, &[3, 2, 3, 2]).unwrap();
        p.add(4, b"abc", &[3]).unwrap();
        let s = p.summary();
        assert_eq!(s.duplicates.groups, 2);
        assert_eq!(s.duplicates.extra_records, 2);
        assert_eq!(s.duplicates.listed, vec![vec![0, 4], vec![1, 3]]);
        let l = s.lengths.unwrap();
        assert_eq!((l.min, l.max), (2, 3));
        assert!(s.channels.is_empty());
    }

    #[test]
    fn ragged_rows_and_misfits() {
        let spec = Spec::of(Some(&Schema::new(Kind::Ragged, "<u2", &[3], "raw")), 4);
        assert_eq!((spec.channels, spec.row_bytes), (3, 6));
        let mut p = Profile::new(spec);
        p.add(0, &[0u8; 12 + 5], &[12, 5]).unwrap();
        let s = p.summary();
        assert_eq!(s.misfit, Listed { count: 1, indices: vec![1] });
        assert_eq!(s.lengths.unwrap().max, 2);
        assert_eq!(s.channels[0].count, 2);
        assert!(p.add(2, &[0u8; 3], &[4]).is_err());
    }

    #[test]
    fn too_many_distinct_labels_drop_the_counts() {
        let mut p = Profile::new(dense("<i8", &[]));
        let data: Vec<u8> = (0..(MAX_DISTINCT as i64 + 5)).flat_map(|x| x.to_le_bytes()).collect();
        p.add(0, &data, &vec![8; MAX_DISTINCT + 5]).unwrap();
        let s = p.summary();
        assert!(s.distinct_over && s.value_counts.is_none());
    }

    #[test]
    fn codec_bytes_sum_entries_by_tag() {
        let e = |compress, phys, logic| RecordLoc {
            offset: 0,
            phys_length: phys,
            logic_length: logic,
            chunk_id: 0,
            compress,
            reserved: 0,
        };
        let mut tally = CodecTally::default();
        [e(1, 10, 40), e(0, 8, 8), e(1, 5, 20), e(9, 1, 1)].into_iter().for_each(|x| tally.add(x));
        let got = tally.sums();
        let names: Vec<_> =
            got.iter().map(|c| (c.codec.as_str(), c.records, c.stored_bytes, c.decoded_bytes)).collect();
        assert_eq!(names, [("raw", 1, 8, 8), ("zstd", 2, 15, 60), ("tag 9", 1, 1, 1)]);
    }
}
