//! Weighted mixing: which records of which dataset make each batch of a mixed loader.
//!
//! Invariants:
//! * Exact per-batch proportions: every batch holds `counts[j]` records of dataset `j`, the same
//!   at every step: the largest-remainder apportionment of the batch size by the weights (ties
//!   go to the lower `j`), so `|counts[j] - B·w_j/Σw| < 1`. A dataset with a positive weight
//!   that would get no record per batch is refused, never silently dropped.
//! * Each dataset reads its own element stream: the [`Sampler`] stream of batch size 1 over its
//!   length, in the mixer's mode, keyed by `(seed, j)` (SEQUENTIAL: `e mod L`; IID: uniform
//!   draws; CYCLIC: a fresh permutation of all `L` records per epoch). Step `k` takes the
//!   `counts[j]` elements after position `base[j] + (k - base_step)·counts[j]`, so a batch is a
//!   pure function of the step, seek is O(1), and resume is exact.
//! * [`Mixer::rebase`] continues every stream where it stands: new weights at a checkpoint change
//!   how many records each step takes from each dataset, never which records come next.
//! * Within a batch the datasets are interleaved by one fixed pattern (smooth weighted round
//!   robin), so every contiguous slice of the batch (a shard) holds each dataset within 2 of its
//!   proportional share.
//! * Element `e` of dataset `j` is global index `offsets[j] + e`, as in a manifest's index space.
//! * Schedules ([`Schedule`]): weights may change with the step, between points `(step,
//!   weights)`, held (`Step`) or interpolated (`Linear`); before the first point its weights hold,
//!   after the last the last's. Step `k` takes the apportionment of the batch by the weights at
//!   `k`, so proportions stay exact per batch at every step; a dataset may have weight 0 (and,
//!   between points, get no record) for part of a schedule. Stream positions add up the counts
//!   of the steps since the base: constant stretches in O(1), linear ones through per-segment
//!   running totals every [`BLOCK_STEPS`] steps, made on first use (O(segment steps)).

use std::sync::{Arc, OnceLock};

use thiserror::Error;

use crate::error::{Classify, ErrorKind};
use crate::sampler::{Mode, Sampler, SamplerError};

/// Why a mix cannot be built.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum MixError {
    /// No datasets, or weights and lengths of different counts.
    #[error("a mix needs one weight per dataset and at least one dataset (got {datasets} datasets, {weights} weights)")]
    Shape { datasets: usize, weights: usize },
    /// A weight that is negative, NaN or infinite.
    #[error("weight {index} is {weight}: weights must be finite and not negative")]
    BadWeight { index: usize, weight: f64 },
    /// Every weight is zero.
    #[error("all weights are zero")]
    AllZero,
    /// A dataset with a positive weight would get no record in a batch.
    #[error("dataset {index} (weight {weight}) would get no record in a batch of {batch}: raise the batch size or the weight")]
    Starved { index: usize, weight: f64, batch: u64 },
    /// A dataset's stream cannot be built (for example, it is empty).
    #[error("dataset {index}: {source}")]
    Stream { index: usize, source: SamplerError },
    /// A schedule with no points, points out of step order, or points of different widths.
    #[error("a schedule needs points in increasing step order, each with one weight per dataset: {0}")]
    Schedule(String),
    /// The datasets' lengths add up past `u64`.
    #[error("the datasets' lengths add up past 2^64")]
    TooLong,
}

impl Classify for MixError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Argument
    }
}

/// Records per batch of each dataset: the largest-remainder apportionment of `batch`.
pub fn counts(weights: &[f64], batch: u64) -> Result<Vec<u64>, MixError> {
    let counts = apportion(weights, batch)?;
    if let Some(index) = (0..weights.len()).find(|&j| weights[j] > 0.0 && counts[j] == 0) {
        return Err(MixError::Starved { index, weight: weights[index], batch });
    }
    Ok(counts)
}

/// [`counts`] without the starvation check (between a schedule's points, a small weight may
/// round to no record).
fn apportion(weights: &[f64], batch: u64) -> Result<Vec<u64>, MixError> {
    if weights.is_empty() {
        return Err(MixError::Shape { datasets: 0, weights: 0 });
    }
    if let Some((index, &weight)) = weights.iter().enumerate().find(|(_, w)| !w.is_finite() || **w < 0.0) {
        return Err(MixError::BadWeight { index, weight });
    }
    let total: f64 = weights.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(MixError::AllZero);
    }
    let quotas: Vec<f64> = weights.iter().map(|w| w / total * batch as f64).collect();
    let mut counts: Vec<u64> = quotas.iter().map(|q| q.floor() as u64).collect();
    let short = batch.saturating_sub(counts.iter().sum());
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; equal remainders to the lower index (a stable sort keeps it).
    order.sort_by(|&a, &b| (quotas[b] - quotas[b].floor()).total_cmp(&(quotas[a] - quotas[a].floor())));
    for &j in order.iter().take(short as usize) {
        counts[j] += 1;
    }
    Ok(counts)
}

/// How weights change between a schedule's points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interpolation {
    /// A point's weights hold until the next point.
    Step,
    /// Weights move linearly from one point's to the next's.
    Linear,
}

/// Steps per running total of a linear schedule segment.
pub const BLOCK_STEPS: u64 = 1024;

/// Mixing weights as a function of the step: points `(step, weights)` in increasing step order.
#[derive(Debug, Clone)]
pub struct Schedule {
    points: Vec<(u64, Vec<f64>)>,
    interpolation: Interpolation,
    batch: u64,
    /// Per linear segment `i` (from point `i` to `i + 1`): the counts summed over its first
    /// `m · BLOCK_STEPS` steps, for each `m`; made on first use.
    totals: Arc<Vec<OnceLock<Vec<Vec<u64>>>>>,
}

impl Schedule {
    /// A schedule for batches of `batch` records. Every point's weights must apportion the batch
    /// (see [`counts`]: no dataset with a positive weight left without a record).
    pub fn new(
        points: Vec<(u64, Vec<f64>)>,
        interpolation: Interpolation,
        batch: u64,
    ) -> Result<Schedule, MixError> {
        let Some((_, first)) = points.first() else {
            return Err(MixError::Schedule("it has no points".into()));
        };
        let width = first.len();
        for (i, (step, w)) in points.iter().enumerate() {
            if w.len() != width {
                return Err(MixError::Schedule(format!(
                    "point {i} (step {step}) has {} weights, point 0 has {width}",
                    w.len()
                )));
            }
            if i > 0 && *step <= points[i - 1].0 {
                return Err(MixError::Schedule(format!(
                    "point {i} is at step {step}, not after step {}",
                    points[i - 1].0
                )));
            }
            counts(w, batch)?;
        }
        let totals = Arc::new((0..points.len()).map(|_| OnceLock::new()).collect());
        Ok(Schedule { points, interpolation, batch, totals })
    }

    /// The same weights at every step.
    pub fn constant(weights: &[f64], batch: u64) -> Result<Schedule, MixError> {
        Schedule::new(vec![(0, weights.to_vec())], Interpolation::Step, batch)
    }

    /// The points.
    pub fn points(&self) -> &[(u64, Vec<f64>)] {
        &self.points
    }

    /// How weights move between points.
    pub fn interpolation(&self) -> Interpolation {
        self.interpolation
    }

    /// Datasets.
    pub fn width(&self) -> usize {
        self.points[0].1.len()
    }

    /// The weights at `step`.
    pub fn weights_at(&self, step: u64) -> Vec<f64> {
        let i = self.points.partition_point(|(s, _)| *s <= step);
        if i == 0 {
            return self.points[0].1.clone();
        }
        let (s0, w0) = &self.points[i - 1];
        match (self.interpolation, self.points.get(i)) {
            (Interpolation::Linear, Some((s1, w1))) => {
                let t = (step - s0) as f64 / (s1 - s0) as f64;
                w0.iter().zip(w1).map(|(a, b)| a + (b - a) * t).collect()
            }
            _ => w0.clone(),
        }
    }

    /// Records per batch of each dataset at `step`.
    pub fn counts_at(&self, step: u64) -> Vec<u64> {
        // Every point apportions (checked in `new`), and interpolated weights stay finite, not
        // negative and not all zero, so this cannot fail; a fallback keeps it total anyway.
        apportion(&self.weights_at(step), self.batch).unwrap_or_else(|_| vec![0; self.width()])
    }

    /// True when the counts are the same at every step.
    pub fn is_constant(&self) -> bool {
        self.points.len() == 1
    }

    /// The counts summed over steps `from..to`, added to `acc`.
    fn add_counts(&self, from: u64, to: u64, acc: &mut [u64]) {
        let mut at = from;
        while at < to {
            // The segment holding `at`: before point 0, between points i - 1 and i, or after
            // the last point.
            let i = self.points.partition_point(|(s, _)| *s <= at);
            let end = self.points.get(i).map_or(to, |(s, _)| (*s).min(to));
            let linear = self.interpolation == Interpolation::Linear && i > 0 && i < self.points.len();
            if !linear {
                let c = self.counts_at(at);
                for (a, c) in acc.iter_mut().zip(c) {
                    *a = a.wrapping_add(c.wrapping_mul(end - at));
                }
            } else {
                let seg = i - 1;
                let start = self.points[seg].0;
                let totals = self.totals[seg].get_or_init(|| self.segment_totals(seg));
                // Whole blocks through the running totals, the ends step by step.
                let (b0, b1) = ((at - start).div_ceil(BLOCK_STEPS), (end - start) / BLOCK_STEPS);
                if b0 < b1 {
                    for s in at..start + b0 * BLOCK_STEPS {
                        add(acc, &self.counts_at(s));
                    }
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = a.wrapping_add(totals[b1 as usize][j] - totals[b0 as usize][j]);
                    }
                    for s in start + b1 * BLOCK_STEPS..end {
                        add(acc, &self.counts_at(s));
                    }
                } else {
                    for s in at..end {
                        add(acc, &self.counts_at(s));
                    }
                }
            }
            at = end;
        }
    }

    /// Running totals of linear segment `seg`, every [`BLOCK_STEPS`] steps.
    fn segment_totals(&self, seg: usize) -> Vec<Vec<u64>> {
        let (start, end) = (self.points[seg].0, self.points[seg + 1].0);
        let mut totals = vec![vec![0u64; self.width()]];
        let mut acc = vec![0u64; self.width()];
        for s in start..end {
            add(&mut acc, &self.counts_at(s));
            if (s - start + 1) % BLOCK_STEPS == 0 {
                totals.push(acc.clone());
            }
        }
        totals
    }
}

fn add(acc: &mut [u64], c: &[u64]) {
    for (a, c) in acc.iter_mut().zip(c) {
        *a = a.wrapping_add(*c);
    }
}

/// The seed of dataset `j`'s stream in a mix seeded `seed` (dataset 0's is `seed`); a mix of
/// packed streams seeds source `j`'s packer with it too.
pub fn stream_seed(seed: u64, j: usize) -> u64 {
    seed ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

/// The dataset of each slot of a batch: smooth weighted round robin over `counts` (each dataset
/// appears exactly `counts[j]` times, spread evenly).
pub fn pattern(counts: &[u64]) -> Vec<u32> {
    let total: i128 = counts.iter().map(|&c| i128::from(c)).sum();
    let mut current = vec![0i128; counts.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (cur, &c) in current.iter_mut().zip(counts) {
            *cur += i128::from(c);
        }
        let pick = (0..counts.len()).fold(0, |best, j| if current[j] > current[best] { j } else { best });
        current[pick] -= total;
        out.push(pick as u32);
    }
    out
}

/// Batches of global indices drawn from several datasets in fixed proportions.
#[derive(Debug, Clone)]
pub struct Mixer {
    streams: Vec<Sampler>,
    schedule: Schedule,
    batch: u64,
    offsets: Vec<u64>,
    base_step: u64,
    base: Vec<u64>,
}

impl Mixer {
    /// A mix of datasets of `lengths` with `weights`, batches of `batch` records.
    pub fn new(
        lengths: &[u64],
        weights: &[f64],
        batch: u64,
        mode: Mode,
        seed: u64,
    ) -> Result<Mixer, MixError> {
        if lengths.len() != weights.len() {
            return Err(MixError::Shape { datasets: lengths.len(), weights: weights.len() });
        }
        Mixer::scheduled(lengths, Schedule::constant(weights, batch)?, mode, seed)
    }

    /// A mix whose weights follow `schedule` (its batch size is the mix's).
    pub fn scheduled(lengths: &[u64], schedule: Schedule, mode: Mode, seed: u64) -> Result<Mixer, MixError> {
        if lengths.len() != schedule.width() {
            return Err(MixError::Shape { datasets: lengths.len(), weights: schedule.width() });
        }
        let batch = schedule.batch;
        let streams = lengths
            .iter()
            .enumerate()
            .map(|(j, &len)| {
                Sampler::new(len, 1, mode, stream_seed(seed, j))
                    .map_err(|source| MixError::Stream { index: j, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut offsets = Vec::with_capacity(lengths.len());
        let mut at = 0u64;
        for &len in lengths {
            offsets.push(at);
            at = at.checked_add(len).ok_or(MixError::TooLong)?;
        }
        Ok(Mixer { streams, schedule, batch, offsets, base_step: 0, base: vec![0; lengths.len()] })
    }

    /// Records per batch of each dataset at step 0 (at every step unless scheduled).
    pub fn counts(&self) -> Vec<u64> {
        self.schedule.counts_at(0)
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Records per batch.
    pub fn batch_len(&self) -> usize {
        self.batch as usize
    }

    /// Where each dataset's stream stands before step `step`. Steps before the base are counted
    /// back with the counts at the base (as if they had always held).
    pub fn positions_at(&self, step: u64) -> Vec<u64> {
        let mut out = self.base.clone();
        if step >= self.base_step {
            self.schedule.add_counts(self.base_step, step, &mut out);
        } else {
            let back = self.base_step - step;
            for (o, c) in out.iter_mut().zip(self.schedule.counts_at(self.base_step)) {
                *o = o.wrapping_sub(back.wrapping_mul(c));
            }
        }
        out
    }

    /// The dataset and stream position of each slot of batch `step`, in slot order.
    pub fn slots_at(&self, step: u64) -> Vec<(u32, u64)> {
        let mut next = self.positions_at(step);
        pattern(&self.schedule.counts_at(step))
            .into_iter()
            .map(|j| {
                let at = next[j as usize];
                next[j as usize] = at.wrapping_add(1);
                (j, at)
            })
            .collect()
    }

    /// Continue from `positions` (one per dataset) at step `step`: the state a checkpoint keeps.
    pub fn rebase(&mut self, step: u64, positions: &[u64]) -> Result<(), MixError> {
        if positions.len() != self.base.len() {
            return Err(MixError::Shape { datasets: self.base.len(), weights: positions.len() });
        }
        self.base_step = step;
        self.base = positions.to_vec();
        Ok(())
    }

    /// The global indices of batch `step`, in the batch's slot order.
    pub fn batch_at(&self, step: u64, out: &mut [u64]) -> Result<usize, SamplerError> {
        let n = self.batch_len();
        if out.len() < n {
            return Err(SamplerError::OutputTooSmall { need: n, got: out.len() });
        }
        let mut one = [0u64; 1];
        for (slot, (j, at)) in out.iter_mut().zip(self.slots_at(step)) {
            let j = j as usize;
            self.streams[j].batch_at(at, &mut one)?;
            *slot = self.offsets[j] + one[0];
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_the_largest_remainder_apportionment() {
        assert_eq!(counts(&[0.7, 0.3], 256).unwrap(), vec![179, 77]);
        assert_eq!(counts(&[1.0, 1.0, 1.0], 10).unwrap(), vec![4, 3, 3]);
        assert_eq!(counts(&[2.0, 0.0, 1.0], 9).unwrap(), vec![6, 0, 3]);
        for (w, b) in
            [(vec![0.5, 0.25, 0.125, 0.125], 256u64), (vec![3.0, 7.0, 11.0], 1000), (vec![1e-3, 1.0], 5000)]
        {
            let c = counts(&w, b).unwrap();
            let total: f64 = w.iter().sum();
            assert_eq!(c.iter().sum::<u64>(), b);
            for (&cj, wj) in c.iter().zip(&w) {
                assert!((cj as f64 - wj / total * b as f64).abs() < 1.0, "{w:?} {b} -> {c:?}");
            }
        }
        assert!(matches!(counts(&[1.0, -0.1], 8), Err(MixError::BadWeight { index: 1, .. })));
        assert!(matches!(counts(&[1.0, f64::NAN], 8), Err(MixError::BadWeight { index: 1, .. })));
        assert!(matches!(counts(&[f64::INFINITY], 8), Err(MixError::BadWeight { index: 0, .. })));
        assert_eq!(counts(&[0.0, 0.0], 8), Err(MixError::AllZero));
        assert!(matches!(counts(&[1.0, 1e-6], 8), Err(MixError::Starved { index: 1, .. })));
        assert!(matches!(counts(&[], 8), Err(MixError::Shape { .. })));
    }

    #[test]
    fn the_pattern_spreads_each_dataset_over_every_slice() {
        for c in [vec![179u64, 77], vec![4, 3, 3], vec![128, 64, 32, 32], vec![1, 255], vec![6, 0, 3]] {
            let p = pattern(&c);
            let b: u64 = c.iter().sum();
            assert_eq!(p.len() as u64, b);
            for (j, &cj) in c.iter().enumerate() {
                assert_eq!(p.iter().filter(|&&x| x as usize == j).count() as u64, cj);
                // Every window of the batch holds within 2 of its proportional share.
                for len in 1..=p.len() {
                    for start in (0..=p.len() - len).step_by(7) {
                        let got = p[start..start + len].iter().filter(|&&x| x as usize == j).count() as f64;
                        let want = cj as f64 * len as f64 / b as f64;
                        assert!((got - want).abs() <= 2.0, "{c:?} window {start}+{len}: {got} vs {want}");
                    }
                }
            }
        }
    }

    /// Dataset `j`'s elements, in the order the batches take them.
    fn taken(m: &Mixer, steps: std::ops::Range<u64>, j: usize, lengths: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; m.batch_len()];
        let mut got = Vec::new();
        for step in steps {
            m.batch_at(step, &mut out).unwrap();
            for &g in &out {
                if g >= m.offsets[j] && g < m.offsets[j] + lengths[j] {
                    got.push(g - m.offsets[j]);
                }
            }
        }
        got
    }

    #[test]
    fn batches_are_exact_deterministic_and_resume_with_new_weights() {
        let lengths = [50u64, 7, 300];
        for mode in [Mode::Sequential, Mode::Iid, Mode::Cyclic] {
            let m = Mixer::new(&lengths, &[0.5, 0.2, 0.3], 20, mode, 9).unwrap();
            assert_eq!(m.counts(), vec![10, 4, 6]);
            let mut a = vec![0u64; 20];
            let mut b = vec![0u64; 20];
            for step in [0u64, 1, 17, 1 << 40] {
                m.batch_at(step, &mut a).unwrap();
                m.clone().batch_at(step, &mut b).unwrap();
                assert_eq!(a, b);
                for (j, &c) in m.counts().iter().enumerate() {
                    let inside =
                        a.iter().filter(|&&g| g >= m.offsets[j] && g < m.offsets[j] + lengths[j]).count();
                    assert_eq!(inside as u64, c, "{mode:?} step {step} dataset {j}");
                }
            }
            // Stream j is the batch-size-1 sampler's stream, whatever the counts.
            let whole: Vec<Vec<u64>> = (0..3).map(|j| taken(&m, 0..30, j, &lengths)).collect();
            // New weights at step 12: each stream continues exactly where it stood.
            let mut r = Mixer::new(&lengths, &[0.1, 0.6, 0.3], 20, mode, 9).unwrap();
            r.rebase(12, &m.positions_at(12)).unwrap();
            for (j, whole) in whole.iter().enumerate() {
                let before = taken(&m, 0..12, j, &lengths);
                let after = taken(&r, 12..30, j, &lengths);
                let joined: Vec<u64> = before.into_iter().chain(after).collect();
                let n = joined.len().min(whole.len());
                assert!(n >= 50, "the comparison covers the switch");
                assert_eq!(joined[..n], whole[..n], "{mode:?} dataset {j}: the stream did not continue");
            }
            if mode == Mode::Cyclic {
                // Without replacement: each epoch of dataset 1 (7 records) is a permutation.
                let s = &whole[1];
                for e in 0..s.len() / 7 {
                    let mut epoch = s[e * 7..(e + 1) * 7].to_vec();
                    epoch.sort_unstable();
                    assert_eq!(epoch, (0..7).collect::<Vec<_>>());
                }
            }
        }
    }

    fn schedule_strategy() -> impl proptest::strategy::Strategy<Value = (Vec<(u64, Vec<f64>)>, bool)> {
        use proptest::prelude::*;
        (1usize..5, any::<bool>()).prop_flat_map(|(n, linear)| {
            (
                proptest::collection::vec(
                    (1u64..3000, proptest::collection::vec(prop_oneof![Just(0.0), 0.5f64..4.0], 3)),
                    n,
                ),
                Just(linear),
            )
                .prop_map(|(gaps, linear)| {
                    let mut step = 0;
                    let points = gaps
                        .into_iter()
                        .map(|(gap, mut w)| {
                            step += gap;
                            if w.iter().all(|&x| x == 0.0) {
                                w[0] = 1.0;
                            }
                            (step, w)
                        })
                        .collect();
                    (points, linear)
                })
        })
    }

    proptest::proptest! {
        #[test]
        fn scheduled_positions_add_up_every_steps_counts((points, linear) in schedule_strategy(), probes in proptest::collection::vec(0u64..8_000, 1..6)) {
            let interp = if linear { Interpolation::Linear } else { Interpolation::Step };
            let batch = 64;
            let schedule = match Schedule::new(points, interp, batch) {
                Ok(s) => s,
                Err(MixError::Starved { .. }) => return Ok(()),
                Err(e) => panic!("{e}"),
            };
            let m = Mixer::scheduled(&[40, 9, 700], schedule.clone(), Mode::Cyclic, 3).unwrap();
            let mut acc = vec![0u64; 3];
            let mut step = 0;
            let mut probes = probes;
            probes.sort_unstable();
            for probe in probes {
                while step < probe {
                    let c = schedule.counts_at(step);
                    proptest::prop_assert_eq!(c.iter().sum::<u64>(), batch);
                    let w = schedule.weights_at(step);
                    let total: f64 = w.iter().sum();
                    for (cj, wj) in c.iter().zip(&w) {
                        proptest::prop_assert!((*cj as f64 - wj / total * batch as f64).abs() < 1.0);
                    }
                    add(&mut acc, &c);
                    step += 1;
                }
                proptest::prop_assert_eq!(m.positions_at(probe), acc.clone(), "step {}", probe);
                // A batch holds each dataset's count of that step, in stream order.
                let slots = m.slots_at(probe);
                let c = schedule.counts_at(probe);
                for j in 0..3u32 {
                    let mine: Vec<u64> = slots.iter().filter(|(d, _)| *d == j).map(|(_, p)| *p).collect();
                    let want: Vec<u64> = (acc[j as usize]..acc[j as usize] + c[j as usize]).collect();
                    proptest::prop_assert_eq!(mine, want);
                }
            }
        }
    }

    #[test]
    fn a_schedule_may_silence_a_dataset_and_a_resume_may_change_it() {
        let points = vec![(0, vec![1.0, 0.0]), (100, vec![1.0, 0.0]), (200, vec![1.0, 1.0])];
        let s = Schedule::new(points, Interpolation::Linear, 10).unwrap();
        assert_eq!(s.counts_at(50), vec![10, 0]);
        assert_eq!(s.counts_at(150), vec![7, 3]);
        assert_eq!(s.counts_at(5000), vec![5, 5]);
        let m = Mixer::scheduled(&[30, 30], s, Mode::Sequential, 0).unwrap();
        assert_eq!(m.positions_at(100), vec![1000, 0]);
        // Resumed at step 120 with another schedule: the streams go on from where they stood.
        let at = m.positions_at(120);
        let other = Schedule::constant(&[1.0, 3.0], 10).unwrap();
        let mut r = Mixer::scheduled(&[30, 30], other, Mode::Sequential, 0).unwrap();
        r.rebase(120, &at).unwrap();
        let next = r.slots_at(120);
        assert_eq!(next.iter().filter(|(j, _)| *j == 1).map(|(_, p)| *p).min(), Some(at[1]));
        assert_eq!(r.positions_at(121), vec![at[0] + 3, at[1] + 7]);
        // Points must rise, have one width and apportion the batch.
        assert!(matches!(Schedule::new(vec![], Interpolation::Step, 8), Err(MixError::Schedule(_))));
        assert!(matches!(
            Schedule::new(vec![(5, vec![1.0]), (5, vec![1.0])], Interpolation::Step, 8),
            Err(MixError::Schedule(_))
        ));
        assert!(matches!(
            Schedule::new(vec![(0, vec![1.0]), (9, vec![1.0, 1.0])], Interpolation::Step, 8),
            Err(MixError::Schedule(_))
        ));
        assert!(matches!(
            Schedule::new(vec![(0, vec![1.0, 1e-6])], Interpolation::Step, 8),
            Err(MixError::Starved { .. })
        ));
    }
}
