//! A manifest's stores read as one index space: gathers over many stores equal gathers over
//! one store holding the same records in order; a manifest commit is all or nothing; a store
//! of another layout, a missing store and a store that changed are errors naming it.

use loaderx_core::schema::Kind;
use loaderx_native::{
    commit, read_manifest, write_schema, Classify, Codec, Error, ErrorKind, Layout, Many, RemoteOptions,
    Schema, Store,
};
use std::path::Path;

const ROW: usize = 6;

/// A dense store of rows `first..first + n` (each row: 6 bytes derived from its global index).
fn make(dir: &Path, first: usize, n: usize, dtype: &str) {
    let store = Store::open_or_create(dir).unwrap();
    if n > 0 {
        let bytes: Vec<u8> = (first..first + n).flat_map(row).collect();
        let offsets: Vec<u64> = (0..n as u64).map(|k| k * ROW as u64).collect();
        store.append(&bytes, &offsets, if first % 2 == 0 { Codec::Zstd } else { Codec::Raw }).unwrap();
    }
    drop(store);
    write_schema(dir, &Schema::new(Kind::Dense, dtype, &[ROW as u64], "zstd")).unwrap();
}

fn row(i: usize) -> [u8; ROW] {
    let b = (i as u32).to_le_bytes();
    [b[0], b[1], b[2], b[3], 0xA5, (i % 251) as u8]
}

fn parts(root: &Path) -> Vec<String> {
    let sizes = [40, 0, 1, 77, 13];
    let mut first = 0;
    let mut names = Vec::new();
    for (k, n) in sizes.iter().enumerate() {
        let name = format!("part-{k}");
        make(&root.join(&name), first, *n, "|u1");
        first += n;
        names.push(name);
    }
    names
}

#[test]
fn gathers_over_many_stores_equal_one_store_of_the_same_records() {
    let root = tempfile::tempdir().unwrap();
    let names = parts(root.path());
    let path = root.path().join("manifest.json");
    let opts = RemoteOptions::default();
    commit(&path, &names[..2], &opts).unwrap();
    let m = commit(&path, &names[2..], &opts).unwrap();
    assert_eq!(m.len(), 131);
    assert_eq!(read_manifest(&path).unwrap(), m, "the file holds what commit returned");
    let many = Many::open(&path, &opts).unwrap();
    assert_eq!(many.len(), 131);
    let mut state = 7u64;
    for round in 0..50 {
        let n = 1 + round % 300;
        let indices: Vec<u64> = (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) % 131
            })
            .collect();
        let want: Vec<u8> = indices.iter().flat_map(|&i| row(i as usize)).collect();
        let mut fixed = vec![0u8; want.len()];
        many.gather_fixed(&indices, &mut fixed, ROW as u64).unwrap();
        assert_eq!(fixed, want, "gather_fixed, round {round}");
        // Reversed places through offsets.
        let offsets: Vec<u64> = (0..n as u64).rev().map(|k| k * ROW as u64).collect();
        let mut placed = vec![0u8; want.len()];
        many.gather(&indices, &mut placed, &offsets).unwrap();
        let reversed: Vec<u8> = indices.iter().rev().flat_map(|&i| row(i as usize)).collect();
        assert_eq!(placed, reversed, "gather with offsets, round {round}");
        assert!(many.lengths(&indices).unwrap().iter().all(|&l| l as usize == ROW));
    }
    let layout = Layout { kind: Kind::Dense, item_bytes: ROW as u64 };
    assert_eq!(many.lengths_fitting(&[0, 130], layout).unwrap(), vec![6, 6]);
    let e = many.gather_fixed(&[131], &mut [0u8; ROW], ROW as u64).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Index, "{e}");
    let e = many.gather_fixed(&[0], &mut [0u8; ROW], ROW as u64 - 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
    let short = Layout { kind: Kind::Dense, item_bytes: 5 };
    assert_eq!(many.lengths_fitting(&[3], short).unwrap_err().kind(), ErrorKind::Corrupt);
}

#[test]
fn a_store_of_another_layout_is_refused_and_nothing_is_written() {
    let root = tempfile::tempdir().unwrap();
    let names = parts(root.path());
    make(&root.path().join("floats"), 0, 3, "<f2");
    let path = root.path().join("manifest.json");
    let opts = RemoteOptions::default();
    commit(&path, &names[..1], &opts).unwrap();
    let before = std::fs::read(&path).unwrap();
    let e = commit(&path, &[names[1].clone(), "floats".to_owned()], &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Argument);
    assert!(e.to_string().contains("floats") && e.to_string().contains("<f2"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "a failed commit writes nothing");
    let e = commit(&path, &["nowhere".to_owned()], &opts).unwrap_err();
    assert!(matches!(e, Error::NotFound(_) | Error::NotAStore { .. }), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let e = commit(&path, &[names[0].clone()], &opts).unwrap_err();
    assert!(e.to_string().contains("listed twice"), "{e}");
    assert!(!root.path().join("manifest.json.tmp").exists());
}

#[test]
fn a_store_that_changed_or_vanished_fails_the_open_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let names = parts(root.path());
    let path = root.path().join("manifest.json");
    let opts = RemoteOptions::default();
    commit(&path, &names, &opts).unwrap();
    let store = Store::open(root.path().join("part-3")).unwrap();
    store.append(&row(999), &[0], Codec::Raw).unwrap();
    drop(store);
    let e = Many::open(&path, &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("part-3") && e.to_string().contains("77"), "{e}");
    std::fs::remove_dir_all(root.path().join("part-3")).unwrap();
    let e = Many::open(&path, &opts).unwrap_err();
    assert!(e.to_string().contains("part-3"), "{e}");
    std::fs::write(&path, b"{\"format\": \"something else\"}").unwrap();
    assert_eq!(Many::open(&path, &opts).unwrap_err().kind(), ErrorKind::Corrupt);
    assert!(matches!(Many::open(&root.path().join("none.json"), &opts), Err(Error::NotFound(_))));
}
