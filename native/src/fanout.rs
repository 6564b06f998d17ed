//! Runs the blocks of one batch on the calling thread and the rayon pool together.
//!
//! A batch call from outside the pool would normally hand all its work to the pool and sleep.
//! When the pool's threads are idle they are asleep too, and waking them costs tens of
//! microseconds (much more on a VM), which is most of a small raw gather. Here the caller starts
//! on the blocks at once, and pool helpers join as they wake. When the caller has run out of
//! blocks it closes the gate: a helper that has not entered by then never touches the batch,
//! and the caller waits only for helpers already inside, each for at most one block. So a batch
//! never waits for a thread to wake up: an idle pool costs nothing but the parallel speed-up,
//! and a small batch costs what one thread costs.
//!
//! Invariants: every block runs at most once, and exactly once unless a block failed; after the
//! first error no new block starts, and that error is returned; `for_each_block` does not return
//! (nor unwind) while a helper can still reach the blocks or `f`.
#![allow(unsafe_code)]

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Condvar;

use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{self, Arc, Mutex};

/// Set in [`Gate::state`] once the caller has finished; no helper enters after that.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// What helpers share with the caller of one [`for_each_block`]. Helper jobs outlive the call
/// (they may start long after it returned), so this is reference-counted and `'static`; the
/// borrowed work is reached through `work` only while the gate holds it open.
struct Gate {
    /// [`CLOSED`], plus the number of helpers inside `work`.
    state: AtomicUsize,
    /// Signalled when the last helper inside leaves a closed gate.
    idle: Mutex<()>,
    left: Condvar,
    /// The caller's drain loop, with its lifetime erased.
    work: *const (dyn Fn() + Sync),
    /// A helper's panic, to resume on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `work` points at a `Sync` closure, so calling it from any thread is sound; the pointer
// is only dereferenced between a successful `enter` and the matching `leave`, and `for_each_block`
// keeps the closure alive until every such helper has left (see `close_and_wait`).
unsafe impl Send for Gate {}
// SAFETY: as for `Send`: shared access only calls the `Sync` closure, inside enter/leave.
unsafe impl Sync for Gate {}

impl Gate {
    /// Counts a helper in, unless the caller has finished.
    fn enter(&self) -> bool {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & CLOSED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(state, state + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    fn leave(&self) {
        if self.state.fetch_sub(1, Ordering::AcqRel) == CLOSED + 1 {
            let _idle = sync::lock(&self.idle);
            self.left.notify_all();
        }
    }

    /// Closes the gate and waits until no helper is inside.
    fn close_and_wait(&self) {
        if self.state.fetch_or(CLOSED, Ordering::AcqRel) == 0 {
            return;
        }
        let mut idle = sync::lock(&self.idle);
        while self.state.load(Ordering::Acquire) != CLOSED {
            idle = self.left.wait(idle).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Closes the gate when dropped, also while unwinding from a panic in the caller's own blocks.
struct CloseOnDrop<'g>(&'g Gate);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close_and_wait();
    }
}

/// Runs `f` on every block, on this thread and on up to `helpers` pool threads that are awake
/// in time to help.
pub(crate) fn for_each_block<T, E>(
    blocks: Vec<T>,
    helpers: usize,
    f: impl Fn(T) -> Result<(), E> + Sync,
) -> Result<(), E>
where
    T: Send,
    E: Send,
{
    let slots: Vec<Mutex<Option<T>>> = blocks.into_iter().map(|b| Mutex::new(Some(b))).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let error: Mutex<Option<E>> = Mutex::new(None);
    let drain = || {
        while !stop.load(Ordering::Relaxed) {
            let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
            // Each index is claimed once, so the slot is never contended.
            let block = sync::lock(slot).take();
            if let Some(Err(e)) = block.map(&f) {
                stop.store(true, Ordering::Relaxed);
                sync::lock(&error).get_or_insert(e);
            }
        }
    };
    let helpers = helpers.min(slots.len().saturating_sub(1));
    if helpers == 0 {
        drain();
        return sync::into_inner(error).map_or(Ok(()), Err);
    }
    let work: &(dyn Fn() + Sync + '_) = &drain;
    // SAFETY: only the lifetime changes (same fat pointer). `CloseOnDrop` below keeps this frame,
    // and so `drain` and everything it borrows, alive until no helper is inside the gate, and a
    // helper dereferences `work` only from inside it.
    let work: *const (dyn Fn() + Sync + 'static) =
        unsafe { std::mem::transmute(work as *const (dyn Fn() + Sync + '_)) };
    let gate = Arc::new(Gate {
        state: AtomicUsize::new(0),
        idle: Mutex::new(()),
        left: Condvar::new(),
        work,
        panic: Mutex::new(None),
    });
    for _ in 0..helpers {
        let gate = Arc::clone(&gate);
        rayon::spawn(move || {
            if gate.enter() {
                // SAFETY: entered, so the caller is still inside `for_each_block` (see `work`).
                let run = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*gate.work)() }));
                if let Err(payload) = run {
                    sync::lock(&gate.panic).get_or_insert(payload);
                }
                gate.leave();
            }
        });
    }
    {
        let _close = CloseOnDrop(&gate);
        drain();
    }
    if let Some(payload) = sync::lock(&gate.panic).take() {
        panic::resume_unwind(payload);
    }
    sync::into_inner(error).map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_runs_once() {
        let counts: Vec<AtomicUsize> = (0..50).map(|_| AtomicUsize::new(0)).collect();
        let blocks: Vec<usize> = (0..50).collect();
        for_each_block(blocks, 3, |i| {
            counts[i].fetch_add(1, Ordering::Relaxed);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn an_error_is_returned_and_stops_new_blocks() {
        let ran = AtomicUsize::new(0);
        let result = for_each_block((0..1000).collect(), 0, |i: usize| {
            ran.fetch_add(1, Ordering::Relaxed);
            if i == 3 {
                Err(i)
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err(3));
        assert_eq!(ran.load(Ordering::Relaxed), 4, "no block starts after the error (single thread)");
        assert_eq!(for_each_block(Vec::<usize>::new(), 2, |_| Err::<(), ()>(())), Ok(()));
    }

    /// Every thread of the global pool is busy, so none can help: the caller runs every block
    /// itself and returns without waiting for them (the helpers' late jobs find the gate closed).
    /// Before the gate, this call waited for the pool; a watchdog frees the pool after 10 s so
    /// that a regression fails instead of hanging.
    #[test]
    fn a_busy_pool_never_holds_up_the_batch() {
        let threads = rayon::current_num_threads();
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let blocked = Arc::new(Mutex::new(blocked));
        let busy = Arc::new(std::sync::Barrier::new(threads + 1));
        for _ in 0..threads {
            let (busy, blocked) = (Arc::clone(&busy), Arc::clone(&blocked));
            rayon::spawn(move || {
                busy.wait();
                let _ = sync::lock(&blocked).recv_timeout(std::time::Duration::from_secs(10));
            });
        }
        busy.wait();
        let caller = std::thread::current().id();
        let started = std::time::Instant::now();
        let on_caller = AtomicUsize::new(0);
        for_each_block((0..64).collect(), threads, |_: usize| {
            if std::thread::current().id() == caller {
                on_caller.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), ()>(())
        })
        .unwrap();
        let waited = started.elapsed();
        for _ in 0..threads {
            release.send(()).unwrap();
        }
        assert_eq!(on_caller.load(Ordering::Relaxed), 64, "every block ran on the caller");
        assert!(waited < std::time::Duration::from_secs(5), "the caller waited {waited:?} for a busy pool");
    }

    #[test]
    fn a_helper_panic_reaches_the_caller() {
        let caller = std::thread::current().id();
        let panicked = AtomicBool::new(false);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            for_each_block((0..5_000).collect(), 1, |i: usize| {
                if std::thread::current().id() != caller {
                    panicked.store(true, Ordering::Relaxed);
                    panic!("helper block {i}");
                }
                if !panicked.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Ok::<(), ()>(())
            })
        }));
        let payload = result.expect_err("the helper's panic is resumed on the caller");
        let message = payload.downcast_ref::<String>().map(String::as_str).unwrap_or("");
        assert!(message.starts_with("helper block"), "{message}");
    }
}
