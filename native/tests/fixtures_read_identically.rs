//! Every store the reference (loaderx 0.9.11) wrote in `fixtures/v3` reads here with identical
//! record bytes, lengths, codec tags, header and stats, both as shipped (cut to their used sizes)
//! and after a write restored their full sparse sizes.

mod common;

use common::{copy_store, fixtures, npy_payload, read_all};
use loaderx_native::{Codec, Store};

fn manifest() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).expect("fixtures/v3/manifest.json");
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["stores"].as_array().unwrap().clone()
}

fn check_store(store: &Store, case: &serde_json::Value) {
    let name = case["name"].as_str().unwrap();
    let dir = fixtures().join(name).join("expected");
    assert_eq!(store.len(), case["length"].as_u64().unwrap(), "{name}: length");
    let records = read_all(store);
    let (values, _) = npy_payload(&dir.join("values.npy"));
    assert_eq!(records.concat(), values, "{name}: record bytes");
    let (lengths, _) = npy_payload(&dir.join("lengths.npy"));
    let lengths: Vec<u32> = lengths.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(records.iter().map(|r| r.len() as u32).collect::<Vec<_>>(), lengths, "{name}: lengths");
    let (comp, _) = npy_payload(&dir.join("comp.npy"));
    let idx: Vec<u64> = (0..store.len()).collect();
    let tags: Vec<u8> = store.entries(&idx).unwrap().iter().map(|e| e.compress).collect();
    assert_eq!(tags, comp, "{name}: codec tags");
    let stats = store.stats().unwrap();
    let want = &case["stats"];
    assert_eq!(
        (stats.records, stats.live_bytes, stats.chunk_bytes, stats.reclaimable),
        (
            want["records"].as_u64().unwrap(),
            want["live_bytes"].as_u64().unwrap(),
            want["chunk_bytes"].as_u64().unwrap(),
            want["reclaimable"].as_u64().unwrap()
        ),
        "{name}: stats"
    );
    let header = store.header();
    assert_eq!(
        u64::from(header.tail_offset),
        case["header"]["tail_offset"].as_u64().unwrap(),
        "{name}: tail"
    );
    assert_eq!(store.has_dict(), !case["dict"].is_null(), "{name}: dict");
}

#[test]
fn every_fixture_reads_as_the_reference_wrote_it() {
    let cases = manifest();
    assert!(cases.len() >= 19, "expected the 19 fixture stores");
    for case in &cases {
        let path = fixtures().join(case["store"].as_str().unwrap());
        let store = Store::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_store(&store, case);
    }
}

/// Every file of a directory with its bytes.
fn snapshot(dir: &std::path::Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn reading_a_fixture_changes_no_file() {
    for case in manifest() {
        let path = fixtures().join(case["store"].as_str().unwrap());
        let before = snapshot(&path);
        let store = Store::open(&path).unwrap();
        let _ = read_all(&store);
        let after = snapshot(&path);
        assert_eq!(before, after, "{}", path.display());
    }
}

#[test]
fn short_fixture_copies_take_appends_and_keep_their_records() {
    let tmp = tempfile::tempdir().unwrap();
    for case in manifest() {
        let name = case["name"].as_str().unwrap();
        let copy = tmp.path().join(name);
        copy_store(&fixtures().join(case["store"].as_str().unwrap()), &copy);
        let store = Store::open(&copy).unwrap();
        let before = read_all(&store);
        let codec = if store.has_dict() { Codec::ZstdDict } else { Codec::Zstd };
        let first = store.append(&[7u8; 300], &[0, 100], codec).unwrap();
        assert_eq!(first, before.len() as u64);
        assert_eq!(
            std::fs::metadata(copy.join("meta.zr")).unwrap().len(),
            16 + 16 * (1 << 24),
            "{name}: meta.zr restored"
        );
        assert_eq!(std::fs::metadata(copy.join("0.zr")).unwrap().len(), 1 << 32, "{name}: 0.zr restored");
        drop(store);
        let store = Store::open(&copy).unwrap();
        let after = read_all(&store);
        assert_eq!(&after[..before.len()], &before[..], "{name}: old records intact");
        assert_eq!(after[before.len()..], [vec![7u8; 100], vec![7u8; 200]], "{name}: new records");
    }
}
