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
    if let Some(index) = (0..weights.len()).find(|&j| weights[j] > 0.0 && counts[j] == 0) {
        return Err(MixError::Starved { index, weight: weights[index], batch });
    }
    Ok(counts)
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
    counts: Vec<u64>,
    pattern: Vec<u32>,
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
        let counts = counts(weights, batch)?;
        let streams = lengths
            .iter()
            .enumerate()
            .map(|(j, &len)| {
                let key = seed ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
                Sampler::new(len, 1, mode, key).map_err(|source| MixError::Stream { index: j, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut offsets = Vec::with_capacity(lengths.len());
        let mut at = 0u64;
        for &len in lengths {
            offsets.push(at);
            at = at.checked_add(len).ok_or(MixError::TooLong)?;
        }
        let pattern = pattern(&counts);
        Ok(Mixer { streams, counts, pattern, offsets, base_step: 0, base: vec![0; lengths.len()] })
    }

    /// Records per batch of each dataset.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Records per batch.
    pub fn batch_len(&self) -> usize {
        self.pattern.len()
    }

    /// Where each dataset's stream stands before step `step` (`step >= base_step`; earlier steps
    /// are counted as if the current counts had always held).
    pub fn positions_at(&self, step: u64) -> Vec<u64> {
        let steps = step.wrapping_sub(self.base_step);
        self.base.iter().zip(&self.counts).map(|(&b, &c)| b.wrapping_add(steps.wrapping_mul(c))).collect()
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
        let n = self.pattern.len();
        if out.len() < n {
            return Err(SamplerError::OutputTooSmall { need: n, got: out.len() });
        }
        let mut next = self.positions_at(step);
        let mut one = [0u64; 1];
        for (slot, &j) in out.iter_mut().zip(&self.pattern) {
            let j = j as usize;
            self.streams[j].batch_at(next[j], &mut one)?;
            next[j] = next[j].wrapping_add(1);
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
            assert_eq!(m.counts(), &[10, 4, 6]);
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
}
