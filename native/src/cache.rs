//! The local disk cache of remote stores: fixed-size blocks of remote objects, shared safely by
//! every process on the machine.
//!
//! Invariants:
//! * An entry is named by the object's identity: a hash of its URL, ETag (or version) and size,
//!   plus the block number. A store replaced remotely has a new identity, so its old blocks are
//!   never served for it; they age out.
//! * An entry appears whole or not at all: it is written to a temporary file of its own (named by
//!   process and counter) and renamed into place. A process killed mid-write leaves only a
//!   temporary file, which no reader opens and the next eviction pass removes. An entry whose
//!   length is not the block's is treated as absent and replaced.
//! * The bound is kept by eviction after each call that stores blocks: least recently used
//!   first (a hit touches the entry's modification time). Several processes may evict at once;
//!   removing a file another process is reading is harmless on unix (the open file stays
//!   readable).
//! * No shared memory and no lock files: nothing is left behind by a crash but temporary files.
//! * An entry is never written in place after its rename, so a reader may map it: the mapped
//!   bytes stay those of the entry even if another process evicts (unlinks) it meanwhile.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::options::CacheConfig;

/// Bytes per cached block of a remote object.
pub(crate) const BLOCK: u64 = 4 << 20;
/// Temporary files older than this are a crashed writer's and are removed by eviction.
const STALE_TMP: Duration = Duration::from_secs(600);

/// A cache directory in use.
#[derive(Debug)]
pub(crate) struct DiskCache {
    config: CacheConfig,
}

/// One object's identity in the cache.
#[derive(Debug, Clone)]
pub(crate) struct ObjectKey(String);

impl ObjectKey {
    pub(crate) fn new(url: &str, etag: Option<&str>, size: u64) -> ObjectKey {
        let mut h = Sha256::new();
        for part in [url, "\0", etag.unwrap_or(""), "\0", &size.to_string()] {
            h.update(part.as_bytes());
        }
        let hex: String = h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect();
        ObjectKey(hex)
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl DiskCache {
    pub(crate) fn new(config: CacheConfig) -> std::io::Result<DiskCache> {
        fs::create_dir_all(&config.dir)?;
        Ok(DiskCache { config })
    }

    fn path(&self, key: &ObjectKey, block: u64) -> PathBuf {
        self.config.dir.join(&key.0[..2]).join(format!("{}-{block}", key.0))
    }

    /// The cached block, if it is there whole (`len` bytes), touched as recently used.
    pub(crate) fn open(&self, key: &ObjectKey, block: u64, len: u64) -> Option<fs::File> {
        let file = fs::File::options().read(true).write(true).open(self.path(key, block)).ok()?;
        if file.metadata().ok()?.len() != len {
            return None;
        }
        let _ = file.set_modified(SystemTime::now());
        Some(file)
    }

    /// A cached block (whole: `len` bytes), mapped, or None when it is not cached.
    pub(crate) fn map(&self, key: &ObjectKey, block: u64, len: u64) -> Option<Bytes> {
        let file = self.open(key, block, len)?;
        if len == 0 {
            return Some(Bytes::new());
        }
        let map = crate::map::cache_block(&file, len).ok()?;
        (map.len() as u64 == len).then(|| Bytes::from_owner(map))
    }

    /// Drops a cached block (one whose bytes failed a check), if it is there.
    pub(crate) fn remove(&self, key: &ObjectKey, block: u64) {
        let _ = fs::remove_file(self.path(key, block));
    }

    /// Marks a block as recently used (for a block held mapped across calls).
    pub(crate) fn touch(&self, key: &ObjectKey, block: u64) {
        if let Ok(file) = fs::File::options().write(true).open(self.path(key, block)) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// Stores a block (atomically); [`DiskCache::evict`] keeps the bound afterwards. Failures
    /// are not errors: the cache is an optimisation, and a block that could not be stored is
    /// fetched again next time.
    pub(crate) fn put(&self, key: &ObjectKey, block: u64, bytes: &[u8]) {
        let path = self.path(key, block);
        let Some(parent) = path.parent() else { return };
        let _ = fs::create_dir_all(parent);
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = parent.join(format!(".tmp-{}-{n}", std::process::id()));
        let written = fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes));
        if written.is_err() || fs::rename(&tmp, &path).is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }

    /// Removes least recently used entries until the total is within the bound, and stale
    /// temporary files.
    pub(crate) fn evict(&self) {
        let mut entries = Vec::new();
        let mut total = 0u64;
        let now = SystemTime::now();
        for sub in fs::read_dir(&self.config.dir).into_iter().flatten().flatten() {
            for entry in fs::read_dir(sub.path()).into_iter().flatten().flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                    if now.duration_since(modified).unwrap_or_default() > STALE_TMP {
                        let _ = fs::remove_file(entry.path());
                    }
                    continue;
                }
                total += meta.len();
                entries.push((modified, meta.len(), entry.path()));
            }
        }
        if total <= self.config.max_bytes {
            return;
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.config.max_bytes {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }

    /// Bytes held by entries.
    #[cfg(test)]
    fn used_bytes(dir: &std::path::Path) -> u64 {
        let mut total = 0;
        for sub in fs::read_dir(dir).into_iter().flatten().flatten() {
            for entry in fs::read_dir(sub.path()).into_iter().flatten().flatten() {
                if !entry.file_name().to_string_lossy().starts_with(".tmp-") {
                    total += entry.metadata().map(|m| m.len()).unwrap_or(0);
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_whole_keyed_by_identity_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::new(CacheConfig { dir: dir.path().into(), max_bytes: 250 }).unwrap();
        let a = ObjectKey::new("s3://b/s/0.zr", Some("e1"), 1000);
        let changed = ObjectKey::new("s3://b/s/0.zr", Some("e2"), 1000);
        cache.put(&a, 0, &[1; 100]);
        cache.evict();
        assert_eq!(cache.map(&a, 0, 100), Some(Bytes::from(vec![1u8; 100])));
        assert_eq!(cache.map(&a, 0, 99), None, "a block of another length is absent");
        assert_eq!(cache.map(&changed, 0, 100), None, "a new version is a new key");
        std::thread::sleep(Duration::from_millis(20));
        cache.put(&a, 1, &[2; 100]);
        cache.evict();
        std::thread::sleep(Duration::from_millis(20));
        assert!(cache.map(&a, 0, 100).is_some()); // block 0 is now the most recently used
        std::thread::sleep(Duration::from_millis(20));
        cache.put(&a, 2, &[3; 100]);
        cache.evict();
        assert!(DiskCache::used_bytes(dir.path()) <= 250);
        assert!(cache.map(&a, 1, 100).is_none(), "the least recently used block went first");
        assert!(cache.map(&a, 0, 100).is_some() && cache.map(&a, 2, 100).is_some());
    }
}
