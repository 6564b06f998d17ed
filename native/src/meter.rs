//! Per-thread read meters: what the reads made by the calling thread cost, for loader metrics
//! (the Python `DataLoader.metrics()` reads [`meter`] before and after each step's reads on a
//! worker thread; the difference is that step's share, whatever else runs on other threads).
//!
//! Invariants:
//! * Every count only grows (wrapping at `u64::MAX`), so a difference of two readings on one
//!   thread is what happened on it in between.
//! * A read is counted on the thread that called it, even where helper threads (the rayon pool,
//!   the async runtime) did part of the work: the times are that thread's waits.
//! * Metering costs a few clock reads and additions per call, nothing per record.

use std::cell::Cell;
use std::time::Instant;

/// One thread's read counts since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meter {
    /// Nanoseconds spent decoding (and checking) fetched records into their destinations.
    pub decode_ns: u64,
    /// Stored bytes of the ranges fetched.
    pub read_bytes: u64,
    /// Bytes that came over the network (a remote store's range answers).
    pub network_bytes: u64,
    /// Blocks of a remote store's cache found in memory or on disk.
    pub cache_hits: u64,
    /// Blocks of a remote store's cache that had to be fetched.
    pub cache_misses: u64,
}

thread_local! {
    static METER: Cell<Meter> = const { Cell::new(Meter {
        decode_ns: 0, read_bytes: 0, network_bytes: 0, cache_hits: 0, cache_misses: 0,
    }) };
}

/// The calling thread's counts so far.
pub fn meter() -> Meter {
    METER.with(Cell::get)
}

/// Adds to the calling thread's counts.
pub(crate) fn add(change: impl FnOnce(&mut Meter)) {
    METER.with(|m| {
        let mut now = m.get();
        change(&mut now);
        m.set(now);
    });
}

/// Runs `f`, adding its wall time to the field `field` picks.
pub(crate) fn timed<T>(field: fn(&mut Meter) -> &mut u64, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    add(|m| {
        let slot = field(m);
        *slot = slot.wrapping_add(ns);
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grow_on_the_calling_thread_only() {
        let before = meter();
        add(|m| m.cache_hits += 2);
        timed(|m| &mut m.decode_ns, || std::thread::sleep(std::time::Duration::from_millis(2)));
        let after = meter();
        assert_eq!(after.cache_hits - before.cache_hits, 2);
        assert!(after.decode_ns - before.decode_ns >= 2_000_000);
        let other = std::thread::spawn(meter).join().unwrap_or_default();
        assert_eq!(other, Meter::default());
    }
}
