//! A conversion: the one write session every converter feeds (Python's `from_numpy`,
//! `from_iterator` and `from_arrow`, the Ray datasink through them, and `loaderx convert`).
//! Producers only cut their data into blocks of packed records; the rules live here.
//!
//! Invariants:
//! * [`Conversion::begin`] checks everything that can be checked before a byte is written: the
//!   location is local ([`crate::check_writable`]), it is a new or empty directory or a store,
//!   the write mode allows what is there, and an existing store's schema has the same kind,
//!   dtype and item shape as the new one. A failed `begin` creates nothing.
//! * Every record [`Conversion::append`] takes is 1 byte ..= 1 MiB and fits the schema's layout
//!   (core's [`Layout::check`]) where the schema gives one; one that does not is [`Error::RecordSize`] or
//!   [`Error::DoesNotFit`], naming its position among the records of this conversion. A block is
//!   checked whole before any of it is written.
//! * A `zstd_dict` conversion into a store without a dictionary trains one on its first block
//!   (core's training-set rule: up to 8192 evenly spaced records, 1% of their bytes clamped to
//!   8 KiB ..= 1 MiB unless a size is given).
//! * [`Conversion::finish`] syncs the records, then writes the schema (last, so a crash never
//!   leaves a schema describing records that are not there), then, for
//!   [`WriteMode::Overwrite`], puts the new store in the old one's place.
//! * A conversion that is dropped unfinished (an error, a panic, a producer that gave up) rolls
//!   back: records it appended to an existing store are deleted, a store it created is removed
//!   with the directories it made, and an overwrite's new store is removed while the old one
//!   stays as it was.

use std::fs;
use std::path::{Path, PathBuf};

use loaderx_core::codec::{auto_dict_size, dict_training_set};
use loaderx_core::format::{Codec, MAX_RECORD_LEN};
use loaderx_core::open::is_store_file;
use loaderx_core::plan::record_ranges;
use loaderx_core::schema::{Layout, Schema};

use crate::error::{Error, Result};
use crate::files::{meta_path, read_schema, write_schema};
use crate::upload::Stream;
use crate::{RemoteOptions, Store};

/// The environment variable naming where conversions to URLs stage their stores.
pub const STAGING_ENV: &str = "LOADERX_STAGING_DIR";

/// A local write of a URL conversion (`url`, staged in `stage`) that ran out of space is
/// [`Error::Full`], naming the URL and the staging directory; other errors pass.
fn staging_full(e: Error, url: Option<&str>, stage: Option<&Path>) -> Error {
    match (&e, url, stage) {
        (Error::Io { source, .. }, Some(url), Some(stage))
            if source.kind() == std::io::ErrorKind::StorageFull =>
        {
            Error::Full(format!(
                "writing {url}: the local staging space ran out in {} ({e}); set {STAGING_ENV} to a \
                 directory with more room",
                stage.parent().unwrap_or(stage).display()
            ))
        }
        _ => e,
    }
}

/// What a conversion does with a store already at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Add the records after the store's own (the reference's behaviour).
    Append,
    /// Build a new store beside the old one and swap it in once complete.
    Overwrite,
    /// Refuse ([`Error::Exists`]).
    Error,
}

impl WriteMode {
    /// Parses `append`, `overwrite` or `error`.
    pub fn from_name(name: &str) -> Result<WriteMode> {
        match name {
            "append" => Ok(WriteMode::Append),
            "overwrite" => Ok(WriteMode::Overwrite),
            "error" => Ok(WriteMode::Error),
            _ => Err(Error::BadArgument(format!(
                "mode must be one of 'append', 'overwrite', 'error', got {name:?}"
            ))),
        }
    }
}

/// How a conversion writes.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    pub codec: Codec,
    pub mode: WriteMode,
    /// The dictionary's size cap for `zstd_dict` (by default core's rule).
    pub dict_size: Option<usize>,
}

/// One conversion in progress. See the module docs.
#[derive(Debug)]
pub struct Conversion {
    /// Where the store ends up.
    target: PathBuf,
    /// Where records are written: `target`, or for an overwrite a directory beside it.
    dir: PathBuf,
    store: Option<Store>,
    options: ConvertOptions,
    /// The schema written at `finish` (the existing one with the new keys laid over it).
    schema: Option<Schema>,
    /// The schema the store held before, if any.
    existing: Option<Schema>,
    layout: Option<Layout>,
    /// The store's length before this conversion.
    start: u64,
    written: u64,
    needs_dict: bool,
    /// The store did not exist before: a rollback removes it, and these directories (deepest
    /// first) that `begin` created for it.
    created: Option<Vec<PathBuf>>,
    /// For a URL target ([`Conversion::begin_at`]): the upload and the staging directory the
    /// store is written in, removed when the conversion ends either way.
    streaming: Option<(Stream, PathBuf)>,
    /// The URL target, as shown.
    url: Option<String>,
    finished: bool,
}

impl Conversion {
    /// Starts a conversion into `path`, whose records `schema` describes (`None` writes no
    /// schema: the records are bytes with no declared layout). See the module docs for what is
    /// checked.
    pub fn begin(path: &Path, schema: Option<Schema>, options: ConvertOptions) -> Result<Conversion> {
        crate::check_writable(&path.to_string_lossy())?;
        let is_store = target_holds_store(path)?;
        if is_store && options.mode == WriteMode::Error {
            return Err(Error::Exists(path.to_path_buf()));
        }
        let replace = is_store && options.mode == WriteMode::Overwrite;
        let existing = if is_store && !replace { read_schema(path)? } else { None };
        if let (Some(old), Some(new)) = (&existing, &schema) {
            if !old.compatible(new) {
                return Err(Error::BadArgument(format!(
                    "{} holds a different store ({}), cannot append {}",
                    path.display(),
                    describe(old),
                    describe(new)
                )));
            }
        }
        let merged = match (existing.clone(), schema) {
            (Some(mut old), Some(new)) => {
                old.update(new);
                Some(old)
            }
            (old, new) => new.or(old),
        };
        // A schema that does not say what a record is (a caller's may lack `dtype`, as the
        // reference allows) checks only the size limits.
        let layout = merged.as_ref().and_then(|s| Layout::of(s).ok());
        if let Some(item) = layout.map(|l| l.item_bytes) {
            if !(1..=MAX_RECORD_LEN).contains(&item) {
                return Err(Error::RecordSize { position: 0, len: item });
            }
        }
        let dir = if replace { staging_dir(path) } else { path.to_path_buf() };
        if replace && dir.exists() {
            // Left by a conversion of a process with this id that died.
            fs::remove_dir_all(&dir).map_err(Error::io("remove", &dir))?;
        }
        let new_dirs: Vec<PathBuf> =
            dir.ancestors().take_while(|d| !d.exists()).map(Path::to_path_buf).collect();
        let created = !meta_path(&dir).exists();
        let store = match Store::open_or_create(&dir) {
            Ok(store) => store,
            Err(e) => {
                remove_dirs(&new_dirs);
                return Err(e);
            }
        };
        let start = store.len();
        let needs_dict = options.codec == Codec::ZstdDict && !store.has_dict();
        Ok(Conversion {
            target: path.to_path_buf(),
            dir,
            store: Some(store),
            options,
            schema: merged,
            existing,
            layout,
            start,
            written: 0,
            needs_dict,
            created: (created || replace).then_some(new_dirs),
            streaming: None,
            url: None,
            finished: false,
        })
    }

    /// Starts a conversion into `location`: a local path, as [`Conversion::begin`], or an
    /// `s3://`, `gs://` or `az://` URL. A URL is checked first ([`crate::upload::check_destination`]:
    /// no store there, in any mode, since stores at URLs are written once). The store is then
    /// written in a staging directory under `LOADERX_STAGING_DIR` (or the system's temporary
    /// directory) and streamed up as it is written ([`Stream`]): the staging space needed is
    /// the table and a few parts per chunk, not the store. [`Conversion::finish`] publishes it
    /// (`meta.zr` last); the staging directory is removed either way, and a failed conversion
    /// removes what it put under the URL.
    pub fn begin_at(
        location: &str,
        schema: Option<Schema>,
        options: ConvertOptions,
        remote: &RemoteOptions,
    ) -> Result<Conversion> {
        if !crate::is_url(location) {
            return Conversion::begin(Path::new(location), schema, options);
        }
        let base = std::env::var_os(STAGING_ENV).map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let stage = base.join(format!("loaderx-stage-{}-{nanos}", std::process::id()));
        let dir = stage.join("store");
        let stream = Stream::begin(location, remote, &dir)?;
        fs::create_dir_all(&stage).map_err(Error::io("create the staging directory", &stage))?;
        let options = ConvertOptions { mode: WriteMode::Error, ..options };
        match Conversion::begin(&dir, schema, options) {
            Ok(mut conversion) => {
                conversion.streaming = Some((stream, stage));
                conversion.url = Some(loaderx_core::url::redact(location));
                Ok(conversion)
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&stage);
                Err(e)
            }
        }
    }

    /// The schema the store held before this conversion (`None` for a new store, or one
    /// without a schema, or one being overwritten).
    pub fn existing_schema(&self) -> Option<&Schema> {
        self.existing.as_ref()
    }

    /// Sets a string key of the schema written at [`Conversion::finish`], for what a converter
    /// learns from the records themselves (an image store's `media`). Refused where no schema is
    /// written, and for the keys that say what a record is.
    pub fn set_schema_key(&mut self, key: &str, value: &str) -> Result<()> {
        if matches!(key, "kind" | "dtype" | "item_shape" | "codec" | "format" | "version") {
            return Err(Error::BadArgument(format!("the schema key {key:?} is the conversion's own")));
        }
        let schema = self
            .schema
            .as_mut()
            .ok_or_else(|| Error::BadArgument("this conversion writes no schema".into()))?;
        schema.set(key, value.into());
        Ok(())
    }

    /// Appends the records packed in `src` (record `k` starts at `offsets[k]` and ends where
    /// the next one starts, the last at the end of `src`).
    pub fn append(&mut self, src: &[u8], offsets: &[u64]) -> Result<()> {
        let at = |position: usize| self.written + position as u64;
        let ranges = record_ranges(src.len(), offsets).map_err(|e| match Error::from(e) {
            Error::RecordSize { position, len } => Error::RecordSize { position: at(position) as usize, len },
            other => other,
        })?;
        if let Some(layout) = self.layout {
            for (k, r) in ranges.iter().enumerate() {
                layout.check(at(k), r.len() as u64).map_err(Error::DoesNotFit)?;
            }
        }
        let store = self.store.as_ref().ok_or_else(finished)?;
        if self.needs_dict {
            let records: Vec<&[u8]> = ranges.iter().map(|r| &src[r.clone()]).collect();
            let (samples, sizes) = dict_training_set(&records);
            let capacity = self.options.dict_size.unwrap_or_else(|| auto_dict_size(samples.len() as u64));
            store.train_dict(&samples, &sizes, capacity)?;
            self.needs_dict = false;
        }
        let codec = self.options.codec;
        match &mut self.streaming {
            None => {
                store.append(src, offsets, codec)?;
            }
            // Appended in pieces of at most one upload part (or one record), each streamed
            // before the next is written: the staging disk holds about two parts of the chunk
            // being written, whatever the producer's block size.
            Some((stream, stage)) => {
                let mut k = 0;
                while k < ranges.len() {
                    let start = ranges[k].start;
                    let mut end = k + 1;
                    while end < ranges.len() && ranges[end].end - start <= crate::upload::PART {
                        end += 1;
                    }
                    let piece: Vec<u64> = ranges[k..end].iter().map(|r| (r.start - start) as u64).collect();
                    let appended = store.append(&src[start..ranges[end - 1].end], &piece, codec);
                    appended.map_err(|e| staging_full(e, self.url.as_deref(), Some(stage)))?;
                    stream.advance(&store.header())?;
                    k = end;
                }
            }
        }
        self.written += offsets.len() as u64;
        Ok(())
    }

    /// [`staging_full`] for this conversion.
    fn staging_full(&self, e: Error) -> Error {
        staging_full(e, self.url.as_deref(), self.streaming.as_ref().map(|(_, stage)| stage.as_path()))
    }

    /// Syncs the records, writes the schema and (for an overwrite) swaps the new store in.
    /// Returns the number of records this conversion wrote. On error the conversion rolls back.
    pub fn finish(mut self) -> Result<u64> {
        let store = self.store.as_ref().ok_or_else(finished)?;
        store.sync().map_err(|e| self.staging_full(e))?;
        let header = store.header();
        if let Some(schema) = &self.schema {
            write_schema(&self.dir, schema).map_err(|e| self.staging_full(e))?;
        }
        // Closed before the directory moves (Windows cannot rename a directory with open maps).
        self.store = None;
        if let Some((stream, stage)) = self.streaming.take() {
            let done = stream.finish(&header);
            let _ = fs::remove_dir_all(&stage);
            self.created = None; // the staging directory is gone: nothing local to roll back
            done?;
        } else if self.dir != self.target {
            publish(&self.dir, &self.target)?;
        }
        self.finished = true;
        Ok(self.written)
    }

    /// Undoes what this conversion wrote (see the module docs). Errors are ignored: it runs on
    /// a path that is already failing.
    fn roll_back(&mut self) {
        if let Some((stream, stage)) = self.streaming.take() {
            drop(stream); // aborts the upload and removes what it sent
            self.store = None;
            let _ = fs::remove_dir_all(&stage);
            return;
        }
        if let Some(store) = self.store.take() {
            if self.created.is_none() && self.written > 0 {
                let appended: Vec<u64> = (self.start..self.start + self.written).collect();
                let _ = store.delete(&appended);
            }
            let _ = store.sync();
        }
        let Some(new_dirs) = self.created.take() else { return };
        if self.dir != self.target {
            let _ = fs::remove_dir_all(&self.dir);
            return;
        }
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if is_store_file(name.strip_suffix(".tmp").unwrap_or(&name)) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        remove_dirs(&new_dirs);
    }
}

impl Drop for Conversion {
    fn drop(&mut self) {
        if !self.finished {
            self.roll_back();
        }
    }
}

fn finished() -> Error {
    Error::BadArgument("the conversion is finished".into())
}

/// Whether `path` holds a store, after refusing a file and a directory that holds other
/// things (a converter never mixes its files into a project folder or a manifest's directory).
fn target_holds_store(path: &Path) -> Result<bool> {
    if path.exists() && !path.is_dir() {
        return Err(Error::BadArgument(format!(
            "{} is a file; a converter writes a store into a directory",
            path.display()
        )));
    }
    if !path.is_dir() || meta_path(path).exists() {
        return Ok(path.is_dir());
    }
    let mut found: Vec<String> = fs::read_dir(path)
        .map_err(Error::io("list", path))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if found.is_empty() {
        return Ok(false);
    }
    found.sort();
    let more = if found.len() > 5 { ", ..." } else { "" };
    found.truncate(5);
    Err(Error::BadArgument(format!(
        "{} is neither empty nor a store (it holds {}{more}); write the store into a new or empty directory",
        path.display(),
        found.join(", ")
    )))
}

/// Where an overwrite builds its new store: beside the old one, named by this process.
fn staging_dir(target: &Path) -> PathBuf {
    sibling(target, "overwrite")
}

fn sibling(target: &Path, what: &str) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let parent = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    parent.join(format!(".{name}.loaderx-{what}-{}", crate::process::current()))
}

/// Puts the complete store at `new` in `target`'s place: the old directory moves aside, the new
/// one takes its name (one rename), files of the old directory that are not store files move
/// over, and the old store is removed.
fn publish(new: &Path, target: &Path) -> Result<()> {
    let old = sibling(target, "replaced");
    fs::rename(target, &old).map_err(Error::io("rename", target))?;
    if let Err(e) = fs::rename(new, target) {
        let _ = fs::rename(&old, target);
        return Err(Error::io("rename", new)(e));
    }
    for entry in fs::read_dir(&old).map_err(Error::io("list", &old))?.flatten() {
        let name = entry.file_name();
        if !is_store_file(&name.to_string_lossy()) {
            fs::rename(entry.path(), target.join(&name)).map_err(Error::io("rename", entry.path()))?;
        }
    }
    fs::remove_dir_all(&old).map_err(Error::io("remove", &old))?;
    crate::io::sync_dir(target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Removes the directories a failed conversion created, deepest first, stopping at the first
/// that is not empty.
fn remove_dirs(new_dirs: &[PathBuf]) {
    for d in new_dirs {
        if fs::remove_dir(d).is_err() {
            break;
        }
    }
}

fn describe(schema: &Schema) -> String {
    let kind = schema.kind().map(|k| k.as_str()).unwrap_or("?");
    let dtype = schema.dtype_str().unwrap_or("?");
    let shape = schema.item_shape().unwrap_or_default();
    format!("{kind} {dtype}{shape:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::schema::Kind;

    fn options(codec: Codec, mode: WriteMode) -> ConvertOptions {
        ConvertOptions { codec, mode, dict_size: None }
    }

    fn dense(item: u64) -> Schema {
        Schema::new(Kind::Dense, "|u1", &[item], "zstd")
    }

    #[test]
    fn a_finished_conversion_holds_its_records_and_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/s");
        let mut c =
            Conversion::begin(&path, Some(dense(4)), options(Codec::Zstd, WriteMode::Append)).unwrap();
        c.append(b"abcdefgh", &[0, 4]).unwrap();
        c.append(b"ijkl", &[0]).unwrap();
        assert_eq!(c.finish().unwrap(), 3);
        let store = Store::open(&path).unwrap();
        let mut out = vec![0u8; 12];
        store.gather(&[2, 0, 1], &mut out, &[0, 4, 8]).unwrap();
        assert_eq!(&out, b"ijklabcdefgh");
        assert!(read_schema(&path).unwrap().unwrap().compatible(&dense(4)));
    }

    #[test]
    fn a_dropped_conversion_leaves_nothing_it_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/s");
        let mut c = Conversion::begin(&path, None, options(Codec::Raw, WriteMode::Append)).unwrap();
        c.append(b"abc", &[0]).unwrap();
        drop(c);
        assert!(!dir.path().join("new").exists());
    }

    #[test]
    fn a_dropped_append_restores_the_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut c = Conversion::begin(&path, Some(dense(2)), options(Codec::Raw, WriteMode::Append)).unwrap();
        c.append(b"ab", &[0]).unwrap();
        c.finish().unwrap();
        let mut c = Conversion::begin(&path, Some(dense(2)), options(Codec::Raw, WriteMode::Append)).unwrap();
        c.append(b"cdef", &[0, 2]).unwrap();
        let e = c.append(b"xyz", &[0]).unwrap_err();
        assert!(matches!(e, Error::DoesNotFit(ref m) if m.index == 2), "{e}");
        drop(c);
        assert_eq!(Store::open(&path).unwrap().len(), 1);
    }

    #[test]
    fn record_sizes_are_checked_with_their_position_in_the_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let mut c =
            Conversion::begin(&dir.path().join("s"), None, options(Codec::Raw, WriteMode::Append)).unwrap();
        c.append(b"abc", &[0, 1]).unwrap();
        let e = c.append(b"abc", &[0, 3]).unwrap_err();
        assert!(matches!(e, Error::RecordSize { position: 3, len: 0 }), "{e}");
        let e =
            Conversion::begin(&dir.path().join("t"), Some(dense(0)), options(Codec::Raw, WriteMode::Append));
        assert!(matches!(e, Err(Error::RecordSize { len: 0, .. })));
        assert!(!dir.path().join("t").exists());
    }

    #[test]
    fn modes_decide_what_happens_to_an_existing_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let write = |mode, bytes: &[u8]| -> Result<u64> {
            let mut c = Conversion::begin(&path, Some(dense(1)), options(Codec::Raw, mode))?;
            c.append(bytes, &(0..bytes.len() as u64).collect::<Vec<_>>())?;
            c.finish()
        };
        write(WriteMode::Append, b"ab").unwrap();
        fs::write(path.join("notes.txt"), b"mine").unwrap();
        assert!(matches!(write(WriteMode::Error, b"c"), Err(Error::Exists(_))));
        write(WriteMode::Append, b"c").unwrap();
        assert_eq!(Store::open(&path).unwrap().len(), 3);
        write(WriteMode::Overwrite, b"xyzw").unwrap();
        assert_eq!(Store::open(&path).unwrap().len(), 4);
        assert_eq!(fs::read(path.join("notes.txt")).unwrap(), b"mine");
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("s")]);
        let e =
            Conversion::begin(&path, Some(dense(2)), options(Codec::Raw, WriteMode::Append)).err().unwrap();
        assert!(e.to_string().contains("holds a different store"), "{e}");
    }

    #[test]
    fn a_failed_overwrite_keeps_the_old_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut c = Conversion::begin(&path, Some(dense(1)), options(Codec::Raw, WriteMode::Append)).unwrap();
        c.append(b"ab", &[0, 1]).unwrap();
        c.finish().unwrap();
        let mut c =
            Conversion::begin(&path, Some(dense(1)), options(Codec::Raw, WriteMode::Overwrite)).unwrap();
        c.append(b"x", &[0]).unwrap();
        drop(c);
        assert_eq!(Store::open(&path).unwrap().len(), 2);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn other_directories_and_urls_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("x.txt"), b"").unwrap();
        let e = Conversion::begin(dir.path(), None, options(Codec::Raw, WriteMode::Append)).err().unwrap();
        assert!(e.to_string().contains("neither empty nor a store (it holds x.txt)"), "{e}");
        let e = Conversion::begin(&dir.path().join("x.txt"), None, options(Codec::Raw, WriteMode::Append));
        assert!(matches!(e, Err(Error::BadArgument(_))));
        let e = Conversion::begin(Path::new("s3://b/x"), None, options(Codec::Raw, WriteMode::Append));
        assert!(matches!(e, Err(Error::BadArgument(_))));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_dictionary_conversion_trains_on_its_first_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let records: Vec<u8> =
            (0..4000u32).flat_map(|i| format!("record {:08}", i % 97).into_bytes()).collect();
        let offsets: Vec<u64> = (0..4000).map(|i| i * 15).collect();
        let mut c = Conversion::begin(&path, None, options(Codec::ZstdDict, WriteMode::Append)).unwrap();
        c.append(&records, &offsets).unwrap();
        c.finish().unwrap();
        assert!(Store::open(&path).unwrap().has_dict());
    }
}
