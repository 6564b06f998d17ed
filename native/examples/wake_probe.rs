//! How long a rayon pool thread takes to start a job after the pool has been idle: the cost a
//! parallel gather pays before its helpers join (`cargo run --release --example wake_probe`).
//!
//! For each idle time, 50 times: sleep that long, spawn an empty job from a busy caller (as a
//! gather's caller is, copying its own blocks meanwhile), and time until the job starts. Prints
//! the median, 90th percentile and maximum. On a VM whose idle vCPUs are descheduled by the host,
//! this is far more than the microseconds of a futex wake.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let base = Instant::now();
    let now = move || base.elapsed().as_nanos() as u64;
    rayon::spawn(|| {}); // start the pool
    std::thread::sleep(Duration::from_millis(50));
    for idle_us in [0u64, 100, 1000, 5000] {
        let mut waits: Vec<u64> = (0..50)
            .map(|_| {
                std::thread::sleep(Duration::from_micros(idle_us));
                let started = Arc::new(AtomicU64::new(0));
                let flag = Arc::clone(&started);
                let spawned = now();
                rayon::spawn(move || flag.store(now().max(1), Ordering::Release));
                while started.load(Ordering::Acquire) == 0 {
                    std::hint::spin_loop();
                }
                started.load(Ordering::Acquire).saturating_sub(spawned) / 1000
            })
            .collect();
        waits.sort_unstable();
        println!(
            "idle {idle_us:>5} us before the job: starts after median {:>5} us, p90 {:>5} us, max {:>5} us",
            waits[25], waits[45], waits[49]
        );
    }
}
