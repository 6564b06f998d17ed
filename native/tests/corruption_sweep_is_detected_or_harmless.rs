//! A damaged store never crashes the native engine. For three small fixtures (raw, zstd, and
//! mixed codecs with a dictionary): every truncation length and every single-byte flip of
//! `meta.zr`, and seeded random bit flips in the chunk file and `dict.zr`. Each damaged copy is
//! opened, measured, gathered whole and verified; every step returns a value or a typed error.
//!
//! Each input is classed as *detected* (an error from open, lengths, gather or stats, or a bad
//! record from verify), *identical* (reads back exactly as the good store) or *different* (reads
//! back without complaint, but other bytes: the format has no checksums, so a flip in a raw
//! payload, or in a raw record's offset that still points inside the file, cannot be noticed).
//! The test checks the cases the format makes detectable are detected, and writes the counts to
//! `$LOADERX_RELIABILITY_OUT/native_corruption.json` when that is set.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{copy_store, fixtures};
use loaderx_native::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Detected,
    Identical,
    Different,
}

/// Everything a reader can do with the store at `dir`, as one outcome.
fn exercise(dir: &Path, good: &[Vec<u8>]) -> Outcome {
    let Ok(store) = Store::open(dir) else { return Outcome::Detected };
    let n = store.len();
    let idx: Vec<u64> = (0..n).collect();
    let Ok(lens) = store.lengths(&idx) else { return Outcome::Detected };
    let (offsets, total) = common::packed_offsets(&lens);
    let mut buf = vec![0u8; total as usize];
    if store.gather(&idx, &mut buf, &offsets).is_err() || store.stats().is_err() {
        return Outcome::Detected;
    }
    let report = store.verify(|_, _| {});
    if !report.bad.is_empty() {
        return Outcome::Detected;
    }
    let same = lens.len() == good.len()
        && offsets
            .iter()
            .zip(&lens)
            .zip(good)
            .all(|((&o, &l), g)| &buf[o as usize..(o + u64::from(l)) as usize] == g);
    if same {
        Outcome::Identical
    } else {
        Outcome::Different
    }
}

/// Writes `bytes` as `dir/name`, runs the exercise, and puts `original` back.
fn with_file(dir: &Path, name: &str, bytes: &[u8], original: &[u8], good: &[Vec<u8>]) -> Outcome {
    std::fs::write(dir.join(name), bytes).unwrap();
    let outcome = exercise(dir, good);
    std::fs::write(dir.join(name), original).unwrap();
    outcome
}

#[derive(Default)]
struct Tally(BTreeMap<String, BTreeMap<Outcome, u64>>);

impl Tally {
    fn add(&mut self, kind: &str, outcome: Outcome) {
        *self.0.entry(kind.to_string()).or_default().entry(outcome).or_default() += 1;
    }

    fn get(&self, kind: &str, outcome: Outcome) -> u64 {
        self.0.get(kind).and_then(|m| m.get(&outcome)).copied().unwrap_or(0)
    }

    fn json(&self) -> serde_json::Value {
        let kinds = self.0.iter().map(|(kind, m)| {
            let counts = m.iter().map(|(o, n)| (format!("{o:?}").to_lowercase(), serde_json::json!(n)));
            (kind.clone(), serde_json::Value::Object(counts.collect()))
        });
        serde_json::Value::Object(kinds.collect())
    }
}

/// xorshift64, for reproducible flips.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

const STORES: [&str; 3] = ["be_i4_raw", "f16_zstd", "zrecord_mixed_codecs"];
const RANDOM_FLIPS: u64 = 700;

#[test]
fn every_corruption_is_detected_or_reads_as_data() {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = serde_json::Map::new();
    let mut total = 0u64;
    for name in STORES {
        let dir = tmp.path().join(name);
        copy_store(&fixtures().join(name).join("store"), &dir);
        let good = common::read_all(&Store::open(&dir).unwrap());
        assert_eq!(exercise(&dir, &good), Outcome::Identical, "{name}: the good copy");
        let mut tally = Tally::default();

        let meta = std::fs::read(dir.join("meta.zr")).unwrap();
        for cut in 0..meta.len() {
            let outcome = with_file(&dir, "meta.zr", &meta[..cut], &meta, &good);
            // A cut that keeps every live entry changes nothing; any other is detected.
            let expect = if cut >= 16 + 16 * good.len() { Outcome::Identical } else { Outcome::Detected };
            assert_eq!(outcome, expect, "{name}: meta.zr cut to {cut} bytes");
            tally.add("meta.zr truncation", outcome);
        }
        for at in 0..meta.len() {
            let mut bad = meta.clone();
            bad[at] ^= 0xFF;
            let outcome = with_file(&dir, "meta.zr", &bad, &meta, &good);
            let field = match at {
                0..=5 => "meta.zr header magic/version flip",
                6..=11 => "meta.zr header tail flip",
                12..=15 => "meta.zr header length flip",
                _ => match (at - 16) % 16 {
                    0..=3 => "meta.zr entry offset flip",
                    4..=7 => "meta.zr entry phys_length flip",
                    8..=11 => "meta.zr entry logic_length flip",
                    12..=13 => "meta.zr entry chunk_id flip",
                    14 => "meta.zr entry codec flip",
                    _ => "meta.zr entry reserved flip",
                },
            };
            tally.add(field, outcome);
        }
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ name.len() as u64;
        for file in ["0.zr", "dict.zr"] {
            let Ok(original) = std::fs::read(dir.join(file)) else { continue };
            if original.is_empty() {
                continue;
            }
            for _ in 0..RANDOM_FLIPS {
                let mut bad = original.clone();
                let at = (xorshift(&mut rng) % original.len() as u64) as usize;
                bad[at] ^= 1 << (xorshift(&mut rng) % 8);
                let outcome = with_file(&dir, file, &bad, &original, &good);
                tally.add(&format!("{file} bit flip"), outcome);
            }
        }

        // What the format makes detectable is detected.
        for field in ["meta.zr header magic/version flip", "meta.zr entry codec flip"] {
            assert_eq!(tally.get(field, Outcome::Different), 0, "{name}: a {field} read back as other data");
        }
        assert_eq!(
            tally.get("meta.zr entry reserved flip", Outcome::Detected),
            0,
            "{name}: reserved bytes are ignored"
        );
        assert_eq!(exercise(&dir, &good), Outcome::Identical, "{name}: the good copy after the sweep");
        let count: u64 = tally.0.values().flat_map(|m| m.values()).sum();
        total += count;
        all.insert(name.to_string(), tally.json());
    }
    eprintln!("corruption sweep (native): {total} damaged stores, no panic");
    if let Some(out) = std::env::var_os("LOADERX_RELIABILITY_OUT") {
        std::fs::create_dir_all(&out).unwrap();
        let doc = serde_json::json!({ "inputs": total, "stores": all });
        std::fs::write(
            Path::new(&out).join("native_corruption.json"),
            serde_json::to_vec_pretty(&doc).unwrap(),
        )
        .unwrap();
    }
}
