//! Fuzz harnesses, shared by the cargo-fuzz targets (`fuzz/`) and the tests that replay the
//! committed crashers (`native/tests/fuzz_regressions_replay.rs`), so a crasher is replayed
//! through exactly the code that found it.
//!
//! Invariant each harness checks: arbitrary bytes never panic, and whatever an API accepts it
//! handles consistently (a parsed schema re-encodes to bytes that parse to the same schema; a
//! store that opens can be gathered, verified and measured without a panic).

use std::path::Path;

use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{Codec, Header, RecordLoc, MAX_RECORD_LEN};
use loaderx_core::open::{DICT_FILE, META_FILE, SCHEMA_FILE};
use loaderx_core::read::{self, PlanRules, TableCache};
use loaderx_core::schema::Schema;

use crate::Store;

/// Splits input into parts by 2-byte little-endian length prefixes (the last part takes the rest).
fn parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    let mut rest = data;
    for _ in 0..n.saturating_sub(1) {
        let len = match rest {
            [a, b, tail @ ..] => {
                rest = tail;
                usize::from(u16::from_le_bytes([*a, *b])).min(rest.len())
            }
            _ => 0,
        };
        let (head, tail) = rest.split_at(len);
        out.push(head);
        rest = tail;
    }
    out.push(rest);
    out
}

/// Header and table entries: parsing, validation against sizes, and ranged-read planning.
pub fn format(data: &[u8]) {
    let Ok(header) = Header::read(data) else { return };
    let meta_len = data.len() as u64;
    if header.validate(meta_len).is_err() {
        return;
    }
    let length = u64::from(header.length).min(4096);
    let chunk_lens: Vec<Option<u64>> =
        (0..=header.tail_chunk.min(8)).map(|c| Some(u64::from(c) * 4096 + 65536)).collect();
    let mut cache = TableCache::new(u64::from(header.length));
    for r in cache.missing(0..length) {
        let end = (r.end as usize).min(data.len());
        let _ = cache.insert(r.start, &data[(r.start as usize).min(end)..end]);
    }
    let entries: Vec<(u64, RecordLoc)> = (0..length).filter_map(|i| cache.entry(i).map(|l| (i, l))).collect();
    for (i, loc) in &entries {
        let _ = loc.validate(*i, |c| chunk_lens.get(usize::from(c)).copied().flatten());
    }
    let rules = PlanRules { chunk_lens: &chunk_lens, typed: None, max_gap: 4096, max_out: 64 << 20 };
    if let Ok(plan) = read::plan_gather(&entries, &rules, true) {
        for s in &plan.slots {
            let r = plan.ranges[s.range];
            assert!(r.start + s.at + u64::from(s.stored) <= r.end, "a slot lies outside its range");
        }
    }
}

/// `checksums.lx`: the header parser (an accepted header re-encodes to the same bytes), slot
/// pages cut from arbitrary bytes, and checks of arbitrary slots against arbitrary entries.
/// Input: the sidecar's bytes behind a 2-byte length, then a stored record's bytes.
pub fn checksums(data: &[u8]) {
    use loaderx_core::checksum::{check, SidecarHeader, SlotCache, Verdict, SIDECAR_HEADER};
    let p = parts(data, 2);
    let (sidecar, stored) = (p[0], p[1]);
    if let Ok(header) = SidecarHeader::parse(sidecar) {
        assert_eq!(&header.to_bytes()[..], &sidecar[..SIDECAR_HEADER as usize], "a parsed header re-encodes");
    }
    let mut cache = SlotCache::new(sidecar.len() as u64);
    let indices = 0..(sidecar.len() as u64 / 24 + 2);
    for r in cache.missing(indices.clone(), 1 << 16) {
        let end = (r.end as usize).min(sidecar.len());
        cache.insert(r.start, &sidecar[(r.start as usize).min(end)..end]);
    }
    for i in indices {
        let slot = cache.slot(i).expect("every page the file holds was cached");
        // Against its own entry (covered unless blank) and against a table entry read from the
        // record bytes: a verdict, never a panic, and verified only when the hash matches.
        let loc = slot.map(|s| RecordLoc::read(&s.entry).unwrap_or_default()).unwrap_or_default();
        match check(slot.as_ref(), &loc, stored) {
            Verdict::Verified => {
                assert_eq!(slot.map(|s| s.hash), Some(loaderx_core::checksum::record_hash(stored)))
            }
            Verdict::Mismatch { expected, found } => assert_ne!(expected, found),
            Verdict::Uncovered => {}
        }
        if let Some(other) = RecordLoc::read(stored) {
            let _ = check(slot.as_ref(), &other, stored);
        }
    }
}

/// `schema.msgpack` parsing; an accepted schema re-encodes to bytes that parse back equal.
pub fn schema(data: &[u8]) {
    let Ok(schema) = Schema::from_msgpack(data) else { return };
    let _ = (schema.validate(None), schema.kind(), schema.dtype(), schema.item_bytes());
    let again = Schema::from_msgpack(&schema.to_msgpack()).expect("a re-encoded schema parses");
    assert_eq!(again.to_msgpack(), schema.to_msgpack(), "re-encoding is stable");
}

/// Record decoding: a codec tag, a logical length, an optional dictionary and a payload.
pub fn decode(data: &[u8]) {
    let [tag, l0, l1, l2, rest @ ..] = data else { return };
    let Some(codec) = Codec::from_tag(tag % 3) else { return };
    let logic = (u32::from_le_bytes([*l0, *l1, *l2, 0]) as u64 % MAX_RECORD_LEN + 1) as usize;
    let p = parts(rest, 2);
    let dict = (!p[0].is_empty()).then(|| Dictionary::new(p[0].to_vec()));
    let mut dst = vec![0u8; logic];
    let _ = Decoder::new(dict.as_ref()).decode_into(codec, p[1], &mut dst);
}

/// Encoded images: the first byte picks the crop (`% 3`: centre, random resized, none), the
/// output side (`/ 3 % 16 + 1` pixels) and the flip; the rest is the image. Reads the header,
/// decodes under a 4-megapixel limit and renders with both resizes; only errors may come back.
pub fn image(data: &[u8]) {
    use loaderx_core::image::{decode, header, render, Crop, Limits, Render, Resize};
    let [pick, bytes @ ..] = data else { return };
    let limits = Limits { max_pixels: 1 << 22 };
    let _ = header(bytes);
    let _ = decode(bytes, &limits);
    let crop = [Crop::Center, Crop::RANDOM_RESIZED, Crop::None][usize::from(pick % 3)];
    let side = u32::from(pick / 3 % 16) + 1;
    for resize in [Resize::Fast, Resize::Exact] {
        let spec = Render { height: side, width: side + 1, crop, resize, flip: f64::from(pick & 1), limits };
        let mut out = vec![0u8; spec.output_bytes()];
        let _ = render(bytes, &spec, (u64::from(*pick), 1, 2), &mut out);
    }
}

/// The files of [`store`]'s input, in order: each but the last behind a 2-byte length.
pub const STORE_FILES: [&str; 4] = [META_FILE, DICT_FILE, SCHEMA_FILE, "0.zr"];

/// Packs files into a [`store`] input (the inverse of its split; parts are cut at 64 KiB).
pub fn pack_store(files: &[&[u8]; 4]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in &files[..3] {
        let f = &f[..f.len().min(usize::from(u16::MAX))];
        out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        out.extend_from_slice(f);
    }
    out.extend_from_slice(files[3]);
    out
}

/// A whole store directory from fuzzed files: open, gather every record, verify, stats.
/// `dir` is a scratch directory the harness owns.
pub fn store(data: &[u8], dir: &Path) {
    let p = parts(data, 4);
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    for (name, bytes) in STORE_FILES.iter().zip(&p) {
        if !(bytes.is_empty() && *name != META_FILE) {
            let _ = std::fs::write(dir.join(name), bytes);
        }
    }
    let Ok(store) = Store::open(dir) else { return };
    let n = store.len().min(1024);
    let indices: Vec<u64> = (0..n).collect();
    if let Ok(lens) = store.lengths(&indices) {
        let (offsets, total) = crate::packed(&lens);
        let mut buf = vec![0u8; total as usize];
        let _ = store.gather(&indices, &mut buf, &offsets);
    }
    let _ = store.verify(|_, _| {});
    let _ = store.stats();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_store_is_what_store_splits() {
        let files: [&[u8]; 4] = [b"meta", b"", b"schema", b"chunk bytes"];
        assert_eq!(parts(&pack_store(&files), 4), files.to_vec());
    }

    #[test]
    fn parts_split_by_prefix_and_never_overrun() {
        assert_eq!(parts(&[2, 0, 9, 9, 7], 2), vec![&[9u8, 9][..], &[7][..]]);
        assert_eq!(parts(&[200, 0, 1], 3), vec![&[1u8][..], &[][..], &[][..]]);
        let empty: &[u8] = &[];
        assert_eq!(parts(&[], 2), vec![empty, empty]);
    }
}
