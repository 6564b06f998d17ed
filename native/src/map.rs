//! Memory maps of `meta.zr` and of chunk files. One of the few modules allowed `unsafe` code
//! (docs/design.md, "Layers", lists them).
//!
//! Invariants:
//! * A mapping never extends past the end of its file as the file was when mapped, and every
//!   access is bounds-checked against the mapping's length, so no access touches bytes that are
//!   not in the file (no SIGBUS from this process's own view).
//! * `meta.zr` is mapped `MAP_SHARED` and accessed only through raw pointers and atomics, never
//!   through Rust references, because other handles and processes may write it concurrently.
//!   The header fields a reader may see change (`tail_chunk`, `tail_offset`, `length`) are
//!   accessed atomically; `length` is published with `Release` after the entries below it are
//!   written, and read with `Acquire`.
//! * A table entry at index `i` is written only while `i >= length` (append) or while the caller
//!   holds exclusive access to the store (delete, compact), so readers never see a torn entry.
//!   That is why the writing methods take `&self`: the lock around a handle's `MetaMap`
//!   (`shared.rs`) guards which mapping is current, not its bytes.
//! * Chunk mappings are read-only. Records below the published length are immutable until a
//!   delete or compact, which run with exclusive access.
//!
//! * Cache blocks (`cache.rs`) are mapped read-only whole; a block file is never written after it
//!   is renamed into place, so its bytes never change while mapped.
//!
//! What this module cannot prevent: another process truncating a mapped file under us. That is
//! outside the store's contract (only loaderx writers touch a store, and they never shrink files).
#![allow(unsafe_code)]

use std::fs::File;

use loaderx_core::format::{entry_offset, Header, RecordLoc, Tail, ENTRY_SIZE, HEADER_SIZE};
use memmap2::{Mmap, MmapOptions, MmapRaw};

use crate::sync::atomic::{AtomicU16, AtomicU32, Ordering};

/// A mapping of `meta.zr`: header plus record table.
#[derive(Debug)]
pub(crate) struct MetaMap {
    map: MmapRaw,
    len: u64,
    writable: bool,
}

impl MetaMap {
    /// Maps the whole of `file` (at least [`HEADER_SIZE`] bytes, which the caller checked).
    pub(crate) fn new(file: &File, len: u64, writable: bool) -> std::io::Result<MetaMap> {
        debug_assert!(len >= HEADER_SIZE);
        let mut opts = MmapOptions::new();
        opts.len(usize::try_from(len).map_err(std::io::Error::other)?);
        let map = if writable { opts.map_raw(file)? } else { opts.map_raw_read_only(file)? };
        Ok(MetaMap { map, len, writable })
    }

    fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset + 4 <= HEADER_SIZE as usize && offset.is_multiple_of(4));
        // SAFETY: the map holds at least HEADER_SIZE bytes and is page-aligned, so `offset`
        // (4 or 8 or 12) is in bounds and 4-aligned. The mapping lives as long as `&self`, and
        // all accesses to these header words, from any handle, are atomic.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn atomic_tail_chunk(&self) -> &AtomicU16 {
        // SAFETY: as in `atomic_u32`; offset 6 is 2-aligned and inside the header.
        unsafe { &*self.map.as_ptr().add(6).cast::<AtomicU16>() }
    }

    /// A snapshot of the header. Magic and version never change after creation.
    pub(crate) fn header(&self) -> Header {
        let mut head = [0u8; 6];
        // SAFETY: the first 6 bytes are in bounds and are only written when the store is created.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr(), head.as_mut_ptr(), 6) };
        Header {
            magic: [head[0], head[1], head[2], head[3]],
            version: u16::from_le_bytes([head[4], head[5]]),
            tail_chunk: self.atomic_tail_chunk().load(Ordering::Acquire),
            tail_offset: self.atomic_u32(8).load(Ordering::Acquire),
            length: self.length(),
        }
    }

    /// The published number of records.
    pub(crate) fn length(&self) -> u32 {
        self.atomic_u32(12).load(Ordering::Acquire)
    }

    /// Publishes a new length. Entries below it must already be written.
    pub(crate) fn publish_length(&self, length: u32) {
        assert!(self.writable, "write to a read-only meta.zr mapping");
        self.atomic_u32(12).store(length, Ordering::Release);
    }

    /// Sets the append frontier.
    pub(crate) fn set_tail(&self, tail: Tail) {
        assert!(self.writable, "write to a read-only meta.zr mapping");
        self.atomic_tail_chunk().store(tail.chunk, Ordering::Release);
        self.atomic_u32(8).store(tail.offset, Ordering::Release);
    }

    /// Table entry `index`, or `None` if the mapping does not reach it.
    pub(crate) fn entry(&self, index: u64) -> Option<RecordLoc> {
        let at = entry_offset(index);
        if at.checked_add(ENTRY_SIZE)? > self.len {
            return None;
        }
        let mut bytes = [0u8; ENTRY_SIZE as usize];
        // SAFETY: `at + 16 <= len` was checked above, so the 16 bytes are inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(at as usize), bytes.as_mut_ptr(), 16) };
        RecordLoc::read(&bytes)
    }

    /// Reads one byte of each of the entries of `indices` that the mapping reaches, so that
    /// their cache misses overlap: the loads are independent here, while a loop that checks each
    /// entry before it moves on takes them one after another.
    pub(crate) fn touch_entries(&self, indices: &[u64]) {
        let mut seen = 0u8;
        for &index in indices {
            let at = entry_offset(index);
            if at.checked_add(ENTRY_SIZE).is_some_and(|end| end <= self.len) {
                // SAFETY: `at + 16 <= len` was checked just above, so the byte is inside the
                // mapping; as for `entry`, callers pass checked indices (below the length), whose
                // entries no writer changes while readers hold the gate.
                seen ^= unsafe { *self.map.as_ptr().add(at as usize) };
            }
        }
        std::hint::black_box(seen);
    }

    /// Writes table entry `index`. Returns `false` if the mapping does not reach it.
    ///
    /// The caller guarantees no reader can see the entry yet (`index >= length`) or holds
    /// exclusive access to the store.
    pub(crate) fn set_entry(&self, index: u64, loc: &RecordLoc) -> bool {
        assert!(self.writable, "write to a read-only meta.zr mapping");
        let at = entry_offset(index);
        if at.saturating_add(ENTRY_SIZE) > self.len {
            return false;
        }
        let bytes = loc.to_bytes();
        // SAFETY: in bounds (checked above); the mapping is writable (asserted). No reader reads
        // this entry concurrently (caller contract), so the write cannot be observed torn.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.as_mut_ptr().add(at as usize), 16) };
        true
    }

    /// Flushes `[offset, offset + len)` of the mapping to disk (msync).
    pub(crate) fn flush_range(&self, offset: u64, len: u64) -> std::io::Result<()> {
        let end = offset.saturating_add(len).min(self.len);
        if end <= offset {
            return Ok(());
        }
        self.map.flush_range(offset as usize, (end - offset) as usize)
    }
}

/// A read-only mapping of one chunk file, as long as the file was when mapped.
#[derive(Debug)]
pub(crate) struct ChunkMap {
    map: Option<Mmap>,
}

impl ChunkMap {
    /// Maps `file`, which is `len` bytes long.
    pub(crate) fn new(file: &File, len: u64) -> std::io::Result<ChunkMap> {
        if len == 0 {
            return Ok(ChunkMap { map: None });
        }
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        // SAFETY: the mapping is read-only and exactly `len` bytes, the file's current size.
        // Chunk files only grow while a store is open (loaderx writers never shrink them), and
        // the bytes of committed records are not rewritten while readers may read them (delete
        // and compact take exclusive access), so the slice the map hands out stays valid and
        // unchanging for the records a reader is allowed to read.
        let map = unsafe { MmapOptions::new().len(len).map(file)? };
        Ok(ChunkMap { map: Some(map) })
    }

    /// Mapped bytes.
    pub(crate) fn len(&self) -> u64 {
        self.map.as_ref().map_or(0, |m| m.len() as u64)
    }

    /// The bytes `[offset, offset + len)`, or `None` if they are not all mapped.
    pub(crate) fn bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let map = self.map.as_ref()?;
        let start = usize::try_from(offset).ok()?;
        let end = usize::try_from(offset.checked_add(len)?).ok()?;
        map.get(start..end)
    }
}

/// A read-only mapping of a whole remote-cache block file (`cache.rs`), exactly `len` bytes.
#[cfg(feature = "remote")]
pub(crate) fn cache_block(file: &File, len: u64) -> std::io::Result<Mmap> {
    let len = usize::try_from(len).map_err(std::io::Error::other)?;
    // SAFETY: the mapping is read-only and `len` is the file's size, checked by the caller just
    // before. Cache entries are immutable once renamed into place (only a new file replaces an
    // entry, by rename, and nothing truncates one), and an entry unlinked by eviction stays
    // readable while mapped, so the slice never changes or disappears under us.
    unsafe { MmapOptions::new().len(len).map(file) }
}
