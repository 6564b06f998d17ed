//! The cross-language golden set (tests/golden/generate.py) reads here exactly as the manifest
//! says: per-record sha256 of the decoded bytes, lengths, schema, the sha256 of the typed values
//! in canonical form (converted here, independently of `loaderx_core::view`) and the sampler
//! batches.
//!
//! Runs only when `LOADERX_GOLDEN` points at a generated directory; with `LOADERX_GOLDEN_OUT`
//! set it also writes what it read there as JSON, for tests/golden/compare.py:
//!
//! ```text
//! LOADERX_GOLDEN=artifacts/golden LOADERX_GOLDEN_OUT=artifacts/golden-out/rust.json \
//!   cargo test -p loaderx-native --test golden_stores_read_identically
//! ```

mod common;

use std::path::{Path, PathBuf};

use common::read_all;
use loaderx_core::dtype::{ByteOrder, DKind};
use loaderx_core::sampler::{Mode, Sampler};
use loaderx_core::schema::Schema;
use loaderx_native::Store;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// IEEE half to single precision bits, exactly (NaN payloads kept, as NumPy does).
fn half_to_f32_bits(h: u16) -> u32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match (exp, man) {
        (0, 0) => sign,
        // Subnormal: man · 2^-24, exact in f32.
        (0, m) => sign | (m as f32 * 2f32.powi(-24)).to_bits(),
        (31, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    }
}

/// How a dtype's record bytes become canonical bytes (see generate.py), and the extra dims.
struct Canon {
    /// Bytes per component to reverse (1: none).
    swap: usize,
    half: Option<ByteOrder>,
    extra: Vec<u64>,
}

impl Canon {
    fn of(schema: &Schema) -> Canon {
        let dt = schema.dtype().expect("dtype");
        let n = dt.itemsize as usize;
        let big = dt.order == ByteOrder::Big;
        let swap = |w: usize| if big { w } else { 1 };
        let plain = |w: usize| Canon { swap: swap(w), half: None, extra: vec![] };
        match (dt.kind, n) {
            (DKind::Float, 2) => Canon { swap: 1, half: Some(dt.order), extra: vec![] },
            (DKind::Bool, _) => plain(1),
            (DKind::Int | DKind::UInt, w) => plain(w),
            (DKind::Datetime | DKind::Timedelta, 8) => plain(8),
            (DKind::Float, 4 | 8) => plain(n),
            (DKind::Complex, 8 | 16) => Canon { swap: swap(n / 2), half: None, extra: vec![2] },
            (DKind::Unicode, _) => Canon { swap: swap(4), half: None, extra: vec![n as u64 / 4] },
            _ => Canon { swap: 1, half: None, extra: vec![n as u64] },
        }
    }

    fn convert(&self, src: &[u8], out: &mut Vec<u8>) {
        if let Some(order) = self.half {
            for c in src.chunks_exact(2) {
                let h = if order == ByteOrder::Big {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_le_bytes([c[0], c[1]])
                };
                out.extend_from_slice(&half_to_f32_bits(h).to_le_bytes());
            }
        } else if self.swap > 1 {
            for c in src.chunks_exact(self.swap) {
                out.extend(c.iter().rev());
            }
        } else {
            out.extend_from_slice(src);
        }
    }
}

fn read_store(dir: &Path) -> Value {
    let store = Store::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let n = store.len();
    let records = read_all(&store);
    let idx: Vec<u64> = (0..n).collect();
    let lengths = store.lengths(&idx).unwrap();
    let digests: Vec<String> = records.iter().map(|r| hex(Sha256::digest(r))).collect();
    let schema_path = dir.join("schema.msgpack");
    let mut typed = Vec::new();
    let mut shapes = Vec::new();
    let schema_json = if schema_path.is_file() {
        let schema = Schema::from_msgpack(&std::fs::read(&schema_path).unwrap()).expect("schema");
        let item_shape = schema.item_shape().unwrap();
        let item_bytes = schema.item_bytes().unwrap();
        let kind = schema.kind().unwrap().as_str();
        let canon = Canon::of(&schema);
        for r in &records {
            canon.convert(r, &mut typed);
            let mut shape = Vec::new();
            if kind == "ragged" {
                assert_eq!(r.len() as u64 % item_bytes, 0, "{}: a record is not whole rows", dir.display());
                shape.push(r.len() as u64 / item_bytes);
            }
            shape.extend(&item_shape);
            shape.extend(&canon.extra);
            shapes.push(shape);
        }
        json!({
            "kind": kind,
            "dtype": schema.dtype_str().unwrap(),
            "item_shape": item_shape,
            "codec": schema.codec().unwrap(),
        })
    } else {
        for r in &records {
            typed.extend_from_slice(r);
            shapes.push(vec![r.len() as u64]);
        }
        Value::Null
    };
    json!({
        "length": n,
        "lengths": lengths,
        "records": digests,
        "typed_sha256": hex(Sha256::digest(&typed)),
        "shapes": shapes,
        "schema": schema_json,
    })
}

fn num(v: &Value) -> u64 {
    v.as_str().expect("a decimal string").parse().expect("a u64")
}

fn read_sampler(case: &Value) -> Value {
    let mode = Mode::try_from(case["mode"].as_u64().unwrap() as u8).unwrap();
    let mut s =
        Sampler::new(num(&case["length"]), num(&case["batch_size"]), mode, num(&case["seed"])).unwrap();
    let mut buf = vec![0u64; s.batch_len()];
    let mut batch_at = Map::new();
    for step in case["batch_at"].as_object().unwrap().keys() {
        let k = s.batch_at(step.parse().unwrap(), &mut buf).unwrap();
        batch_at.insert(step.clone(), json!(buf[..k]));
    }
    let mut next = |s: &mut Sampler| {
        let k = s.next_into(&mut buf).unwrap();
        json!(buf[..k])
    };
    let first: Vec<Value> = (0..case["first"].as_array().unwrap().len()).map(|_| next(&mut s)).collect();
    s.seek(num(&case["next"]["seek"]));
    let batches: Vec<Value> = (0..case["next"]["count"].as_u64().unwrap()).map(|_| next(&mut s)).collect();
    json!({ "batch_at": batch_at, "first": first, "next": { "batches": batches, "step_after": s.step().to_string() } })
}

/// The fields the manifest states for a store, in the readers' shape.
fn expected_store(m: &Value) -> Value {
    json!({
        "length": m["length"],
        "lengths": m["lengths"],
        "records": m["records"],
        "typed_sha256": m["typed"]["sha256"],
        "shapes": m["typed"]["shapes"],
        "schema": m["schema"],
    })
}

#[test]
fn golden_stores_read_as_the_manifest_says() {
    let Some(dir) = std::env::var_os("LOADERX_GOLDEN").map(PathBuf::from) else {
        eprintln!("LOADERX_GOLDEN is not set: skipped (tests/golden/run.sh sets it)");
        return;
    };
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("LOADERX_GOLDEN/manifest.json");
    let manifest: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(manifest["version"], 1, "golden manifest version");
    let mut stores = Map::new();
    let mut bad = Vec::new();
    for (name, entry) in manifest["stores"].as_object().unwrap() {
        let got = read_store(&dir.join(entry["path"].as_str().unwrap()));
        let want = expected_store(entry);
        for key in want.as_object().unwrap().keys() {
            if got[key] != want[key] {
                bad.push(format!("{name}: {key} differs"));
            }
        }
        stores.insert(name.clone(), got);
    }
    let mut sampler = Map::new();
    for (name, case) in manifest["sampler"]["cases"].as_object().unwrap() {
        let got = read_sampler(case);
        for key in ["batch_at", "first"] {
            if got[key] != case[key] {
                bad.push(format!("sampler {name}: {key} differs"));
            }
        }
        if got["next"]["batches"] != case["next"]["batches"]
            || got["next"]["step_after"] != case["next"]["step_after"]
        {
            bad.push(format!("sampler {name}: seek + next differs"));
        }
        sampler.insert(name.clone(), got);
    }
    if let Some(out) = std::env::var_os("LOADERX_GOLDEN_OUT") {
        let result = json!({ "reader": "rust", "stores": stores, "sampler": sampler });
        std::fs::write(&out, serde_json::to_string(&result).unwrap() + "\n").unwrap();
    }
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}
