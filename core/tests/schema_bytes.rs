//! Invariant: every fixture store's `schema.msgpack` decodes and re-encodes byte for byte, and its
//! kind, dtype and item_shape are the ones `manifest.json` records for that store.

use std::path::PathBuf;

use loaderx_core::schema::{Kind, Schema};
use serde_json::Value;

/// `$LOADERX_FIXTURES`, else the copy of the reference-written fixtures in `tests/fixtures/v3`.
fn fixtures() -> PathBuf {
    match std::env::var_os("LOADERX_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v3"),
    }
}

fn read(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e} (set LOADERX_FIXTURES)", path.display()))
}

#[test]
fn fixture_schemas_round_trip_and_match_the_manifest() {
    let root = fixtures();
    let manifest: Value = serde_json::from_slice(&read(&root.join("manifest.json"))).unwrap();
    let stores = manifest["stores"].as_array().expect("manifest lists stores");
    let mut dirs: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| root.join(name).join("store/schema.msgpack").is_file())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no */store/schema.msgpack under {}", root.display());
    for dir in &dirs {
        let store = format!("{dir}/store");
        let entry = stores.iter().find(|s| s["store"] == store.as_str());
        let entry = entry.unwrap_or_else(|| panic!("{store} is not in manifest.json"));
        let bytes = read(&root.join(&store).join("schema.msgpack"));
        let schema = Schema::from_msgpack(&bytes).unwrap_or_else(|e| panic!("{store}: {e}"));
        assert_eq!(schema.to_msgpack(), bytes, "{store}: re-encoded bytes differ");

        let kind: Kind = entry["kind"].as_str().unwrap().parse().unwrap();
        let shape: Vec<u64> =
            entry["item_shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(schema.kind(), Ok(kind), "{store}");
        assert_eq!(schema.dtype_str(), Ok(entry["dtype"].as_str().unwrap()), "{store}");
        assert_eq!(schema.item_shape(), Ok(shape.clone()), "{store}");
        assert_eq!(schema.codec(), Ok(entry["codec"].as_str().unwrap()), "{store}");
        assert_eq!(schema.validate(Some(kind)), Ok(()), "{store}");
        let dtype = schema.dtype().unwrap();
        assert_eq!(dtype.to_numpy_str(), schema.dtype_str().unwrap(), "{store}");

        // A canonical schema built from the manifest's fields has the same bytes.
        let codec = schema.codec().unwrap();
        let rebuilt = Schema::new(kind, schema.dtype_str().unwrap(), &shape, codec);
        assert_eq!(rebuilt.to_msgpack(), bytes, "{store}: canonical encoding differs");

        // The manifest's decoded schema has the same keys and values.
        let recorded = entry["schema"].as_object().expect("manifest records the schema");
        assert_eq!(recorded.len(), schema.entries().len(), "{store}");
        for (key, value) in schema.entries() {
            let as_json = serde_json::to_value(value).unwrap();
            assert_eq!(recorded.get(key), Some(&as_json), "{store}: key {key}");
        }
    }
}
