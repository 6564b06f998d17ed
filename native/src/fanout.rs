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
//! A helper that finished does not go back to sleep at once: it *lingers*, spinning for a short
//! while ([`linger`], `LOADERX_LINGER_US`, 100 µs by default) on a one-slot offer. A caller that
//! sees a lingering helper offers its gate there instead of spawning a pool job, so back-to-back
//! batches (a training loop's gathers) are split from their first block. On a VM a pool thread
//! idle for 0.1 ms takes about 0.1 ms to wake (`native/examples/wake_probe.rs`), as long as a
//! 2 MiB gather, so without lingering such a batch runs on one thread. The cost is at most one
//! linger of spinning per helper after the last batch of a burst.
//!
//! Invariants: every block runs at most once, and exactly once unless a block failed; after the
//! first error no new block starts, and that error is returned; `for_each_block` does not return
//! (nor unwind) while a helper can still reach the blocks or `f`.
#![allow(unsafe_code)]

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, OnceLock};
use std::time::{Duration, Instant};

use crate::process::{self, PerProcess};
use crate::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
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
    let here = at_hand();
    let offered = offer(here, &gate);
    for _ in usize::from(offered.is_some())..helpers {
        let gate = Arc::clone(&gate);
        process::spawn(move || {
            help(&gate);
            drop(gate);
            linger();
        });
    }
    {
        let _close = CloseOnDrop(&gate);
        drain();
    }
    if let Some(raw) = offered {
        withdraw(here, raw);
    }
    if let Some(payload) = sync::lock(&gate.panic).take() {
        panic::resume_unwind(payload);
    }
    sync::into_inner(error).map_or(Ok(()), Err)
}

/// Runs the caller's blocks from a pool thread, if the caller has not finished.
fn help(gate: &Gate) {
    if gate.enter() {
        // SAFETY: entered, so the caller is still inside `for_each_block` (see `work`).
        let run = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*gate.work)() }));
        if let Err(payload) = run {
            sync::lock(&gate.panic).get_or_insert(payload);
        }
        gate.leave();
    }
}

/// This process's lingering helpers and batches in flight. A forked child starts with none
/// ([`PerProcess`]): the parent's helpers and batches ran on threads the child lacks. An offer
/// the parent had made stays the parent's (leaked with the rest, never freed in the child).
#[derive(Default)]
struct AtHand {
    /// The gate offered to a lingering helper: null, or one strong count of an `Arc<Gate>` (from
    /// `Arc::into_raw`), owned by whoever swaps it out. One slot: a caller whose offer finds the
    /// slot taken spawns pool jobs as usual.
    offer: AtomicPtr<Gate>,
    /// Helpers spinning in [`linger`] right now.
    lingering: AtomicUsize,
    /// Batches running in this process right now.
    active: AtomicUsize,
}

fn at_hand() -> &'static AtHand {
    static AT_HAND: PerProcess<AtHand> = PerProcess::new();
    AT_HAND.get_or_init(AtHand::default)
}

/// Offers taken by a lingering helper (for tests and probes).
static TAKEN: AtomicUsize = AtomicUsize::new(0);

/// How long a helper spins for the next batch, from `LOADERX_LINGER_US` (0 turns lingering off).
fn linger_for() -> Duration {
    static LINGER: OnceLock<Duration> = OnceLock::new();
    *LINGER.get_or_init(|| {
        let micros = std::env::var("LOADERX_LINGER_US").ok().and_then(|v| v.trim().parse().ok());
        Duration::from_micros(micros.unwrap_or(100))
    })
}

/// Counts a batch in [`AtHand::active`] while it lives, and notes when it ended (see
/// [`helper_at_hand`]).
pub(crate) struct Active {
    /// Gathers that were running when this one started.
    pub(crate) others: usize,
    here: &'static AtHand,
}

impl Active {
    pub(crate) fn enter() -> Active {
        let here = at_hand();
        Active { others: here.active.fetch_add(1, Ordering::Relaxed), here }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        batch_ended();
        self.here.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// When the last batch ended, in nanoseconds since [`epoch`] (0: none yet).
static LAST_END: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_nanos() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// Notes that a batch (split or not) has just ended, for [`helper_at_hand`].
fn batch_ended() {
    LAST_END.store(now_nanos(), Ordering::Relaxed);
}

/// Whether a helper can join a batch for little more than a compare-and-swap: one is lingering
/// now, or the last batch ended less than a linger ago, so batches are coming back to back and a
/// helper started now lingers for the next ones. Never, with lingering off.
pub(crate) fn helper_at_hand() -> bool {
    let linger = linger_for();
    if linger.is_zero() {
        return false;
    }
    if at_hand().lingering.load(Ordering::Relaxed) > 0 {
        return true;
    }
    ended_within(LAST_END.load(Ordering::Relaxed), now_nanos(), linger)
}

/// Whether a batch that ended at `last` (0: none yet) ended less than `linger` before `now`.
fn ended_within(last: u64, now: u64, linger: Duration) -> bool {
    last != 0 && u128::from(now.saturating_sub(last)) < linger.as_nanos()
}

/// Offers `gate` to a lingering helper; returns the offered pointer, for [`withdraw`].
///
/// `lingering` and `offer` are both `SeqCst`, against [`linger`]'s exit: either this call sees
/// the helper still lingering, or the helper's last look sees this offer.
fn offer(here: &AtHand, gate: &Arc<Gate>) -> Option<*mut Gate> {
    if here.lingering.load(Ordering::SeqCst) == 0 {
        return None;
    }
    let raw = Arc::into_raw(Arc::clone(gate)).cast_mut();
    match here.offer.compare_exchange(std::ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => Some(raw),
        Err(_) => {
            // SAFETY: `raw` came from `Arc::into_raw` just above and was never published.
            drop(unsafe { Arc::from_raw(raw) });
            None
        }
    }
}

/// Takes back an offer nobody took. The slot still holding `raw` keeps that gate alive, so no
/// other gate can have the same address meanwhile: the exchange cannot take someone else's.
fn withdraw(here: &AtHand, raw: *mut Gate) {
    if here.offer.compare_exchange(raw, std::ptr::null_mut(), Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        // SAFETY: the exchange moved the slot's strong count (from `offer`) to us.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// Takes the offered gate, if any.
fn take(here: &AtHand) -> Option<Arc<Gate>> {
    let raw = here.offer.swap(std::ptr::null_mut(), Ordering::SeqCst);
    // SAFETY: a non-null slot holds one strong count from `offer`; the swap moved it to us.
    (!raw.is_null()).then(|| unsafe { Arc::from_raw(raw) })
}

/// Spins on [`AtHand::offer`] for up to [`linger_for`], helping every batch offered meanwhile.
fn linger() {
    let linger = linger_for();
    if linger.is_zero() {
        return;
    }
    let here = at_hand();
    here.lingering.fetch_add(1, Ordering::SeqCst);
    let mut since = Instant::now();
    loop {
        for _ in 0..64 {
            if !here.offer.load(Ordering::Relaxed).is_null() {
                break;
            }
            std::hint::spin_loop();
        }
        if let Some(gate) = take(here) {
            TAKEN.fetch_add(1, Ordering::Relaxed);
            help(&gate);
            since = Instant::now();
        } else if since.elapsed() >= linger
            || here.active.load(Ordering::Relaxed) >= rayon::current_num_threads()
        {
            // Time is up, or gathers on every core run alone and offer nothing (a loader's
            // workers): the core is theirs.
            break;
        }
    }
    here.lingering.fetch_sub(1, Ordering::SeqCst);
    // An offer made before the caller saw the count drop is still ours to serve.
    if let Some(gate) = take(here) {
        TAKEN.fetch_add(1, Ordering::Relaxed);
        help(&gate);
    }
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

    /// Back-to-back batches reach a helper that lingers after the one before, through the
    /// offer slot rather than a fresh pool job. Other tests running at the same time can hold
    /// every core's worth of batches for a while (a lingerer then leaves at once), so it runs
    /// batches until both have been seen, for at most 20 s.
    #[test]
    fn a_lingering_helper_takes_back_to_back_batches() {
        let before = TAKEN.load(Ordering::Relaxed);
        let caller = std::thread::current().id();
        let mut helped = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while (helped == 0 || TAKEN.load(Ordering::Relaxed) == before) && Instant::now() < deadline {
            let others = AtomicUsize::new(0);
            for_each_block((0..8).collect(), 1, |_: usize| {
                if std::thread::current().id() != caller {
                    others.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_micros(50));
                Ok::<(), ()>(())
            })
            .unwrap();
            helped += usize::from(others.load(Ordering::Relaxed) > 0);
        }
        assert!(helped > 0, "no batch was helped");
        assert!(TAKEN.load(Ordering::Relaxed) > before, "no batch went through the offer slot");
    }

    /// A batch that ends makes the next one, right after it, find a helper at hand. The thread
    /// may be descheduled for longer than a linger between the two calls (it was under wine on a
    /// loaded machine), so it gets a few tries; with lingering off it never finds one.
    #[test]
    fn a_batch_right_after_another_finds_a_helper_at_hand() {
        let found = (0..50).any(|_| {
            batch_ended();
            helper_at_hand()
        });
        assert_eq!(found, !linger_for().is_zero());
    }

    /// The window is exactly one linger long, and no batch yet means no helper.
    #[test]
    fn only_a_batch_ended_less_than_a_linger_ago_counts() {
        let linger = Duration::from_micros(100);
        assert!(ended_within(1_000, 1_000, linger));
        assert!(ended_within(1_000, 100_999, linger));
        assert!(!ended_within(1_000, 101_000, linger));
        assert!(!ended_within(0, 50, linger), "no batch has ended yet");
        assert!(!ended_within(1_000, 1_001, Duration::ZERO));
        // A clock read before the store (another thread's) is not in the future.
        assert!(ended_within(2_000, 1_000, linger));
    }

    /// A child forked while a helper lingers (and a batch runs on another thread) starts with
    /// neither: the helper's thread does not exist there, so it must not wait for its offers.
    #[cfg(unix)]
    #[test]
    fn a_forked_child_starts_with_no_helpers_and_no_batches() {
        let _active = Active::enter();
        for _ in 0..1000 {
            for_each_block((0..8).collect(), 1, |_: usize| {
                std::thread::sleep(Duration::from_micros(20));
                Ok::<(), ()>(())
            })
            .unwrap();
            if at_hand().lingering.load(Ordering::SeqCst) == 0 {
                continue;
            }
            // SAFETY: the child loads atomics, allocates its own counts (glibc's at-fork handlers
            // make `malloc` safe there) and calls `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let here = at_hand();
                let clean = here.lingering.load(Ordering::SeqCst) == 0
                    && here.active.load(Ordering::SeqCst) == 0
                    && here.offer.load(Ordering::SeqCst).is_null();
                // SAFETY: ends the child at once, running nothing of the parent's.
                unsafe { libc::_exit(if clean { 0 } else { 1 }) };
            }
            assert!(pid > 0, "fork failed");
            let mut status = 0;
            // SAFETY: waits for the child just forked; `status` is a valid out-pointer.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child inherited counts");
            return;
        }
        panic!("no helper ever lingered");
    }

    /// Several callers at once race on the one offer slot: every block still runs once, and no
    /// offer is taken twice.
    #[test]
    fn racing_callers_share_the_offer_slot_safely() {
        std::thread::scope(|s| {
            for t in 0..3 {
                s.spawn(move || {
                    for round in 0..300 {
                        let n = 1 + (round * 7 + t) % 23;
                        let counts: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                        for_each_block((0..n).collect(), 2, |i: usize| {
                            counts[i].fetch_add(1, Ordering::Relaxed);
                            Ok::<(), ()>(())
                        })
                        .unwrap();
                        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
                    }
                });
            }
        });
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
