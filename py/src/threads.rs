//! Fork-safe access to a rayon pool.
//!
//! rayon's global pool is created lazily, and its threads do not survive `fork()`: a child that
//! used the parent's pool would wait forever. Users fork all the time (torch `DataLoader` workers,
//! `multiprocessing`). So the process that first runs work owns the global pool, and any other
//! process (a forked child, or a child of a child) runs work on a pool of its own, created on
//! first use in that process.

#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

/// The process that uses rayon's global pool.
static GLOBAL_OWNER: OnceLock<u32> = OnceLock::new();
/// A forked process's own pool, tagged with the process it was built in.
static FORKED_POOL: Mutex<Option<(u32, Arc<ThreadPool>)>> = Mutex::new(None);

/// This process's id, or 0 until it is first asked for (and again in a child after `fork()`).
static PID: AtomicU32 = AtomicU32::new(0);

/// Runs in the child right after `fork()`: only an atomic store, which is async-signal-safe.
#[cfg(unix)]
extern "C" fn forgot_pid() {
    PID.store(0, Ordering::Relaxed);
}

/// The process id without a system call per batch (`getpid` is one, and it showed in the
/// profile of small gathers). A fork handler, registered before an id is first kept, clears it
/// in every child, which then asks the system once more.
fn process_id() -> u32 {
    static HANDLER: OnceLock<bool> = OnceLock::new();
    let kept = PID.load(Ordering::Relaxed);
    if kept != 0 {
        return kept;
    }
    let pid = std::process::id();
    #[cfg(unix)]
    // SAFETY: registers a handler that only stores to an atomic and is a static function, so it
    // stays valid for the life of the process.
    let registered =
        *HANDLER.get_or_init(|| unsafe { libc::pthread_atfork(None, None, Some(forgot_pid)) } == 0);
    #[cfg(not(unix))]
    let registered = *HANDLER.get_or_init(|| true);
    if registered {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// Runs `f` where its rayon work can actually execute in this process.
pub(crate) fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pid = process_id();
    if *GLOBAL_OWNER.get_or_init(|| pid) == pid {
        return f();
    }
    let pool = {
        let mut slot = FORKED_POOL.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((owner, pool)) if *owner == pid => Arc::clone(pool),
            _ => {
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                // Building a pool fails only when the OS refuses threads. Running inline is then
                // the best left: small batches need no pool, and larger ones surface the problem.
                let Ok(pool) = rayon::ThreadPoolBuilder::new().num_threads(threads).build() else {
                    return f();
                };
                let pool = Arc::new(pool);
                *slot = Some((pid, Arc::clone(&pool)));
                pool
            }
        }
    };
    pool.install(f)
}
