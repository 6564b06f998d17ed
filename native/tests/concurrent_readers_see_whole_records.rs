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
    let checked = checked.load(Ordering::Relaxed);
    assert!(checked > 1000, "readers barely ran");
    eprintln!("readers and writer: {checked} records checked during 2000 appended");
}

/// The length-publication protocol under stress: a writer appends one record at a time while
/// readers, half on the writer's handle and half on handles of their own (separate read-only
/// mappings of the same files, as another process has), read the newest published record the
/// moment they see the length move. An entry or payload written after the length was published
/// would show here as an error or wrong bytes. `LOADERX_STRESS_APPENDS` scales it (`make soak`).
#[test]
fn the_newest_published_record_is_always_whole() {
    let appends: u64 =
        std::env::var("LOADERX_STRESS_APPENDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let tmp = tempfile::tempdir().unwrap();
    let writer = Store::open_or_create(tmp.path()).unwrap();
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        for reader in 0..8 {
            let own = (reader % 2 == 1).then(|| Store::open(tmp.path()).unwrap());
            let (writer, done, reads) = (&writer, &done, &reads);
            s.spawn(move || {
                let store = own.as_ref().unwrap_or(writer);
                let mut seen = 0;
                let mut buf = vec![0u8; 4096];
                while !done.load(Ordering::Acquire) {
                    let n = store.len();
                    if n == seen {
                        std::hint::spin_loop();
                        continue;
                    }
                    assert!(n > seen, "the published length went backwards");
                    seen = n;
                    let newest = n - 1;
                    let len = store.lengths(&[newest]).unwrap()[0] as usize;
                    store.gather(&[newest], &mut buf[..len], &[0]).unwrap();
                    assert!(
                        buf[..len] == record(SEED, newest, 4096)[..],
                        "record {newest} read before it was whole"
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for k in 0..appends {
            let (buf, offsets) = pack(&[record(SEED, k, 4096)]);
            let codec = if k % 3 == 0 { Codec::Raw } else { Codec::Zstd };
            assert_eq!(writer.append(&buf, &offsets, codec).unwrap(), k);
        }
        done.store(true, Ordering::Release);
    });
    let reads = reads.load(Ordering::Relaxed);
    // Only that the readers ran at all: how many publications they catch depends on the load.
    assert!(reads > appends / 100, "readers caught only {reads} of {appends} publications");
    eprintln!("length publication: {appends} appends, {reads} newest-record reads by 8 readers, all whole");
}
