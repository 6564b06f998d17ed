//! Random sequences of append, delete, compact, gather and reopen leave the store holding exactly
//! what a plain `Vec<Vec<u8>>` model holds, record for record.

mod common;

use common::{pack, read_all};
use loaderx_native::{Codec, Store};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Vec<u8>>, u8),
    Delete(Vec<u64>),
    Compact,
    Gather(Vec<u64>),
    Reopen,
}

fn record() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 1..300),
        (1usize..3000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        (1usize..2000, any::<u8>()).prop_map(|(n, b)| (0..n).map(|i| (i / 5) as u8 ^ b).collect()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (prop::collection::vec(record(), 0..12), 0u8..2).prop_map(|(r, c)| Op::Append(r, c)),
        2 => prop::collection::vec(any::<u64>(), 0..6).prop_map(Op::Delete),
        1 => Just(Op::Compact),
        2 => prop::collection::vec(any::<u64>(), 0..10).prop_map(Op::Gather),
        1 => Just(Op::Reopen),
    ]
}

/// The model of a delete: the reference's descending swap-last.
fn model_delete(model: &mut Vec<Vec<u8>>, picks: &[u64]) -> Vec<u64> {
    if model.is_empty() {
        return vec![];
    }
    let mut idx: Vec<u64> = picks.iter().map(|p| p % model.len() as u64).collect();
    let chosen = idx.clone();
    idx.sort_unstable();
    idx.dedup();
    for &i in idx.iter().rev() {
        let last = model.pop().unwrap();
        if (i as usize) < model.len() {
            model[i as usize] = last;
        }
    }
    chosen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_model(ops in prop::collection::vec(op(), 1..25)) {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open_or_create(tmp.path()).unwrap();
        let mut model: Vec<Vec<u8>> = Vec::new();
        for op in ops {
            match op {
                Op::Append(records, c) => {
                    let (buf, offsets) = pack(&records);
                    let codec = if c == 0 { Codec::Raw } else { Codec::Zstd };
                    let first = store.append(&buf, &offsets, codec).unwrap();
                    prop_assert_eq!(first, model.len() as u64);
                    model.extend(records);
                }
                Op::Delete(picks) => {
                    let chosen = model_delete(&mut model, &picks);
                    store.delete(&chosen).unwrap();
                }
                Op::Compact => {
                    store.compact().unwrap();
                    let stats = store.stats().unwrap();
                    prop_assert_eq!(stats.chunk_bytes, stats.live_bytes);
                }
                Op::Gather(picks) => {
                    if model.is_empty() { continue; }
                    let idx: Vec<u64> = picks.iter().map(|p| p % model.len() as u64).collect();
                    let lens = store.lengths(&idx).unwrap();
                    let (offsets, total) = common::packed_offsets(&lens);
                    let mut dst = vec![0u8; total as usize];
                    store.gather(&idx, &mut dst, &offsets).unwrap();
                    let want: Vec<u8> = idx.iter().flat_map(|&i| model[i as usize].clone()).collect();
                    prop_assert_eq!(dst, want);
                }
                Op::Reopen => {
                    drop(store);
                    store = Store::open(tmp.path()).unwrap();
                }
            }
            prop_assert_eq!(store.len(), model.len() as u64);
        }
        prop_assert_eq!(read_all(&store), model);
    }
}
