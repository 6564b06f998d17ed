//! The I/O seam: every platform-specific file call of the crate lives here, and every call the
//! write path makes that changes a file goes through here, each mapped to an [`Error::Io`]
//! naming the operation and the path.
//!
//! Platform code sits in one place, the private `sys` module, which has the same small set of
//! functions for unix and for Windows (positional read and write, marking a file sparse,
//! directory sync, disk usage, the error codes faults use). Nothing else in the crate names
//! `std::os::*`.
//!
//! Invariants the callers keep, and what they mean on each platform:
//! * Positional I/O only: no handle's cursor is ever used. Windows' `seek_read`/`seek_write`
//!   move the cursor as a side effect, which is therefore harmless. [`read_exact_at`] and
//!   [`write_all_at`] loop until every byte is done, across short transfers and `Interrupted`.
//! * [`set_len`] only grows a file to its full sparse size. Unix filesystems keep the hole
//!   unallocated; on Windows the file is first marked sparse (`FSCTL_SET_SPARSE`), or NTFS would
//!   reserve the whole 4 GiB of a chunk file. Marking is best effort: where it fails (a filesystem
//!   without sparse files) the file still grows, only without the space saving.
//! * [`rename`] only ever replaces files no one maps (`*.tmp` → `meta.zr` at creation,
//!   `delete.journal`, `dict.zr` and `schema.msgpack`, which are read whole and closed). On Windows a rename over a file
//!   another process holds open without `FILE_SHARE_DELETE` fails; such a failure is an ordinary
//!   [`Error::Io`] and leaves the store as it was.
//! * [`remove`] is called on files the calling handle has dropped its maps and descriptors of.
//!   Windows may refuse to remove a file another process still maps, or keep its name until that
//!   process lets go (so it cannot be created anew before then). `compact` then fails with
//!   [`Error::Io`] (op `remove` or `create`), consistently, and re-running it once the other
//!   reader has closed finishes the job.
//! * [`sync_dir`] makes creations, renames and removals durable. Windows has no directory fsync:
//!   NTFS logs those metadata changes in its journal, so after a power loss the directory holds
//!   each change whole or not at all, but the latest ones may be lost. The call is a no-op there.
//!
//! With the `fault-injection` feature (tests only) each call that changes a file first asks
//! [`faults`] whether it should fail, so a test can make the N-th write, sync, rename, resize or
//! removal fail with "no space" or an I/O error, or make a write stop halfway (a short write
//! followed by "no space"). Without the feature the check compiles to nothing.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::Path;

use crate::error::{Error, Result};

#[cfg(not(any(unix, windows)))]
compile_error!("loaderx-native runs on unix and Windows; other targets use loaderx-core directly");

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

    use super::Op;
    use crate::sync::{self, Mutex};

    /// How the chosen call fails.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        /// No space: ENOSPC (`ERROR_DISK_FULL` on Windows).
        NoSpace,
        /// An I/O error: EIO (`ERROR_IO_DEVICE` on Windows).
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
        let mut guard = sync::lock(&STATE);
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
    std::io::Error::from_raw_os_error(sys::NO_SPACE)
}

/// Fails with the fault injected for this call of `op`, if any. `Ok(true)` asks a write to stop
/// halfway (a short write); the caller then fails with "no space".
#[cfg(feature = "fault-injection")]
fn check(op: Op, what: &'static str, path: &Path) -> Result<bool> {
    match faults::hit(op) {
        None => Ok(false),
        Some(faults::Kind::Short) if op == Op::Write => Ok(true),
        Some(faults::Kind::Io) => {
            Err(Error::io(what, path)(std::io::Error::from_raw_os_error(sys::IO_ERROR)))
        }
        Some(_) => Err(Error::io(what, path)(no_space())),
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn check(_op: Op, _what: &'static str, _path: &Path) -> Result<bool> {
    Ok(false)
}

/// Reads exactly `buf.len()` bytes at `offset`. Reads are never fault-injected.
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, path: &Path) -> Result<()> {
    let (mut buf, mut offset) = (buf, offset);
    while !buf.is_empty() {
        match sys::read_at(file, buf, offset) {
            Ok(0) => return Err(Error::io("read", path)(ErrorKind::UnexpectedEof.into())),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", path)(e)),
        }
    }
    Ok(())
}

/// Writes all of `bytes` at `offset` (`pwrite` on unix, `WriteFile` at an offset on Windows).
pub(crate) fn write_all_at(file: &File, bytes: &[u8], offset: u64, path: &Path) -> Result<()> {
    if check(Op::Write, "write", path)? {
        write_all_at_raw(file, &bytes[..bytes.len() / 2], offset).map_err(Error::io("write", path))?;
        return Err(Error::io("write", path)(no_space()));
    }
    write_all_at_raw(file, bytes, offset).map_err(Error::io("write", path))
}

fn write_all_at_raw(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    let (mut bytes, mut offset) = (bytes, offset);
    while !bytes.is_empty() {
        match sys::write_at(file, bytes, offset) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

/// `fsync` (`FlushFileBuffers` on Windows).
pub(crate) fn sync_file(file: &File, path: &Path) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    file.sync_all().map_err(Error::io("sync", path))
}

/// `fdatasync` (`FlushFileBuffers` on Windows).
pub(crate) fn sync_data(file: &File, path: &Path) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    file.sync_data().map_err(Error::io("sync", path))
}

/// Makes renames, creations and removals in `dir` durable: an `fsync` of the directory on unix,
/// nothing on Windows (see the module docs). Counted as a sync on every platform.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    check(Op::Sync, "sync", dir)?;
    sys::sync_dir(dir).map_err(Error::io("sync", dir))
}

/// A sync done by `f` (an `msync` of the table, say), counted as a sync.
pub(crate) fn sync_with(path: &Path, f: impl FnOnce() -> std::io::Result<()>) -> Result<()> {
    check(Op::Sync, "sync", path)?;
    f().map_err(Error::io("sync", path))
}

/// `rename`, replacing `to` if it exists (`MoveFileExW` with `MOVEFILE_REPLACE_EXISTING` on
/// Windows).
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    check(Op::Rename, "rename", from)?;
    fs::rename(from, to).map_err(Error::io("rename", from))
}

/// Grows `file` to `len`, sparsely (only ever used to give files their full sparse size).
pub(crate) fn set_len(file: &File, len: u64, path: &Path) -> Result<()> {
    check(Op::Resize, "resize", path)?;
    // Best effort, as the module docs say: a file that cannot be marked sparse still grows.
    let _ = sys::mark_sparse(file);
    file.set_len(len).map_err(Error::io("resize", path))
}

/// Removes `path`; `Ok(false)` if it was not there.
pub(crate) fn remove(path: &Path) -> Result<bool> {
    check(Op::Remove, "remove", path)?;
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path)(e)),
    }
}

/// Gives back the disk space of bytes `offset..offset + len` of `file` (a hole punched, the size
/// kept; the range then reads as zeros): Linux `fallocate(PUNCH_HOLE)`, macOS `F_PUNCHHOLE`,
/// Windows `FSCTL_SET_ZERO_DATA` on a sparse file. Where the filesystem cannot, the error is
/// returned and the bytes stay; a caller for whom space is an optimisation ignores it. Used by a
/// write streamed to a URL on bytes already uploaded, so a store larger than the local disk's
/// free space still converts.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) fn release(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    sys::release(file, offset, len)
}

/// Bytes the file at `path` takes on disk: what is allocated, so a sparse chunk file counts only
/// the parts written (`st_blocks` on unix, `GetCompressedFileSizeW` on Windows).
pub fn disk_usage(path: &Path) -> std::io::Result<u64> {
    sys::disk_usage(path)
}

/// Unix: `pread`/`pwrite`; files grown with `ftruncate` are sparse already.
#[cfg(unix)]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::path::Path;

    /// ENOSPC and EIO (the same numbers on Linux and macOS).
    pub(super) const NO_SPACE: i32 = 28;
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(super) const IO_ERROR: i32 = 5;

    pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        file.read_at(buf, offset)
    }

    pub(super) fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        file.write_at(buf, offset)
    }

    pub(super) fn mark_sparse(_file: &File) -> io::Result<()> {
        Ok(())
    }

    pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    pub(super) fn disk_usage(path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.blocks() * 512)
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[allow(unsafe_code)]
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(super) fn release(file: &File, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (offset, len) = (to_off(offset)?, to_off(len)?);
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: the descriptor is valid for the call (borrowed from `file`); fallocate reads
        // only its integer arguments.
        if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    #[cfg(target_vendor = "apple")]
    #[allow(unsafe_code)]
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(super) fn release(file: &File, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let hole = libc::fpunchhole_t {
            fp_flags: 0,
            reserved: 0,
            fp_offset: to_off(offset)?,
            fp_length: to_off(len)?,
        };
        // SAFETY: the descriptor is valid for the call, and `hole` is a live fpunchhole_t that
        // F_PUNCHHOLE only reads.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_PUNCHHOLE, &hole) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    #[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(super) fn release(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    fn to_off(v: u64) -> io::Result<libc::off_t> {
        libc::off_t::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }
}

/// Windows: `ReadFile`/`WriteFile` at an offset, `FSCTL_SET_SPARSE`, no directory sync.
#[cfg(windows)]
mod sys {
    use std::fs::File;
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use std::os::windows::fs::FileExt;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;
    use std::ptr;

    use windows_sys::Win32::Foundation::{ERROR_DISK_FULL, ERROR_IO_DEVICE, NO_ERROR};
    use windows_sys::Win32::Storage::FileSystem::{GetCompressedFileSizeW, INVALID_FILE_SIZE};
    use windows_sys::Win32::System::Ioctl::{FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA};
    use windows_sys::Win32::System::IO::DeviceIoControl;

    pub(super) const NO_SPACE: i32 = ERROR_DISK_FULL as i32;
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(super) const IO_ERROR: i32 = ERROR_IO_DEVICE as i32;

    /// Also moves the handle's cursor, which nothing in this crate uses.
    pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        file.seek_read(buf, offset)
    }

    /// Also moves the handle's cursor, which nothing in this crate uses.
    pub(super) fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        file.seek_write(buf, offset)
    }

    /// Marks `file` sparse, so growing it reserves no space. Needs a handle opened for writing.
    /// Wine 8 reports success and ignores the request (no sparse attribute is set); its files
    /// live on unix filesystems, where growing a file leaves a hole anyway.
    pub(super) fn mark_sparse(file: &File) -> io::Result<()> {
        // No input buffer means "set sparse".
        fsctl(file, FSCTL_SET_SPARSE, &[])
    }

    /// Zeroes a range of a sparse file, which deallocates it.
    pub(super) fn release(file: &File, offset: u64, len: u64) -> io::Result<()> {
        let to_i64 = |v: u64| i64::try_from(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
        // FILE_ZERO_DATA_INFORMATION: the first byte zeroed and the first byte past the range,
        // two little-endian i64s.
        let mut input = [0u8; 16];
        input[..8].copy_from_slice(&to_i64(offset)?.to_le_bytes());
        input[8..].copy_from_slice(&to_i64(offset + len)?.to_le_bytes());
        fsctl(file, FSCTL_SET_ZERO_DATA, &input)
    }

    /// One file-system control call on `file` with `input` and no output.
    #[allow(unsafe_code)]
    fn fsctl(file: &File, code: u32, input: &[u8]) -> io::Result<()> {
        let mut returned = 0u32;
        let len = u32::try_from(input.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let data = if input.is_empty() { ptr::null() } else { input.as_ptr().cast() };
        // SAFETY: the handle is valid for the call (borrowed from `file`); the input buffer is
        // `len` live bytes (or null with length 0); there is no output buffer; `returned` is a
        // live u32; the call is synchronous (null OVERLAPPED; std opens files without
        // FILE_FLAG_OVERLAPPED).
        let ok = unsafe {
            DeviceIoControl(
                file.as_raw_handle(),
                code,
                data,
                len,
                ptr::null_mut(),
                0,
                &mut returned,
                ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Windows cannot flush a directory; see the module docs.
    pub(super) fn sync_dir(_dir: &Path) -> io::Result<()> {
        Ok(())
    }

    /// What Explorer calls "size on disk" for a sparse file. Wine 8 answers with the apparent
    /// size instead.
    #[allow(unsafe_code)]
    pub(super) fn disk_usage(path: &Path) -> io::Result<u64> {
        let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
        let mut high = 0u32;
        // SAFETY: `wide` is a NUL-terminated UTF-16 path that outlives the call, and `high` is a
        // live u32 the call writes the upper half of the size to.
        let low = unsafe { GetCompressedFileSizeW(wide.as_ptr(), &mut high) };
        if low == INVALID_FILE_SIZE {
            // Also a valid low half: only GetLastError tells the two apart.
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(NO_ERROR as i32) {
                return Err(e);
            }
        }
        Ok((u64::from(high) << 32) | u64::from(low))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_io_round_trips_and_reports_short_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        write_all_at(&file, b"world", 6, &path).unwrap();
        write_all_at(&file, b"hello ", 0, &path).unwrap();
        let mut buf = [0u8; 11];
        read_exact_at(&file, &mut buf, 0, &path).unwrap();
        assert_eq!(&buf, b"hello world");
        let mut past = [0u8; 4];
        let err = read_exact_at(&file, &mut past, 9, &path).unwrap_err();
        assert!(
            matches!(err, Error::Io { op: "read", ref source, .. } if source.kind() == ErrorKind::UnexpectedEof)
        );
    }

    #[test]
    fn release_frees_a_range_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8 + 1).collect();
        write_new(&path, &data, data.len() as u64).unwrap();
        let file = fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        sync_file(&file, &path).unwrap();
        #[cfg(unix)]
        let before = disk_usage(&path).unwrap();
        let released = release(&file, 0, 3 << 20);
        let mut buf = vec![0u8; data.len()];
        read_exact_at(&file, &mut buf, 0, &path).unwrap();
        match released {
            Ok(()) => assert!(buf[..3 << 20].iter().all(|&b| b == 0), "the released range reads as zeros"),
            // Wine answers FSCTL_SET_ZERO_DATA with ERROR_NOT_SUPPORTED (50): refused, and then
            // nothing is lost. Unix filesystems here must release.
            Err(e) if cfg!(windows) && e.raw_os_error() == Some(50) => assert_eq!(buf, data),
            Err(e) => panic!("release failed: {e}"),
        }
        assert_eq!(buf[3 << 20..], data[3 << 20..], "the rest is kept");
        assert_eq!(fs::metadata(&path).unwrap().len(), data.len() as u64, "the size is kept");
        #[cfg(unix)]
        assert!(disk_usage(&path).unwrap() + (2 << 20) <= before, "{before} bytes on disk, still");
    }

    #[test]
    fn set_len_grows_sparsely_and_keeps_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        write_new(&path, b"head", 1 << 30).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 1 << 30);
        let mut buf = [0u8; 4];
        read_exact_at(&File::open(&path).unwrap(), &mut buf, 0, &path).unwrap();
        assert_eq!(&buf, b"head");
        let used = disk_usage(&path).unwrap();
        assert!(used <= 1 << 30, "{used} bytes on disk");
        // The hole takes no space. (Wine reports the apparent size, so Windows gets the bound only.)
        #[cfg(unix)]
        assert!(used < 1 << 20, "{used} bytes on disk for 4 bytes of data");
        sync_dir(dir.path()).unwrap();
    }
}
