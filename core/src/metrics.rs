//! Loader metrics: what each `next()` of a loader waited, how many batches were ready, each
//! step's time per stage on the workers, the bytes made and read, and a remote cache's hits, kept
//! cheaply enough to record on every step, plus the step's events for a trace.
//!
//! Front ends time the steps (their clocks, their threads) and hand the marks here; this module
//! only counts them.
//!
//! Invariants:
//! * Counts, totals and maxima are exact; percentiles come from a log-scale histogram of
//!   [`PER_OCTAVE`] buckets per doubling from [`FLOOR`] seconds, so each is within 9.05 % (2^(1/8)) of the
//!   exact value (the upper edge of its bucket, never above the maximum).
//! * Recording is O(1) with no allocation, except trace events, of which at most `max_events`
//!   are kept; past that the recorder drops them and says so ([`Recorder::dropped`]).
//! * No input panics: negative or NaN durations count as 0.

/// Histogram buckets per doubling.
pub const PER_OCTAVE: u32 = 8;
/// The shortest time the histogram tells apart (1 µs): shorter ones share its first bucket.
pub const FLOOR: f64 = 1e-6;
/// Buckets: the floor's, then [`PER_OCTAVE`] per doubling up to 2^48 µs (about 9 years).
const BUCKETS: usize = 1 + 48 * PER_OCTAVE as usize;

/// The stages of a step on a worker, in the order they run.
pub const STAGES: [&str; 4] = ["sample", "read", "decode", "transform"];

/// Durations in log-scale buckets, with an exact count, total and maximum.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    total: f64,
    max: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; BUCKETS], count: 0, total: 0.0, max: 0.0 }
    }
}

/// A histogram's figures, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub total: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Histogram {
    /// Counts one duration of `seconds`.
    pub fn add(&mut self, seconds: f64) {
        let s = if seconds.is_finite() && seconds > 0.0 { seconds } else { 0.0 };
        let k = if s <= FLOOR {
            0
        } else {
            // `as` saturates: a huge ratio lands in the last bucket.
            ((s / FLOOR).log2() * f64::from(PER_OCTAVE)) as usize + 1
        };
        self.buckets[k.min(BUCKETS - 1)] += 1;
        self.count += 1;
        self.total += s;
        self.max = self.max.max(s);
    }

    /// The upper edge of the bucket holding the `q` quantile, never above the maximum.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = q * self.count as f64;
        let mut seen = 0u64;
        for (k, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if n > 0 && seen as f64 >= rank {
                let edge = if k == 0 { FLOOR } else { FLOOR * 2f64.powf(k as f64 / f64::from(PER_OCTAVE)) };
                return edge.min(self.max);
            }
        }
        self.max
    }

    /// Count, total, p50, p95, p99 and max.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            total: self.total,
            p50: self.quantile(0.50),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
            max: self.max,
        }
    }
}

/// One step on a worker: the clock at its start, after sampling, after reading and after the
/// transform (seconds), and the engine's share of its reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Marks {
    pub start: f64,
    pub sampled: f64,
    pub read: f64,
    pub transformed: f64,
    /// Seconds of the read spent decoding (part of `read - sampled`).
    pub decode: f64,
    pub read_bytes: u64,
    pub network_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// A trace event: `stage` indexes [`STAGES`], or is `None` for a consumer's wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    pub stage: Option<u8>,
    pub track: u32,
    pub start: f64,
    pub end: f64,
    pub step: u64,
}

/// How many batches were ready when `next()` was called.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ready {
    pub total: u64,
    pub min: Option<u64>,
    pub max: u64,
    /// Calls that found none ready (stalls).
    pub none: u64,
}

/// Read counts of the steps: bytes read, bytes over the network, cache hits and misses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Io {
    pub read_bytes: u64,
    pub network_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// One loader's metrics in one process. See the module docs.
#[derive(Debug, Clone)]
pub struct Recorder {
    pub wait: Histogram,
    pub ready: Ready,
    pub stages: [Histogram; 4],
    /// Bytes of the batches made.
    pub bytes: u64,
    pub io: Io,
    trace: bool,
    max_events: usize,
    events: Vec<Event>,
    dropped: bool,
}

impl Recorder {
    /// A recorder; with `trace`, it also keeps up to `max_events` events.
    pub fn new(trace: bool, max_events: usize) -> Recorder {
        Recorder {
            wait: Histogram::default(),
            ready: Ready::default(),
            stages: Default::default(),
            bytes: 0,
            io: Io::default(),
            trace,
            max_events,
            events: Vec::new(),
            dropped: false,
        }
    }

    /// Starts counting anew; the trace keeps its events.
    pub fn reset(&mut self) {
        let events = std::mem::take(&mut self.events);
        let dropped = self.dropped;
        *self = Recorder { events, dropped, ..Recorder::new(self.trace, self.max_events) };
    }

    /// A `next()` that started at `start` with `ready` batches ready and returned at `end`
    /// with step `step`.
    pub fn waited(&mut self, start: f64, end: f64, ready: u64, step: u64) {
        self.wait.add(end - start);
        let r = &mut self.ready;
        r.total += ready;
        r.min = Some(r.min.map_or(ready, |m| m.min(ready)));
        r.max = r.max.max(ready);
        r.none += u64::from(ready == 0);
        self.event(None, 0, start, end, step);
    }

    /// A step made on worker track `track` (>= 1) with `nbytes` bytes of batch.
    pub fn step(&mut self, step: u64, marks: &Marks, nbytes: u64, track: u32) {
        let reading = (marks.read - marks.sampled).max(0.0);
        let decode = marks.decode.clamp(0.0, reading);
        let cut = marks.read - decode;
        let spans = [
            (marks.start, marks.sampled),
            (marks.sampled, cut),
            (cut, marks.read),
            (marks.read, marks.transformed),
        ];
        for (k, (a, b)) in spans.into_iter().enumerate() {
            self.stages[k].add(b - a);
            self.event(Some(k as u8), track, a, b, step);
        }
        self.bytes = self.bytes.wrapping_add(nbytes);
        let io = &mut self.io;
        io.read_bytes = io.read_bytes.wrapping_add(marks.read_bytes);
        io.network_bytes = io.network_bytes.wrapping_add(marks.network_bytes);
        io.cache_hits = io.cache_hits.wrapping_add(marks.cache_hits);
        io.cache_misses = io.cache_misses.wrapping_add(marks.cache_misses);
    }

    fn event(&mut self, stage: Option<u8>, track: u32, start: f64, end: f64, step: u64) {
        if !self.trace {
            return;
        }
        if self.events.len() >= self.max_events {
            self.dropped = true;
            return;
        }
        self.events.push(Event { stage, track, start, end, step });
    }

    /// The trace events kept, in the order they were recorded.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// True when events were dropped past the cap.
    pub fn dropped(&self) -> bool {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn percentiles_are_within_nine_percent(mut values in proptest::collection::vec(1e-6f64..100.0, 1..400)) {
            let mut h = Histogram::default();
            values.iter().for_each(|&v| h.add(v));
            values.sort_by(f64::total_cmp);
            for q in [0.5, 0.95, 0.99] {
                // The exact value at rank ⌈q·n⌉ (what the histogram counts up to).
                let k = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
                let exact = values[k];
                let got = h.quantile(q);
                // At most one bucket's ratio above: 2^(1/8) (9.05 %), reached by a value on a lower edge.
                let ratio = 2f64.powf(1.0 / f64::from(PER_OCTAVE)) * (1.0 + 1e-12);
                prop_assert!(got >= exact * 0.999_999 && got <= exact * ratio, "q {q}: {got} against {exact}");
            }
            prop_assert_eq!(h.count, values.len() as u64);
            prop_assert_eq!(h.max, values[values.len() - 1]);
        }
    }

    #[test]
    fn bad_durations_count_as_zero() {
        let mut h = Histogram::default();
        [f64::NAN, -1.0, f64::INFINITY, 1e300].iter().for_each(|&v| h.add(v));
        assert_eq!((h.count, h.total), (4, 1e300));
    }

    #[test]
    fn a_step_splits_its_read_into_read_and_decode_and_keeps_events_up_to_the_cap() {
        let mut r = Recorder::new(true, 6);
        let marks = Marks {
            start: 1.0,
            sampled: 1.5,
            read: 3.5,
            transformed: 4.0,
            decode: 0.5,
            read_bytes: 7,
            ..Marks::default()
        };
        r.step(3, &marks, 10, 1);
        r.waited(0.0, 4.5, 0, 3);
        let totals: Vec<f64> = r.stages.iter().map(|h| h.total).collect();
        assert_eq!(totals, [0.5, 1.5, 0.5, 0.5]);
        assert_eq!((r.bytes, r.io.read_bytes, r.ready.none), (10, 7, 1));
        assert_eq!(r.events().len(), 5);
        r.step(4, &marks, 10, 2);
        assert_eq!(r.events().len(), 6);
        assert!(r.dropped());
        r.reset();
        assert_eq!((r.bytes, r.stages[0].count, r.events().len()), (0, 0, 6));
    }
}
