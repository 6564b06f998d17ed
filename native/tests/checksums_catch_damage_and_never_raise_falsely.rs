//! Per-record checksums (`checksums.lx`, docs/format.md): every flipped stored byte of a raw,
//! zstd or zstd_dict record is a checksum error under `always`; a table another writer changed
//! (as the reference changes it: swap-delete, compaction, appends, none of which touch the
//! sidecar) never makes one; `add_checksums` backfills and seals.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use common::{read_all, read_at, write_at};
use loaderx_native::{Codec, Error, RecordLoc, Store, VerifyMode};

const META: &str = "meta.zr";

fn entry(dir: &Path, index: u64) -> RecordLoc {
    let bytes: [u8; 16] = read_at(&dir.join(META), 16 + 16 * index);
    RecordLoc::read(&bytes).unwrap()
}

fn set_entry(dir: &Path, index: u64, loc: &RecordLoc) {
    write_at(&dir.join(META), 16 + 16 * index, &loc.to_bytes());
}

fn header(dir: &Path) -> [u8; 16] {
    read_at(&dir.join(META), 0)
}

/// A store of raw, zstd and zstd_dict records, all of them covered.
fn mixed_store(dir: &Path) -> Store {
    let store = Store::open_or_create(dir).unwrap();
    let text: Vec<u8> = (0..400u32).flat_map(|i| format!("row {i} of the table; ").into_bytes()).collect();
    let samples: Vec<u8> = text.iter().copied().cycle().take(64 << 10).collect();
    let sizes = vec![512usize; samples.len() / 512];
    store.train_dict(&samples, &sizes, 4096).unwrap();
    store.append(&text[..300], &[0, 100], Codec::Raw).unwrap();
    store.append(&text[300..2300], &[0, 1000], Codec::Zstd).unwrap();
    store.append(&text[2300..4300], &[0], Codec::ZstdDict).unwrap();
    store.sync().unwrap();
    store
}

fn gather_one(store: &Store, index: u64) -> Result<Vec<u8>, Error> {
    let len = store.lengths(&[index])?[0] as usize;
    let mut out = vec![0u8; len];
    store.gather(&[index], &mut out, &[0])?;
    Ok(out)
}

#[test]
fn always_catches_every_flipped_stored_byte_of_every_codec() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let want = read_all(&mixed_store(dir));
    let n = want.len() as u64;
    let mut caught = 0;
    let mut flips = 0;
    for index in 0..n {
        let loc = entry(dir, index);
        assert_eq!(loc.reserved, 1, "entries written with checksums carry the mark");
        let chunk = dir.join(format!("{}.zr", loc.chunk_id));
        for at in 0..loc.stored_len() {
            let offset = u64::from(loc.offset) + at;
            let [byte] = read_at::<1>(&chunk, offset);
            write_at(&chunk, offset, &[byte ^ 0xA5]);
            let store = Store::open(dir).unwrap();
            store.set_verify_mode(VerifyMode::Always);
            flips += 1;
            match gather_one(&store, index) {
                Err(Error::Checksum { index: i, file, offset: o, .. }) => {
                    assert_eq!((i, o), (index, u64::from(loc.offset)));
                    assert_eq!(file, chunk);
                    caught += 1;
                }
                other => panic!("record {index} byte {at}: {other:?}"),
            }
            write_at(&chunk, offset, &[byte]);
        }
    }
    assert_eq!(caught, flips);
    assert!(flips > 600, "{flips}");
    // Undamaged again, it all reads back, checked.
    let store = Store::open(dir).unwrap();
    store.set_verify_mode(VerifyMode::Always);
    assert_eq!(read_all(&store), want);
}

#[test]
fn fetched_leaves_local_reads_unchecked_and_verify_reports_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    mixed_store(dir);
    let loc = entry(dir, 0);
    write_at(&dir.join("0.zr"), u64::from(loc.offset), b"X");
    let store = Store::open(dir).unwrap();
    assert_eq!(store.verify_mode(), VerifyMode::Fetched);
    assert_eq!(gather_one(&store, 0).unwrap()[0], b'X', "the default does not check local reads");
    let report = store.verify(|_, _| {});
    assert_eq!(report.coverage.mismatched, 1);
    assert_eq!(report.coverage.verified, 4);
    assert_eq!(report.bad.len(), 1);
    assert!(report.bad[0].1.contains("checksum mismatch"), "{:?}", report.bad);
    assert!(store.content_digest().unwrap().is_some(), "the digest never reads records");
}

/// The reference's delete: each hole filled with the last entry, in descending order.
fn foreign_delete(dir: &Path, indices: &[u64]) {
    let mut order = indices.to_vec();
    order.sort_unstable_by(|a, b| b.cmp(a));
    let mut h = header(dir);
    let mut length = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
    for i in order {
        let last = entry(dir, length - 1);
        set_entry(dir, i, &last);
        length -= 1;
    }
    h[12..16].copy_from_slice(&(length as u32).to_le_bytes());
    write_at(&dir.join(META), 0, &h);
}

/// The reference's compaction of a one-chunk store: live records repacked in physical order.
fn foreign_compact(dir: &Path) {
    let mut h = header(dir);
    let length = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
    let chunk = dir.join("0.zr");
    let mut live: Vec<(u64, RecordLoc)> = (0..length).map(|i| (i, entry(dir, i))).collect();
    live.sort_by_key(|(_, l)| l.offset);
    let mut at = 0u32;
    for (i, mut loc) in live {
        let mut bytes = vec![0u8; loc.stored_len() as usize];
        let mut file = fs::File::open(&chunk).unwrap();
        file.seek(SeekFrom::Start(u64::from(loc.offset))).unwrap();
        file.read_exact(&mut bytes).unwrap();
        write_at(&chunk, u64::from(at), &bytes);
        loc.offset = at;
        set_entry(dir, i, &loc);
        at += bytes.len() as u32;
    }
    h[8..12].copy_from_slice(&at.to_le_bytes());
    write_at(&dir.join(META), 0, &h);
}

/// The reference's append of raw records (reserved byte 0), at the tail of chunk 0.
fn foreign_append(dir: &Path, records: &[&[u8]]) {
    let mut h = header(dir);
    let mut length = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
    let mut tail = u32::from_le_bytes(h[8..12].try_into().unwrap());
    for r in records {
        write_at(&dir.join("0.zr"), u64::from(tail), r);
        let n = r.len() as u32;
        let loc = RecordLoc {
            offset: tail,
            phys_length: n,
            logic_length: n,
            chunk_id: 0,
            compress: 0,
            reserved: 0,
        };
        set_entry(dir, length, &loc);
        length += 1;
        tail += n;
    }
    h[8..12].copy_from_slice(&tail.to_le_bytes());
    h[12..16].copy_from_slice(&(length as u32).to_le_bytes());
    write_at(&dir.join(META), 0, &h);
}

fn fixed_store(dir: &Path, n: u8) -> Store {
    let store = Store::open_or_create(dir).unwrap();
    let src: Vec<u8> = (0..n).flat_map(|k| [k; 100]).collect();
    let offsets: Vec<u64> = (0..u64::from(n)).map(|k| k * 100).collect();
    store.append(&src, &offsets, Codec::Raw).unwrap();
    store.sync().unwrap();
    store
}

#[test]
fn another_writers_deletes_compactions_and_appends_never_raise_a_checksum_error() {
    // Each case ends in a table whose entries equal, byte for byte except the mark, those the
    // checksums were written for, while other bytes lie under them.
    type Case = fn(&Path);
    let cases: [(&str, Case); 4] = [
        ("delete second-to-last, compact, append one", |d| {
            foreign_delete(d, &[8]);
            foreign_compact(d);
            foreign_append(d, &[&[77u8; 100]]);
        }),
        ("delete last, compact, append one", |d| {
            foreign_delete(d, &[9]);
            foreign_compact(d);
            foreign_append(d, &[&[77u8; 100]]);
        }),
        ("append one, delete last original, compact", |d| {
            foreign_append(d, &[&[77u8; 100]]);
            foreign_delete(d, &[9]);
            foreign_compact(d);
        }),
        ("delete one, compact", |d| {
            foreign_delete(d, &[3]);
            foreign_compact(d);
        }),
    ];
    for (name, change) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        drop(fixed_store(dir, 10));
        change(dir);
        let store = Store::open(dir).unwrap();
        store.set_verify_mode(VerifyMode::Always);
        let all = read_all(&store);
        assert_eq!(all.len() as u64, store.len(), "{name}");
        let report = store.verify(|_, _| {});
        assert!(report.bad.is_empty(), "{name}: {:?}", report.bad);
        assert_eq!(report.coverage.mismatched, 0, "{name}");
        assert!(report.coverage.verified > 0, "{name}: untouched records still verify");
        assert_eq!(store.content_digest().unwrap(), None, "{name}: no digest for a changed table");
        // A backfill takes the store as it is, covers everything and seals it again.
        let fill = store.add_checksums(false, |_, _| {}).unwrap();
        assert!(fill.mismatched.is_empty(), "{name}: {fill:?}");
        let report = store.verify(|_, _| {});
        assert_eq!(report.coverage.verified, store.len(), "{name}: {report:?}");
        assert!(store.content_digest().unwrap().is_some(), "{name}");
    }
}

#[test]
fn damage_in_a_sealed_store_is_not_adopted_by_a_backfill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    drop(fixed_store(dir, 4));
    write_at(&dir.join("0.zr"), 150, b"!");
    let store = Store::open(dir).unwrap();
    let fill = store.add_checksums(false, |_, _| {}).unwrap();
    assert_eq!(fill.mismatched, vec![1]);
    store.set_verify_mode(VerifyMode::Always);
    assert!(matches!(gather_one(&store, 1), Err(Error::Checksum { index: 1, .. })));
    let fill = store.add_checksums(true, |_, _| {}).unwrap();
    assert_eq!((fill.replaced, fill.mismatched.len()), (1, 0));
    assert_eq!(gather_one(&store, 1).unwrap()[50], b'!');
}

#[test]
fn our_own_deletes_and_compactions_keep_every_record_covered() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = fixed_store(dir, 20);
    store.delete(&[3, 17, 0]).unwrap();
    store.compact().unwrap();
    store.append(&[9u8; 50], &[0], Codec::Zstd).unwrap();
    store.set_verify_mode(VerifyMode::Always);
    let report = store.verify(|_, _| {});
    assert_eq!(report.coverage.verified, store.len(), "{report:?}");
    let digest = store.content_digest().unwrap().expect("sealed and covered");
    // Compaction moves bytes, not content: the digest is the same after another one.
    store.compact().unwrap();
    assert_eq!(store.content_digest().unwrap(), Some(digest.clone()));
    drop(store);
    let again = Store::open(dir).unwrap();
    assert_eq!(again.content_digest().unwrap(), Some(digest));
    // Damage after all that is still caught.
    let loc = entry(dir, 5);
    write_at(&dir.join(format!("{}.zr", loc.chunk_id)), u64::from(loc.offset) + 7, b"?");
    again.set_verify_mode(VerifyMode::Always);
    assert!(matches!(gather_one(&again, 5), Err(Error::Checksum { index: 5, .. })));
}

#[test]
fn a_store_without_checksums_gets_them_on_its_next_write_and_by_backfill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    drop(fixed_store(dir, 5));
    // As the reference leaves a store: no sidecar, entries unmarked.
    fs::remove_file(dir.join("checksums.lx")).unwrap();
    for i in 0..5 {
        set_entry(dir, i, &RecordLoc { reserved: 0, ..entry(dir, i) });
    }
    let store = Store::open(dir).unwrap();
    store.append(&[1u8; 10], &[0], Codec::Raw).unwrap();
    let report = store.verify(|_, _| {});
    assert_eq!((report.coverage.verified, report.coverage.uncovered), (1, 5));
    assert_eq!(store.content_digest().unwrap(), None);
    let fill = store.add_checksums(false, |_, _| {}).unwrap();
    assert_eq!((fill.added, fill.verified), (5, 1));
    assert!((0..6).all(|i| entry(dir, i).reserved == 1));
    assert_eq!(store.verify(|_, _| {}).coverage.verified, 6);
}
