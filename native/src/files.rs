//! The files of a store directory: their paths, read-only chunk views, the dictionary, creating
//! an empty store, opening `meta.zr` for writing, and the schema file.
//!
//! Invariants:
//! * A store's files are `meta.zr`, chunk files `<id>.zr` (`id` in decimal, no leading
//!   zeros required), `dict.zr`, `schema.msgpack` and, during a delete, `delete.journal`, named
//!   by core's open protocol (`loaderx_core::open`). Every local path is built here.
//! * Whole-file replacements (`meta.zr` at creation, `dict.zr`, `schema.msgpack`) are written to
//!   `<name>.tmp` through the I/O seam, synced, and renamed into place, so the file appears
//!   whole or not at all. A failed replacement removes its `.tmp` and leaves the old file.
//! * Nothing read from a file is allocated before its size is checked: the side files against
//!   core's caps ([`read_side`]).
//! * Opening `meta.zr` for writing takes the store's one writer lock ([`Error::Locked`] when
//!   another handle or process holds it) and validates the header before anything is written.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use loaderx_core::codec::Dictionary;
use loaderx_core::format::{Header, CHUNK_SIZE, HEADER_SIZE, META_FULL_SIZE};
use loaderx_core::open::{self, DICT_FILE, JOURNAL_FILE, META_FILE, SCHEMA_FILE};
use loaderx_core::schema::Schema;

use crate::error::{Error, Result};
use crate::io;
use crate::map::{ChunkMap, MetaMap};

/// `meta.zr` in `dir`.
pub(crate) fn meta_path(dir: &Path) -> PathBuf {
    dir.join(META_FILE)
}

/// Chunk file `id` in `dir`.
pub(crate) fn chunk_path(dir: &Path, id: u16) -> PathBuf {
    dir.join(open::chunk_name(id))
}

/// `dict.zr` in `dir`.
pub(crate) fn dict_path(dir: &Path) -> PathBuf {
    dir.join(DICT_FILE)
}

/// `delete.journal` in `dir`.
pub(crate) fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

/// The temporary name `path` is written under before it is renamed into place.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn is_chunk_name(name: &str) -> bool {
    open::chunk_id(name).is_some()
}

/// Writes `bytes` to `path` whole: to `path.tmp` (grown to `len` when that is larger), synced,
/// then renamed over `path`. On failure the `.tmp` is removed and `path` is as it was. The
/// caller syncs the directory.
pub(crate) fn replace(path: &Path, bytes: &[u8], len: u64) -> Result<()> {
    let tmp = tmp_path(path);
    let result = io::write_new(&tmp, bytes, len).and_then(|()| io::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A read-only view of one chunk file, as long as the file was when mapped.
#[derive(Debug)]
pub(crate) struct Chunk {
    map: ChunkMap,
}

impl Chunk {
    /// Maps the chunk file at `path`; `None` when it does not exist.
    pub(crate) fn open_read(path: &Path) -> Result<Option<Chunk>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path)(e)),
        };
        let len = file.metadata().map_err(Error::io("stat", path))?.len();
        let map = ChunkMap::new(&file, len).map_err(Error::io("mmap", path))?;
        Ok(Some(Chunk { map }))
    }

    /// Mapped bytes.
    pub(crate) fn len(&self) -> u64 {
        self.map.len()
    }

    /// The bytes `[offset, offset + len)`, or `None` if they are not all mapped.
    pub(crate) fn bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        self.map.bytes(offset, len)
    }
}

/// The whole of side file `name` (`dict.zr`, `schema.msgpack`, `delete.journal`) in `dir`, its
/// size checked against core's cap for it before anything is allocated
/// (`loaderx_core::open::check_side_size`); `None` when there is no such file.
pub(crate) fn read_side(dir: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let path = dir.join(name);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &path)(e)),
    };
    let len = file.metadata().map_err(Error::io("stat", &path))?.len();
    open::check_side_size(name, len).map_err(|e| Error::classified(dir, e))?;
    let mut bytes = vec![0u8; len as usize];
    io::read_exact_at(&file, &mut bytes, 0, &path)?;
    Ok(Some(bytes))
}

/// Loads `dict.zr`; `None` when the store has none.
pub(crate) fn load_dict(dir: &Path) -> Result<Option<Dictionary>> {
    Ok(read_side(dir, DICT_FILE)?.map(Dictionary::new))
}

/// Creates an empty store in `dir`: `meta.zr` (written whole, then renamed into place) and `0.zr`.
pub(crate) fn create_store(dir: &Path) -> Result<()> {
    let has_store_files = fs::read_dir(dir)
        .map_err(Error::io("list", dir))?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_str().is_some_and(|n| n == DICT_FILE || is_chunk_name(n)));
    if has_store_files {
        return Err(Error::corrupt(
            meta_path(dir),
            "missing, but the directory holds chunk files; refusing to start a new store over them",
        ));
    }
    // meta.zr appears whole (header written) or not at all. A crash before 0.zr exists is
    // repaired by the first write, which creates a missing tail chunk of an empty store.
    replace(&meta_path(dir), &Header::EMPTY.to_bytes(), META_FULL_SIZE)?;
    let chunk = chunk_path(dir, 0);
    let file = File::create(&chunk).map_err(Error::io("create", &chunk))?;
    io::set_len(&file, CHUNK_SIZE, &chunk)?;
    io::sync_dir(dir)
}

/// `meta.zr` opened for writing: locked, validated, grown to full size and mapped.
pub(crate) fn open_meta_for_writing(dir: &Path) -> Result<(File, MetaMap, Header)> {
    let meta_path = meta_path(dir);
    let meta_file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&meta_path)
        .map_err(Error::io("open for writing", &meta_path))?;
    match meta_file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_path_buf())),
        Err(fs::TryLockError::Error(e)) => return Err(Error::io("lock", &meta_path)(e)),
    }
    let len = meta_file.metadata().map_err(Error::io("stat", &meta_path))?.len();
    let mut head = [0u8; HEADER_SIZE as usize];
    io::read_exact_at(&meta_file, &mut head, 0, &meta_path)?;
    let header = Header::read(&head).map_err(|e| Error::classified(dir, e))?;
    header.validate(len).map_err(|e| Error::classified(dir, e))?;
    if len < META_FULL_SIZE {
        io::set_len(&meta_file, META_FULL_SIZE, &meta_path)?;
    }
    let map = MetaMap::new(&meta_file, META_FULL_SIZE, true).map_err(Error::io("mmap", &meta_path))?;
    Ok((meta_file, map, header))
}

/// The store's schema (`schema.msgpack` in `dir`); `None` when the store has none.
///
/// A file that is not a well-formed schema map is [`Error::Corrupt`] naming `schema.msgpack`.
/// The schema's fields are not checked here ([`Schema::validate`] does that).
pub fn read_schema(dir: &Path) -> Result<Option<Schema>> {
    let Some(bytes) = read_side(dir, SCHEMA_FILE)? else { return Ok(None) };
    Schema::from_msgpack(&bytes).map(Some).map_err(|e| Error::classified(dir, e))
}

/// Writes the store's schema, replacing any: `schema.msgpack.tmp` is written and synced, renamed
/// over `schema.msgpack`, and the directory synced. On failure the old schema (or none) stays.
///
/// Call it once the records it describes are appended and synced, so a crash never leaves a
/// schema describing records that are not there.
pub fn write_schema(dir: &Path, schema: &Schema) -> Result<()> {
    replace(&dir.join(SCHEMA_FILE), &schema.to_msgpack(), 0)?;
    io::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::error::{Classify, ErrorKind};
    use loaderx_core::schema::Kind;

    #[test]
    fn side_files_over_their_cap_are_corrupt_before_anything_is_read() {
        let dir = tempfile::tempdir().unwrap();
        for name in [SCHEMA_FILE, DICT_FILE, JOURNAL_FILE] {
            // Sparse: the size is what is checked, so nothing this big is ever allocated.
            let file = File::create(dir.path().join(name)).unwrap();
            file.set_len(open::max_side_bytes(name) + 1).unwrap();
            let e = read_side(dir.path(), name).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{name}: {e}");
            assert_eq!(e.file().and_then(|f| f.file_name()).unwrap(), name, "{e}");
            file.set_len(3).unwrap();
            assert_eq!(read_side(dir.path(), name).unwrap().unwrap().len(), 3);
        }
        assert!(read_side(dir.path(), "missing").unwrap().is_none());
        assert!(read_schema(dir.path()).is_err(), "3 zero bytes are not a schema map");
    }

    #[test]
    fn chunk_names() {
        assert!(is_chunk_name("0.zr") && is_chunk_name("17.zr"));
        assert!(!is_chunk_name("meta.zr") && !is_chunk_name(".zr") && !is_chunk_name("dict.zr"));
        assert_eq!(tmp_path(Path::new("/s/dict.zr")), Path::new("/s/dict.zr.tmp"));
    }

    #[test]
    fn schema_round_trips_and_a_bad_one_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_schema(dir.path()).unwrap().is_none());
        let schema = Schema::new(Kind::Ragged, "<f4", &[3], "zstd");
        write_schema(dir.path(), &schema).unwrap();
        assert_eq!(read_schema(dir.path()).unwrap(), Some(schema.clone()));
        assert!(!dir.path().join("schema.msgpack.tmp").exists());
        let mut other = schema;
        other.set("note", "replaced".into());
        write_schema(dir.path(), &other).unwrap();
        assert_eq!(read_schema(dir.path()).unwrap(), Some(other));

        fs::write(dir.path().join(SCHEMA_FILE), b"\xc1 not msgpack").unwrap();
        let err = read_schema(dir.path()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(matches!(err, Error::Corrupt { ref file, .. } if file.ends_with(SCHEMA_FILE)), "{err}");
        assert!(err.to_string().contains("schema.msgpack"), "{err}");
    }
}
