//! The `loaderx` tool's record commands agree with the store and with Python: `export` then
//! `convert` reproduces a reference-written store byte for byte, `head`/`cat` print the stored
//! values, `compact` frees what deletes left, and bad usage exits with code 2, writing nothing.

mod common;

use std::path::Path;
use std::process::Command;

use common::{copy_store, fixtures, npy_payload};
use loaderx_native::Store;

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args.iter().map(|a| a.as_ref())).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The bytes a reader uses: the header and live table of meta.zr, and the used part of 0.zr.
fn used_bytes(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let meta = std::fs::read(dir.join("meta.zr")).unwrap();
    let length = u32::from_le_bytes(meta[12..16].try_into().unwrap()) as usize;
    let tail = u32::from_le_bytes(meta[8..12].try_into().unwrap()) as usize;
    let chunk = std::fs::read(dir.join("0.zr")).unwrap();
    let mut table = meta[..16 + 16 * length].to_vec();
    // Byte 15 of an entry is the checksum writers' mark (docs/format.md): 1 here, 0 from the
    // reference, ignored by readers.
    table[16..].chunks_mut(16).for_each(|e| e[15] = 0);
    (table, chunk[..tail].to_vec())
}

/// The text of one header field up to the next comma outside parentheses, spaces removed.
fn field(header: &str, key: &str) -> String {
    let rest = &header[header.find(key).unwrap_or_else(|| panic!("{key} in {header}")) + key.len()..];
    let mut depth = 0;
    let end = rest
        .char_indices()
        .find(|&(_, c)| {
            depth += i32::from(c == '(') - i32::from(c == ')');
            (c == ',' || c == '}') && depth == 0
        })
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].split_whitespace().collect()
}

#[test]
fn export_then_convert_reproduces_the_reference_store() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, codec) in
        [("u8img_zstd", "zstd"), ("u8img_raw", "raw"), ("be_i4_raw", "raw"), ("f16_zstd", "zstd")]
    {
        let src = fixtures().join(name).join("store");
        let npy = tmp.path().join(format!("{name}.npy"));
        let (code, _, err) = run(&[&"export", &src, &npy]);
        assert_eq!(code, 0, "{name}: {err}");
        // The exported array is the fixture's expected values, byte for byte.
        let (want, want_header) = npy_payload(&fixtures().join(name).join("expected/values.npy"));
        let (got, got_header) = npy_payload(&npy);
        assert!(got == want, "{name}: exported payload differs");
        for key in ["'descr': ", "'shape': "] {
            assert_eq!(field(&got_header, key), field(&want_header, key), "{name}: {key}");
        }

        let out = tmp.path().join(format!("{name}-converted"));
        let (code, _, err) = run(&[&"convert", &npy, &out, &"--codec", &codec]);
        assert_eq!(code, 0, "{name}: {err}");
        if codec == "raw" {
            // Raw stores are byte-identical to the reference's but for the entry mark. (zstd
            // frames may differ by a few bytes between zstd releases, so zstd stores are
            // compared by their records.)
            assert!(used_bytes(&out) == used_bytes(&src), "{name}: table and chunk bytes differ");
        }
        let converted = Store::open(&out).unwrap();
        let n = converted.len();
        let item = want.len() as u64 / n;
        let mut all = vec![0u8; want.len()];
        let offsets: Vec<u64> = (0..n).map(|k| k * item).collect();
        converted.gather(&(0..n).collect::<Vec<_>>(), &mut all, &offsets).unwrap();
        assert!(all == want, "{name}: converted records differ from the array");
        let tags: Vec<u8> =
            converted.entries(&(0..n).collect::<Vec<_>>()).unwrap().iter().map(|l| l.compress).collect();
        let reference: Vec<u8> = Store::open(&src)
            .unwrap()
            .entries(&(0..n).collect::<Vec<_>>())
            .unwrap()
            .iter()
            .map(|l| l.compress)
            .collect();
        assert_eq!(tags, reference, "{name}: per-record codec tags (including the raw fallback)");
        assert_eq!(
            std::fs::read(out.join("schema.msgpack")).unwrap(),
            std::fs::read(src.join("schema.msgpack")).unwrap()
        );
        let (code, _, err) = run(&[&"convert", &npy, &out]);
        assert_eq!(code, 2, "converting onto an existing store is refused: {err}");
    }
}

#[test]
fn head_and_cat_print_the_stored_values() {
    let src = fixtures().join("be_i4_raw/store");
    let (code, out, _) = run(&[&"head", &src, &"-n", &"2", &"--json", &"--values", &"100"]);
    assert_eq!(code, 0);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (payload, _) = npy_payload(&fixtures().join("be_i4_raw/expected/values.npy"));
    let want: Vec<i64> = payload
        .chunks_exact(4)
        .take(12)
        .map(|c| i64::from(i32::from_be_bytes(c.try_into().unwrap())))
        .collect();
    let got: Vec<i64> = rows
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["values"].as_array().unwrap().clone())
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(got, want);
    assert_eq!(rows[0]["shape"], serde_json::json!([2, 3]));

    let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["cat".as_ref(), src.as_os_str(), "1".as_ref(), "0".as_ref(), "--raw".as_ref()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, [&payload[24..48], &payload[..24]].concat(), "record 1 then record 0, as stored");
    let (code, _, err) = run(&[&"cat", &src, &"50"]);
    assert_eq!(code, 2, "an index past the end: {err}");
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn compact_frees_what_deletes_left_and_stats_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_store(&fixtures().join("deleted_uncompacted/store"), &dir);
    let before = Store::open(&dir).unwrap().stats().unwrap();
    assert!(before.reclaimable > 0);
    let (code, out, err) = run(&[&"compact", &dir, &"--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["freed"], before.reclaimable);
    let (code, out, _) = run(&[&"stats", &dir, &"--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reclaimable"], 0);
    assert_eq!(v["records"], before.records);
    let (code, _, _) = run(&[&"verify", &dir]);
    assert_eq!(code, 0);
}

#[test]
fn bad_usage_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let ragged = fixtures().join("tokens_i32_ragged_zstd/store");
    let (code, _, err) = run(&[&"export", &ragged, &tmp.path().join("x.npy")]);
    assert_eq!(code, 2);
    assert!(err.contains("dense"), "{err}");
    let (code, _, _) = run(&[&"convert", &tmp.path().join("missing.npy"), &tmp.path().join("s")]);
    assert_eq!(code, 2);
    assert!(!tmp.path().join("s").exists(), "a failed convert leaves no store behind");
    std::fs::write(tmp.path().join("junk.npy"), b"not an npy file").unwrap();
    let (code, _, _) = run(&[&"convert", &tmp.path().join("junk.npy"), &tmp.path().join("s")]);
    assert_eq!(code, 2);
    assert!(!tmp.path().join("s").exists());
    let (code, _, _) = run(&[&"head", &tmp.path().join("nowhere")]);
    assert_eq!(code, 2);
    let (code, _, _) = run(&[&"frobnicate"]);
    assert_eq!(code, 2);
}
