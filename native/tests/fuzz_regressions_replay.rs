//! Every committed fuzz input (`fuzz/regressions/<target>/*`) and every reference fixture runs
//! through the fuzz harnesses without a panic: a bug the fuzzer found stays fixed, and the
//! harnesses themselves are exercised on real stores in every test run. Each target keeps at
//! least one committed input, and every file in its folder is replayed (none is skipped), so an
//! empty or unreadable folder fails instead of passing vacuously.

mod common;

use std::path::{Path, PathBuf};

use common::fixtures;
use loaderx_native::fuzzing;

/// The folder of committed inputs for one cargo-fuzz target.
fn regressions_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target)
}

/// Runs `harness` on every file in `fuzz/regressions/<target>/` and returns how many it ran.
/// Anything in the folder that is not a readable file fails the test.
fn replay(target: &str, mut harness: impl FnMut(&[u8])) -> usize {
    let dir = regressions_dir(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let mut replayed = 0;
    for path in &paths {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("replaying {}", path.display());
        harness(&data);
        replayed += 1;
    }
    replayed
}

#[test]
fn committed_crashers_replay_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    let counts = [
        ("format", replay("format", fuzzing::format)),
        ("schema", replay("schema", fuzzing::schema)),
        ("decode", replay("decode", fuzzing::decode)),
        ("checksums", replay("checksums", fuzzing::checksums)),
        ("image", replay("image", fuzzing::image)),
        ("store", replay("store", |data| fuzzing::store(data, &scratch.path().join("s")))),
    ];
    for (target, replayed) in counts {
        let dir = regressions_dir(target);
        let present = std::fs::read_dir(&dir).unwrap().count();
        eprintln!("fuzz/regressions/{target}: {replayed} of {present} files replayed");
        assert!(replayed > 0, "{}: no committed inputs to replay", dir.display());
        assert_eq!(replayed, present, "{}: every file is replayed", dir.display());
    }
}

fn read_or_empty(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn fixtures_pass_through_every_harness() {
    let scratch = tempfile::tempdir().unwrap();
    let mut stores = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let dir = entry.unwrap().path().join("store");
        if !dir.join("meta.zr").is_file() {
            continue;
        }
        let files = fuzzing::STORE_FILES.map(|f| read_or_empty(&dir.join(f)));
        fuzzing::format(&files[0]);
        fuzzing::schema(&files[2]);
        let packed = fuzzing::pack_store(&[&files[0], &files[1], &files[2], &files[3]]);
        fuzzing::store(&packed, &scratch.path().join("s"));
        // A damaged copy of the same store: every byte of the table flipped in turn.
        let meta = &files[0];
        for i in (0..meta.len()).step_by(7) {
            let mut bad = meta.clone();
            bad[i] ^= 0xa5;
            fuzzing::format(&bad);
        }
        stores += 1;
    }
    assert!(stores >= 15, "only {stores} fixture stores found");
}
