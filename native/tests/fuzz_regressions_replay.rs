//! Every committed fuzz crasher (`fuzz/regressions/<target>/*`) and every reference fixture run
//! through the fuzz harnesses without a panic: a bug the fuzzer found stays fixed, and the
//! harnesses themselves are exercised on real stores in every test run.

mod common;

use std::path::Path;

use common::fixtures;
use loaderx_native::fuzzing;

fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| !n.to_string_lossy().starts_with('.')))
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

fn read_or_empty(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn committed_crashers_replay_cleanly() {
    let scratch = tempfile::tempdir().unwrap();
    for (name, data) in regressions("format") {
        eprintln!("replaying {name}");
        fuzzing::format(&data);
    }
    for (_, data) in regressions("schema") {
        fuzzing::schema(&data);
    }
    for (_, data) in regressions("decode") {
        fuzzing::decode(&data);
    }
    for (_, data) in regressions("store") {
        fuzzing::store(&data, &scratch.path().join("s"));
    }
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
