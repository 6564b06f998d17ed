//! Stores written here open in the reference loaderx 0.9.11 with identical contents, and
//! records the reference appends to our stores read back here byte-exact.
//!
//! Needs the reference in its own venv: `LOADERX_REF_PYTHON=.venv-ref/bin/python` (`make test`
//! sets it up). Without it the test is skipped, unless `LOADERX_REQUIRE_REF=1`, when it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{pack, read_all, record};
use loaderx_native::{Codec, Store};

fn ref_python() -> Option<PathBuf> {
    match std::env::var_os("LOADERX_REF_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var("LOADERX_REQUIRE_REF").as_deref() == Ok("1") => {
            panic!("LOADERX_REQUIRE_REF=1 but LOADERX_REF_PYTHON is not set")
        }
        None => {
            eprintln!("skipped: set LOADERX_REF_PYTHON to the reference venv's python");
            None
        }
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/interop").join(name)
}

fn run(python: &Path, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    // One OpenMP thread: the reference's multi-threaded zstd gather of variable-length records
    // crashes with SIGSEGV now and then (docs/reference-defects.md), which made this test flake.
    let out = Command::new(python)
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("run the reference python");
    assert!(out.status.success(), "reference failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("reference printed JSON")
}

/// Reads `dir` with the reference and checks it sees exactly `ours`.
fn reference_sees(python: &Path, dir: &Path, store: &Store) {
    let bin = dir.with_extension("bin");
    let seen = run(python, &[script("ref_read.py").as_os_str(), dir.as_os_str(), bin.as_os_str()]);
    let ours = read_all(store);
    assert_eq!(seen["len"].as_u64().unwrap(), ours.len() as u64, "{}", dir.display());
    let lengths: Vec<u64> = seen["lengths"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(lengths, ours.iter().map(|r| r.len() as u64).collect::<Vec<_>>());
    assert!(std::fs::read(&bin).unwrap() == ours.concat(), "{}: bytes differ", dir.display());
    let stats = store.stats().unwrap();
    assert_eq!(seen["stats"]["live_bytes"].as_u64().unwrap(), stats.live_bytes);
    assert_eq!(seen["stats"]["chunk_bytes"].as_u64().unwrap(), stats.chunk_bytes);
    assert_eq!(seen["has_dict"].as_bool().unwrap(), store.has_dict());
}

fn records(seed: u64, n: u64) -> Vec<Vec<u8>> {
    (0..n).map(|k| record(seed, k, 3000)).collect()
}

#[test]
fn our_stores_open_in_the_reference_and_theirs_appends_read_here() {
    let Some(python) = ref_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (name, codec) in [("raw", Codec::Raw), ("zstd", Codec::Zstd), ("zstd_dict", Codec::ZstdDict)] {
        let dir = tmp.path().join(name);
        let store = Store::open_or_create(&dir).unwrap();
        let recs = records(name.len() as u64, 150);
        if codec == Codec::ZstdDict {
            let (buf, _) = pack(&recs);
            let sizes: Vec<usize> = recs.iter().map(Vec::len).collect();
            store.train_dict(&buf, &sizes, 8192).unwrap();
        }
        let (buf, offsets) = pack(&recs);
        store.append(&buf, &offsets, codec).unwrap();
        store.sync().unwrap();
        cases.push((dir, store));
    }
    // Deleted, then compacted.
    let dir = tmp.path().join("compacted");
    let store = Store::open_or_create(&dir).unwrap();
    let (buf, offsets) = pack(&records(9, 120));
    store.append(&buf, &offsets, Codec::Zstd).unwrap();
    store.delete(&[1, 3, 10, 119, 119, 0]).unwrap();
    store.compact().unwrap();
    store.sync().unwrap();
    cases.push((dir, store));

    for (dir, store) in &cases {
        reference_sees(&python, dir, store);
    }
    // The other way: the reference appends to our stores (each handle dropped first, as two
    // writers at once are unsupported).
    for (dir, store) in cases {
        let before = read_all(&store);
        drop(store);
        let out = run(&python, &[script("ref_append.py").as_os_str(), dir.as_os_str()]);
        let store = Store::open(&dir).unwrap();
        let after = read_all(&store);
        assert_eq!(after.len() as u64, out["len"].as_u64().unwrap());
        assert_eq!(&after[..before.len()], &before[..], "{}: old records changed", dir.display());
        let mut k = before.len();
        for batch in out["added"].as_array().unwrap() {
            assert_eq!(batch["first"].as_u64().unwrap(), k as u64);
            for hex in batch["records"].as_array().unwrap() {
                let hex = hex.as_str().unwrap();
                let want: Vec<u8> = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect();
                assert_eq!(after[k], want, "{}: record {k}", dir.display());
                k += 1;
            }
        }
        // And we can keep writing after the reference did.
        store.append(b"ours again", &[0], Codec::Zstd).unwrap();
        reference_sees(&python, &dir, &store);
    }
}
