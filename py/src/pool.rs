//! Output arrays whose memory is recycled across batches.
//!
//! A fresh 32 MiB NumPy array costs the kernel 8,192 page faults and 32 MiB of zeroing, which is
//! more than gathering 32 MiB from a warm store. A loader asks for the same batch size over and
//! over, so a batch's memory goes back to a small pool when its array (and every view of it) is
//! garbage-collected, and the next batch of that size reuses it, already faulted in.
//!
//! Invariants: a buffer is in the pool only while no array refers to it; the pool holds at most
//! `MAX_BUFFERS` buffers and `MAX_BYTES` bytes; small buffers (which malloc already recycles) are
//! not pooled. The pool is only ever `try_lock`ed, so a lock inherited mid-use across `fork()`
//! costs a fresh allocation, never a deadlock.
#![allow(unsafe_code)]

use std::sync::Mutex;

use numpy::ndarray::Array1;
use numpy::PyArray1;
use pyo3::prelude::*;

const MIN_POOLED: usize = 1 << 20;
const MAX_BUFFERS: usize = 8;
const MAX_BYTES: usize = 512 << 20;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of exactly `len` bytes, recycled when one is free. Its contents are unspecified.
pub(crate) fn take(len: usize) -> Vec<u8> {
    if len >= MIN_POOLED {
        if let Ok(mut pool) = POOL.try_lock() {
            if let Some(i) = pool.iter().position(|v| v.len() == len) {
                return pool.swap_remove(i);
            }
        }
    }
    vec![0u8; len]
}

fn give(buffer: Vec<u8>) {
    if buffer.len() < MIN_POOLED {
        return;
    }
    if let Ok(mut pool) = POOL.try_lock() {
        let held: usize = pool.iter().map(Vec::len).sum();
        if pool.len() < MAX_BUFFERS && held + buffer.len() <= MAX_BYTES {
            pool.push(buffer);
        }
    }
}

/// Owns the memory of an array handed to Python; returns it to the pool when Python drops it.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct PooledBytes {
    array: Array1<u8>,
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        let (buffer, _) = std::mem::take(&mut self.array).into_raw_vec_and_offset();
        give(buffer);
    }
}

/// Wraps `buffer` as a 1-D uint8 NumPy array without copying.
pub(crate) fn into_array(py: Python<'_>, buffer: Vec<u8>) -> PyResult<Bound<'_, PyArray1<u8>>> {
    let owner = Bound::new(py, PooledBytes { array: Array1::from_vec(buffer) })?;
    let array = &owner.get().array;
    // SAFETY: `owner` becomes the NumPy array's base object, so it lives as long as the array
    // and any view of it. Its `array` is never modified or reallocated while it lives (the
    // class is frozen and has no methods), so the memory the NumPy array points to stays valid.
    Ok(unsafe { PyArray1::borrow_from_array(array, owner.clone().into_any()) })
}
