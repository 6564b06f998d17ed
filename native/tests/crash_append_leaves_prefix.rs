//! A writer killed with SIGKILL at any moment during appends leaves a store that reopens and
//! holds a byte-exact prefix of what was appended.
//!
//! The test re-runs its own binary as the writer child (selected by an environment variable),
//! kills it after a random delay, and checks the store. `LOADERX_CRASH_CYCLES` sets the number
//! of cycles (default 50).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{pack, read_all, record};
use loaderx_native::{Codec, Store};

const CHILD_ENV: &str = "LOADERX_CRASH_CHILD_DIR";
const SEED: u64 = 0xC0FFEE;

fn expected(k: u64) -> Vec<u8> {
    record(SEED, k, 20_000)
}

/// The writer: appends batches of deterministic records forever (until killed).
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let store = Store::open_or_create(Path::new(&dir)).unwrap();
    let mut next = store.len();
    loop {
        let batch = 1 + (next % 17);
        let records: Vec<Vec<u8>> = (next..next + batch).map(expected).collect();
        let (buf, offsets) = pack(&records);
        let codec = if next % 2 == 0 { Codec::Zstd } else { Codec::Raw };
        let first = store.append(&buf, &offsets, codec).unwrap();
        assert_eq!(first, next);
        next += batch;
        if next % 5 == 0 {
            store.sync().unwrap();
        }
    }
}

#[test]
fn killed_appends_leave_a_readable_prefix() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let cycles: u64 = std::env::var("LOADERX_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut last_len = 0;
    let mut grew = 0;
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child_writer", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let start = Instant::now();
        let delay = Duration::from_micros(2_000 + rng % 60_000);
        while start.elapsed() < delay {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("writer exited early with {status}");
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if !dir.join("meta.zr").exists() {
            continue; // killed before the store was created
        }
        let store = Store::open(&dir).unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
        let all = read_all(&store);
        assert!(all.len() as u64 >= last_len, "cycle {cycle}: store shrank");
        for (k, rec) in all.iter().enumerate() {
            assert!(*rec == expected(k as u64), "cycle {cycle}: record {k} differs");
        }
        if all.len() as u64 > last_len {
            grew += 1;
        }
        last_len = all.len() as u64;
    }
    assert!(grew > cycles / 4, "the writer made progress in only {grew} of {cycles} cycles");
    eprintln!("{cycles} kill cycles, final length {last_len}");
}
