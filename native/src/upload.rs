//! Copying a local store's live bytes to object storage (`loaderx cp`, `copy_store`).
//!
//! Publication rule (docs/format.md, "Stores on object storage"): a remote store exists once its
//! `meta.zr` does, since every reader opens a store by reading it first. A copy uploads every
//! other file first and `meta.zr` last, created only where none is (`If-None-Match: *`), so a
//! reader never opens a half-copied store and two copies to one URL never both publish.
//!
//! Invariants:
//! * Only live bytes go up: each file up to core's [`file_used`] (the table up to the store's
//!   length, each chunk up to its last record, `checksums.lx` up to the last live slot), never
//!   the sparse space writers preallocate (4 GiB per chunk, 256 MiB of table).
//! * A destination that already holds a store is refused, never overwritten.
//! * A copy is resumable: each object finished is listed, with its size and SHA-256, in the
//!   marker object [`MARKER`] under the destination; a later copy of the same store skips the
//!   objects whose local bytes still hash the same. Publishing removes the marker.
//! * Memory is bounded: files stream from disk in parts of [`PART`] bytes (multipart uploads
//!   above [`SINGLE_PUT`]), at most [`PARALLEL`] objects at a time, [`PARTS_IN_FLIGHT`] parts
//!   each. Retries of interrupted requests are `object_store`'s.
//! * The store must not be written while it is copied (the copy reads its header once).

use std::path::{Path, PathBuf};

use loaderx_core::open::{
    chunk_ids, chunk_name, CHECKSUM_FILE, DICT_FILE, JOURNAL_FILE, META_FILE, SCHEMA_FILE,
};
use loaderx_core::stats::file_used;

use crate::error::{Error, Result};
use crate::options::RemoteOptions;
use crate::store::Store;

/// The object under the destination that lists the objects a copy finished.
pub const MARKER: &str = ".loaderx-upload";
/// Files up to this size go up in one request; larger ones as multipart uploads.
pub const SINGLE_PUT: u64 = 16 << 20;
/// Bytes per part of a multipart upload (and per local read).
pub const PART: usize = 16 << 20;
/// Objects uploaded at once.
pub const PARALLEL: usize = 4;
/// Parts of one multipart upload in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// The destination, as shown (secrets redacted).
    pub url: String,
    /// Objects the store has at the destination, and how many of them an earlier copy had
    /// already sent (skipped).
    pub objects: usize,
    pub skipped: usize,
    /// Bytes sent, and the live bytes of the store (what a full copy sends).
    pub sent: u64,
    pub live: u64,
    /// The local files' apparent size (what a generic copy of the directory would send).
    pub apparent: u64,
    /// The store's content digest, read back from the destination (`None` without checksums
    /// over every record).
    pub digest: Option<String>,
}

/// Copies the store at local directory `src` to `dst` (an `s3://`, `gs://` or `az://` URL):
/// its live bytes, `meta.zr` last (see the module docs), resuming an interrupted copy of the
/// same store. Then opens the copy and checks its length and content digest against the
/// local store's. `sent(n)` is called as bytes go up (for a progress bar). A build without
/// object storage (the `remote` feature) refuses with [`crate::Error::BadArgument`].
pub fn upload(
    src: &Path,
    dst: &str,
    options: &RemoteOptions,
    sent: &(dyn Fn(u64) + Sync),
) -> Result<CopyReport> {
    refuse_http(dst)?;
    #[cfg(feature = "remote")]
    return imp::upload(src, dst, options, sent);
    #[cfg(not(feature = "remote"))]
    {
        let _ = (src, options, sent);
        Err(no_remote(dst))
    }
}

/// A store uploaded while it is written (a conversion to a URL, see [`crate::Conversion`]): each
/// chunk file goes up as one multipart upload, part by part as the writer passes each part's end,
/// and the local bytes of every part sent are released ([`crate::io::release`]). The staging
/// space a conversion needs is then the table, the side files and at most
/// [`PARTS_IN_FLIGHT`] + 1 parts of each chunk being written, whatever the store's size.
/// [`Stream::finish`] sends the rest and publishes as [`upload`] does (`meta.zr` last).
///
/// Invariants: bytes below the store's tail are final once an append returns (a conversion
/// only appends); a chunk's upload is completed only once the writer has moved past the chunk
/// (or at `finish`). A stream dropped unfinished aborts its open upload and removes what it put
/// under the destination, unless a store was published there.
pub struct Stream {
    #[cfg(feature = "remote")]
    inner: imp::Stream,
}

impl Stream {
    /// Starts streaming the store being written in local directory `dir` to `dst`, after the
    /// checks of [`check_destination`].
    pub fn begin(dst: &str, options: &RemoteOptions, dir: &Path) -> Result<Stream> {
        refuse_http(dst)?;
        #[cfg(feature = "remote")]
        return Ok(Stream { inner: imp::Stream::begin(dst, options, dir)? });
        #[cfg(not(feature = "remote"))]
        {
            let _ = (options, dir);
            Err(no_remote(dst))
        }
    }

    /// Sends every whole part the writer has finished, by the store's `header` after an append.
    pub fn advance(&mut self, header: &loaderx_core::format::Header) -> Result<()> {
        #[cfg(feature = "remote")]
        return self.inner.advance(header);
        #[cfg(not(feature = "remote"))]
        {
            let _ = header;
            Ok(())
        }
    }

    /// Completes the chunk uploads and copies the rest of the finished store at `dir` (live
    /// bytes, `meta.zr` last), then reads the copy back as [`upload`] does.
    pub fn finish(self, header: &loaderx_core::format::Header) -> Result<CopyReport> {
        #[cfg(feature = "remote")]
        return self.inner.finish(header);
        #[cfg(not(feature = "remote"))]
        {
            let _ = header;
            unreachable!("a Stream is never made without the remote feature")
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}

/// Removes what an interrupted copy left under `dst` (objects and the marker). A published
/// store (its `meta.zr` there) is refused with [`crate::Error::RemoteConflict`] unless
/// `published` (a writer removing a store it wrote and nobody lists). Returns the objects
/// removed.
pub fn remove_partial(dst: &str, options: &RemoteOptions, published: bool) -> Result<usize> {
    #[cfg(feature = "remote")]
    return imp::remove_partial(dst, options, published);
    #[cfg(not(feature = "remote"))]
    {
        let _ = (options, published);
        Err(no_remote(dst))
    }
}

/// The names directly under the prefix `url` (its "directories": stores, for a manifest's
/// `parts/`), sorted.
pub fn children(url: &str, options: &RemoteOptions) -> Result<Vec<String>> {
    #[cfg(feature = "remote")]
    return imp::children(url, options);
    #[cfg(not(feature = "remote"))]
    {
        let _ = options;
        Err(no_remote(url))
    }
}

/// Checks that a store can be written at `dst` before any work is done: an `s3://`, `gs://`
/// or `az://` URL (`http(s)://` is read-only: [`crate::Error::BadArgument`]) that the
/// credentials reach and where no store is ([`crate::Error::RemoteConflict`] otherwise).
pub fn check_destination(dst: &str, options: &RemoteOptions) -> Result<()> {
    refuse_http(dst)?;
    #[cfg(feature = "remote")]
    return imp::check_destination(dst, options);
    #[cfg(not(feature = "remote"))]
    {
        let _ = options;
        Err(no_remote(dst))
    }
}

/// [`crate::Error::BadArgument`] for an `http(s)://` destination: HTTP is read-only.
fn refuse_http(dst: &str) -> Result<()> {
    let scheme = dst.split("://").next().unwrap_or_default().to_ascii_lowercase();
    if scheme == "http" || scheme == "https" {
        return Err(crate::Error::BadArgument(format!(
            "{}: HTTP URLs are read-only; write to s3://, gs://, az:// or a local directory",
            loaderx_core::url::redact(dst)
        )));
    }
    Ok(())
}

#[cfg(not(feature = "remote"))]
fn no_remote(dst: &str) -> crate::Error {
    crate::Error::BadArgument(format!(
        "{}: this build has no object storage client (see docs/release.md); copy the store from a build that has one",
        loaderx_core::url::redact(dst)
    ))
}

/// One file of the store and the bytes of it that go up.
#[derive(Debug, Clone)]
struct Part {
    name: String,
    used: u64,
}

/// The files of the store at `dir` with their live bytes, `meta.zr` last, and their apparent
/// size in all.
fn parts_of(dir: &Path, store: &Store) -> Result<(Vec<Part>, u64)> {
    let header = store.header();
    let mut names: Vec<String> = chunk_ids(&header).map(chunk_name).collect();
    names.extend([SCHEMA_FILE, DICT_FILE, JOURNAL_FILE, CHECKSUM_FILE, META_FILE].map(str::to_owned));
    let mut parts = Vec::new();
    let mut apparent = 0;
    for name in names {
        let path = dir.join(&name);
        let size = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("read the size of", &path)(e)),
        };
        apparent += size;
        parts.push(Part { used: file_used(&name, size, &header), name });
    }
    Ok((parts, apparent))
}

/// Copies the store at local directory `src` to `dst`: a URL ([`upload`]), or a local directory
/// that does not exist yet or is empty ([`copy_local`]).
pub fn copy(
    src: &Path,
    dst: &str,
    options: &RemoteOptions,
    sent: &(dyn Fn(u64) + Sync),
) -> Result<CopyReport> {
    if crate::is_url(dst) {
        return upload(src, dst, options, sent);
    }
    copy_local(src, Path::new(dst), options, sent)
}

/// Copies the store at local directory `src` to the new local directory `dst`: each file made
/// at its source's apparent size with only its live bytes written, the rest left a hole as the
/// writers leave it (so the copy takes the store's live bytes on disk, not its gigabytes of
/// preallocated space, and stays appendable). The files are written in a directory beside
/// `dst`, synced, and renamed into place, so `dst` is never a half-copied store. Then the copy
/// is opened and its length and content digest checked, as [`upload`] does. A `dst` that holds
/// anything is refused ([`Error::BadArgument`]).
pub fn copy_local(
    src: &Path,
    dst: &Path,
    options: &RemoteOptions,
    sent: &(dyn Fn(u64) + Sync),
) -> Result<CopyReport> {
    crate::check_writable(&dst.to_string_lossy())?;
    match std::fs::read_dir(dst).map(|mut entries| entries.next().is_some()) {
        Ok(true) => {
            return Err(Error::BadArgument(format!(
                "{} is not empty: cp makes a new store (remove it, or choose a new directory)",
                dst.display()
            )))
        }
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("read", dst)(e)),
    }
    let local = Store::open_location(&src.to_string_lossy(), false, options)?;
    let (parts, apparent) = parts_of(src, &local)?;
    let live: u64 = parts.iter().map(|p| p.used).sum();
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(Error::io("create", &parent))?;
    let name = dst.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.loaderx-cp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp); // left by a copy of a process with this id that died
    let written = (|| -> Result<()> {
        std::fs::create_dir(&tmp).map_err(Error::io("create", &tmp))?;
        let mut buf = vec![0u8; PART];
        for part in &parts {
            let (from_path, to_path) = (src.join(&part.name), tmp.join(&part.name));
            let from = std::fs::File::open(&from_path).map_err(Error::io("open", &from_path))?;
            let size = from.metadata().map_err(Error::io("read the size of", &from_path))?.len();
            let to = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&to_path)
                .map_err(Error::io("create", &to_path))?;
            crate::io::set_len(&to, size, &to_path)?;
            let mut at = 0;
            while at < part.used {
                let n = (part.used - at).min(PART as u64) as usize;
                crate::io::read_exact_at(&from, &mut buf[..n], at, &from_path)?;
                crate::io::write_all_at(&to, &buf[..n], at, &to_path)?;
                at += n as u64;
                sent(n as u64);
            }
            crate::io::sync_file(&to, &to_path)?;
        }
        crate::io::sync_dir(&tmp)?;
        if dst.exists() {
            std::fs::remove_dir(dst).map_err(Error::io("replace the empty directory", dst))?;
        }
        crate::io::rename(&tmp, dst)?;
        crate::io::sync_dir(&parent)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let digest = read_back(&dst.to_string_lossy(), &dst.display().to_string(), &local, options)?;
    let objects = parts.len();
    Ok(CopyReport { url: dst.display().to_string(), objects, skipped: 0, sent: live, live, apparent, digest })
}

/// Opens the copy at `location` (shown as `shown`) and checks that it reads back as `local`
/// does: the same length and content digest. Returns the digest.
fn read_back(location: &str, shown: &str, local: &Store, options: &RemoteOptions) -> Result<Option<String>> {
    let copy = Store::open_location(location, false, options)?;
    let (digest, want) = (copy.content_digest()?, local.content_digest()?);
    if copy.len() != local.len() || digest != want {
        return Err(Error::Corrupt {
            file: shown.into(),
            offset: None,
            index: None,
            detail: format!(
                "the copy reads back as {} records with digest {digest:?}, not {} records with digest {want:?}",
                copy.len(),
                local.len()
            ),
        });
    }
    Ok(digest)
}

#[cfg(feature = "remote")]
mod imp {
    use super::*;
    use std::io::Read;
    use std::sync::Mutex;

    use futures::{StreamExt, TryStreamExt};
    use loaderx_core::open::{chunk_name, META_FILE};
    use loaderx_core::stats::file_used;
    use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
    use sha2::{Digest, Sha256};

    use crate::error::Error;
    use crate::sources::object::{connect, runtime, Connection};
    use crate::store::Store;
    use loaderx_core::format::Header;
    use std::path::PathBuf;

    /// An object a copy finished: its name, size and SHA-256 (hex), as the marker lists it.
    type Entry = (String, u64, String);

    /// The multipart upload of the chunk file being written.
    struct Open {
        id: u16,
        name: String,
        file: std::fs::File,
        writer: WriteMultipart,
        hash: Sha256,
        /// Bytes of the chunk handed to the upload (and released locally).
        upto: u64,
    }

    pub(super) struct Stream {
        conn: Connection,
        options: RemoteOptions,
        dir: PathBuf,
        open: Option<Open>,
        /// The first chunk not yet completed or skipped.
        next: u16,
        done: Vec<Entry>,
        sent: u64,
        finished: bool,
    }

    impl Stream {
        pub(super) fn begin(dst: &str, options: &RemoteOptions, dir: &Path) -> Result<Stream> {
            let conn = connect(dst, options)?;
            runtime()?.block_on(refuse_a_store(&conn))?;
            Ok(Stream {
                conn,
                options: options.clone(),
                dir: dir.to_path_buf(),
                open: None,
                next: 0,
                done: Vec::new(),
                sent: 0,
                finished: false,
            })
        }

        pub(super) fn advance(&mut self, header: &Header) -> Result<()> {
            runtime()?.block_on(self.send(header, false))
        }

        pub(super) fn finish(mut self, header: &Header) -> Result<CopyReport> {
            runtime()?.block_on(self.send(header, true))?;
            let count = |_: u64| {};
            let conn = Connection::clone(&self.conn);
            let mut report = upload_with(&self.dir, conn, &self.options, &count, &self.done)?;
            self.finished = true;
            report.sent += self.sent;
            Ok(report)
        }

        /// Sends the chunks up to the store's tail: each whole part below the tail, and all of
        /// every chunk the writer has left (or, with `all`, of the tail chunk too), completing
        /// their uploads. A chunk too small to need a multipart upload is left to the final copy.
        async fn send(&mut self, header: &Header, all: bool) -> Result<()> {
            for id in self.next..=header.tail_chunk {
                let name = chunk_name(id);
                let path = self.dir.join(&name);
                let size = match std::fs::metadata(&path) {
                    Ok(m) => m.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io("read the size of", &path)(e)),
                };
                let end = file_used(&name, size, header);
                let sealed = id < header.tail_chunk || all;
                let limit = if sealed { end } else { end - end % PART as u64 };
                if self.open.is_none() {
                    if limit < PART as u64 || (sealed && end <= SINGLE_PUT) {
                        if sealed {
                            self.next = id + 1; // left whole for the final copy
                        }
                        continue;
                    }
                    let upload = self.conn.store.put_multipart(&self.conn.path(&name)).await;
                    let writer = upload.map_err(|e| write_error(&self.conn, e))?;
                    let file = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&path)
                        .map_err(Error::io("open", &path))?;
                    let writer = WriteMultipart::new_with_chunk_size(writer, PART);
                    self.open =
                        Some(Open { id, name: name.clone(), file, writer, hash: Sha256::new(), upto: 0 });
                }
                let Some(open) = self.open.as_mut().filter(|o| o.id == id) else { continue };
                while open.upto < limit {
                    let n = (limit - open.upto).min(PART as u64);
                    let mut buf = vec![0u8; n as usize];
                    crate::io::read_exact_at(&open.file, &mut buf, open.upto, &path)?;
                    open.hash.update(&buf);
                    open.writer
                        .wait_for_capacity(PARTS_IN_FLIGHT)
                        .await
                        .map_err(|e| write_error(&self.conn, e))?;
                    open.writer.write(&buf);
                    // The part's bytes are the upload's now; their disk space is given back
                    // (best effort: a filesystem without holes keeps them).
                    let _ = crate::io::release(&open.file, open.upto, n);
                    open.upto += n;
                    self.sent += n;
                }
                if sealed {
                    let Some(open) = self.open.take() else { continue };
                    open.writer.finish().await.map_err(|e| write_error(&self.conn, e))?;
                    self.done.push((open.name, open.upto, hex(&open.hash.finalize())));
                    self.next = id + 1;
                }
            }
            Ok(())
        }
    }

    impl Drop for Stream {
        /// An unfinished stream (the conversion failed) aborts its open upload and removes what
        /// it put under the destination; a published store there is never touched.
        fn drop(&mut self) {
            if self.finished {
                return;
            }
            let Ok(rt) = runtime() else { return };
            if let Some(open) = self.open.take() {
                let _ = rt.block_on(open.writer.abort());
            }
            // Refused, and so skipped, where a store is published (this one or another's).
            let _ = remove_partial(&self.conn.url, &self.options, false);
        }
    }

    /// Attempts of the publishing put after the first whose answer was lost.
    const PUBLISH_RETRIES: u32 = 3;

    /// SHA-256 of the first `len` bytes of `path`, in hex.
    fn local_sha256(path: &Path, len: u64) -> Result<String> {
        let file = std::fs::File::open(path).map_err(Error::io("open", path))?;
        let mut reader = file.take(len);
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader.read(&mut buf).map_err(Error::io("read", path))?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
        }
        Ok(hex(&hash.finalize()))
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The error of a failed write at `conn`: no permission, no such bucket, or `object_store`'s
    /// (after its retries), each naming the URL.
    fn write_error(conn: &Connection, source: object_store::Error) -> Error {
        match source {
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                Error::RemoteDenied { url: conn.shown.clone(), source }
            }
            object_store::Error::NotFound { .. } => {
                let bucket = url::Url::parse(&conn.url).ok().and_then(|u| u.host_str().map(str::to_owned));
                Error::RemoteMissing {
                    url: conn.shown.clone(),
                    what: format!("no such bucket or container: {}", bucket.unwrap_or_default()),
                }
            }
            source => conn.explain(source),
        }
    }

    /// The marker's entries (`name size sha256` per line), or none when there is no marker.
    async fn read_marker(conn: &Connection) -> Result<Vec<Entry>> {
        let got = match conn.store.get(&conn.path(MARKER)).await {
            Ok(r) => r.bytes().await.map_err(|e| write_error(conn, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(write_error(conn, e)),
        };
        let text = String::from_utf8_lossy(&got);
        Ok(text
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut w = l.split(' ');
                Some((w.next()?.to_owned(), w.next()?.parse().ok()?, w.next()?.to_owned()))
            })
            .collect())
    }

    async fn write_marker(conn: &Connection, done: &[Entry]) -> Result<()> {
        let mut text = String::from("loaderx-upload 1\n");
        for (name, size, sha) in done {
            text.push_str(&format!("{name} {size} {sha}\n"));
        }
        conn.store
            .put(&conn.path(MARKER), PutPayload::from(text.into_bytes()))
            .await
            .map_err(|e| write_error(conn, e))?;
        Ok(())
    }

    /// Uploads the first `len` bytes of `path` as `name`, `mode` for a single request; returns
    /// their SHA-256. `sent(n)` is called as bytes go.
    async fn put_file(
        conn: &Connection,
        path: &Path,
        name: &str,
        len: u64,
        mode: PutMode,
        sent: &(dyn Fn(u64) + Sync),
    ) -> Result<String> {
        let file = std::fs::File::open(path).map_err(Error::io("open", path))?;
        let mut reader = file.take(len);
        let mut hash = Sha256::new();
        let target = conn.path(name);
        let read_part = |reader: &mut std::io::Take<std::fs::File>| -> Result<Vec<u8>> {
            let mut buf = Vec::with_capacity(PART.min(len as usize));
            reader.by_ref().take(PART as u64).read_to_end(&mut buf).map_err(Error::io("read", path))?;
            Ok(buf)
        };
        if len <= SINGLE_PUT || !matches!(mode, PutMode::Overwrite) {
            let mut bytes = Vec::with_capacity(len as usize);
            reader.read_to_end(&mut bytes).map_err(Error::io("read", path))?;
            if bytes.len() as u64 != len {
                return Err(Error::BadArgument(format!("{} changed while it was copied", path.display())));
            }
            hash.update(&bytes);
            let opts = PutOptions { mode, ..PutOptions::default() };
            conn.store.put_opts(&target, PutPayload::from(bytes), opts).await.map_err(|e| match e {
                object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
                    Error::RemoteConflict {
                        url: conn.shown.clone(),
                        what: format!(
                            "{name} appeared there while this copy ran: another copy published a store first"
                        ),
                    }
                }
                e => write_error(conn, e),
            })?;
            sent(len);
            return Ok(hex(&hash.finalize()));
        }
        let upload = conn.store.put_multipart(&target).await.map_err(|e| write_error(conn, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut total = 0u64;
        let result: Result<()> = async {
            loop {
                let buf = read_part(&mut reader)?;
                if buf.is_empty() {
                    break;
                }
                hash.update(&buf);
                writer.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(|e| write_error(conn, e))?;
                writer.write(&buf);
                total += buf.len() as u64;
                sent(buf.len() as u64);
            }
            if total != len {
                return Err(Error::BadArgument(format!("{} changed while it was copied", path.display())));
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                writer.finish().await.map_err(|e| write_error(conn, e))?;
                Ok(hex(&hash.finalize()))
            }
            Err(e) => {
                // Parts already sent are dropped server-side (best effort).
                let _ = writer.abort().await;
                Err(e)
            }
        }
    }

    /// Puts `part` (`meta.zr`) where no object of its name is, retrying a request whose answer
    /// was lost: `object_store` does not retry a conditional put after a broken connection,
    /// since the put may have landed. When the name turns out taken, the object there is
    /// compared with the local bytes: equal, it is this copy's own earlier attempt (published);
    /// different, another copy published first ([`Error::RemoteConflict`]).
    async fn publish(
        conn: &Connection,
        path: &Path,
        part: &Part,
        sent: &(dyn Fn(u64) + Sync),
    ) -> Result<String> {
        let mut attempt = 0;
        loop {
            match put_file(conn, path, &part.name, part.used, PutMode::Create, sent).await {
                Ok(sha) => return Ok(sha),
                Err(conflict @ Error::RemoteConflict { .. }) => {
                    let ours = local_sha256(path, part.used)?;
                    let there =
                        conn.store.get(&conn.path(&part.name)).await.map_err(|e| write_error(conn, e))?;
                    let bytes = there.bytes().await.map_err(|e| write_error(conn, e))?;
                    if hex(&Sha256::digest(&bytes)) != ours {
                        return Err(conflict);
                    }
                    sent(part.used); // by the attempt whose answer was lost
                    return Ok(ours);
                }
                Err(Error::Remote { source, .. }) if attempt < PUBLISH_RETRIES && answer_lost(&source) => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `error` is a transport failure (a broken connection or a timeout) rather than
    /// the server's answer: the one failure `object_store` leaves unretried on a conditional put.
    fn answer_lost(error: &object_store::Error) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = next {
            if e.downcast_ref::<object_store::client::HttpError>().is_some() {
                return true;
            }
            next = e.source();
        }
        false
    }

    /// The refusal of a published store at `conn` (its `meta.zr` there).
    async fn refuse_a_store(conn: &Connection) -> Result<()> {
        match conn.store.head(&conn.path(META_FILE)).await {
            Ok(_) => Err(Error::RemoteConflict {
                url: conn.shown.clone(),
                what: "a store is already there (its meta.zr exists); stores at URLs are written once, never overwritten".into(),
            }),
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(write_error(conn, e)),
        }
    }

    pub(super) fn check_destination(dst: &str, options: &RemoteOptions) -> Result<()> {
        let conn = connect(dst, options)?;
        runtime()?.block_on(refuse_a_store(&conn))
    }

    pub(super) fn upload(
        src: &Path,
        dst: &str,
        options: &RemoteOptions,
        sent: &(dyn Fn(u64) + Sync),
    ) -> Result<CopyReport> {
        let conn = connect(dst, options)?;
        upload_with(src, conn, options, sent, &[])
    }

    /// [`upload`] through `conn`, where the objects `streamed` lists went up already (sent by a
    /// [`Stream`], their local bytes released): they are neither hashed nor sent again.
    fn upload_with(
        src: &Path,
        conn: Connection,
        options: &RemoteOptions,
        sent: &(dyn Fn(u64) + Sync),
        streamed: &[Entry],
    ) -> Result<CopyReport> {
        let local = Store::open_location(&src.to_string_lossy(), false, options)?;
        let (parts, apparent) = parts_of(src, &local)?;
        let live: u64 = parts.iter().map(|p| p.used).sum();
        let (objects, skipped, sent_bytes) = runtime()?.block_on(async {
            refuse_a_store(&conn).await?;
            let earlier = read_marker(&conn).await?;
            let done = Mutex::new(Vec::new());
            let skipped = Mutex::new(0usize);
            let sent_bytes = std::sync::atomic::AtomicU64::new(0);
            let count = |n: u64| {
                sent_bytes.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                sent(n);
            };
            let (meta, rest): (Vec<Part>, Vec<Part>) =
                parts.iter().cloned().partition(|p| p.name == META_FILE);
            futures::stream::iter(rest.iter().map(Ok))
                .try_for_each_concurrent(PARALLEL, |part| {
                    let (conn, earlier, done, skipped, count) = (&conn, &earlier, &done, &skipped, &count);
                    async move {
                        let path = src.join(&part.name);
                        let same = |(n, size, _): &&Entry| *n == part.name && *size == part.used;
                        if let Some(entry) = streamed.iter().find(same) {
                            let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                            d.push(entry.clone());
                            return Ok(());
                        }
                        let before = earlier.iter().find(same);
                        if let Some((_, _, sha)) = before {
                            if local_sha256(&path, part.used)? == *sha {
                                *skipped.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                                done.lock().unwrap_or_else(|e| e.into_inner()).push((
                                    part.name.clone(),
                                    part.used,
                                    sha.clone(),
                                ));
                                return Ok(());
                            }
                        }
                        let sha =
                            put_file(conn, &path, &part.name, part.used, PutMode::Overwrite, count).await?;
                        let listed = {
                            let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                            d.push((part.name.clone(), part.used, sha));
                            d.clone()
                        };
                        write_marker(conn, &listed).await
                    }
                })
                .await?;
            // Publication: meta.zr last, only where none is.
            for part in &meta {
                publish(&conn, &src.join(&part.name), part, &count).await?;
            }
            match conn.store.delete(&conn.path(MARKER)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(write_error(&conn, e)),
            }
            let skipped = *skipped.lock().unwrap_or_else(|e| e.into_inner());
            Ok((parts.len(), skipped, sent_bytes.load(std::sync::atomic::Ordering::Relaxed)))
        })?;
        let digest = super::read_back(&conn.url, &conn.shown, &local, options)?;
        Ok(CopyReport { url: conn.shown, objects, skipped, sent: sent_bytes, live, apparent, digest })
    }

    pub(super) fn children(url: &str, options: &RemoteOptions) -> Result<Vec<String>> {
        let conn = connect(url, options)?;
        runtime()?.block_on(async {
            let listed = conn
                .store
                .list_with_delimiter(Some(&conn.prefix))
                .await
                .map_err(|e| write_error(&conn, e))?;
            let mut names: Vec<String> =
                listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)).collect();
            names.sort();
            Ok(names)
        })
    }

    pub(super) fn remove_partial(dst: &str, options: &RemoteOptions, published: bool) -> Result<usize> {
        let conn = connect(dst, options)?;
        runtime()?.block_on(async {
            if !published && conn.store.head(&conn.path(META_FILE)).await.is_ok() {
                return Err(Error::RemoteConflict {
                    url: conn.shown.clone(),
                    what: "a published store is there (its meta.zr exists); only a partial copy is removed"
                        .into(),
                });
            }
            let listed: Vec<_> =
                conn.store.list(Some(&conn.prefix)).try_collect().await.map_err(|e| write_error(&conn, e))?;
            let n = listed.len();
            futures::stream::iter(listed.into_iter().map(|m| m.location))
                .map(|p| {
                    let conn = &conn;
                    async move { conn.store.delete(&p).await.map_err(|e| write_error(conn, e)) }
                })
                .buffer_unordered(8)
                .try_collect::<Vec<()>>()
                .await?;
            Ok(n)
        })
    }
}
