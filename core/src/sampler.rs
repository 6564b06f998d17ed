//! Index sampler: turns a step number into a batch of record indices.
//!
//! Invariants:
//! * Every batch is a pure function of `(length, batch_size, mode, seed, step)`. The sampler holds
//!   no stream state besides the step counter, so [`Sampler::seek`] is O(1) in every mode.
//! * Every index written is `< length`, and every batch of a sampler has [`Sampler::batch_len`]
//!   indices.
//! * No input panics or overflows: step and element arithmetic wraps at 2^64, and zero lengths,
//!   zero batch sizes, unknown modes and short output buffers are [`SamplerError`] values.
//! * [`Mode::Sequential`] reproduces the reference exactly: batch `k` is
//!   `[(k·B + j) mod L for j < B]` with `k·B + j` computed modulo 2^64. The seed is ignored.
//! * [`Mode::Iid`] draws element `g = step·B + j` uniformly from `0..L` with replacement, so the
//!   stream does not depend on `B`. Words come from a counter-based generator keyed by the seed and
//!   are mapped to `0..L` without bias (multiply-high with rejection).
//! * [`Mode::Cyclic`] walks, per epoch `e`, a permutation `P_e` of `0..L` that depends on
//!   `(seed, e, L)` and not on `B`. An epoch is `L / B` batches and its remainder is dropped; when
//!   `L < B` every step is an epoch of its own and yields all `L` indices. `P_e` is a keyed Feistel
//!   network on `2h` bits brought into range by cycle walking; it is never materialised.

use thiserror::Error;

/// How a [`Sampler`] orders indices. The discriminants are the reference's mode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    /// Consecutive windows over the index space, wrapping around the end.
    Sequential = 0,
    /// Independent uniform draws, with replacement.
    Iid = 1,
    /// A fresh permutation per epoch, without replacement within an epoch.
    Cyclic = 2,
}

impl TryFrom<u8> for Mode {
    type Error = SamplerError;

    fn try_from(value: u8) -> Result<Self, Self::Error> {
        match value {
            0 => Ok(Self::Sequential),
            1 => Ok(Self::Iid),
            2 => Ok(Self::Cyclic),
            other => Err(SamplerError::UnknownMode(other)),
        }
    }
}

/// Errors from building or driving a [`Sampler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SamplerError {
    /// The mode number is not 0 (sequential), 1 (iid) or 2 (cyclic).
    #[error("unknown sampler mode {0}: expected 0 (sequential), 1 (iid) or 2 (cyclic)")]
    UnknownMode(u8),
    /// The index space is empty.
    #[error("sampler length must be at least 1")]
    ZeroLength,
    /// A batch would hold no indices.
    #[error("sampler batch size must be at least 1")]
    ZeroBatch,
    /// The batch cannot be addressed on this platform (`batch_size > usize::MAX`).
    #[error("batch size {0} does not fit in this platform's address space")]
    BatchTooLarge(u64),
    /// The output buffer is shorter than [`Sampler::batch_len`].
    #[error("output buffer holds {got} indices but a batch has {need}")]
    OutputTooSmall {
        /// Indices a batch has.
        need: usize,
        /// Length of the buffer passed in.
        got: usize,
    },
}

impl crate::error::Classify for SamplerError {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Argument
    }
}

/// Weyl increment for the key-derivation and retry counters (2^64 / golden ratio, odd).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// Weyl increment and multiplier offset of the fast word generator (wyrand's odd constants).
const WEYL: u64 = 0xA076_1D64_78BD_642F;
const MUM_XOR: u64 = 0xE703_7ED1_A0B4_28DB;
/// Key-derivation domains, so the modes and the rejection retries never share a stream.
const DOMAIN_IID: u64 = 0x0049_4944;
const DOMAIN_RETRY: u64 = 0x0052_4554_5259;
const DOMAIN_CYCLIC: u64 = 0x4359_434C_4943;
/// Largest length drawn from 32-bit halves of a word. The rejection rate there is below
/// `length / 2^32 <= 1/64`; longer index spaces take a full 64-bit word per element.
const NARROW_MAX: u64 = 1 << 26;
/// Feistel rounds per permutation evaluation.
const ROUNDS: usize = 4;

/// A bijective 64-bit finalizer (xor-shift / multiply, moremur constants). Used where strength
/// matters more than speed: key derivation and rejection retries.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 27;
    x = x.wrapping_mul(0x3C79_AC49_2BA7_B653);
    x ^= x >> 33;
    x = x.wrapping_mul(0x1C69_B3F7_4AC4_AE35);
    x ^ (x >> 27)
}

/// Hash of two words; a bijection in each argument when the other is fixed.
#[inline]
pub(crate) fn hash2(a: u64, b: u64) -> u64 {
    mix(mix(a ^ GAMMA).wrapping_add(b).wrapping_add(GAMMA))
}

/// One-multiply mixer: the folded 128-bit product of `s` and `s ^ MUM_XOR`. Fed with a Weyl
/// counter it is the wyrand generator; it also serves as the Feistel round function.
#[inline(always)]
fn mum(s: u64) -> u64 {
    let product = u128::from(s) * u128::from(s ^ MUM_XOR);
    (product as u64) ^ ((product >> 64) as u64)
}

/// How many of `base, base + 1, …` (at most `len`) come before the u64 sum wraps to 0.
fn before_wrap(base: u64, len: usize) -> usize {
    match base {
        0 => len,
        _ => usize::try_from(base.wrapping_neg()).map_or(len, |n| n.min(len)),
    }
}

/// Produces batches of indices in `0..length`; see the module docs for the exact semantics.
#[derive(Debug, Clone)]
pub struct Sampler {
    length: u64,
    batch_size: u64,
    mode: Mode,
    seed: u64,
    step: u64,
    batch_len: usize,
    /// Seed-derived key of the IID element stream or of the CYCLIC permutations.
    key: u64,
    /// IID: Lemire rejection threshold of the fast path, `2^32 mod length` for narrow lengths,
    /// else `2^64 mod length`.
    threshold: u64,
    /// CYCLIC: batches per epoch, `length / batch_size`, or 1 when `length < batch_size`.
    epoch_batches: u64,
    /// CYCLIC: bits per Feistel half, `h >= 1` with `2^(2h) >= length`.
    half_bits: u32,
}

impl Sampler {
    /// A sampler positioned at step 0.
    pub fn new(length: u64, batch_size: u64, mode: Mode, seed: u64) -> Result<Self, SamplerError> {
        if length == 0 {
            return Err(SamplerError::ZeroLength);
        }
        if batch_size == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        let len_of_batch = match mode {
            Mode::Cyclic => batch_size.min(length),
            Mode::Sequential | Mode::Iid => batch_size,
        };
        let batch_len = usize::try_from(len_of_batch).map_err(|_| SamplerError::BatchTooLarge(batch_size))?;
        let domain = if mode == Mode::Iid { DOMAIN_IID } else { DOMAIN_CYCLIC };
        let threshold = match length <= NARROW_MAX {
            true => (1u64 << 32) % length,
            false => length.wrapping_neg() % length,
        };
        // Bits needed for the values 0..length, split into two halves of at least one bit.
        let half_bits = (u64::BITS - (length - 1).leading_zeros()).div_ceil(2).max(1);
        Ok(Self {
            length,
            batch_size,
            mode,
            seed,
            step: 0,
            batch_len,
            key: hash2(seed, domain),
            threshold,
            epoch_batches: (length / batch_size).max(1),
            half_bits,
        })
    }

    /// Size of the index space.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Requested batch size.
    pub fn batch_size(&self) -> u64 {
        self.batch_size
    }

    /// Ordering mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Seed (ignored by [`Mode::Sequential`]).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The step the next call to [`Sampler::next_into`] returns.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves to `step` in O(1); the next [`Sampler::next_into`] returns batch `step`.
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// Indices in every batch: `batch_size`, except CYCLIC with `length < batch_size`, where a
    /// batch is the whole permutation of `length` indices.
    pub fn batch_len(&self) -> usize {
        self.batch_len
    }

    /// Writes batch `step` to `out[..batch_len]` and returns `batch_len`. Does not move the cursor.
    pub fn batch_at(&self, step: u64, out: &mut [u64]) -> Result<usize, SamplerError> {
        let need = self.batch_len;
        let got = out.len();
        let out = out.get_mut(..need).ok_or(SamplerError::OutputTooSmall { need, got })?;
        match self.mode {
            Mode::Sequential => self.fill_sequential(step, out),
            Mode::Iid => self.fill_iid(step, out),
            Mode::Cyclic => self.fill_cyclic(step, out),
        }
        Ok(need)
    }

    /// Writes the batch at the cursor, then advances the cursor by one step (wrapping at 2^64).
    pub fn next_into(&mut self, out: &mut [u64]) -> Result<usize, SamplerError> {
        let n = self.batch_at(self.step, out)?;
        self.step = self.step.wrapping_add(1);
        Ok(n)
    }

    /// Writes elements `first, first + 1, …` of the element stream to `out`: what a sampler of
    /// the same length, mode and seed with batch size 1 returns at those steps (the batch size
    /// of `self` plays no part). Packing reads documents in this order.
    pub fn elements_into(&self, first: u64, out: &mut [u64]) {
        match self.mode {
            Mode::Sequential => self.sequential_from(first, out),
            Mode::Iid => self.iid_from(first, out),
            Mode::Cyclic => {
                // Epoch e is elements [e·L, (e + 1)·L): split where a run crosses into the next.
                let (mut at, mut out) = (first, out);
                while !out.is_empty() {
                    let (epoch, position) = (at / self.length, at % self.length);
                    let n = usize::try_from(self.length - position).unwrap_or(usize::MAX).min(out.len());
                    let (run, rest) = out.split_at_mut(n);
                    self.cyclic_run(epoch, position, run);
                    (at, out) = (at.wrapping_add(n as u64), rest);
                }
            }
        }
    }

    fn fill_sequential(&self, step: u64, out: &mut [u64]) {
        self.sequential_from(step.wrapping_mul(self.batch_size), out);
    }

    /// SEQUENTIAL elements `base, base + 1, …`: element j is `base.wrapping_add(j) % length`.
    /// Within one run that u64 sum wraps to 0 at most once and then restarts at index 0.
    fn sequential_from(&self, base: u64, out: &mut [u64]) {
        let (head, tail) = out.split_at_mut(before_wrap(base, out.len()));
        fill_ascending(head, base % self.length, self.length);
        fill_ascending(tail, 0, self.length);
    }

    fn fill_iid(&self, step: u64, out: &mut [u64]) {
        self.iid_from(step.wrapping_mul(self.batch_size), out);
    }

    /// IID elements `base, base + 1, …` (wrapping at 2^64).
    fn iid_from(&self, base: u64, out: &mut [u64]) {
        let (head, tail) = out.split_at_mut(before_wrap(base, out.len()));
        for (first, run) in [(base, head), (0, tail)] {
            match self.length <= NARROW_MAX {
                true => self.iid_narrow(first, run),
                false => self.iid_wide(first, run),
            }
        }
    }

    /// Elements `first..first + out.len()` (no wrap) for lengths above [`NARROW_MAX`]: element g
    /// takes the word `mum(key + (g + 1)·WEYL)` through 64-bit multiply-high.
    fn iid_wide(&self, first: u64, out: &mut [u64]) {
        let mut counter = self.key.wrapping_add(first.wrapping_mul(WEYL));
        for (j, slot) in out.iter_mut().enumerate() {
            counter = counter.wrapping_add(WEYL);
            let wide = u128::from(mum(counter)) * u128::from(self.length);
            *slot = match (wide as u64) < self.threshold {
                true => iid_retry(self.seed, self.length, first.wrapping_add(j as u64)),
                false => (wide >> 64) as u64,
            };
        }
    }

    /// Elements `first..first + out.len()` (no wrap) for lengths up to [`NARROW_MAX`]: elements
    /// 2q and 2q + 1 take the low and high halves of word `mum(key + (q + 1)·WEYL)` through
    /// 32-bit multiply-high, so one word serves two elements.
    fn iid_narrow(&self, first: u64, out: &mut [u64]) {
        let (length, threshold, seed) = (self.length, self.threshold, self.seed);
        let draw = |half: u64, g: u64| {
            let product = half * length; // half < 2^32 and length <= 2^26: no overflow
            match (product & 0xFFFF_FFFF) < threshold {
                true => iid_retry(seed, length, g),
                false => product >> 32,
            }
        };
        let word = |q: u64| mum(self.key.wrapping_add(q.wrapping_add(1).wrapping_mul(WEYL)));
        // An odd first element takes the high half of its word; the rest then start even.
        let (lead, rest) = out.split_at_mut(usize::from(first & 1 == 1).min(out.len()));
        if let [slot] = lead {
            *slot = draw(word(first >> 1) >> 32, first);
        }
        let even = first.wrapping_add(lead.len() as u64);
        // even + rest.len() does not pass 2^64, so pair j holds elements even + 2j and + 2j + 1.
        let last = even.wrapping_add(rest.len() as u64).wrapping_sub(1);
        let mut counter = self.key.wrapping_add((even >> 1).wrapping_mul(WEYL));
        let mut pairs = rest.chunks_exact_mut(2);
        for (j, pair) in (&mut pairs).enumerate() {
            counter = counter.wrapping_add(WEYL);
            let w = mum(counter);
            let g = even.wrapping_add(2 * j as u64);
            pair[0] = draw(w & 0xFFFF_FFFF, g);
            pair[1] = draw(w >> 32, g.wrapping_add(1));
        }
        if let [slot] = pairs.into_remainder() {
            *slot = draw(word(last >> 1) & 0xFFFF_FFFF, last);
        }
    }

    fn fill_cyclic(&self, step: u64, out: &mut [u64]) {
        let epoch = step / self.epoch_batches;
        // (step mod epoch_batches) · batch_size + out.len() <= length: nothing overflows.
        self.cyclic_run(epoch, (step % self.epoch_batches) * self.batch_size, out);
    }

    /// Positions `start..start + out.len()` (within `0..length`) of epoch `epoch`'s permutation.
    fn cyclic_run(&self, epoch: u64, start: u64, out: &mut [u64]) {
        let epoch_key = hash2(self.key, epoch);
        let mut keys = [0u64; ROUNDS];
        for (round, key) in (0u64..).zip(keys.iter_mut()) {
            *key = hash2(epoch_key, round);
        }
        // P_e[i] applies the Feistel bijection to i, then re-applies it while the value is out of
        // range. The walk ends because the cycle through i returns to i, which is in range. The
        // first application runs as its own branch-free pass so independent elements overlap.
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = feistel(&keys, self.half_bits, start + i as u64);
        }
        for slot in out.iter_mut() {
            while *slot >= self.length {
                *slot = feistel(&keys, self.half_bits, *slot);
            }
        }
    }
}

/// IID rejection path of element `g`: fresh 64-bit words from a separate counter domain, mapped
/// by multiply-high with the exact 64-bit threshold, until one is accepted.
#[cold]
#[inline(never)]
fn iid_retry(seed: u64, length: u64, g: u64) -> u64 {
    let element_key = mix(hash2(seed, DOMAIN_RETRY).wrapping_add(g.wrapping_mul(GAMMA)));
    let threshold = length.wrapping_neg() % length;
    let mut attempt: u64 = 1;
    loop {
        let word = mix(element_key.wrapping_add(attempt.wrapping_mul(GAMMA)));
        let wide = u128::from(word) * u128::from(length);
        if (wide as u64) >= threshold {
            return (wide >> 64) as u64;
        }
        attempt = attempt.wrapping_add(1);
    }
}

/// `out[i] = (start + i) mod length` for `start < length`, written as ascending runs.
fn fill_ascending(out: &mut [u64], start: u64, length: u64) {
    let mut rest = out;
    let mut first = start;
    while !rest.is_empty() {
        let run = usize::try_from(length - first).map_or(rest.len(), |n| n.min(rest.len()));
        let (head, tail) = rest.split_at_mut(run);
        for (i, slot) in head.iter_mut().enumerate() {
            *slot = first + i as u64;
        }
        rest = tail;
        first = 0;
    }
}

/// Balanced Feistel network on `2·half_bits` bits (`1 <= half_bits <= 32`). The round function
/// is the top `half_bits` bits of `mum(right ^ round_key)`.
#[inline]
fn feistel(keys: &[u64; ROUNDS], half_bits: u32, x: u64) -> u64 {
    let mask = (1u64 << half_bits) - 1;
    let drop = u64::BITS - half_bits;
    let (mut left, mut right) = (x >> half_bits, x & mask);
    for &key in keys {
        let f = mum(right ^ key) >> drop;
        (left, right) = (right, left ^ f);
    }
    (left << half_bits) | right
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    const MODES: [Mode; 3] = [Mode::Sequential, Mode::Iid, Mode::Cyclic];

    fn new(l: u64, b: u64, mode: Mode, seed: u64) -> Sampler {
        Sampler::new(l, b, mode, seed).unwrap()
    }

    proptest! {
        #[test]
        fn elements_are_the_batch_size_one_stream(l in 1u64..300, b in 1u64..40, first in 0u64..2000, n in 0usize..700, seed: u64, m in 0usize..3) {
            let one = new(l, 1, MODES[m], seed);
            let mut want = vec![0u64; n];
            for (j, w) in want.iter_mut().enumerate() {
                one.batch_at(first + j as u64, std::slice::from_mut(w)).unwrap();
            }
            let mut got = vec![0u64; n];
            new(l, b, MODES[m], seed).elements_into(first, &mut got);
            prop_assert_eq!(got, want);
        }
    }

    fn batch(s: &Sampler, step: u64) -> Vec<u64> {
        let mut out = vec![0; s.batch_len()];
        assert_eq!(s.batch_at(step, &mut out), Ok(s.batch_len()));
        out
    }

    /// The concatenated batches of one CYCLIC epoch.
    fn epoch(l: u64, b: u64, seed: u64, e: u64) -> Vec<u64> {
        let s = new(l, b, Mode::Cyclic, seed);
        let per = (l / b).max(1);
        (0..per).flat_map(|p| batch(&s, e * per + p)).collect()
    }

    #[test]
    fn batch_at_equals_kth_next_and_seek_moves_both_ways() {
        for (mode, (l, b)) in
            MODES.iter().flat_map(|&m| [(10, 4), (7, 3), (3, 5), (1000, 33), (1, 1)].map(|c| (m, c)))
        {
            let mut s = new(l, b, mode, 99);
            let mut out = vec![0; s.batch_len()];
            let mut firsts = Vec::new();
            for k in 0..40 {
                assert_eq!((s.step(), s.next_into(&mut out)), (k, Ok(s.batch_len())));
                assert_eq!(out, batch(&s, k));
                firsts.push(out.clone());
            }
            for k in [30usize, 3, 17, 0, 38] {
                s.seek(k as u64);
                s.next_into(&mut out).unwrap();
                assert_eq!(out, firsts[k], "{mode:?} L={l} B={b} seek {k}");
                s.next_into(&mut out).unwrap();
                assert_eq!(out, firsts[k + 1]);
            }
        }
    }

    #[test]
    fn sequential_wraps_like_the_reference() {
        let s = new(3, 5, Mode::Sequential, 0);
        assert_eq!([batch(&s, 0), batch(&s, 1)], [[0, 1, 2, 0, 1], [2, 0, 1, 2, 0]]);
        assert_eq!(batch(&new(10, 4, Mode::Sequential, 0), 1 << 62), [0, 1, 2, 3]);
        // k·3 = 2^64 - 1: the u64 sum wraps inside the batch and the run restarts at 0.
        let s = new(1000, 3, Mode::Sequential, 0);
        assert_eq!(batch(&s, u64::MAX / 3), [u64::MAX % 1000, 0, 1]);
        assert_eq!(batch(&s, u64::MAX), [613, 614, 615]); // base 2^64 - 3: no wrap inside
    }

    #[test]
    fn cyclic_epochs_are_repeat_free_and_cover() {
        for (l, b) in [(10u64, 4u64), (12, 4), (1000, 32), (1024, 1), (7, 3), (5, 5), (3, 5)] {
            for e in [0u64, 1, 2, 1_000_000, u64::MAX / (l / b).max(1) - 1] {
                let items = epoch(l, b, 5, e);
                let distinct: HashSet<u64> = items.iter().copied().collect();
                assert_eq!(items.len() as u64, l / b * b + if l < b { l } else { 0 });
                assert_eq!(distinct.len(), items.len(), "L={l} B={b} epoch {e} repeats");
                assert!(items.iter().all(|&x| x < l));
                if l % b == 0 || l < b {
                    assert_eq!(distinct, (0..l).collect());
                }
            }
        }
        assert_eq!(new(3, 5, Mode::Cyclic, 1).batch_len(), 3);
    }

    #[test]
    fn cyclic_epochs_differ_and_permutation_ignores_batch_size() {
        let epochs: HashSet<Vec<u64>> = (0..20).map(|e| epoch(1000, 1000, 3, e)).collect();
        assert_eq!(epochs.len(), 20);
        assert_ne!(epoch(1000, 1000, 3, 0), epoch(1000, 1000, 4, 0));
        for (l, e) in [(10u64, 0u64), (11, 3), (1000, 7), (3, 2)] {
            let (two, four, one) = (epoch(l, 2, 8, e), epoch(l, 4, 8, e), epoch(l, 1, 8, e));
            let n = two.len().min(four.len());
            assert_eq!((&one[..n], &two[..n]), (&four[..n], &four[..n]));
        }
    }

    #[test]
    fn iid_is_uniform_and_independent_of_batch_size() {
        let s = new(10, 1000, Mode::Iid, 2024);
        let mut counts = [0u64; 10];
        (0..100).flat_map(|k| batch(&s, k)).for_each(|v| counts[v as usize] += 1);
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - 1e4).powi(2) / 1e4).sum();
        assert!(chi2 < 33.7, "chi-square {chi2}, 9 dof (p = 1e-4): {counts:?}");
        for l in [10u64, 1 << 26, (1 << 26) + 1, (1 << 63) + 5, u64::MAX] {
            let [one, two, four, odd] = [1, 2, 4, 3].map(|b| new(l, b, Mode::Iid, 7));
            for k in [0u64, 1, 50, u64::MAX / 4] {
                let joined = [batch(&two, 2 * k), batch(&two, 2 * k + 1)].concat();
                assert_eq!(joined, batch(&four, k), "L={l} k={k}");
                assert_eq!(batch(&one, 4 * k + 1), joined[1..2]);
            }
            // B = 3 straddles word pairs and, here, the 2^64 wrap of the element number.
            assert_eq!(batch(&odd, u64::MAX / 3)[1..], [batch(&one, 0), batch(&one, 1)].concat());
        }
        assert_ne!(batch(&s, 0), batch(&new(10, 1000, Mode::Iid, 2025), 0));
    }

    #[test]
    fn huge_lengths_and_steps_stay_in_range() {
        for mode in MODES {
            for (l, b) in
                [(1u64 << 63) + 5, u64::MAX, 1 << 32, 3].map(|l| [(l, 1), (l, 3), (l, 64)]).as_flattened()
            {
                for step in [0, 1, u64::MAX / 2, u64::MAX] {
                    let v = batch(&new(*l, *b, mode, u64::MAX), step);
                    assert!(v.iter().all(|x| x < l));
                    let distinct = v.iter().collect::<HashSet<_>>().len();
                    assert!(mode != Mode::Cyclic || distinct == v.len());
                }
            }
            let mut s = new(5, u64::MAX, mode, 0);
            s.seek(u64::MAX);
            let res = s.next_into(&mut [0u64; 8]);
            if mode == Mode::Cyclic {
                assert_eq!((res, s.step()), (Ok(5), 0));
            } else {
                assert!(matches!(res, Err(SamplerError::OutputTooSmall { got: 8, .. })));
                assert_eq!(s.step(), u64::MAX); // a failed call does not advance
            }
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let zero = [(0, 4), (4, 0)].map(|(l, b)| Sampler::new(l, b, Mode::Iid, 0).err());
        assert_eq!(zero, [Some(SamplerError::ZeroLength), Some(SamplerError::ZeroBatch)]);
        for m in [3u8, 7, 255] {
            assert_eq!(Mode::try_from(m), Err(SamplerError::UnknownMode(m)));
        }
        assert_eq!(MODES.map(|m| Mode::try_from(m as u8)), MODES.map(Ok));
        let s = new(10, 4, Mode::Sequential, 0);
        let err = SamplerError::OutputTooSmall { need: 4, got: 3 };
        assert_eq!(s.batch_at(0, &mut [0u64; 3]), Err(err));
        let mut long = [u64::MAX; 6];
        assert_eq!(s.batch_at(0, &mut long), Ok(4));
        assert_eq!(long, [0, 1, 2, 3, u64::MAX, u64::MAX]);
    }

    proptest! {
        #[test]
        fn every_index_is_in_range(
            l in 1u64.., small in 1u64..50, pick_small: bool, b in 1u64..80, mode in 0u8..3,
            seed: u64, step: u64,
        ) {
            let l = if pick_small { small } else { l };
            let s = new(l, b, Mode::try_from(mode).unwrap(), seed);
            let v = batch(&s, step);
            prop_assert_eq!(v.len() as u64, if mode == 2 { b.min(l) } else { b });
            prop_assert!(v.iter().all(|&x| x < l));
        }
    }
}
