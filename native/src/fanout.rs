//! Runs the blocks of one batch on the calling thread and the rayon pool together.
//!
//! A batch call from outside the pool would normally hand all its work to the pool and sleep.
//! When the pool's threads are idle they are asleep too, and waking them costs tens of
//! microseconds (much more on a VM), which is most of a 3 MiB raw gather. Here the caller starts
//! on the blocks at once, and pool helpers join as they wake. So an idle pool costs nothing but
//! the parallel speed-up.
//!
//! Invariants: every block runs at most once, and exactly once unless a block failed; after the
//! first error no new block starts, and that error is returned.

use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::{self, Mutex};

/// Runs `f` on every block, on this thread and on up to `helpers` pool threads.
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
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| drain());
        }
        drain();
    });
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
}
