//! Bad input from callers or from disk is a typed error: nothing is written, nothing panics, and
//! the store stays usable afterwards (docs/format.md "Opening a store" and "Table entry").

mod common;

use std::fs;
use std::path::Path;

use common::{copy_store, fixtures, read_all, read_at, write_at};
use loaderx_native::{Codec, Error, Store};

fn new_store(dir: &Path) -> Store {
    let store = Store::open_or_create(dir).unwrap();
    store.append(&[1u8; 100], &[0, 40], Codec::Raw).unwrap();
    store.append(&[2u8; 1000], &[0], Codec::Zstd).unwrap();
    store
}

fn assert_unchanged(store: &Store) {
    let all = read_all(store);
    assert_eq!(all, vec![vec![1u8; 40], vec![1u8; 60], vec![2u8; 1000]]);
    // Still usable for writing, too.
    let n = store.append(b"after", &[0], Codec::Raw).unwrap();
    assert_eq!(read_all(store)[n as usize], b"after");
    store.delete(&[n]).unwrap();
}

#[test]
fn index_out_of_range_is_refused_before_any_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let mut dst = vec![9u8; 2000];
    for bad in [3u64, 1 << 40, u64::MAX] {
        let err = store.gather(&[0, bad], &mut dst, &[0, 100]).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { length: 3, .. }), "{err}");
        assert!(matches!(store.lengths(&[bad]), Err(Error::IndexOutOfRange { .. })));
        assert!(matches!(store.delete(&[0, bad]), Err(Error::IndexOutOfRange { .. })));
    }
    assert!(dst.iter().all(|&b| b == 9), "nothing copied");
    assert_unchanged(&store);
}

#[test]
fn destination_too_small_or_overlapping_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let mut dst = vec![9u8; 1000];
    let err = store.gather(&[0, 2], &mut dst, &[0, 40]).unwrap_err();
    assert!(matches!(err, Error::BadArgument(ref m) if m.contains("too small")), "{err}");
    let mut exact = vec![0u8; 1000];
    store.gather(&[2], &mut exact, &[0]).unwrap();
    let err = store.gather(&[0, 1], &mut dst, &[0, 39]).unwrap_err();
    assert!(matches!(err, Error::BadArgument(ref m) if m.contains("overlap")), "{err}");
    assert!(store.gather(&[0, 1], &mut dst, &[0]).is_err(), "offset count mismatch");
    assert!(dst.iter().all(|&b| b == 9));
    store.gather(&[], &mut [], &[]).unwrap();
    assert_unchanged(&store);
}

#[test]
fn bad_records_append_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    let huge = vec![0u8; (1 << 20) + 1];
    assert!(
        matches!(store.append(&huge, &[0], Codec::Zstd), Err(Error::RecordSize { len, .. }) if len == (1 << 20) + 1)
    );
    assert!(matches!(
        store.append(&[1, 2, 3], &[0, 3], Codec::Raw),
        Err(Error::RecordSize { position: 1, len: 0 })
    ));
    assert!(matches!(store.append(&[1, 2, 3], &[0, 5], Codec::Raw), Err(Error::BadArgument(_))));
    assert!(matches!(store.append(&[1, 2, 3], &[2, 1], Codec::Raw), Err(Error::RecordSize { .. })));
    assert!(matches!(store.append(&[1, 2, 3], &[0], Codec::ZstdDict), Err(Error::Dictionary(_))));
    assert_eq!(store.append(&[], &[], Codec::Raw).unwrap(), 3, "n = 0 is a no-op returning the length");
    let exact = vec![5u8; 1 << 20];
    let i = store.append(&exact, &[0], Codec::Zstd).unwrap();
    assert_eq!(read_all(&store)[i as usize], exact);
    store.delete(&[i]).unwrap();
    assert_unchanged(&store);
}

#[test]
fn a_full_table_refuses_the_append() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path());
    drop(store);
    // Pretend the store holds 2^24 - 1 records (entries past 3 read as zeros = invalid, which is
    // fine: only the count matters here).
    write_at(&tmp.path().join("meta.zr"), 12, &((1u32 << 24) - 1).to_le_bytes());
    let store = Store::open(tmp.path()).unwrap();
    assert!(matches!(store.append(&[1u8; 10], &[0, 5], Codec::Raw), Err(Error::Full(_))));
    assert_eq!(store.len(), (1 << 24) - 1);
}

#[test]
fn unknown_codec_tag_and_entries_past_their_chunk_are_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    drop(new_store(tmp.path()));
    // Entry 2 (the zstd one): tag 7.
    write_at(&tmp.path().join("meta.zr"), 16 + 16 * 2 + 14, &[7]);
    // Entry 1: offset far past the end of 0.zr once that file is cut short.
    fs::OpenOptions::new().write(true).open(tmp.path().join("0.zr")).unwrap().set_len(120).unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let mut dst = vec![0u8; 2000];
    let err = store.gather(&[2], &mut dst, &[0]).unwrap_err();
    assert!(matches!(err, Error::Corrupt { ref detail, .. } if detail.contains("codec tag 7")), "{err}");
    // The damage is located: the table entry's offset in meta.zr.
    assert_eq!(err.file(), Some(tmp.path().join("meta.zr").as_path()));
    assert_eq!(err.offset(), Some(16 + 16 * 2), "{err}");
    assert_eq!(store.gather(&[0], &mut dst, &[0]).map_err(|e| e.to_string()), Ok(()));
    // 0.zr is 120 bytes; record 1 lives at 40..100 and record 2 after it: now cut record 1 too.
    drop(store);
    fs::OpenOptions::new().write(true).open(tmp.path().join("0.zr")).unwrap().set_len(70).unwrap();
    let store = Store::open(tmp.path()).unwrap();
    let err = store.gather(&[1], &mut dst, &[0]).unwrap_err();
    assert!(matches!(err, Error::Corrupt { ref file, .. } if file.ends_with("0.zr")), "{err}");
    assert_eq!(err.offset(), Some(40), "the record's start in 0.zr: {err}");
    assert!(store.gather(&[0], &mut dst, &[0]).is_ok(), "the readable record still reads");
}

#[test]
fn bad_meta_files_are_refused_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join("u8img_zstd/store");
    let case = |name: &str, meta: Option<Vec<u8>>| {
        let dir = tmp.path().join(name);
        copy_store(&src, &dir);
        if let Some(bytes) = meta {
            fs::write(dir.join("meta.zr"), bytes).unwrap();
        }
        Store::open(&dir)
    };
    let full = fs::read(src.join("meta.zr")).unwrap();
    assert!(matches!(case("zero", Some(vec![])), Err(Error::Corrupt { .. })));
    assert!(matches!(case("two", Some(vec![0x5a, 0x52])), Err(Error::Corrupt { .. })));
    assert!(matches!(
        case("garbage", Some(b"this is not a loaderx store at all".to_vec())),
        Err(Error::NotAStore { .. })
    ));
    let mut v4 = full.clone();
    v4[4] = 4;
    assert!(matches!(case("v4", Some(v4)), Err(Error::NotAStore { .. })));
    let short = full[..full.len() - 1].to_vec();
    let err = case("short", Some(short)).unwrap_err();
    assert!(matches!(err, Error::Corrupt { ref detail, .. } if detail.contains("3215 bytes")), "{err}");
    assert_eq!((err.offset(), err.file().map(|f| f.ends_with("meta.zr"))), (Some(3215), Some(true)));
    let mut over = full.clone();
    over[12..16].copy_from_slice(&((1u32 << 24) + 1).to_le_bytes());
    assert!(matches!(case("over", Some(over)), Err(Error::Corrupt { .. })));
    // Cut to exactly 16 + 16·length: valid.
    let store = case("exact", None).unwrap();
    assert_eq!(store.len(), 200);
    assert_eq!(fs::metadata(store.path().join("meta.zr")).unwrap().len(), 16 + 16 * 200);
    assert_eq!(read_all(&store).len(), 200);
}

#[test]
fn missing_directories_files_and_meta_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(Store::open(tmp.path().join("nope")), Err(Error::NotFound(_))));
    assert!(!tmp.path().join("nope").exists(), "open without create writes nothing");
    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    assert!(matches!(Store::open(&file), Err(Error::NotADirectory(_))));
    assert!(matches!(Store::open_or_create(&file), Err(Error::NotADirectory(_))));
    assert!(matches!(Store::open(tmp.path()), Err(Error::NotAStore { .. })));
    // A directory with chunk files but no meta.zr is not silently replaced.
    let orphan = tmp.path().join("orphan");
    copy_store(&fixtures().join("u8img_raw/store"), &orphan);
    fs::remove_file(orphan.join("meta.zr")).unwrap();
    assert!(matches!(Store::open_or_create(&orphan), Err(Error::Corrupt { .. })));
    assert_eq!(fs::metadata(orphan.join("0.zr")).unwrap().len(), 156_800, "old data untouched");
    // Missing parents are created, as by the reference.
    let deep = tmp.path().join("a/b/c");
    let store = Store::open_or_create(&deep).unwrap();
    assert_eq!(store.len(), 0);
    assert_eq!(
        fs::read(deep.join("meta.zr")).unwrap()[..16],
        [0x5a, 0x52, 0x45, 0x43, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn a_missing_chunk_file_is_an_error_not_zeros() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_store(&fixtures().join("u8img_raw/store"), &dir);
    fs::remove_file(dir.join("0.zr")).unwrap();
    let store = Store::open(&dir).unwrap();
    let mut dst = vec![0u8; 784];
    let err = store.gather(&[0], &mut dst, &[0]).unwrap_err();
    assert!(matches!(err, Error::Corrupt { ref file, .. } if file.ends_with("0.zr")), "{err}");
    assert!(matches!(store.append(&[1u8; 10], &[0], Codec::Raw), Err(Error::Corrupt { .. })));
    assert!(!dir.join("0.zr").exists(), "not re-created over lost data");
}

#[test]
fn zstd_dict_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_store(&fixtures().join("u8img_zstd_dict/store"), &dir);
    let store = Store::open(&dir).unwrap();
    let samples = vec![3u8; 4000];
    let err = store.train_dict(&samples, &[1000; 4], 8192).unwrap_err();
    assert!(matches!(err, Error::Dictionary(_)), "retraining would orphan records: {err}");
    assert!(matches!(store.train_dict(&samples, &[1000; 3], 8192), Err(Error::BadArgument(_))));
    drop(store);
    fs::write(dir.join("dict.zr"), b"garbage").unwrap();
    let store = Store::open(&dir).unwrap();
    assert!(store.has_dict());
    let mut dst = vec![0u8; 784];
    assert!(matches!(store.gather(&[0], &mut dst, &[0]), Err(Error::Decode { index: 0, .. })));
}

#[test]
fn a_second_writer_process_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a = new_store(tmp.path());
    let b = Store::open(tmp.path()).unwrap();
    // Readers take no lock: b reads while a holds the writer lock.
    assert_eq!(read_all(&b).len(), 3);
    let err = b.append(b"x", &[0], Codec::Raw).unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    assert!(matches!(b.delete(&[0]), Err(Error::Locked(_))));
    drop(a);
    b.append(b"x", &[0], Codec::Raw).unwrap();
    assert_eq!(b.len(), 4);
}

#[test]
fn verify_lists_exactly_the_bad_records() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_store(&fixtures().join("u8img_zstd/store"), &dir);
    let clean = Store::open(&dir).unwrap().verify(|_, _| {});
    assert_eq!((clean.checked, clean.bad.len()), (200, 0));
    // Break record 5's frame magic (a flip inside the payload may go unnoticed: frames carry
    // no checksum) and set entry 9's codec tag to 7.
    let store = Store::open(&dir).unwrap();
    let loc = store.entries(&[5]).unwrap()[0];
    drop(store);
    let at = u64::from(loc.offset);
    let [b] = read_at::<1>(&dir.join("0.zr"), at);
    write_at(&dir.join("0.zr"), at, &[b ^ 0xff]);
    write_at(&dir.join("meta.zr"), 16 + 16 * 9 + 14, &[7]);
    let mut seen = Vec::new();
    let report = Store::open(&dir).unwrap().verify(|done, total| seen.push((done, total)));
    let bad: Vec<u64> = report.bad.iter().map(|(i, _)| *i).collect();
    assert_eq!(bad, vec![5, 9], "{:?}", report.bad);
    assert_eq!(seen.last(), Some(&(200, 200)));
}

#[test]
fn fixed_stride_gather_checks_every_record_length() {
    let tmp = tempfile::tempdir().unwrap();
    let store = new_store(tmp.path()); // records of 40, 60 and 1000 bytes
    let mut dst = vec![0u8; 80];
    assert!(matches!(store.gather_fixed(&[0, 1], &mut dst, 40), Err(Error::Corrupt { .. })));
    assert!(matches!(store.gather_fixed(&[0], &mut dst, 40), Err(Error::BadArgument(_))), "size mismatch");
    assert!(matches!(store.gather_fixed(&[0, 0], &mut dst, 0), Err(Error::BadArgument(_))));
    store.gather_fixed(&[0, 0], &mut dst, 40).unwrap();
    assert_eq!(dst, vec![1u8; 80]);
    assert_unchanged(&store);
}
