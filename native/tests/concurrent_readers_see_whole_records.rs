//! Eight threads gathering while another appends never see a torn or wrong record: every
//! record below the length a reader observes is complete and byte-exact.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::{pack, record};
use loaderx_native::{Codec, Store};

const SEED: u64 = 77;

#[test]
fn readers_and_one_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(tmp.path()).unwrap();
    let done = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for reader in 0..8u64 {
            let (store, done, checked) = (&store, &done, &checked);
            s.spawn(move || {
                let mut x = reader + 1;
                while !done.load(Ordering::Acquire) {
                    let n = store.len();
                    if n == 0 {
                        continue;
                    }
                    let idx: Vec<u64> = (0..32)
                        .map(|_| {
                            x = x
                                .wrapping_mul(6_364_136_223_846_793_005)
                                .wrapping_add(1_442_695_040_888_963_407);
                            (x >> 33) % n
                        })
                        .collect();
                    let lens = store.lengths(&idx).unwrap();
                    let (offsets, total) = common::packed_offsets(&lens);
                    let mut dst = vec![0u8; total as usize];
                    store.gather(&idx, &mut dst, &offsets).unwrap();
                    for (k, &i) in idx.iter().enumerate() {
                        let got = &dst[offsets[k] as usize..][..lens[k] as usize];
                        assert!(got == record(SEED, i, 5000).as_slice(), "record {i} torn or wrong");
                    }
                    checked.fetch_add(idx.len() as u64, Ordering::Relaxed);
                }
            });
        }
        let mut next = 0u64;
        for batch in 0..200u64 {
            let records: Vec<Vec<u8>> = (next..next + 10).map(|k| record(SEED, k, 5000)).collect();
            let (buf, offsets) = pack(&records);
            let codec = if batch % 2 == 0 { Codec::Zstd } else { Codec::Raw };
            assert_eq!(store.append(&buf, &offsets, codec).unwrap(), next);
            next += 10;
        }
        done.store(true, Ordering::Release);
    });
    assert_eq!(store.len(), 2000);
    assert!(checked.load(Ordering::Relaxed) > 1000, "readers barely ran");
}
