//! Native side of the JavaScript benchmark (`scripts/bench_js.mjs`).
//!
//! `bench_store make DIR N RECLEN` writes a zstd store of `N` records of `RECLEN` mildly
//! compressible bytes (one byte in seven zero, as in the other benchmarks).
//! `bench_store gather DIR BATCHES.json ROUNDS` gathers each batch of indices on one thread,
//! after a warm-up pass, and prints `{"mib_s": …, "rounds": […]}` (median of rounds).

use std::time::Instant;

use loaderx_native::{Codec, Store};

fn mild_bytes(state: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            if state.is_multiple_of(7) {
                0
            } else {
                (*state >> 32) as u8
            }
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["make", dir, n, len] => {
            let (n, len): (usize, usize) = (n.parse()?, len.parse()?);
            let store = Store::open_or_create(dir)?;
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for start in (0..n).step_by(1000) {
                let count = 1000.min(n - start);
                let src = mild_bytes(&mut state, count * len);
                let offsets: Vec<u64> = (0..count as u64).map(|k| k * len as u64).collect();
                store.append(&src, &offsets, Codec::Zstd)?;
            }
            store.sync()?;
            println!("{{\"records\": {}}}", store.len());
        }
        ["gather", dir, batches, rounds] => {
            let store = Store::open(dir)?;
            let batches: Vec<Vec<u64>> = serde_json::from_str(&std::fs::read_to_string(batches)?)?;
            let rounds: usize = rounds.parse()?;
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
            let mut times = Vec::new();
            let mut bytes = 0u64;
            pool.install(|| -> Result<(), loaderx_native::Error> {
                for round in 0..=rounds {
                    let t = Instant::now();
                    let mut moved = 0u64;
                    for batch in &batches {
                        let lens = store.lengths(batch)?;
                        let (offsets, total) = loaderx_native::packed(&lens);
                        let mut dst = vec![0u8; total as usize];
                        store.gather(batch, &mut dst, &offsets)?;
                        moved += total;
                    }
                    if round > 0 {
                        times.push(t.elapsed().as_secs_f64());
                        bytes = moved;
                    }
                }
                Ok(())
            })?;
            let mut rates: Vec<f64> = times.iter().map(|t| bytes as f64 / t / (1 << 20) as f64).collect();
            rates.sort_by(f64::total_cmp);
            println!("{{\"mib_s\": {}, \"rounds\": {:?}}}", rates[rates.len() / 2], rates);
        }
        _ => {
            eprintln!("usage: bench_store make DIR N RECLEN | bench_store gather DIR BATCHES.json ROUNDS");
            std::process::exit(2);
        }
    }
    Ok(())
}
