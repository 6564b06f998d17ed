//! Fork-safe access to a rayon pool.
//!
//! rayon's global pool is created lazily, and its threads do not survive `fork()`: a child that
//! used the parent's pool would wait forever. Users fork all the time (torch `DataLoader` workers,
//! `multiprocessing`). So the process that first runs work owns the global pool, and any other
//! process (a forked child, or a child of a child) runs work on a pool of its own, created on
//! first use in that process.

use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

/// The process that uses rayon's global pool.
static GLOBAL_OWNER: OnceLock<u32> = OnceLock::new();
/// A forked process's own pool, tagged with the process it was built in.
static FORKED_POOL: Mutex<Option<(u32, Arc<ThreadPool>)>> = Mutex::new(None);

/// Runs `f` where its rayon work can actually execute in this process.
pub(crate) fn run<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pid = std::process::id();
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
