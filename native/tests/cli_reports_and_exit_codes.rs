//! The `loaderx` tool reports a store's facts as JSON and signals problems through its exit code:
//! 0 clean, 1 bad records found, 2 not a readable store.

mod common;

use std::process::Command;

use common::{copy_store, fixtures};

fn loaderx(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn info_and_verify() {
    let store = fixtures().join("zrecord_mixed_codecs/store");
    let (code, out) = loaderx(&["info".as_ref(), store.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["length"], 120);
    assert_eq!(v["records_by_codec"], serde_json::json!({"raw": 42, "zstd": 39, "zstd_dict": 39}));
    assert_eq!(v["dict_bytes"], 8192);
    assert_eq!(v["schema"]["kind"], "ragged");
    let (code, out) = loaderx(&["verify".as_ref(), store.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("120 records checked, 0 bad"));

    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("broken");
    copy_store(&store, &broken);
    std::fs::write(broken.join("dict.zr"), b"not a dictionary").unwrap();
    let (code, out) = loaderx(&["verify".as_ref(), broken.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["bad_count"], 39, "every zstd_dict record fails");
    assert_eq!(v["bad"].as_array().unwrap().len(), 20, "the first 20 are listed");
    let (_, out) = loaderx(&["verify".as_ref(), broken.as_os_str(), "--json".as_ref(), "--show=50".as_ref()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["bad"].as_array().unwrap().len(), 39);
    let (code, _) = loaderx(&["info".as_ref(), tmp.path().join("missing").as_os_str()]);
    assert_eq!(code, 2);
}
