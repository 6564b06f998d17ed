//! Output arrays whose memory is recycled across batches.
//!
//! A fresh 32 MiB NumPy array costs the kernel 8,192 page faults and 32 MiB of zeroing, which is
//! more than gathering 32 MiB from a warm store. A loader asks for the same batch size over and
//! over, so a batch's memory goes back to a small pool when its array (and every view of it) is
//! garbage-collected, and the next batch of that size reuses it, already faulted in.
//!
//! Buffers are page-aligned: a record copied from a page-aligned place in a chunk file then lands
//! at the same offset within a page, which is the fastest case for `memcpy` (see
//! `loaderx_core::codec::copy_record`).
//!
//! Invariants: a buffer is in the pool only while no array refers to it; the pool holds at most
//! `MAX_BUFFERS` buffers and `MAX_BYTES` bytes of capacity, evicting the buffers given back
//! longest ago to make room for a new one. Small buffers are pooled too: a fresh one costs
//! `calloc`'s zeroing, which showed in the profile of 16-record gathers. The pool is per process
//! (`loaderx_native::process::PerProcess`): a forked child starts with an empty one and never
//! touches the parent's, whose lock a parent thread may have held at the fork. The pool is only
//! ever `try_lock`ed, so a busy pool costs a fresh allocation, never a wait. A buffer's capacity
//! never changes; a recycled one serves any `len` up to it. An array of the parent's that a child
//! drops gives its buffer (the child's copy) to the child's pool.
#![allow(unsafe_code)]

use std::sync::Mutex;

use loaderx_native::process::PerProcess;

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::prelude::*;

const MAX_BUFFERS: usize = 8;
const MAX_BYTES: usize = 512 << 20;

const PAGE: usize = 4096;

/// `len` usable bytes starting at a page boundary inside `bytes`.
pub(crate) struct Buffer {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
    /// At least `len`; `start + capacity <= bytes.len()`.
    capacity: usize,
}

impl Buffer {
    /// `len` usable bytes, with room for `capacity` (at least `len`).
    fn new(len: usize, capacity: usize) -> Buffer {
        let capacity = capacity.max(len);
        let bytes = vec![0u8; capacity + PAGE];
        let start = bytes.as_ptr().align_offset(PAGE).min(PAGE);
        Buffer { bytes, start, len, capacity }
    }

    /// The usable bytes.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
}

/// This process's free buffers.
fn pool() -> &'static Mutex<Vec<Buffer>> {
    static POOL: PerProcess<Mutex<Vec<Buffer>>> = PerProcess::new();
    POOL.get_or_init(|| Mutex::new(Vec::new()))
}

/// A page-aligned buffer of exactly `len` bytes, recycled when one is free. Its contents are
/// unspecified.
pub(crate) fn take(len: usize) -> Buffer {
    reuse(len, |capacity| capacity == len).unwrap_or_else(|| Buffer::new(len, len))
}

/// Like [`take`], for batches whose size varies from call to call (ragged records): a free
/// buffer with room for `len` bytes and at most twice that is recycled, and a fresh one gets a
/// quarter more room than asked, so the next, slightly larger batch finds it too.
pub(crate) fn take_varying(len: usize) -> Buffer {
    reuse(len, |capacity| capacity >= len && capacity / 2 <= len)
        .unwrap_or_else(|| Buffer::new(len, len.saturating_add(len / 4)))
}

/// The free buffer given back last whose capacity `fits`, set to `len` usable bytes.
fn reuse(len: usize, fits: impl Fn(usize) -> bool) -> Option<Buffer> {
    let mut pool = pool().try_lock().ok()?;
    let i = pool.iter().rposition(|b| fits(b.capacity))?;
    let mut buffer = pool.remove(i);
    buffer.len = len;
    Some(buffer)
}

fn give(buffer: Buffer) {
    let size = buffer.capacity;
    if size > MAX_BYTES {
        return;
    }
    if let Ok(mut pool) = pool().try_lock() {
        // Oldest first out: the sizes a loop uses now come back soonest. (Without eviction, a
        // pool full of one run's sizes made every later, larger batch fault in fresh memory.)
        let mut held: usize = pool.iter().map(|b| b.capacity).sum();
        while !pool.is_empty() && (pool.len() >= MAX_BUFFERS || held + size > MAX_BYTES) {
            held -= pool.remove(0).capacity;
        }
        pool.push(buffer);
    }
}

/// Owns the memory of an array handed to Python; returns it to the pool when Python drops it.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct PooledBytes {
    buffer: Option<Buffer>,
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            give(buffer);
        }
    }
}

/// Wraps `buffer` as a 1-D uint8 NumPy array without copying.
pub(crate) fn into_array(py: Python<'_>, buffer: Buffer) -> PyResult<Bound<'_, PyArray1<u8>>> {
    let owner = Bound::new(py, PooledBytes { buffer: Some(buffer) })?;
    let bytes = owner.get().buffer.as_ref().map_or(&[][..], Buffer::as_slice);
    let view = ArrayView1::from(bytes);
    // SAFETY: `owner` becomes the NumPy array's base object, so it lives as long as the array
    // and any view of it. Its buffer is never modified, moved or reallocated while it lives (the
    // class is frozen and has no methods; only `drop` takes the buffer), so the memory the NumPy
    // array points to stays valid.
    Ok(unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) })
}
