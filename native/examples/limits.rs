//! The machine's limits for the benchmarks (`scripts/bench_limits.py`): what a gather could cost
//! with no store at all around it.
//!
//! ```text
//! limits gather FILE OFFSET RECORD BATCHES BATCH THREADS [stream]
//! limits decode FILE OFFSET RECORD BATCHES BATCH THREADS [stream]
//! ```
//!
//! `FILE` holds fixed-size records of `RECORD` bytes from byte `OFFSET` on (an `.npy` file past
//! its header). `BATCHES` is a file of little-endian `u64` record indices, `BATCH` per batch.
//! Prints one JSON list: the seconds each batch took in one pass, after every page of `FILE` was
//! read once (mapped, and the caches flushed through, as for a row that reads a store whose
//! mapping is warm but whose records are not in the CPU caches).
//!
//! * `gather` copies each batch's records from a warm read-only mmap of `FILE` into one reused,
//!   already faulted-in buffer: `memcpy` and nothing else.
//! * `decode` first compresses every record of `FILE` on its own with zstd at the store's level,
//!   holds the frames in memory, then decodes each batch's frames into the reused buffer: the
//!   codec and nothing else. A record whose frame would not be smaller is copied instead, as a
//!   store keeps it raw.
//!
//! With `THREADS` = 2 the batch is split in halves; the second half goes to one helper thread that
//! lives for the whole run and spins between batches, so no batch pays for starting or waking a
//! thread. That is a best case no real loader gets, which is what a limit should be.
//!
//! With `stream`, each thread instead takes every other batch whole, with no step between
//! batches, and the one figure printed is the wall time per batch: the throughput limit a loader
//! with batches in flight is measured against.
#![allow(unsafe_code)]

use std::hint::spin_loop;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const PAGE: usize = 4096;

fn usage() -> ! {
    eprintln!("usage: limits gather|decode FILE OFFSET RECORD BATCHES BATCH THREADS [stream]");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], k: usize) -> T {
    args.get(k).and_then(|a| a.parse().ok()).unwrap_or_else(|| usage())
}

/// The work one thread does for its share of a batch.
trait Half: Send {
    fn run(&mut self, indices: &[u64], dst: &mut [u8]);
}

struct Copy<'a> {
    src: &'a [u8],
    record: usize,
}

impl Half for Copy<'_> {
    fn run(&mut self, indices: &[u64], dst: &mut [u8]) {
        for (&i, out) in indices.iter().zip(dst.chunks_exact_mut(self.record)) {
            let at = i as usize * self.record;
            out.copy_from_slice(&self.src[at..at + self.record]);
        }
    }
}

struct Decode<'a> {
    src: &'a [u8],
    /// Each record's zstd frame, or `None` where the frame is no smaller than the record (a
    /// store keeps such a record raw, so reading it is a copy).
    frames: &'a [Option<Vec<u8>>],
    decoder: zstd::bulk::Decompressor<'static>,
}

impl Half for Decode<'_> {
    fn run(&mut self, indices: &[u64], dst: &mut [u8]) {
        let record = dst.len() / indices.len().max(1);
        for (&i, out) in indices.iter().zip(dst.chunks_exact_mut(record)) {
            let i = i as usize;
            match &self.frames[i] {
                Some(frame) => {
                    let n = self.decoder.decompress_to_buffer(frame, out).expect("a frame decodes");
                    assert_eq!(n, record, "a frame decodes to one record");
                }
                None => out.copy_from_slice(&self.src[i * record..(i + 1) * record]),
            }
        }
    }
}

/// Spins until `flag` reaches `k`, yielding the core after a while: with both threads spinning
/// and something else running, a pure spin could hold the core the other thread needs.
fn wait_for(flag: &AtomicUsize, k: usize) {
    let mut spins = 0u32;
    while flag.load(Ordering::Acquire) < k {
        spins += 1;
        if spins < 4096 {
            spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Times every batch, one pass.
fn time_batches(batches: &[&[u64]], record: usize, mut halves: Vec<Box<dyn Half + '_>>) -> Vec<f64> {
    let batch = batches[0].len();
    let split = if halves.len() == 2 { batch / 2 } else { batch };
    // Page-aligned, as the engine's buffers are: a destination a few bytes past a page boundary
    // from a page-aligned source makes every load alias a store just made (4K aliasing), which
    // costs a raw copy about a third of its speed here.
    let (mut bytes, start) = aligned(batch * record);
    let dst = &mut bytes[start..start + batch * record];
    let (lo, hi) = dst.split_at_mut(split * record);
    let rounds = batches.len();
    let go = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut times = Vec::with_capacity(batches.len());
    let mut first = halves.remove(0);
    std::thread::scope(|s| {
        if let Some(mut second) = halves.pop() {
            let (go, done) = (&go, &done);
            s.spawn(move || {
                for k in 1..=rounds {
                    wait_for(go, k);
                    second.run(&batches[(k - 1) % batches.len()][split..], hi);
                    done.store(k, Ordering::Release);
                }
            });
        }
        for k in 1..=rounds {
            let t = Instant::now();
            go.store(k, Ordering::Release);
            first.run(&batches[(k - 1) % batches.len()][..split], lo);
            if split < batch {
                wait_for(&done, k);
            }
            times.push(t.elapsed().as_secs_f64());
        }
    });
    times
}

/// Reads a byte of every page of `src`: maps them all (as a store's long-lived mapping is) and
/// streams the file through the caches, so the timed pass starts as cold as a row's does.
fn touch_pages(src: &[u8]) {
    let mut seen = 0u8;
    for page in src.chunks(PAGE) {
        seen ^= page[0];
    }
    std::hint::black_box(seen);
}

/// A page-aligned buffer of `len` bytes, already written once (so faulted in).
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let bytes = vec![1u8; len + PAGE];
    let start = bytes.as_ptr().align_offset(PAGE).min(PAGE);
    (bytes, start)
}

/// Throughput rather than latency: each thread takes every `threads`-th batch into a buffer of
/// its own, with no step in between, as a loader with batches in flight does. Returns the wall
/// time per batch of one pass over all of them.
fn time_stream(batches: &[&[u64]], record: usize, workers: Vec<Box<dyn Half + '_>>) -> Vec<f64> {
    let threads = workers.len();
    let start = std::sync::Barrier::new(threads + 1);
    let end = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for (t, mut worker) in workers.into_iter().enumerate() {
            let (start, end) = (&start, &end);
            s.spawn(move || {
                let (mut bytes, at) = aligned(batches[0].len() * record);
                let dst = &mut bytes[at..at + batches[0].len() * record];
                start.wait();
                for b in batches.iter().skip(t).step_by(threads) {
                    worker.run(b, dst);
                }
                end.wait();
            });
        }
        start.wait();
        let t = Instant::now();
        end.wait();
        vec![t.elapsed().as_secs_f64() / batches.len() as f64]
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or_else(|| usage());
    let file = std::fs::File::open(args.get(2).unwrap_or_else(|| usage())).expect("FILE opens");
    let (offset, record): (usize, usize) = (arg(&args, 3), arg(&args, 4));
    let raw = std::fs::read(args.get(5).unwrap_or_else(|| usage())).expect("BATCHES reads");
    let (batch, threads): (usize, usize) = (arg(&args, 6), arg(&args, 7));
    if batch == 0 || !(1..=2).contains(&threads) || raw.len() % (8 * batch) != 0 || raw.is_empty() {
        usage();
    }
    let indices: Vec<u64> =
        raw.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
    let batches: Vec<&[u64]> = indices.chunks_exact(batch).collect();
    // SAFETY: the benchmark owns FILE and nothing writes to it while this process runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("FILE maps");
    let src = &map[offset..];
    touch_pages(src);
    let count = src.len() / record;
    assert!(indices.iter().all(|&i| (i as usize) < count), "every index is a record of FILE");
    let stream = args.get(8).map(String::as_str) == Some("stream");
    let time = |halves| {
        if stream {
            time_stream(&batches, record, halves)
        } else {
            time_batches(&batches, record, halves)
        }
    };
    let times = match mode {
        "gather" => time((0..threads).map(|_| Box::new(Copy { src, record }) as Box<dyn Half>).collect()),
        "decode" => {
            let level = loaderx_core::codec::ZSTD_LEVEL;
            let mut c = zstd::bulk::Compressor::new(level).expect("a compressor");
            let frames: Vec<Option<Vec<u8>>> = src
                .chunks_exact(record)
                .map(|r| Some(c.compress(r).expect("a record compresses")).filter(|f| f.len() <= r.len()))
                .collect();
            time(
                (0..threads)
                    .map(|_| {
                        let decoder = zstd::bulk::Decompressor::new().expect("a decompressor");
                        Box::new(Decode { src, frames: &frames, decoder }) as Box<dyn Half>
                    })
                    .collect(),
            )
        }
        _ => usage(),
    };
    let list: Vec<String> = times.iter().map(|t| format!("{t:.9}")).collect();
    println!("[{}]", list.join(","));
}
