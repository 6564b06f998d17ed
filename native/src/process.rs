//! Which process this is, and what a forked child may reuse: the one place that knows `fork()`.
//!
//! Users fork all the time (torch `DataLoader` workers, `multiprocessing` on Linux). A child gets
//! a copy of the parent's memory but only the thread that called `fork()`: every other thread
//! (rayon's pool, the remote runtime's workers, a lingering fan-out helper) does not exist there,
//! and a lock one of them held stays held forever. So whatever involves threads or locks belongs
//! to the process that built it:
//!
//! * [`current`] is this process's id, kept in an atomic so a batch costs no system call. One
//!   at-fork hook, registered once before an id is first kept, clears it in every child (an
//!   atomic store, which is async-signal-safe), and the child asks the system again.
//! * [`PerProcess`] holds a value tagged with the process that built it. Asked in another process
//!   (a child holds the parent's copy), it builds a fresh value there. The remote runtime
//!   (`sources::object`), the fan-out's helper counts (`fanout`), a child's rayon pool (below)
//!   and the Python binding's buffer pool each live in one.
//! * [`run`]: rayon work of this process. The first process that asks runs it on rayon's global
//!   pool; any other process (a forked child, or its child) on a pool of its own, built there
//!   on first use. The gather's fan-out spawns its helpers there too (`spawn`, `threads`).
//! * A [`Store`](crate::Store) or [`Many`](crate::Many) opened before a fork is the parent's:
//!   its locks may be held by threads the child lacks, so a child opens its own (the Python
//!   package does, asking [`forked_since`] through `loaderx._process`).
//!
//! Invariants:
//! * In a child, nothing a [`PerProcess`] inherited is used, dropped or freed: its threads, locks
//!   and half-done updates are the parent's. It is leaked (pages the child never touches cost it
//!   no memory), and the child builds its own value on first use.
//! * Within one process, a value once built stays until its [`PerProcess`] is dropped (never, for
//!   a `static`), so the references handed out stay valid.
//! * Nothing here takes a lock: a child can never wait on a lock some parent thread held.

#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::ptr;
use std::sync::OnceLock;

use rayon::ThreadPool;

use crate::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, Ordering};

/// This process's id, or 0 until it is first asked for (and again in a child after `fork()`).
static PID: AtomicU32 = AtomicU32::new(0);

/// [`forgot_pid`]'s registration: not yet, registered, or refused by the system.
static HOOK: AtomicU8 = AtomicU8::new(UNHOOKED);
const UNHOOKED: u8 = 0;
const HOOKED: u8 = 1;
const REFUSED: u8 = 2;

/// The at-fork hook, run in the child right after `fork()`: only an atomic store.
#[cfg(unix)]
extern "C" fn forgot_pid() {
    PID.store(0, Ordering::Relaxed);
}

/// Registers [`forgot_pid`] once; true when it runs in every later child. No lock and no
/// `Once`: a fork in the middle of a registration must not leave the child waiting. Two threads
/// racing here may both register, which only clears the id twice.
fn hooked() -> bool {
    match HOOK.load(Ordering::Acquire) {
        HOOKED => true,
        REFUSED => false,
        _ => {
            #[cfg(unix)]
            // SAFETY: registers a static function that only stores to an atomic, so it is valid
            // for the life of the process and safe to run in a child after `fork()`.
            let ok = unsafe { libc::pthread_atfork(None, None, Some(forgot_pid)) } == 0;
            // No fork without unix: an id, once kept, stays right.
            #[cfg(not(unix))]
            let ok = true;
            let state = if ok { HOOKED } else { REFUSED };
            let _ = HOOK.compare_exchange(UNHOOKED, state, Ordering::AcqRel, Ordering::Acquire);
            ok
        }
    }
}

/// This process's id (`getpid`), without a system call after the first (it showed in the profile
/// of small gathers). Where the at-fork hook could not be registered, it asks every time.
pub fn current() -> u32 {
    let kept = PID.load(Ordering::Relaxed);
    if kept != 0 {
        return kept;
    }
    let pid = std::process::id();
    // Kept only once the hook is in place, so every child forgets it.
    if hooked() {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// True when this is not process `pid`: a fork happened since `pid` was noted (with
/// [`current`]), so what that process built with threads or locks is not this one's.
pub fn forked_since(pid: u32) -> bool {
    pid != current()
}

/// A value of `T` per process: built on first use in each process, never shared with a child.
///
/// ```
/// use loaderx_native::process::PerProcess;
/// static COUNTER: PerProcess<std::sync::atomic::AtomicU64> = PerProcess::new();
/// let counter = COUNTER.get_or_init(Default::default);
/// assert!(std::ptr::eq(counter, COUNTER.get_or_init(Default::default)));
/// ```
pub struct PerProcess<T> {
    /// Null, or a `Built` from `Box::into_raw`: this process's, or one inherited through `fork()`.
    slot: AtomicPtr<Built<T>>,
    /// Owns a `T` and hands out `&T` to any thread: the thread safety of `OnceLock<T>`.
    _value: PhantomData<OnceLock<T>>,
}

struct Built<T> {
    pid: u32,
    value: T,
}

impl<T> PerProcess<T> {
    pub const fn new() -> PerProcess<T> {
        PerProcess { slot: AtomicPtr::new(ptr::null_mut()), _value: PhantomData }
    }

    /// This process's value, built by `init` if this process has none yet.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        match self.get_or_try_init(|| Ok::<T, std::convert::Infallible>(init())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// This process's value, built by `init` if this process has none yet. An error is returned
    /// and nothing is kept, so a later call tries again. Threads that race here may each run
    /// `init`; one value is kept and the others are dropped.
    pub fn get_or_try_init<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        let pid = current();
        let mut seen = self.slot.load(Ordering::Acquire);
        if let Some(value) = mine(seen, pid) {
            return Ok(value);
        }
        let fresh = Box::into_raw(Box::new(Built { pid, value: init()? }));
        loop {
            match self.slot.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
                // The value replaced, if any, was inherited from a parent: leaked, never dropped.
                // SAFETY: `fresh` is now the slot's and is never freed while `self` lives.
                Ok(_) => return Ok(unsafe { &(*fresh).value }),
                Err(now) => {
                    if let Some(value) = mine(now, pid) {
                        // SAFETY: `fresh` came from `Box::into_raw` above and was never published.
                        drop(unsafe { Box::from_raw(fresh) });
                        return Ok(value);
                    }
                    seen = now;
                }
            }
        }
    }
}

/// The value at `built` if process `pid` built it.
fn mine<'a, T>(built: *mut Built<T>, pid: u32) -> Option<&'a T> {
    // SAFETY: a non-null slot points at a `Built` from `Box::into_raw`, which is never freed while
    // its `PerProcess` lives (a parent's is leaked in the child; see the module invariants).
    let built = unsafe { built.as_ref() }?;
    (built.pid == pid).then_some(&built.value)
}

impl<T: std::fmt::Debug> std::fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = mine(self.slot.load(Ordering::Acquire), current());
        f.debug_struct("PerProcess").field("value", &value).finish()
    }
}

impl<T> Default for PerProcess<T> {
    fn default() -> PerProcess<T> {
        PerProcess::new()
    }
}

impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let built = *self.slot.get_mut();
        if mine(built, current()).is_some() {
            // SAFETY: this process's own value, from `Box::into_raw`; `&mut self` means no
            // reference to it is left.
            drop(unsafe { Box::from_raw(built) });
        }
    }
}

/// The process whose rayon work runs on rayon's global pool: the first that asked (0: none yet).
static GLOBAL_OWNER: AtomicU32 = AtomicU32::new(0);
/// The pool of any other process.
static OWN_POOL: PerProcess<ThreadPool> = PerProcess::new();

/// Where this process's rayon work runs.
enum Pool {
    Global,
    Own(&'static ThreadPool),
    /// No pool could be built (the system refused threads): work runs on the calling thread.
    None,
}

fn pool() -> Pool {
    let pid = current();
    let mut owner = GLOBAL_OWNER.load(Ordering::Relaxed);
    if owner == 0 {
        owner = match GLOBAL_OWNER.compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => pid,
            Err(other) => other,
        };
    }
    if owner == pid {
        return Pool::Global;
    }
    // rayon's defaults, as for the global pool (`RAYON_NUM_THREADS`, else one thread per core).
    match OWN_POOL.get_or_try_init(|| rayon::ThreadPoolBuilder::new().build()) {
        Ok(pool) => Pool::Own(pool),
        Err(_) => Pool::None,
    }
}

/// Runs `f` where its rayon work (parallel iterators, `rayon::spawn`) executes in this process.
/// In the process that owns the global pool, that is `f()` itself, on the calling thread.
pub fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match pool() {
        Pool::Own(pool) => pool.install(f),
        Pool::Global | Pool::None => f(),
    }
}

/// Starts `job` on this process's pool. Without a pool the job is dropped unrun: callers use it
/// for helpers that are welcome, never needed (see `fanout`).
pub(crate) fn spawn(job: impl FnOnce() + Send + 'static) {
    match pool() {
        Pool::Global => rayon::spawn(job),
        Pool::Own(pool) => pool.spawn(job),
        Pool::None => drop(job),
    }
}

/// The threads of this process's pool (1 without one).
pub(crate) fn threads() -> usize {
    match pool() {
        Pool::Global => rayon::current_num_threads(),
        Pool::Own(pool) => pool.current_num_threads(),
        Pool::None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Mutex;

    #[test]
    fn the_id_is_the_systems_and_is_kept() {
        assert_eq!(current(), std::process::id());
        assert_eq!(PID.load(Ordering::Relaxed), std::process::id(), "kept after the first ask");
        assert!(!forked_since(current()));
        assert!(forked_since(current().wrapping_add(1)));
    }

    #[test]
    fn one_value_per_process_and_threads_share_it() {
        let cell: PerProcess<Mutex<Vec<u32>>> = PerProcess::new();
        let first = cell.get_or_init(|| Mutex::new(vec![1]));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| assert!(ptr::eq(first, cell.get_or_init(|| Mutex::new(vec![2])))));
            }
        });
        assert_eq!(*crate::sync::lock(cell.get_or_init(|| Mutex::new(vec![3]))), [1]);
        let failed: PerProcess<u32> = PerProcess::new();
        assert_eq!(failed.get_or_try_init(|| Err("refused")), Err("refused"));
        assert_eq!(failed.get_or_try_init(|| Ok::<u32, &str>(7)), Ok(&7), "an error keeps nothing");
    }

    /// Runs `child` in a forked child and returns its exit code (the child exits at once after).
    #[cfg(unix)]
    fn in_child(child: impl FnOnce() -> bool) -> i32 {
        // SAFETY: the child only runs `child` (atomics, and in some tests an allocation, which
        // glibc's own at-fork handlers make safe) and then `_exit`s, running nothing of the
        // parent's.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is a valid out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child did not exit");
        libc::WEXITSTATUS(status)
    }

    /// A child forked while another thread holds the parent's value locked gets a value of its
    /// own, unlocked, built by its own `init`; the parent's value is untouched. (Sharing the
    /// parent's would leave the lock held forever in the child: `try_lock` fails there.)
    #[cfg(unix)]
    #[test]
    fn a_forked_child_builds_its_own_value() {
        use crate::sync::Arc;
        static CELL: PerProcess<Mutex<&'static str>> = PerProcess::new();
        let parents: *const Mutex<&str> = CELL.get_or_init(|| Mutex::new("parent"));
        let (held, release) = (Arc::new(std::sync::Barrier::new(2)), Arc::new(std::sync::Barrier::new(2)));
        let holder = {
            let (held, release) = (Arc::clone(&held), Arc::clone(&release));
            std::thread::spawn(move || {
                let _guard = crate::sync::lock(CELL.get_or_init(|| Mutex::new("never")));
                held.wait();
                release.wait();
            })
        };
        held.wait();
        let parent = current();
        let code = in_child(|| {
            let mine = CELL.get_or_init(|| Mutex::new("child"));
            forked_since(parent)
                && current() == std::process::id()
                && !ptr::eq(parents, mine)
                && mine.try_lock().is_ok_and(|v| *v == "child")
        });
        release.wait();
        holder.join().unwrap();
        assert_eq!(code, 0, "the child used the parent's value");
        assert!(ptr::eq(parents, CELL.get_or_init(|| Mutex::new("again"))));
        assert_eq!(*crate::sync::lock(CELL.get_or_init(|| Mutex::new("again"))), "parent");
    }

    /// In a child of the process that uses rayon's global pool (whose threads the child lacks),
    /// parallel work runs on a pool of the child's own and finishes; the parent keeps the global
    /// pool. (On the global pool the child's `sum` would wait forever; the parent's 30 s alarm
    /// in the child turns that into a failure.)
    #[cfg(unix)]
    #[test]
    fn a_forked_child_runs_parallel_work_on_its_own_pool() {
        use rayon::prelude::*;
        let sum = || run(|| (0..10_000u64).into_par_iter().map(|i| i * 2).sum::<u64>());
        assert_eq!(sum(), 99_990_000);
        assert!(matches!(pool(), Pool::Global), "the test process asked first");
        let code = in_child(|| {
            // SAFETY: `alarm` only arms a timer; its default action ends a hung child.
            unsafe { libc::alarm(30) };
            sum() == 99_990_000 && matches!(pool(), Pool::Own(_)) && threads() >= 1
        });
        assert_eq!(code, 0);
        assert!(matches!(pool(), Pool::Global));
    }
}
