//! Every call the write path makes that changes a file goes through here, each mapped to an
//! [`Error::Io`] naming the operation and the path.
//!
//! With the `fault-injection` feature (tests only) each call first asks [`faults`] whether it
//! should fail, so a test can make the N-th write, sync, rename, resize or removal fail with
//! ENOSPC or EIO, or make a write stop halfway (a short write followed by ENOSPC). Without the
//! feature the check compiles to nothing.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};

/// What a call does, for counting and for choosing which call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "fault-injection"), allow(unreachable_pub, dead_code))]
pub enum Op {
    /// Writing bytes to a file.
    Write,
    /// `fsync`/`fdatasync`/`msync`.
    Sync,
    /// Renaming a file into place.
    Rename,
    /// Changing a file's length (creating sparse chunk files).
    Resize,
    /// Removing a file.
    Remove,
}

#[cfg(feature = "fault-injection")]
pub mod faults {
    //! The test-only fault plan: one global plan, because the writes of one operation run on
    //! rayon threads. Tests that arm it must not run concurrently with each other.

    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::Op;

    /// How the chosen call fails.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        /// ENOSPC.
        NoSpace,
        /// EIO.
        Io,
        /// Writes the first half of the bytes, then fails with ENOSPC (other ops: ENOSPC).
        Short,
    }

    #[derive(Debug, Default)]
    struct State {
        counts: HashMap<Op, u64>,
        armed: Option<(Op, u64, Kind)>,
        fired: bool,
    }

    static STATE: Mutex<Option<State>> = Mutex::new(None);

    fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        f(guard.get_or_insert_with(State::default))
    }

    /// Resets the counters and makes call number `nth` (from 0) of `op` fail with `kind`.
    pub fn arm(op: Op, nth: u64, kind: Kind) {
        with(|s| *s = State { armed: Some((op, nth, kind)), ..State::default() });
    }

    /// Resets the counters and injects nothing (counting only).
    pub fn count_only() {
        with(|s| *s = State::default());
    }

    /// Disarms, returning whether the armed fault fired and the calls counted per op.
    pub fn disarm() -> (bool, HashMap<Op, u64>) {
        with(|s| {
            let out = (s.fired, std::mem::take(&mut s.counts));
            *s = State::default();
            out
        })
    }

    pub(super) fn hit(op: Op) -> Option<Kind> {
        with(|s| {
            let seen = s.counts.entry(op).or_insert(0);
            let n = *seen;
            *seen += 1;
            match s.armed {
                Some((o, nth, kind)) if o == op && nth == n => {
                    s.fired = true;
                    Some(kind)
                }
                _ => None,
            }
        })
    }
}

fn no_space() -> std::io::Error {
    std::io::Error::from_raw_os_error(28) // ENOSPC
}

/// Fails with the fault injected for this call of `op`, if any. `Ok(true)` asks a write to stop
/// halfway (a short write); the caller then fails with ENOSPC.
#[cfg(feature = "fault-injection")]
fn check(op: Op, what: &'static str, path: &Path) -> Result<bool> {
    match faults::hit(op) {
        None => Ok(false),
        Some(faults::Kind::Short) if op == Op::Write => Ok(true),
        Some(faults::Kind::Io) => Err(Error::io(what, path)(std::io::Error::from_raw_os_error(5))),
        Some(_) => Err(Error::io(what, path)(no_space())),
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn check(_op: Op, _what: &'static str, _path: &Path) -> Result<bool> {
    Ok(false)
}

/// `pwrite`s all of `bytes` at `offset`.
pub(crate) fn write_at(file: &File, bytes: &[u8], offset: u64, path: &Path) -> Result<()> {
    if check(Op::Write, "write", path)? {
        let half = &bytes[..bytes.len() / 2];
        file.write_all_at(half, offset).map_err(Error::io("write", path))?;
        return Err(Error::io("write", path)(no_space()));
    }
    file.write_all_at(bytes, offset).map_err(Error::io("write", path))
}

/// Creates (or replaces) `path` with `bytes`, made durable, for renaming into place.
pub(crate) fn write_new(path: &Path, bytes: &[u8], len: u64) -> Result<()> {
    let mut file = File::create(path).map_err(Error::io("create", path))?;
    if check(Op::Write, "write", path)? {
        file.write_all(&bytes[..bytes.len() / 2]).map_err(Error::io("write", path))?;
        return Err(Error::io("write", path)(no_space()));
    }
    file.write_all(bytes).map_err(Error::io("write", path))?;
    if len > bytes.len() as u64 {
        set_len(&file, len, path)?;
    }
    sync_file(&file, path)
}

/// `fsync`.
pub(crate) fn sync_file(file: &File, path: &Path) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    file.sync_all().map_err(Error::io("sync", path))
}

/// `fdatasync`.
pub(crate) fn sync_data(file: &File, path: &Path) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    file.sync_data().map_err(Error::io("sync", path))
}

/// `fsync` of a directory, making renames, creations and removals in it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    check(Op::Sync, "sync", dir)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(Error::io("sync", dir))
}

/// A sync done by `f` (an `msync` of the table, say), counted as a sync.
pub(crate) fn sync_with(path: &Path, f: impl FnOnce() -> std::io::Result<()>) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    f().map_err(Error::io("sync", path))
}

/// `rename`.
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    check(Op::Rename, "rename", from)?;
    fs::rename(from, to).map_err(Error::io("rename", from))
}

/// `ftruncate` to `len` (only ever used to grow files to their sparse full size).
pub(crate) fn set_len(file: &File, len: u64, path: &Path) -> Result<()> {
    check(Op::Resize, "resize", path)?;
    file.set_len(len).map_err(Error::io("resize", path))
}

/// Removes `path`; `Ok(false)` if it was not there.
pub(crate) fn remove(path: &Path) -> Result<bool> {
    check(Op::Remove, "remove", path)?;
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path)(e)),
    }
}
