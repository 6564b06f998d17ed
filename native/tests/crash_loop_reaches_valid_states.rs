//! A writer process killed with SIGKILL at a random moment during append, delete or compact
//! leaves a store that opens, verifies clean, and holds a state the operation can reach:
//! * append: a byte-exact prefix of what was appended, never shorter than before;
//! * delete: the state before some delete of the child's deterministic sequence (the next
//!   delete either happened whole or not at all);
//! * compact: the same records in the same order; and running compact again finishes the job
//!   (nothing left to reclaim).
//!
//! The test re-runs its own binary as the writer child (selected by environment variables). The
//! child prints `ready` when it starts its operation; the parent then waits a random delay,
//! adapted to how long the operation runs, and kills it. `LOADERX_CRASH_CYCLES` sets the
//! cycles per operation (default 50; `make soak` runs 1,000).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{pack, read_all};
use loaderx_native::{Codec, Store, VerifyMode};

const CHILD_OP: &str = "LOADERX_CRASH_CHILD_OP";
const CHILD_DIR: &str = "LOADERX_CRASH_CHILD_DIR";
const SEED: u64 = 0xC0FFEE;
/// The delete child stops at this many records; the parent refills to `REFILL`.
const FLOOR: usize = 40;
const REFILL: u64 = 240;
/// Deletes one delete child makes (each one is four syncs).
const DELETES_PER_RUN: usize = 12;

/// Record `id`: its id, then deterministic bytes, so a read-back names the record it is.
fn record(id: u64) -> Vec<u8> {
    let mut bytes = id.to_le_bytes().to_vec();
    bytes.extend(common::record(SEED, id, 6000));
    bytes
}

/// The ids a store holds, in index order, checking every record's bytes.
fn ids(store: &Store, label: &str) -> Vec<u64> {
    read_all(store)
        .iter()
        .enumerate()
        .map(|(k, bytes)| {
            let id = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            assert!(*bytes == record(id), "{label}: record {k} (id {id}) is damaged");
            id
        })
        .collect()
}

fn append_ids(store: &Store, ids: std::ops::Range<u64>, codec: Codec) -> u64 {
    let records: Vec<Vec<u8>> = ids.map(record).collect();
    let (buf, offsets) = pack(&records);
    store.append(&buf, &offsets, codec).unwrap()
}

/// The delete child's next delete, a pure function of the store's contents.
fn next_delete(state: &[u64]) -> Vec<u64> {
    let mut x = state.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &id| (h ^ id).wrapping_mul(0x100_0000_01b3));
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n = 1 + next() % 6;
    (0..n).map(|_| next() % state.len() as u64).collect()
}

/// What `delete(indices)` does to a list (swap-with-last, largest index first).
fn apply_delete(state: &[u64], indices: &[u64]) -> Vec<u64> {
    let mut order = indices.to_vec();
    order.sort_unstable_by(|a, b| b.cmp(a));
    order.dedup();
    let mut out = state.to_vec();
    for hole in order {
        let last = out.pop().unwrap();
        if (hole as usize) < out.len() {
            out[hole as usize] = last;
        }
    }
    out
}

/// The writer child: runs the operation named by `CHILD_OP` on the store in `CHILD_DIR`.
#[test]
fn crash_child() {
    let (Some(op), Some(dir)) = (std::env::var_os(CHILD_OP), std::env::var_os(CHILD_DIR)) else { return };
    let store = Store::open_or_create(Path::new(&dir)).unwrap();
    // On a line of its own (the harness has printed "test crash_child ... " without one).
    let mut out = std::io::stdout().lock();
    out.write_all(b"\nready\n").and_then(|()| out.flush()).unwrap();
    drop(out);
    match op.to_str().unwrap() {
        "append" => {
            let mut next = store.len();
            loop {
                let batch = 1 + (next % 17);
                let codec = if next % 2 == 0 { Codec::Zstd } else { Codec::Raw };
                assert_eq!(append_ids(&store, next..next + batch, codec), next);
                next += batch;
                if next % 5 == 0 {
                    store.sync().unwrap();
                }
            }
        }
        "delete" => {
            let mut state = ids(&store, "child");
            for _ in 0..DELETES_PER_RUN {
                if state.len() <= FLOOR {
                    break;
                }
                let indices = next_delete(&state);
                store.delete(&indices).unwrap();
                state = apply_delete(&state, &indices);
            }
        }
        "compact" => {
            store.compact().unwrap();
            store.sync().unwrap();
        }
        other => panic!("unknown child op {other}"),
    }
}

/// Starts the `op` child on `dir`, waits until it reports `ready`, and keeps draining its output
/// (so its last words never meet a closed pipe).
fn spawn(op: &str, dir: &Path) -> (Child, Instant) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_OP, op)
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines.by_ref().map_while(Result::ok).any(|line| line == "ready");
    assert!(ready, "the {op} child exited before it was ready");
    std::thread::spawn(move || lines.for_each(drop));
    (child, Instant::now())
}

/// Kills `child` after `delay` unless it exits first. Returns true if it was killed mid-run.
fn kill_after(child: &mut Child, start: Instant, delay: Duration) -> bool {
    while start.elapsed() < delay {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the writer child failed: {status}");
            return false;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    child.kill().unwrap(); // SIGKILL; TerminateProcess on Windows (and under wine)
    let status = child.wait().unwrap();
    !status.success()
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    /// A delay in `[0, span)`.
    fn delay(&mut self, span: &Span) -> Duration {
        Duration::from_micros(self.below(span.0.as_micros() as u64 + 1))
    }
}

/// The range kill delays are drawn from, adapted to how long the operation runs: it shrinks
/// when a child finishes before its kill and grows slowly when it is killed, so most kills land
/// mid-operation whatever the machine's speed.
struct Span(Duration);

impl Span {
    fn observe(&mut self, killed: bool) {
        self.0 = if killed { self.0 * 5 / 4 } else { (self.0 / 2).max(Duration::from_micros(200)) };
    }
}

/// The crash tests take turns: a child spawned by one test inherits, for the instant between
/// fork and exec, the descriptors another test holds, and with them its writer lock.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cycles() -> u64 {
    std::env::var("LOADERX_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(50)
}

/// The parent's turn (see [`SERIAL`]), or `None` inside a writer child.
fn parent_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    if std::env::var_os(CHILD_OP).is_some() {
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Runs the `op` child on `dir`, kills it after `delay` unless it finishes first, then reopens
/// the store and checks that it verifies clean. Returns the store and whether the kill landed.
fn kill_and_reopen(op: &str, dir: &Path, delay: Duration, label: &str) -> (Store, bool) {
    let (mut child, start) = spawn(op, dir);
    let killed = kill_after(&mut child, start, delay);
    let store = Store::open(dir).unwrap_or_else(|e| panic!("{label}: reopen failed: {e}"));
    let report = store.verify(|_, _| {});
    assert!(report.bad.is_empty(), "{label}: verify found {:?}", report.bad);
    // A kill leaves records covered correctly or not covered (checksums.lx), never a wrong one;
    // every later read in the loop is checked.
    assert_eq!(report.coverage.mismatched + report.coverage.unverified, 0, "{label}: {:?}", report.coverage);
    store.set_verify_mode(VerifyMode::Always);
    (store, killed)
}

#[test]
fn killed_appends_leave_a_prefix() {
    let Some(_turn) = parent_turn() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut last_len, mut grew, mut appended) = (0, 0, 0);
    let cycles = cycles();
    for cycle in 0..cycles {
        if last_len > 6000 {
            // Start over, so each reopen re-reads a bounded store.
            std::fs::remove_dir_all(&dir).unwrap();
            last_len = 0;
        }
        let label = format!("append cycle {cycle}");
        let delay = Duration::from_micros(1_000 + rng.below(40_000));
        let (store, killed) = kill_and_reopen("append", &dir, delay, &label);
        assert!(killed, "the append child never stops on its own");
        let ids = ids(&store, &label);
        assert!(ids.iter().copied().eq(0..ids.len() as u64), "{label}: not a prefix");
        assert!(ids.len() >= last_len, "{label}: the store shrank");
        grew += u64::from(ids.len() > last_len);
        appended += ids.len() - last_len;
        last_len = ids.len();
    }
    assert!(grew > cycles / 4, "the writer made progress in only {grew} of {cycles} cycles");
    eprintln!("crash loop: append: {cycles} SIGKILL cycles, {appended} records appended and checked");
}

#[test]
fn killed_deletes_leave_a_state_of_the_sequence() {
    let Some(_turn) = parent_turn() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = Rng(0x9d2c_5680_1b3f_77a1);
    let mut next_id = 0;
    let (mut span, mut mid, mut steps_seen) = (Span(Duration::from_millis(20)), 0u64, 0u64);
    let cycles = cycles();
    for cycle in 0..cycles {
        let store = Store::open_or_create(&dir).unwrap();
        if (store.len() as usize) <= FLOOR {
            let codec = if cycle % 2 == 0 { Codec::Zstd } else { Codec::Raw };
            append_ids(&store, next_id..next_id + REFILL, codec);
            next_id += REFILL;
            store.sync().unwrap();
        }
        let before = ids(&store, "before");
        drop(store);
        let label = format!("delete cycle {cycle}");
        let (store, killed) = kill_and_reopen("delete", &dir, rng.delay(&span), &label);
        span.observe(killed);
        mid += u64::from(killed);
        assert!(!dir.join("delete.journal").exists(), "{label}: open left the journal behind");
        let now = ids(&store, &label);
        let mut state = before;
        let mut steps = 0;
        while state != now {
            assert!(state.len() > FLOOR, "{label}: the store is not a state the deletes reach");
            state = apply_delete(&state, &next_delete(&state));
            steps += 1;
        }
        steps_seen += steps;
    }
    assert!(mid > cycles / 4, "only {mid} of {cycles} children were killed mid-run");
    eprintln!("crash loop: delete: {cycles} SIGKILL cycles ({mid} mid-run), {steps_seen} deletes checked");
}

#[test]
fn killed_compactions_keep_every_record_and_finish_when_rerun() {
    let Some(_turn) = parent_turn() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut rng = Rng(0x51f1_5e3d_a0c4_2b97);
    let mut next_id = 0;
    let (mut span, mut mid) = (Span(Duration::from_millis(20)), 0u64);
    let cycles = cycles();
    for cycle in 0..cycles {
        // Fragment the store: add records, delete a random third of them.
        let store = Store::open_or_create(&dir).unwrap();
        let codec = if cycle % 2 == 0 { Codec::Zstd } else { Codec::Raw };
        append_ids(&store, next_id..next_id + 400, codec);
        next_id += 400;
        let len = store.len();
        let doomed: Vec<u64> = (0..len / 3).map(|_| rng.below(len)).collect();
        store.delete(&doomed).unwrap();
        if store.len() > 1500 {
            let extra: Vec<u64> = (0..store.len() - 1500).collect();
            store.delete(&extra).unwrap();
        }
        store.sync().unwrap();
        let before = ids(&store, "before");
        drop(store);
        let label = format!("compact cycle {cycle}");
        let (store, killed) = kill_and_reopen("compact", &dir, rng.delay(&span), &label);
        span.observe(killed);
        mid += u64::from(killed);
        assert!(ids(&store, &label) == before, "{label}: records changed");
        store.compact().unwrap_or_else(|e| panic!("{label}: re-run failed: {e}"));
        let stats = store.stats().unwrap();
        assert_eq!(stats.reclaimable, 0, "{label}: the re-run left bytes to reclaim");
        assert!(ids(&store, &label) == before, "{label}: the re-run changed records");
        store.sync().unwrap();
    }
    assert!(mid > cycles / 4, "only {mid} of {cycles} children were killed mid-run");
    eprintln!("crash loop: compact: {cycles} SIGKILL cycles ({mid} mid-run)");
}
