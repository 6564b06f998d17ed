//! Helpers shared by the integration tests: fixture lookup, `.npy` payloads, copies of stores.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

/// `tests/fixtures/v3` (a copy of the reference-written fixtures), or `$LOADERX_FIXTURES` when set.
pub fn fixtures() -> PathBuf {
    std::env::var_os("LOADERX_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v3"))
}

/// The data bytes of a little `.npy` file (C order), and its shape.
pub fn npy_payload(path: &Path) -> (Vec<u8>, String) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{} is not .npy", path.display());
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
    };
    let header = String::from_utf8_lossy(&bytes[start..start + header_len]).into_owned();
    assert!(header.contains("'fortran_order': False"));
    (bytes[start + header_len..].to_vec(), header)
}

/// Copies a store directory (files only) to `dst`, making the copy writable.
pub fn copy_store(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        std::fs::copy(entry.path(), &to).unwrap();
        let mut perms = std::fs::metadata(&to).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(&to, perms).unwrap();
    }
}

/// Overwrites bytes of the file at `path`, starting at `offset` (portable: seek, then write).
pub fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

/// Reads `N` bytes of the file at `path`, starting at `offset`.
pub fn read_at<const N: usize>(path: &Path, offset: u64) -> [u8; N] {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    let mut out = [0u8; N];
    file.read_exact(&mut out).unwrap();
    out
}

/// Deterministic pseudo-random bytes for record `k` of a test (length 1..=max_len).
pub fn record(seed: u64, k: u64, max_len: usize) -> Vec<u8> {
    let mut x = seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d;
    let mut next = move || {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 29;
        x
    };
    let len = 1 + (next() as usize % max_len);
    let compressible = next() % 2 == 0;
    (0..len).map(|i| if compressible { (i / 7) as u8 ^ (k as u8) } else { next() as u8 }).collect()
}

/// Packs records into one buffer plus offsets, as `append` takes them.
pub fn pack(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let mut offsets = Vec::with_capacity(records.len());
    let mut buf = Vec::new();
    for r in records {
        offsets.push(buf.len() as u64);
        buf.extend_from_slice(r);
    }
    (buf, offsets)
}

/// Back-to-back destination offsets for records of these lengths, and the total size.
pub fn packed_offsets(lens: &[u32]) -> (Vec<u64>, u64) {
    let mut offsets = Vec::with_capacity(lens.len());
    let mut total = 0u64;
    for &l in lens {
        offsets.push(total);
        total += u64::from(l);
    }
    (offsets, total)
}

/// Reads every record of a store, one gather call, as separate byte vectors.
pub fn read_all(store: &loaderx_native::Store) -> Vec<Vec<u8>> {
    let n = store.len();
    let idx: Vec<u64> = (0..n).collect();
    let lens = store.lengths(&idx).unwrap();
    let (offsets, total) = packed_offsets(&lens);
    let mut buf = vec![0u8; total as usize];
    store.gather(&idx, &mut buf, &offsets).unwrap();
    offsets.iter().zip(&lens).map(|(&o, &l)| buf[o as usize..(o + u64::from(l)) as usize].to_vec()).collect()
}
