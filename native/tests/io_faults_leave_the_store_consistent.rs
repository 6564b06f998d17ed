//! Every write, sync, rename, resize and removal an operation makes is made to fail in turn
//! (ENOSPC, EIO, and for writes a short write that stops halfway). Each injected fault surfaces
//! as an error, and the store stays consistent: a fresh handle verifies clean, holds the
//! contents from before the operation or from after it, and accepts the next append.
//!
//! Needs the `fault-injection` feature (`cargo test -p loaderx-native --features
//! fault-injection`). The fault plan is global, so all cases run inside one test.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{pack, read_all, record};
use loaderx_core::schema::Kind as SchemaKind;
use loaderx_native::faults::{self, Kind};
use loaderx_native::{read_schema, write_schema, Codec, IoOp, Schema, Store, VerifyMode};

const SEED: u64 = 0xFA17;

fn records(from: u64, n: u64) -> Vec<Vec<u8>> {
    (from..from + n).map(|k| record(SEED, k, 3000)).collect()
}

fn append(store: &Store, recs: &[Vec<u8>], codec: Codec) -> loaderx_native::Result<u64> {
    let (buf, offsets) = pack(recs);
    store.append(&buf, &offsets, codec)
}

/// One operation under test, run on a store directory that holds the base state.
struct Case {
    name: &'static str,
    /// Builds the base state in an empty directory.
    setup: fn(&Path),
    /// The operation, on a fresh handle.
    op: fn(&Store) -> loaderx_native::Result<()>,
}

fn base(dir: &Path) {
    let store = Store::open_or_create(dir).unwrap();
    append(&store, &records(0, 24), Codec::Zstd).unwrap();
    append(&store, &records(24, 12), Codec::Raw).unwrap();
    store.sync().unwrap();
}

fn fragmented(dir: &Path) {
    base(dir);
    let store = Store::open(dir).unwrap();
    store.delete(&[0, 3, 5, 11, 20, 30]).unwrap();
    store.sync().unwrap();
}

/// The base store with `meta.zr` and `0.zr` cut to their used length, as stores copied without
/// sparse-file support arrive: the first write must grow them back.
fn trimmed(dir: &Path) {
    base(dir);
    let store = Store::open(dir).unwrap();
    let header = store.header();
    drop(store);
    let meta = std::fs::OpenOptions::new().write(true).open(dir.join("meta.zr")).unwrap();
    meta.set_len(16 + 16 * u64::from(header.length)).unwrap();
    let chunk = std::fs::OpenOptions::new().write(true).open(dir.join("0.zr")).unwrap();
    chunk.set_len(u64::from(header.tail_offset)).unwrap();
}

/// The schema the `write_schema` case starts with (`n == 1`) and writes (`n == 2`).
fn schema(n: u64) -> Schema {
    Schema::new(SchemaKind::Ragged, "<u2", &[n, 3], "zstd")
}

fn dict_samples() -> (Vec<u8>, Vec<usize>) {
    let samples: Vec<Vec<u8>> =
        (0..300).map(|k| format!("sample {k} of a small corpus: {}", k % 13).into_bytes()).collect();
    let sizes = samples.iter().map(Vec::len).collect();
    (samples.concat(), sizes)
}

const CASES: &[Case] = &[
    Case { name: "create", setup: |_| {}, op: |_| Ok(()) },
    Case {
        name: "append+sync",
        setup: base,
        op: |s| append(s, &records(100, 9), Codec::Zstd).and_then(|_| s.sync()),
    },
    Case {
        name: "append to a trimmed store",
        setup: trimmed,
        op: |s| append(s, &records(100, 3), Codec::Raw).map(drop),
    },
    Case { name: "delete", setup: base, op: |s| s.delete(&[1, 7, 8, 33, 35]) },
    Case { name: "compact", setup: fragmented, op: |s| s.compact().and_then(|()| s.sync()) },
    Case {
        name: "train_dict",
        setup: base,
        op: |s| {
            let (buf, sizes) = dict_samples();
            s.train_dict(&buf, &sizes, 4096).map(drop)
        },
    },
    Case {
        name: "write_schema",
        setup: |dir| {
            base(dir);
            write_schema(dir, &schema(1)).unwrap();
        },
        op: |s| write_schema(s.path(), &schema(2)),
    },
];

#[test]
fn every_injected_fault_is_an_error_and_the_store_stays_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let mut injected = 0u64;
    for (c, case) in CASES.iter().enumerate() {
        // A clean run gives the contents after, and how many calls of each kind the op makes.
        let clean = tmp.path().join(format!("{c}-clean"));
        std::fs::create_dir_all(&clean).unwrap();
        (case.setup)(&clean);
        let setup_store = (case.name != "create").then(|| Store::open(&clean).unwrap());
        faults::count_only();
        let result = match &setup_store {
            Some(store) => (case.op)(store),
            None => Store::open_or_create(&clean).map(drop),
        };
        let (_, counts) = faults::disarm();
        result.unwrap_or_else(|e| panic!("{}: the clean run failed: {e}", case.name));
        drop(setup_store);
        let after = read_all(&Store::open(&clean).unwrap());
        assert!(counts.values().sum::<u64>() > 0, "{}: no I/O calls counted", case.name);

        let plan = fault_plan(&counts);
        for (n, &(op, nth, kind)) in plan.iter().enumerate() {
            let dir = tmp.path().join(format!("{c}-{n}"));
            let label = format!("{}: {op:?} #{nth} fails with {kind:?}", case.name);
            let (result, before) = if case.name == "create" {
                std::fs::create_dir_all(&dir).unwrap();
                faults::arm(op, nth, kind);
                (Store::open_or_create(&dir).map(drop), Vec::new())
            } else {
                std::fs::create_dir_all(&dir).unwrap();
                (case.setup)(&dir);
                let store = Store::open(&dir).unwrap();
                let before = read_all(&store);
                faults::arm(op, nth, kind);
                let result = (case.op)(&store);
                (result, before)
            };
            let (fired, _) = faults::disarm();
            assert!(fired, "{label}: the fault never fired");
            assert!(result.is_err(), "{label}: the operation reported success");
            injected += 1;
            check_consistent(&dir, &label, &before, &after);
        }
        std::fs::remove_dir_all(&clean).unwrap();
    }
    eprintln!("io faults: {injected} injected, every one an error with the store consistent");
    assert!(injected >= 30, "only {injected} faults injected");
}

/// Which faults to inject: every call of every kind, with each failure mode that applies.
fn fault_plan(counts: &HashMap<IoOp, u64>) -> Vec<(IoOp, u64, Kind)> {
    let mut plan = Vec::new();
    for op in [IoOp::Write, IoOp::Sync, IoOp::Rename, IoOp::Resize, IoOp::Remove] {
        let kinds: &[Kind] = if op == IoOp::Write {
            &[Kind::NoSpace, Kind::Io, Kind::Short]
        } else {
            &[Kind::NoSpace, Kind::Io]
        };
        for nth in 0..counts.get(&op).copied().unwrap_or(0) {
            plan.extend(kinds.iter().map(|&kind| (op, nth, kind)));
        }
    }
    plan
}

/// A fresh handle on `dir` opens, verifies clean, holds `before` or `after`, and takes an append.
fn check_consistent(dir: &Path, label: &str, before: &[Vec<u8>], after: &[Vec<u8>]) {
    if !dir.join("meta.zr").exists() {
        assert!(before.is_empty(), "{label}: meta.zr vanished");
        return; // the store was never created: the state before
    }
    // The schema is the one before or the one after, whole, and no temporary file is left.
    let schema = read_schema(dir).unwrap_or_else(|e| panic!("{label}: schema unreadable: {e}"));
    let whole = match &schema {
        None => !label.starts_with("write_schema"),
        Some(s) => *s == self::schema(1) || *s == self::schema(2),
    };
    assert!(whole, "{label}: schema is {schema:?}");
    assert!(!dir.join("schema.msgpack.tmp").exists(), "{label}: schema.msgpack.tmp left behind");
    let store = Store::open(dir).unwrap_or_else(|e| panic!("{label}: reopen failed: {e}"));
    let report = store.verify(|_, _| {});
    assert!(report.bad.is_empty(), "{label}: verify found {:?}", report.bad);
    assert_eq!(report.coverage.mismatched, 0, "{label}: {:?}", report.coverage);
    store.set_verify_mode(VerifyMode::Always);
    let now = read_all(&store);
    assert!(now == before || now == after, "{label}: contents are neither the state before nor after");
    let extra = records(500, 2);
    let first = append(&store, &extra, Codec::Zstd).unwrap_or_else(|e| panic!("{label}: append after: {e}"));
    let all = read_all(&store);
    assert_eq!(&all[first as usize..], &extra[..], "{label}: the next append reads back wrong");
    store.sync().unwrap_or_else(|e| panic!("{label}: sync after: {e}"));
}
