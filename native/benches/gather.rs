//! Gather throughput beside the physical limit, in one run.
//!
//! For 12 KiB and 128 KiB records of mildly compressible bytes (zstd ratio about 1.08), gathers
//! batches of 256 sorted random records from warm raw and zstd stores, on the default rayon pool
//! and on one thread, beside a plain single-thread `memcpy` of the same records from a warm mmap
//! of the same data laid out flat. Prints MiB/s (median of interleaved rounds) and the ratio to
//! that memcpy.
//!
//! `cargo bench -p loaderx-native --bench gather` (add `-- --quick` for a small run).
#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write;
use std::time::Instant;

use loaderx_native::{Codec, Store};

#[path = "support/bench_data.rs"]
mod bench_data;
use bench_data::{fill, Rng};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One gather implementation: (indices, destination, destination offsets).
type GatherFn<'a> = Box<dyn FnMut(&[u64], &mut [u8], &[u64]) + 'a>;

struct Case<'a> {
    name: String,
    run: GatherFn<'a>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 7 };
    let threads = rayon::current_num_threads();
    println!(
        "machine: {} logical cpus, rayon pool {threads} threads",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{:<28} {:>12} {:>12} {:>10}", "case", "MiB/s", "per batch", "vs memcpy");
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let sizes: &[(usize, u64)] =
        if quick { &[(12 << 10, 4000), (128 << 10, 800)] } else { &[(12 << 10, 20_000), (128 << 10, 4000)] };
    for &(rec, n) in sizes {
        let tmp = tempfile::tempdir().unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let flat_path = tmp.path().join("flat.bin");
        let mut flat = File::create(&flat_path).unwrap();
        let raw = Store::open_or_create(tmp.path().join("raw")).unwrap();
        let zstd = Store::open_or_create(tmp.path().join("zstd")).unwrap();
        let stores = [(&raw, Codec::Raw), (&zstd, Codec::Zstd)];
        fill(&mut rng, &stores, (rec, n, 64 << 20), |buf| flat.write_all(buf).unwrap());
        drop(flat);
        let zs = zstd.stats().unwrap();
        // SAFETY: the file is private to this benchmark and not modified while mapped.
        let flat_map = unsafe { memmap2::Mmap::map(&File::open(&flat_path).unwrap()).unwrap() };

        let batch = 256usize;
        let batches: Vec<Vec<u64>> = (0..32)
            .map(|_| {
                let mut idx: Vec<u64> = Vec::with_capacity(batch);
                while idx.len() < batch {
                    let i = rng.next() % n;
                    if !idx.contains(&i) {
                        idx.push(i);
                    }
                }
                idx.sort_unstable();
                idx
            })
            .collect();
        let offsets: Vec<u64> = (0..batch as u64).map(|i| i * rec as u64).collect();
        // A page-aligned destination: glibc's `rep movsb` is much slower on some CPUs when the
        // destination sits just past the source modulo 4 KiB, and the baseline should be the
        // machine's real limit, not that artefact.
        let mut backing = vec![1u8; batch * rec + 4096];
        let skip = backing.as_ptr().align_offset(4096);
        let dst = &mut backing[skip..skip + batch * rec];

        let raw = &raw;
        let zstd = &zstd;
        let one = &one;
        let map = &flat_map;
        let mut cases: Vec<Case> = vec![
            Case {
                name: "memcpy from mmap, 1 thread".into(),
                run: Box::new(move |idx, dst, _| {
                    for (k, &i) in idx.iter().enumerate() {
                        let src = &map[i as usize * rec..][..rec];
                        dst[k * rec..][..rec].copy_from_slice(src);
                    }
                }),
            },
            Case { name: "raw gather".into(), run: Box::new(move |i, d, o| raw.gather(i, d, o).unwrap()) },
            Case {
                name: "raw gather, 1 thread".into(),
                run: Box::new(move |i, d, o| one.install(|| raw.gather(i, d, o).unwrap())),
            },
            Case { name: "zstd gather".into(), run: Box::new(move |i, d, o| zstd.gather(i, d, o).unwrap()) },
            Case {
                name: "zstd gather, 1 thread".into(),
                run: Box::new(move |i, d, o| one.install(|| zstd.gather(i, d, o).unwrap())),
            },
        ];
        // Warm every path over all the data once.
        let all: Vec<u64> = (0..n).collect();
        for case in cases.iter_mut() {
            for chunk in all.chunks(batch) {
                (case.run)(chunk, dst, &offsets[..chunk.len()]);
            }
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        for _ in 0..rounds {
            for (c, case) in cases.iter_mut().enumerate() {
                let start = Instant::now();
                for idx in &batches {
                    (case.run)(idx, dst, &offsets);
                }
                times[c].push(start.elapsed().as_secs_f64() / batches.len() as f64);
            }
        }
        let mib = (batch * rec) as f64 / (1 << 20) as f64;
        let base = mib / median(times[0].clone());
        println!(
            "-- {} KiB records, {n} of them, batch {batch}, zstd ratio {:.3}",
            rec >> 10,
            n as f64 * rec as f64 / zs.live_bytes as f64
        );
        for (case, t) in cases.iter().zip(times) {
            let per = median(t);
            let rate = mib / per;
            println!("{:<28} {:>12.0} {:>10.3}ms {:>9.2}x", case.name, rate, per * 1e3, rate / base);
        }
    }
}
