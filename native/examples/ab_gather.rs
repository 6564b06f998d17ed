//! One side of the read path's A/B benchmark (`scripts/ab_gather.sh` runs two builds of this
//! example, the current tree's and a base commit's, in alternation on the same stores).
//!
//! `ab_gather DIR SECONDS`: creates (once) raw and zstd stores of 12 KiB and 128 KiB records of
//! mildly compressible bytes in DIR, then for each store and batch size (16, 256, 4096 records,
//! random sorted indices, warm) runs gathers for about SECONDS/12 seconds and prints one line:
//! `case batch records_per_second`.
//! Only the public API is used, so the same file builds against any version of the crate.

use std::path::Path;
use std::time::{Duration, Instant};

use loaderx_native::{Codec, Store};

#[path = "../benches/support/bench_data.rs"]
mod bench_data;
use bench_data::{fill, Rng};

fn make(dir: &Path, rec: usize, n: u64) {
    if dir.join("done").exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let raw = Store::open_or_create(dir.join("raw")).unwrap();
    let zstd = Store::open_or_create(dir.join("zstd")).unwrap();
    fill(&mut rng, &[(&raw, Codec::Raw), (&zstd, Codec::Zstd)], (rec, n, 32 << 20), |_| {});
    raw.sync().unwrap();
    zstd.sync().unwrap();
    std::fs::write(dir.join("done"), b"").unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = Path::new(&args[1]);
    let seconds: f64 = args[2].parse().unwrap();
    let per_case = Duration::from_secs_f64(seconds / 12.0);
    for (rec, n) in [(12usize << 10, 12_000u64), (128 << 10, 1_500)] {
        let dir = root.join(format!("{}k", rec >> 10));
        make(&dir, rec, n);
        for codec in ["raw", "zstd"] {
            let store = Store::open(dir.join(codec)).unwrap();
            for batch in [16usize, 256, 4096] {
                let mut rng = Rng(42 + batch as u64);
                let batches: Vec<Vec<u64>> = (0..16)
                    .map(|_| {
                        let mut idx: Vec<u64> = (0..batch).map(|_| rng.next() % n).collect();
                        idx.sort_unstable();
                        idx
                    })
                    .collect();
                let offsets: Vec<u64> = (0..batch as u64).map(|i| i * rec as u64).collect();
                let mut dst = vec![0u8; batch * rec];
                for idx in &batches {
                    store.gather(idx, &mut dst, &offsets).unwrap();
                }
                let (start, mut records) = (Instant::now(), 0u64);
                while start.elapsed() < per_case {
                    for idx in &batches {
                        store.gather(idx, &mut dst, &offsets).unwrap();
                    }
                    records += (batches.len() * batch) as u64;
                }
                let rate = records as f64 / start.elapsed().as_secs_f64();
                println!("{}k-{codec} {batch} {rate:.0}", rec >> 10);
            }
        }
    }
}
