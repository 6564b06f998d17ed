//! A store whose delete was interrupted after its `delete.journal` became durable reads as the
//! finished deletion in every reader, whether it can finish the delete on disk or not; a damaged
//! journal is a corrupt-store error naming `delete.journal`.
//!
//! The stores are made for real: a delete is stopped by the fault-injection seam at the first
//! removal of the delete (settling: the journal is durable and the table rewritten, but the
//! journal not yet removed), and the files are copied at that moment (`after_table`); the same
//! journal beside the table as it was before the delete is what a power cut right after the
//! journal's commit leaves (`before_table`); `finished` is the same store after a normal delete.
//! They are committed under `tests/journal/` for the Python and JavaScript readers (local, HTTP,
//! S3, wasm), trimmed to the bytes they use; [`committed_fixtures_match_their_generator`] pins
//! them to this generator (`LOADERX_WRITE_JOURNAL_FIXTURES=1` rewrites them).

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use common::{pack, read_all};
use loaderx_native::faults::{self, Kind};
use loaderx_native::{Codec, Error, IoOp, Store};

const SEED: u64 = 0x10_07;
const RECORDS: u64 = 40;
/// The delete every fixture is about.
const DELETE: [u64; 5] = [3, 17, 39, 20, 0];
const CASES: [&str; 3] = ["before_table", "after_table", "finished"];

/// The fault plan is global, so the tests here take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/journal")
}

/// The store every fixture starts from: raw and zstd records.
fn build(dir: &Path) -> Store {
    let store = Store::open_or_create(dir).unwrap();
    for (ids, codec) in [(0..RECORDS / 2, Codec::Raw), (RECORDS / 2..RECORDS, Codec::Zstd)] {
        let records: Vec<Vec<u8>> = ids.map(|k| common::record(SEED, k, 300)).collect();
        let (buf, offsets) = pack(&records);
        store.append(&buf, &offsets, codec).unwrap();
    }
    store
}

/// Copies the store files of `src` to `dst`, trimmed: `meta.zr` to its table, chunk files to the
/// header's frontier (readers accept trimmed files; nothing past them is read).
fn copy_trimmed(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    let meta = fs::read(src.join("meta.zr")).unwrap();
    let header = loaderx_native::Header::read(&meta).unwrap();
    let table = loaderx_core::format::table_end(u64::from(header.length)) as usize;
    fs::write(dst.join("meta.zr"), &meta[..table]).unwrap();
    for id in loaderx_core::open::chunk_ids(&header) {
        let name = loaderx_core::open::chunk_name(id);
        let bytes = fs::read(src.join(&name)).unwrap();
        let end = if id < header.tail_chunk { bytes.len() } else { header.tail_offset as usize };
        fs::write(dst.join(&name), &bytes[..end]).unwrap();
    }
    let journal = src.join("delete.journal");
    if journal.exists() {
        fs::copy(journal, dst.join("delete.journal")).unwrap();
    }
}

/// Writes the three fixtures into `out`.
fn generate(out: &Path) {
    let work = tempfile::tempdir().unwrap();
    let (live, before) = (work.path().join("live"), work.path().join("before"));
    let store = build(&live);
    copy_trimmed(&live, &before);
    // Stop the delete at its first removal: the journal's, once the table is rewritten.
    faults::arm(IoOp::Remove, 0, Kind::Io);
    let stopped = store.delete(&DELETE);
    let (fired, _) = faults::disarm();
    assert!(fired && stopped.is_err(), "the delete was not stopped: {stopped:?}");
    assert!(live.join("delete.journal").exists(), "the stopped delete left no journal");
    copy_trimmed(&live, &out.join("after_table"));
    copy_trimmed(&before, &out.join("before_table"));
    fs::copy(live.join("delete.journal"), out.join("before_table/delete.journal")).unwrap();
    drop(store);
    let finished = work.path().join("finished");
    build(&finished).delete(&DELETE).unwrap();
    copy_trimmed(&finished, &out.join("finished"));
}

fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

/// A writable copy of committed fixture `case`.
fn copy_of(case: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    common::copy_store(&committed().join(case), dir.path());
    dir
}

/// Holds the store's writer lock (the lock a live writer holds on `meta.zr`).
fn hold_lock(dir: &Path) -> File {
    let file = File::open(dir.join("meta.zr")).unwrap();
    file.try_lock().unwrap();
    file
}

fn finished_records() -> Vec<Vec<u8>> {
    read_all(&Store::open(committed().join("finished")).unwrap())
}

fn assert_corrupt_journal(err: &Error) {
    assert!(matches!(err, Error::Corrupt { file, .. } if file.ends_with("delete.journal")), "{err}");
}

#[test]
fn committed_fixtures_match_their_generator() {
    let _serial = serial();
    let fresh = tempfile::tempdir().unwrap();
    generate(fresh.path());
    if std::env::var_os("LOADERX_WRITE_JOURNAL_FIXTURES").is_some() {
        for case in CASES {
            let _ = fs::remove_dir_all(committed().join(case));
            common::copy_store(&fresh.path().join(case), &committed().join(case));
        }
    }
    for case in CASES {
        assert!(
            files_of(&fresh.path().join(case)) == files_of(&committed().join(case)),
            "tests/journal/{case} differs from what its generator writes (LOADERX_WRITE_JOURNAL_FIXTURES=1 rewrites it)"
        );
    }
    // The fixtures are what they claim: the journal stands beside the old table, or beside the
    // rewritten one.
    let len = |case: &str| {
        loaderx_native::Header::read(&fs::read(committed().join(case).join("meta.zr")).unwrap())
            .unwrap()
            .length
    };
    assert_eq!(len("before_table"), RECORDS as u32);
    assert_eq!((len("after_table"), len("finished")), (RECORDS as u32 - 5, RECORDS as u32 - 5));
}

#[test]
fn a_locked_store_reads_the_finished_deletion_in_memory() {
    let _serial = serial();
    let finished = finished_records();
    for case in ["before_table", "after_table"] {
        let dir = copy_of(case);
        let journal = fs::read(dir.path().join("delete.journal")).unwrap();
        let lock = hold_lock(dir.path());
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.len(), RECORDS - 5, "{case}");
        assert_eq!(read_all(&store), finished, "{case}");
        assert_eq!(store.verify(|_, _| {}).bad, vec![], "{case}");
        assert_eq!(store.stats().unwrap().records, RECORDS - 5);
        // Nothing was written: the journal and the table are as they were.
        assert_eq!(fs::read(dir.path().join("delete.journal")).unwrap(), journal, "{case}");
        drop((store, lock));
        // Once the lock is free, opening finishes the delete on disk, with the same records.
        let store = Store::open(dir.path()).unwrap();
        assert!(!dir.path().join("delete.journal").exists(), "{case}");
        assert_eq!(read_all(&store), finished, "{case}");
    }
}

/// Makes `path` unwritable: read-only permissions and, for a user they do not stop (root), the
/// immutable attribute (`chattr +i`), which is taken back when the guard drops.
#[cfg(target_os = "linux")]
fn unwritable(path: &Path) -> impl Drop {
    struct Immutable(Option<PathBuf>);
    impl Drop for Immutable {
        fn drop(&mut self) {
            if let Some(path) = &self.0 {
                let _ = std::process::Command::new("chattr").arg("-i").arg(path).status();
            }
        }
    }
    let mut perms = fs::metadata(path).unwrap().permissions();
    perms.set_readonly(true);
    fs::set_permissions(path, perms).unwrap();
    if fs::OpenOptions::new().write(true).open(path).is_err() {
        return Immutable(None);
    }
    let status = std::process::Command::new("chattr").arg("+i").arg(path).status();
    assert!(status.as_ref().is_ok_and(|s| s.success()), "chattr +i {} failed: {status:?}", path.display());
    Immutable(Some(path.to_owned()))
}

#[test]
#[cfg(target_os = "linux")]
fn a_read_only_store_reads_the_finished_deletion_in_memory() {
    let _serial = serial();
    let finished = finished_records();
    for case in ["before_table", "after_table"] {
        let dir = copy_of(case);
        let meta = dir.path().join("meta.zr");
        let before = fs::read(&meta).unwrap();
        let guard = unwritable(&meta);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(read_all(&store), finished, "{case}");
        assert!(dir.path().join("delete.journal").exists(), "{case}");
        drop((store, guard));
        assert_eq!(fs::read(&meta).unwrap(), before, "{case}: a read-only open wrote");
    }
}

#[test]
fn a_locked_handle_that_later_writes_finishes_the_delete_and_sees_its_appends() {
    let _serial = serial();
    let dir = copy_of("before_table");
    let lock = hold_lock(dir.path());
    let store = Store::open(dir.path()).unwrap();
    drop(lock);
    let extra = vec![b"appended".to_vec()];
    let (buf, offsets) = pack(&extra);
    assert_eq!(store.append(&buf, &offsets, Codec::Raw).unwrap(), RECORDS - 5);
    assert!(!dir.path().join("delete.journal").exists());
    let mut expected = finished_records();
    expected.extend(extra);
    assert_eq!(read_all(&store), expected);
    // Back at the journal's new length, with entry 0 (one the journal holds) changed: the table
    // is the truth now, not the journal.
    store.delete(&[0]).unwrap();
    expected.swap_remove(0);
    assert_eq!(store.len(), RECORDS - 5);
    assert_eq!(read_all(&store), expected);
    assert_eq!(read_all(&Store::open(dir.path()).unwrap()), expected);
}

#[test]
fn a_damaged_journal_is_corrupt_naming_it_locked_or_not() {
    let _serial = serial();
    for locked in [true, false] {
        for damage in ["flip", "length"] {
            let dir = copy_of("before_table");
            let path = dir.path().join("delete.journal");
            let mut bytes = fs::read(&path).unwrap();
            match damage {
                "flip" => bytes[10] ^= 0x20,
                // A whole journal of another delete: it does not apply to this table.
                _ => bytes = other_journal(),
            }
            fs::write(&path, &bytes).unwrap();
            let lock = locked.then(|| hold_lock(dir.path()));
            let err = Store::open(dir.path()).unwrap_err();
            assert_corrupt_journal(&err);
            assert!(err.to_string().contains("delete.journal is damaged"), "{err}");
            drop(lock);
            assert_eq!(fs::read(&path).unwrap(), bytes, "a damaged journal is left as it is");
        }
    }
}

/// A valid journal of a delete from a table of another length.
fn other_journal() -> Vec<u8> {
    let entry = |i: u64| {
        Some(loaderx_native::RecordLoc {
            logic_length: 1,
            phys_length: 1,
            offset: i as u32,
            ..Default::default()
        })
    };
    loaderx_core::journal::DeleteJournal::plan(RECORDS + 7, &[1], entry).unwrap().unwrap().to_bytes()
}
