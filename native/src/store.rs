//! [`Store`]: one open store, local or remote, read through the one reader (`reader.rs`) over
//! its source (`source.rs`), and written, when it is local, through the writer (`writer.rs`).
//!
//! Invariants:
//! * Opening follows core's open protocol (`loaderx_core::open`) and never writes, except to
//!   finish a delete that a crash interrupted (a `delete.journal` is present, no live writer
//!   holds the lock and the store is writable). When it cannot (another writer holds the lock,
//!   or the files are read-only), the journal is applied in memory by the reader: the store
//!   reads as the finished deletion. A reader maps `meta.zr` and the chunk files read-only
//!   at their current sizes and takes no lock. Only the first mutating call upgrades the handle to
//!   a writer.
//! * Every write on a remote store is refused with [`Error::BadArgument`] naming the URL before
//!   anything is sent.
//! * Lock order, everywhere: `gate` → `writer` → `meta` → `chunks` → `dict` (`gate` in
//!   `sources::local`, the last three in [`Shared`]). `gate` is held shared by reads, appends and
//!   dictionary training, and exclusively by delete and compact.
//! * A handle's writer, once created, lives as long as the handle; no code path sees a mutating
//!   call without one ([`Store::with_writer`]).

use std::fs::{self, File};
use std::path::Path;

use loaderx_core::checksum::VerifyMode;
use loaderx_core::format::{Codec, Header, RecordLoc, HEADER_SIZE};
use loaderx_core::open::{self, Overlay};
use loaderx_core::plan::{check_indices, record_ranges};
use loaderx_core::schema::{Layout, Schema};

use crate::error::{Error, Result};
use crate::files::{self, chunk_path, meta_path, Chunk};
use crate::journal;
use crate::map::MetaMap;
use crate::options::RemoteOptions;
use crate::reader::{rows_at, Reader};
use crate::shared::Shared;
use crate::sources::local::LocalDir;
use crate::sync::{self, Arc, Mutex};
use crate::writer::{Backfill, Writer};

pub use crate::reader::VerifyReport;
pub use loaderx_core::stats::Stats;

/// How [`Store::open_with`] treats a missing store.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Create the directory (with parents) and an empty store when there is none.
    pub create: bool,
}

/// One open loaderx record store: a directory on disk (read and write) or, with the `remote`
/// feature, a URL (read-only).
///
/// `gather`, `lengths`, `stats` and `append` may run concurrently from many threads; `delete`
/// and `compact` take exclusive access (they wait for running calls and block new ones).
#[derive(Debug)]
pub struct Store {
    reader: Reader,
    /// The directory, for writes; `None` for a remote store.
    local: Option<Arc<LocalDir>>,
    /// `None` until the first mutating call upgrades the handle.
    writer: Mutex<Option<Writer>>,
}

impl Store {
    /// Opens an existing store.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens a store, creating the directory and an empty store if there is none (as
    /// `Zrecord(path)` does).
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, OpenOptions { create: true })
    }

    /// A URL opens read-only over the network; anything else is a local directory (created when
    /// `create` is set and there is none; a collapsed URL such as `s3:/b/x` is refused then, see
    /// [`crate::check_writable`]).
    pub fn open_location(location: &str, create: bool, remote: &RemoteOptions) -> Result<Store> {
        if crate::location::is_url(location) {
            #[cfg(feature = "remote")]
            {
                let (source, overlay) = crate::sources::object::open(location, remote)?;
                let reader = Reader::new(source, overlay);
                return Ok(Store { reader, local: None, writer: Mutex::new(None) });
            }
            #[cfg(not(feature = "remote"))]
            {
                let _ = remote;
                return Err(Error::BadArgument(format!(
                    "{}: this build of loaderx reads local stores only (it has no remote support)",
                    loaderx_core::url::redact(location)
                )));
            }
        }
        Store::open_with(location, OpenOptions { create })
    }

    /// Opens a local store with explicit options. With `create`, a URL (`s3://b/x`, or `s3:/b/x`
    /// as a path type collapses it) is refused with [`Error::BadArgument`]: it never becomes a
    /// local directory.
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Store> {
        let dir = path.as_ref().to_path_buf();
        if options.create {
            crate::location::check_writable(&dir.to_string_lossy())?;
        }
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Error::NotADirectory(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && options.create => {
                fs::create_dir_all(&dir).map_err(Error::io("create directory", &dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NotFound(dir)),
            Err(e) => return Err(Error::io("stat", &dir)(e)),
        }
        let meta_path = meta_path(&dir);
        if !meta_path.exists() {
            if !options.create {
                return Err(Error::NotAStore { path: dir, reason: "it has no meta.zr".into() });
            }
            files::create_store(&dir)?;
        }
        let pending = files::journal_path(&dir).exists() && !journal::recover_interrupted_delete(&dir)?;
        let meta_file = File::open(&meta_path).map_err(Error::io("open", &meta_path))?;
        let meta_len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
        if meta_len < HEADER_SIZE {
            return Err(Error::corrupt_at(
                &meta_path,
                meta_len,
                format!("the file is {meta_len} bytes, shorter than the 16-byte header"),
            ));
        }
        // The header is read through the map, not the descriptor: on Windows a live writer's
        // lock on `meta.zr` is mandatory and refuses reads through other handles, but not
        // through maps.
        let meta = MetaMap::new(&meta_file, meta_len, false).map_err(Error::io("mmap", &meta_path))?;
        let header = meta.header();
        open::read_header(&header.to_bytes(), meta_len).map_err(|e| Error::classified(&dir, e))?;
        let overlay = if pending { journal::overlay(&dir, header.length)? } else { Overlay::default() };
        let chunks = (0..=header.tail_chunk)
            .map(|id| Ok(Chunk::open_read(&chunk_path(&dir, id))?.map(Arc::new)))
            .collect::<Result<Vec<_>>>()?;
        let dict = files::load_dict(&dir)?;
        let sidecar = crate::checksums::SidecarMap::open(&dir)?;
        let local = Arc::new(LocalDir::new(Shared::new(dir, meta, chunks, dict, sidecar)));
        let reader = Reader::new(local.clone(), overlay);
        Ok(Store { reader, local: Some(local), writer: Mutex::new(None) })
    }

    /// The store directory, or the URL as shown (without userinfo and query values).
    pub fn path(&self) -> &Path {
        self.reader.at()
    }

    /// The path or URL, as shown (a URL without its userinfo and query values).
    pub fn location(&self) -> String {
        self.reader.at().display().to_string()
    }

    /// True for a store opened by URL.
    pub fn is_remote(&self) -> bool {
        self.local.is_none()
    }

    /// The local directory, for a write: a remote store is refused.
    fn local(&self, what: &str) -> Result<&LocalDir> {
        self.local.as_deref().ok_or_else(|| {
            Error::BadArgument(format!(
                "{} is a remote store, which is read-only: cannot {what}",
                self.location()
            ))
        })
    }

    /// Number of live records.
    pub fn len(&self) -> u64 {
        self.reader.len()
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the header.
    pub fn header(&self) -> Header {
        self.reader.header()
    }

    /// True if the store has a dictionary (`dict.zr`).
    pub fn has_dict(&self) -> bool {
        self.reader.has_dict()
    }

    /// The dictionary bytes, if the store has one.
    pub fn dict_bytes(&self) -> Option<Vec<u8>> {
        self.reader.dict_bytes()
    }

    /// The store's schema, if it has one.
    pub fn schema(&self) -> Result<Option<Schema>> {
        self.reader.schema()
    }

    /// The checked table entries of `indices` (where and how each record is stored).
    pub fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        self.reader.entries(indices)
    }

    /// Logical (decoded) length of each record.
    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        self.reader.lengths_with(indices, None)
    }

    /// Logical length of each record, each checked to fit `layout` ([`Layout::check`], the one
    /// rule of every front end). The first record that does not fit is an [`Error::Corrupt`]
    /// naming `meta.zr` and the offset of its table entry.
    pub fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        self.reader.lengths_with(indices, Some(layout))
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]`.
    ///
    /// The destination ranges must lie inside `dst` and must not overlap. Work is split over
    /// the rayon pool in contiguous blocks, one zstd context per block, and each record is
    /// decoded (or copied) straight from the chunk mapping into `dst`.
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        self.reader.gather(indices, dst, dst_offsets)
    }

    /// Decodes records `indices`, each exactly `stride` bytes long, back to back into `dst`
    /// (`dst.len() == indices.len() · stride`), as a dense dataset reads its fixed-size rows.
    /// A record of any other length is an [`Error::Corrupt`] (the dense rule of
    /// [`Layout::check`]), never a misaligned batch.
    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        self.reader.gather_fixed(indices, dst, stride)
    }

    /// Decodes records `indices` into `pieces`, one slice per record of exactly its decoded
    /// length (a piece of another length is [`Error::BadArgument`]). With `layout`, every record
    /// must fit it first (as [`Store::gather_fixed`] checks).
    pub fn gather_pieces(
        &self,
        indices: &[u64],
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        self.reader.gather_pieces(indices, pieces, layout)
    }

    /// Decodes records `indices`, each exactly `stride` bytes, into the rows `positions` of
    /// `dst` (rows of `stride` bytes): how a mix fills each source's rows of one batch.
    pub fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()> {
        let (rows, layout) = rows_at(indices, dst, positions, stride)?;
        self.gather_pieces(indices, rows, Some(layout))
    }

    /// The reader, for a gather over many stores (`many.rs`).
    pub(crate) fn reader(&self) -> &Reader {
        &self.reader
    }

    /// Decodes every record and checks its table entry, bounds and length (see
    /// [`VerifyReport`]). `progress` is called with (records done, total) after each block.
    pub fn verify(&self, progress: impl FnMut(u64, u64)) -> VerifyReport {
        self.reader.verify(true, progress)
    }

    /// [`Store::verify`], except that unless `deep` a record its checksum covers and matches is
    /// not decoded (`loaderx verify` without `--deep`).
    pub fn verify_with(&self, deep: bool, progress: impl FnMut(u64, u64)) -> VerifyReport {
        self.reader.verify(deep, progress)
    }

    /// Storage usage.
    pub fn stats(&self) -> Result<Stats> {
        self.reader.stats()
    }

    /// Which reads are checked against the store's checksums (`checksums.lx`).
    pub fn verify_mode(&self) -> VerifyMode {
        self.reader.verify_mode()
    }

    /// Sets which reads are checked: [`VerifyMode::Fetched`] (the default) checks what comes
    /// over the network, [`VerifyMode::Always`] local reads too.
    pub fn set_verify_mode(&self, mode: VerifyMode) {
        self.reader.set_verify_mode(mode)
    }

    /// The digest of the store's content, from its schema, dictionary, table and checksums
    /// (no record is read): `None` unless checksums cover every record.
    pub fn content_digest(&self) -> Result<Option<String>> {
        self.reader.content_digest()
    }

    /// The store's identity for exclusion masks (`loaderx_core::mask`): its schema and table.
    pub fn mask_identity(&self) -> Result<[u8; 32]> {
        self.reader.mask_identity()
    }

    /// Gives every live record that no checksum covers one (`loaderx checksum add`) and seals
    /// the checksums. A checksum that does not match in a store whose table is as its writer
    /// left it is damage: it stays, and is listed, unless `adopt` (take the bytes as they are).
    /// `progress(done, total)` after each block.
    pub fn add_checksums(&self, adopt: bool, progress: impl FnMut(u64, u64)) -> Result<Backfill> {
        let local = self.local("add checksums to")?;
        let _gate = sync::write(&local.gate);
        self.with_writer(local, |w| {
            let table = local.checked_table()?;
            w.add_checksums(&local.shared, &table, adopt, progress)
        })
    }

    /// Runs `f` with this handle's writer, upgrading the handle on its first mutating call (see
    /// `writer.rs`) and first finishing a delete an I/O error left pending.
    fn with_writer<T>(&self, local: &LocalDir, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let mut guard = sync::lock(&self.writer);
        let writer = match guard.take() {
            Some(writer) => guard.insert(writer),
            None => {
                let writer = Writer::open(&local.shared)?;
                // Opening the writer finished any delete journal on disk.
                self.reader.drop_overlay();
                guard.insert(writer)
            }
        };
        writer.settle_pending(&local.shared)?;
        f(writer)
    }

    /// Appends the records packed in `src` (record `k` starts at `offsets[k]` and runs to the
    /// next offset or the end) with `codec`, and returns the index of the first one.
    ///
    /// All-or-nothing: on error nothing is visible and the length is unchanged.
    pub fn append(&self, src: &[u8], offsets: &[u64], codec: Codec) -> Result<u64> {
        let local = self.local("append")?;
        let ranges = record_ranges(src.len(), offsets)?;
        let _gate = sync::read(&local.gate);
        self.with_writer(local, |w| w.append(&local.shared, src, &ranges, codec))
    }

    /// Removes records, keeping the live index space dense: duplicates are dropped and the rest
    /// applied in descending order, each hole filled with the current last record.
    /// Only the table changes; `compact` reclaims the bytes. Takes exclusive access.
    ///
    /// Crash-atomic: the outcome is written to `delete.journal` (synced, renamed into place)
    /// before the table changes, and a crash after that point is finished by the next open.
    /// If an I/O error strikes after the journal is in place, the delete has still happened
    /// (the error says it could not be made durable) and the next mutating call retries that.
    pub fn delete(&self, indices: &[u64]) -> Result<()> {
        let local = self.local("delete")?;
        let _gate = sync::write(&local.gate);
        check_indices(self.len(), indices)?;
        if indices.is_empty() {
            return Ok(());
        }
        self.with_writer(local, |w| w.delete(&local.shared, indices))
    }

    /// Rewrites the live records densely, in place, in physical order, and deletes chunk files
    /// past the new frontier. Safe to interrupt: re-running finishes the job. Takes exclusive
    /// access.
    pub fn compact(&self) -> Result<()> {
        let local = self.local("compact")?;
        let _gate = sync::write(&local.gate);
        self.with_writer(local, |w| {
            let table = local.checked_table()?;
            w.compact(&local.shared, &table)
        })
    }

    /// Trains a dictionary of at most `capacity` bytes on the samples packed in `samples`
    /// (lengths `sizes`), stores it as `dict.zr` and installs it. Returns its size.
    ///
    /// Refused when live records already use the current dictionary: replacing it would make
    /// them unreadable.
    pub fn train_dict(&self, samples: &[u8], sizes: &[usize], capacity: usize) -> Result<usize> {
        let local = self.local("train a dictionary")?;
        let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
        if total != Some(samples.len()) {
            return Err(Error::BadArgument(format!(
                "sample sizes add up to {total:?} bytes, but {} sample bytes were given",
                samples.len()
            )));
        }
        let _gate = sync::read(&local.gate);
        self.with_writer(local, |w| w.train_dict(&local.shared, samples, sizes, capacity))
    }

    /// Makes everything appended so far durable: chunk data first, then the table, then the
    /// header. A handle that never wrote (or a remote store) has nothing to sync.
    pub fn sync(&self) -> Result<()> {
        match (self.local.as_deref(), sync::lock(&self.writer).as_mut()) {
            (Some(local), Some(writer)) => writer.sync(&local.shared),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::error::Classify;
    use loaderx_core::format::entry_offset;
    use loaderx_core::schema::Kind;

    #[test]
    fn records_that_do_not_fit_the_layout_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path().join("s")).unwrap();
        // Records of 12, 12 and 10 bytes.
        store.append(&[7u8; 34], &[0, 12, 24], Codec::Raw).unwrap();
        let rows = Layout { kind: Kind::Ragged, item_bytes: 4 };
        assert_eq!(store.lengths_fitting(&[1, 0], rows).unwrap(), vec![12, 12]);
        for layout in [rows, Layout { kind: Kind::Dense, item_bytes: 12 }] {
            let err = store.lengths_fitting(&[0, 2, 1], layout).unwrap_err();
            assert!(matches!(err, Error::Corrupt { ref file, .. } if file.ends_with("meta.zr")), "{err}");
            assert_eq!(err.offset(), Some(entry_offset(2)), "{err}");
            assert!(err.to_string().contains("record 2 is 10 bytes"), "{err}");
        }
        let err = store.lengths_fitting(&[3], rows).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { index: 3, length: 3 }), "{err}");

        let mut dst = [0u8; 24];
        let err = store.gather_fixed(&[0, 2], &mut dst, 12).unwrap_err();
        assert_eq!(
            (err.kind(), err.offset()),
            (loaderx_core::error::ErrorKind::Corrupt, Some(entry_offset(2)))
        );
        assert_eq!(dst, [0u8; 24], "a failed check leaves the buffer untouched");
        store.gather_fixed(&[1, 0], &mut dst, 12).unwrap();
        assert_eq!(dst, [7u8; 24]);
    }

    #[test]
    fn verify_reports_a_blank_table_tail_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = Store::open_or_create(&path).unwrap();
        store.append(&[5u8; 30], &[0, 10, 20], Codec::Raw).unwrap();
        store.sync().unwrap();
        drop(store);
        let poke = |at: u64, value: u32| {
            use std::io::{Seek, SeekFrom, Write};
            let mut meta = fs::OpenOptions::new().write(true).open(meta_path(&path)).unwrap();
            meta.seek(SeekFrom::Start(at)).unwrap();
            meta.write_all(&value.to_le_bytes()).unwrap();
        };
        // A damaged record count: 1000 where 3 records were written.
        poke(12, 1000);
        let report = Store::open(&path).unwrap().verify(|_, _| {});
        assert_eq!((report.checked, report.bad.len(), report.unlisted), (1000, 1, 996));
        assert_eq!(report.bad[0].0, 3);
        assert!(report.bad[0].1.contains("record count is damaged"), "{}", report.bad[0].1);
        // One bad record inside the table is still reported as itself.
        poke(12, 3);
        poke(entry_offset(1) + 8, 0); // record 1's logical length
        let report = Store::open(&path).unwrap().verify(|_, _| {});
        assert_eq!((report.checked, report.unlisted), (3, 0));
        assert_eq!(report.bad.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn creating_a_store_at_a_url_is_refused_before_any_directory_exists() {
        let dir = tempfile::tempdir().unwrap();
        for url in ["s3://b/x", "http://user:pw@h/x?sig=s"] {
            let err = Store::open_or_create(url).unwrap_err();
            assert!(matches!(err, Error::BadArgument(_)), "{err}");
            assert!(!err.to_string().contains("pw") && !err.to_string().contains("sig=s"), "{err}");
        }
        // The form `pathlib.Path("s3://b/x")` takes: refused, never a local folder `s3:`.
        let err = Store::open_or_create("s3:/b/x").unwrap_err();
        assert!(matches!(err, Error::BadArgument(_)) && err.to_string().contains("s3://b/x"), "{err}");
        assert!(!Path::new("s3:").exists());
        // Under a directory, `s3:` is only a folder name.
        assert!(Store::open_or_create(dir.path().join("s3:").join("b")).is_ok());
    }
}
