//! Locks and atomics, in one place: every other module takes them from here, so a
//! single-threaded build or a model checker (loom) can swap them without touching the engine.
//!
//! Poisoning is handled once, here. A thread that panics while holding one of the crate's locks
//! cannot leave the guarded value half-updated, because every write under these locks replaces a
//! whole value (a mapping, a slot of the chunk list, the dictionary, the writer's bookkeeping)
//! or is a positional write whose safety does not depend on the lock (see `shared.rs`). So a
//! poisoned lock is still safe to use, and these helpers take it as if nothing happened.

pub(crate) use std::sync::atomic;
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shared access to `lock`, ignoring poison (see the module docs).
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Exclusive access to `lock`, ignoring poison (see the module docs).
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// `mutex`, locked, ignoring poison (see the module docs).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `mutex`'s value, ignoring poison (see the module docs).
pub(crate) fn into_inner<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_still_usable() {
        let lock = Arc::new(RwLock::new(1));
        let mutex = Arc::new(Mutex::new(2));
        let (l, m) = (lock.clone(), mutex.clone());
        let _ = std::thread::spawn(move || {
            let _w = write(&l);
            let _g = super::lock(&m);
            panic!("poison both");
        })
        .join();
        assert!(lock.is_poisoned() && mutex.is_poisoned());
        *write(&lock) += 1;
        assert_eq!(*read(&lock), 2);
        *super::lock(&mutex) += 1;
        assert_eq!(into_inner(Arc::try_unwrap(mutex).unwrap()), 3);
    }
}
