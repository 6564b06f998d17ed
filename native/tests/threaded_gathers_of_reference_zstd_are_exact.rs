//! The reference loaderx 0.9.11 crashes with SIGSEGV now and then in its multi-threaded zstd
//! gather of variable-length records (docs/reference-defects.md). Our reader does not share the
//! defect: variable-length zstd and zstd_dict stores the reference wrote are gathered many times,
//! from several threads at once, each call itself fanned out over the rayon pool, and every byte
//! of every batch is checked against the expected records.

mod common;

use common::{fixtures, npy_payload};
use loaderx_native::Store;

/// The fixture's records, split by its expected lengths.
fn expected(name: &str) -> Vec<Vec<u8>> {
    let dir = fixtures().join(name).join("expected");
    let (values, _) = npy_payload(&dir.join("values.npy"));
    let (lengths, _) = npy_payload(&dir.join("lengths.npy"));
    let mut at = 0;
    let mut out = Vec::new();
    for c in lengths.chunks(4) {
        let n = u32::from_le_bytes(c.try_into().unwrap()) as usize;
        out.push(values[at..at + n].to_vec());
        at += n;
    }
    assert_eq!(at, values.len(), "{name}: lengths cover the values");
    out
}

/// A deterministic pseudo-random batch (repeats allowed), as a loader draws it.
fn batch(seed: u64, len: u64, size: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % len
        })
        .collect()
}

#[test]
fn variable_length_zstd_stores_gather_exactly_from_many_threads() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 150;
    for name in ["tokens_i32_ragged_zstd", "tokens_i32_ragged_zstd_dict", "zrecord_mixed_codecs"] {
        let want = expected(name);
        let store = Store::open(fixtures().join(name).join("store")).unwrap();
        assert_eq!(store.len(), want.len() as u64, "{name}");
        let distinct = want.iter().map(Vec::len).collect::<std::collections::BTreeSet<_>>().len();
        assert!(distinct > 10, "{name}: the records must vary in length");
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (store, want) = (&store, &want);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let size = 1 + ((round * 37 + t) % 256) as usize;
                        let idx = batch(round * THREADS + t + 1, store.len(), size);
                        let mut offsets = Vec::with_capacity(idx.len());
                        let mut total = 0u64;
                        for &i in &idx {
                            offsets.push(total);
                            total += want[i as usize].len() as u64;
                        }
                        // Poisoned with a byte no check can mistake for a decoded zero.
                        let mut dst = vec![0xA5u8; total as usize];
                        store.gather(&idx, &mut dst, &offsets).unwrap();
                        for (k, &i) in idx.iter().enumerate() {
                            let at = offsets[k] as usize;
                            let rec = &want[i as usize];
                            assert!(
                                dst[at..at + rec.len()] == rec[..],
                                "{name}: round {round}, thread {t}, record {i}"
                            );
                        }
                    }
                });
            }
        });
    }
}
