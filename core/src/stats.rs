//! Storage usage of a store, as `Zrecord.stats()` reports it, computed from the header and the
//! live table entries.
//!
//! Invariant: `reclaimable = chunk_bytes − live_bytes` (saturating), an upper bound on what a
//! compaction frees; `live_bytes` sums `phys_length` as the reference does.

use crate::format::{entry_offset, Header, RecordLoc, CHUNK_SIZE};
use crate::names::{chunk_id, META_FILE};

/// Storage usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Live records.
    pub records: u64,
    /// Stored bytes of the live records (sum of `phys_length`).
    pub live_bytes: u64,
    /// Decoded bytes of the live records (sum of `logic_length`).
    pub logical_bytes: u64,
    /// `tail_chunk · 2^32 + tail_offset`: how far the chunk files have grown.
    pub chunk_bytes: u64,
    /// `chunk_bytes − live_bytes`.
    pub reclaimable: u64,
}

/// The usage of several stores together: every field summed.
impl std::iter::Sum for Stats {
    fn sum<I: Iterator<Item = Stats>>(iter: I) -> Stats {
        iter.fold(Stats::default(), |t, s| Stats {
            records: t.records + s.records,
            live_bytes: t.live_bytes + s.live_bytes,
            logical_bytes: t.logical_bytes + s.logical_bytes,
            chunk_bytes: t.chunk_bytes + s.chunk_bytes,
            reclaimable: t.reclaimable + s.reclaimable,
        })
    }
}

impl Stats {
    /// Usage of a store with `header`, from its live entries.
    pub fn from_entries(header: &Header, entries: impl IntoIterator<Item = RecordLoc>) -> Stats {
        let (live, logical) = entries
            .into_iter()
            .fold((0, 0), |(p, l), loc| (p + u64::from(loc.phys_length), l + u64::from(loc.logic_length)));
        Stats::from_sums(header, live, logical)
    }

    /// Usage of a store with `header` whose live entries sum to `live_bytes` stored and
    /// `logical_bytes` decoded bytes (for front ends that read the table in parts).
    pub fn from_sums(header: &Header, live_bytes: u64, logical_bytes: u64) -> Stats {
        let chunk_bytes = header.chunk_bytes();
        Stats {
            records: u64::from(header.length),
            live_bytes,
            logical_bytes,
            chunk_bytes,
            reclaimable: chunk_bytes.saturating_sub(live_bytes),
        }
    }
}

/// The bytes of store file `name` (of apparent size `size`) that hold data for a store with
/// `header`: the header and live table of `meta.zr`, the written part of each chunk file
/// (whole for chunks before the tail chunk, up to the tail offset in it, none after), the
/// header and live records' slots of `checksums.lx`, all of any other file. Writers preallocate
/// `meta.zr`, chunks and `checksums.lx` as sparse files, so this, not the apparent size, is what
/// a store holds; never more than `size`.
pub fn file_used(name: &str, size: u64, header: &Header) -> u64 {
    let held = if name == META_FILE {
        entry_offset(u64::from(header.length))
    } else if name == crate::names::CHECKSUM_FILE {
        crate::checksum::slot_offset(u64::from(header.length))
    } else if let Some(id) = chunk_id(name) {
        match id.cmp(&header.tail_chunk) {
            std::cmp::Ordering::Less => CHUNK_SIZE,
            std::cmp::Ordering::Equal => u64::from(header.tail_offset),
            std::cmp::Ordering::Greater => 0,
        }
    } else {
        size
    };
    held.min(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_live_entries() {
        let header = Header { tail_offset: 100, length: 2, ..Header::EMPTY };
        let loc = |p, l| RecordLoc { phys_length: p, logic_length: l, ..RecordLoc::default() };
        let s = Stats::from_entries(&header, [loc(10, 40), loc(30, 30)]);
        assert_eq!((s.live_bytes, s.logical_bytes, s.chunk_bytes, s.reclaimable), (40, 70, 100, 60));
    }

    #[test]
    fn the_bytes_used_of_each_file() {
        let header = Header { tail_chunk: 1, tail_offset: 100, length: 3, ..Header::EMPTY };
        assert_eq!(file_used("meta.zr", 1 << 28, &header), 16 + 3 * 16);
        assert_eq!(file_used("meta.zr", 20, &header), 20, "never more than the file");
        assert_eq!(file_used("0.zr", 1 << 33, &header), CHUNK_SIZE);
        assert_eq!(file_used("1.zr", CHUNK_SIZE, &header), 100);
        assert_eq!(file_used("2.zr", 4096, &header), 0);
        assert_eq!(file_used("schema.msgpack", 78, &header), 78);
        let n = u64::from(header.length);
        assert_eq!(file_used("checksums.lx", crate::checksum::SIDECAR_FULL_SIZE, &header), 128 + 24 * n);
        assert_eq!(file_used("checksums.lx", 100, &header), 100, "a cut sidecar: what it holds");
    }
}
