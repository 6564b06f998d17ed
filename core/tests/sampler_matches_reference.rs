//! Invariant: SEQUENTIAL batches equal the reference's recorded `sampler.json` output exactly, for
//! consecutive steps and after `seek`; IID and CYCLIC batches have the reference's shape (batch
//! length, indices `< length`, CYCLIC repeat-free within an epoch).

use std::collections::HashSet;
use std::path::PathBuf;

use loaderx_core::sampler::{Mode, Sampler};
use serde_json::Value;

/// `$LOADERX_FIXTURES`, else the copy of the reference-written fixtures in `tests/fixtures/v3`.
fn fixtures() -> PathBuf {
    match std::env::var_os("LOADERX_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v3"),
    }
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("expected an unsigned integer, got {v}"))
}

fn batch_of(v: &Value) -> Vec<u64> {
    v.as_array().expect("a batch is an array").iter().map(u64_of).collect()
}

/// The batch a fresh sampler returns after `seek(step)`.
fn after_seek(s: &Sampler, step: u64) -> Vec<u64> {
    let mut fresh = s.clone();
    fresh.seek(step);
    let mut out = vec![0; s.batch_len()];
    let n = fresh.next_into(&mut out).unwrap();
    assert_eq!(fresh.step(), step.wrapping_add(1));
    out[..n].to_vec()
}

#[test]
fn sampler_json_cases() {
    let path = fixtures().join("sampler.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (set LOADERX_FIXTURES)", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().expect("cases");
    let mut seen_modes = HashSet::new();
    for case in cases {
        let (length, batch) = (u64_of(&case["length"]), u64_of(&case["batch_size"]));
        let (mode, seed) = (u64_of(&case["mode"]), u64_of(&case["seed"]));
        let mode = Mode::try_from(u8::try_from(mode).unwrap()).unwrap();
        seen_modes.insert(mode);
        let ctx = format!("L={length} B={batch} mode={mode:?} seed={seed}");
        let mut sampler = Sampler::new(length, batch, mode, seed).unwrap();
        let steps: Vec<Vec<u64>> = case["steps"].as_array().unwrap().iter().map(batch_of).collect();
        let seeks: Vec<(u64, Vec<u64>)> = case["seek_then_next"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), batch_of(v)))
            .collect();
        assert!(!steps.is_empty() && !seeks.is_empty(), "{ctx}: empty case");
        let mut ours = Vec::new();
        for _ in &steps {
            let mut out = vec![0; sampler.batch_len()];
            let n = sampler.next_into(&mut out).unwrap();
            ours.push(out[..n].to_vec());
        }
        // (what we produce, what the reference recorded, which call) for every recorded batch.
        let fresh = Sampler::new(length, batch, mode, seed).unwrap();
        let stepped = ours.iter().cloned().zip(steps.iter()).enumerate();
        let stepped = stepped.map(|(k, (mine, theirs))| (mine, theirs, format!("step {k}")));
        let seeked =
            seeks.iter().map(|(step, theirs)| (after_seek(&fresh, *step), theirs, format!("seek({step})")));
        for (mine, theirs, call) in stepped.chain(seeked) {
            if mode == Mode::Sequential {
                assert_eq!(&mine, theirs, "{ctx}: {call}");
            }
            assert_eq!(mine.len(), theirs.len(), "{ctx}: {call}: batch length");
            let in_range = mine.iter().chain(theirs).all(|&i| i < length);
            assert!(in_range, "{ctx}: {call}: index out of range");
        }
        if mode == Mode::Cyclic {
            // Every epoch of ours and of the reference is repeat-free.
            let per_epoch = (length / batch).max(1) as usize;
            for (label, batches) in [("ours", &ours), ("reference", &steps)] {
                for epoch in batches.chunks(per_epoch) {
                    let items: Vec<u64> = epoch.iter().flatten().copied().collect();
                    let distinct: HashSet<u64> = items.iter().copied().collect();
                    assert_eq!(distinct.len(), items.len(), "{ctx}: {label} epoch repeats");
                }
            }
        }
    }
    assert_eq!(seen_modes.len(), 3, "fixtures cover all three modes");
}
