//! Manifests: many stores read as one dataset, in one index space.
//!
//! A manifest is a small JSON file (`manifest.json` by convention) that lists stores in order,
//! each with the number of records it held when it was added, plus the record layout they all
//! share:
//!
//! ```json
//! {"format": "loaderx-manifest", "version": 1,
//!  "kind": "dense", "dtype": "<f4", "item_shape": [3],
//!  "stores": [{"path": "part-0", "length": 1000}, {"path": "s3://b/part-1", "length": 24}]}
//! ```
//!
//! Invariants:
//! * Global index `i` is record `i - offset(k)` of store `k`, where `offset(k)` is the sum of the
//!   listed lengths before `k`. The total fits in `u64`.
//! * Every listed store has the manifest's layout: its schema is [`Schema::compatible`] with
//!   `kind`, `dtype` and `item_shape` (all three absent for plain byte stores, which then hold
//!   no schema). A store that does not is refused when added, naming it.
//! * A store's path appears once. Relative paths are relative to the manifest's directory.
//! * Opening checks each store against its entry: a store whose length changed since it was
//!   listed is an error, never a silently shifted index space.
//!
//! No I/O here: front ends read and write the file (atomically: temporary file, fsync, rename)
//! and open the stores.
//!
//! Store or manifest: every front end (native, Python, the CLI, JS and the viewer) asks
//! [`identify`] what a location holds, from what it sees there ([`Seen`]): a file named
//! `*.json` is a manifest, a directory holding `meta.zr` is a store (even when it also holds
//! `manifest.json`), a directory holding only `manifest.json` is a manifest, and anything else
//! is a typed error naming what was found.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::{Classify, ErrorKind};
use crate::names::META_FILE;
use crate::schema::{Kind, Schema};

/// The manifest's file name inside a dataset directory.
pub use crate::names::MANIFEST_FILE;
const FORMAT: &str = "loaderx-manifest";
const VERSION: u32 = 1;

/// What can be wrong with a manifest or with a store against it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The bytes are not a manifest this version reads.
    #[error("not a loaderx manifest: {0}")]
    Unreadable(String),
    /// A store would be listed twice.
    #[error("store {0} is listed twice")]
    Duplicate(String),
    /// A store's records do not have the manifest's layout.
    #[error("store {path} holds {found}, but the manifest's stores hold {expected}")]
    Mismatch {
        /// The store, as listed.
        path: String,
        /// The manifest's layout.
        expected: String,
        /// The store's.
        found: String,
    },
    /// A listed store now holds another number of records.
    #[error(
        "store {path} holds {actual} records, but the manifest lists {listed}: it changed after it was added"
    )]
    LengthChanged {
        /// The store, as listed.
        path: String,
        /// Records listed.
        listed: u64,
        /// Records it holds now.
        actual: u64,
    },
    /// The listed lengths add up past `u64`.
    #[error("the stores' lengths add up past 2^64")]
    TooLong,
    /// A store path that is empty.
    #[error("a store path is empty")]
    EmptyPath,
}

impl Classify for ManifestError {
    fn kind(&self) -> ErrorKind {
        match self {
            ManifestError::Unreadable(_) | ManifestError::TooLong | ManifestError::LengthChanged { .. } => {
                ErrorKind::Corrupt
            }
            ManifestError::Duplicate(_) | ManifestError::Mismatch { .. } | ManifestError::EmptyPath => {
                ErrorKind::Argument
            }
        }
    }
}

/// What a front end sees at a location before opening anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen<'a> {
    /// Nothing is there.
    Nothing,
    /// A file (or an object whose name says it is one): its name, the path's last part.
    File {
        /// The file's name.
        name: &'a str,
    },
    /// A directory (or a URL prefix, or a set of files by name), and which of the two files
    /// that decide it holds.
    Directory {
        /// Whether it holds `meta.zr`.
        store: bool,
        /// Whether it holds `manifest.json`.
        manifest: bool,
    },
}

/// What a location holds, as [`identify`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A store: open the location as a store directory.
    Store,
    /// A manifest, the location itself being the file.
    ManifestFile,
    /// A manifest, the file [`MANIFEST_FILE`] inside the location.
    ManifestInside,
}

/// Why a location is neither a store nor a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IdentifyError {
    /// Nothing is there.
    #[error("nothing is there")]
    Missing,
    /// A store's own `meta.zr` rather than its directory.
    #[error("it is a store's meta.zr; open the directory that holds it")]
    StoreFile,
    /// A file that is not a manifest.
    #[error("it is a file ({name}); open a store's directory or a manifest (.json)")]
    OtherFile {
        /// The file's name.
        name: String,
    },
    /// A directory holding neither file.
    #[error("it holds neither meta.zr (a store) nor manifest.json (a manifest)")]
    Neither,
}

impl Classify for IdentifyError {
    fn kind(&self) -> ErrorKind {
        match self {
            IdentifyError::Missing => ErrorKind::NotFound,
            IdentifyError::StoreFile | IdentifyError::OtherFile { .. } => ErrorKind::Argument,
            IdentifyError::Neither => ErrorKind::NotAStore,
        }
    }
}

/// Whether a URL's or path's last part names a file [`identify`] decides on by name alone
/// (`meta.zr` or a `.json` file), so that a front end that cannot list a location (HTTP) knows
/// it need not look inside it.
pub fn names_a_file(name: &str) -> bool {
    name == META_FILE || is_manifest_name(name)
}

fn is_manifest_name(name: &str) -> bool {
    name.len() > ".json".len() && name.to_ascii_lowercase().ends_with(".json")
}

/// Store or manifest: what a location holds, given what is seen there. See the module docs.
pub fn identify(seen: Seen<'_>) -> Result<Holds, IdentifyError> {
    match seen {
        Seen::Nothing => Err(IdentifyError::Missing),
        Seen::File { name } if is_manifest_name(name) => Ok(Holds::ManifestFile),
        Seen::File { name } if name == META_FILE => Err(IdentifyError::StoreFile),
        Seen::File { name } => Err(IdentifyError::OtherFile { name: name.to_owned() }),
        Seen::Directory { store: true, .. } => Ok(Holds::Store),
        Seen::Directory { manifest: true, .. } => Ok(Holds::ManifestInside),
        Seen::Directory { .. } => Err(IdentifyError::Neither),
    }
}

/// One listed store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Where the store is: relative to the manifest's directory, absolute, or a URL.
    pub path: String,
    /// Records it held when it was added.
    pub length: u64,
}

/// The layout every store of a manifest shares: `None` fields for plain byte stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
struct LayoutKey {
    kind: Option<String>,
    dtype: Option<String>,
    item_shape: Option<Vec<u64>>,
}

impl LayoutKey {
    fn of(schema: Option<&Schema>) -> LayoutKey {
        let Some(s) = schema else { return LayoutKey::default() };
        LayoutKey {
            kind: s.kind().ok().map(|k| k.as_str().to_owned()),
            dtype: s.dtype_str().ok().map(str::to_owned),
            item_shape: s.item_shape().ok(),
        }
    }

    fn describe(&self) -> String {
        match (&self.kind, &self.dtype, &self.item_shape) {
            (None, None, None) => "plain records (no schema)".to_owned(),
            (kind, dtype, shape) => format!(
                "{} records of {} {:?}",
                kind.as_deref().unwrap_or("?"),
                dtype.as_deref().unwrap_or("?"),
                shape.as_deref().unwrap_or(&[])
            ),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    format: String,
    version: u32,
    #[serde(flatten)]
    layout: LayoutKey,
    stores: Vec<Entry>,
}

/// Stores listed in order, with their shared layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    layout: LayoutKey,
    stores: Vec<Entry>,
}

impl Manifest {
    /// An empty manifest; the first store added sets the layout.
    pub fn new() -> Manifest {
        Manifest::default()
    }

    /// Reads a manifest's JSON, checking the format, the version and the invariants.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Unreadable(e.to_string()))?;
        if wire.format != FORMAT {
            return Err(ManifestError::Unreadable(format!("format is {:?}, not {FORMAT:?}", wire.format)));
        }
        if wire.version != VERSION {
            return Err(ManifestError::Unreadable(format!(
                "version {} (this build reads {VERSION})",
                wire.version
            )));
        }
        let mut manifest = Manifest { layout: wire.layout, stores: Vec::with_capacity(wire.stores.len()) };
        for entry in wire.stores {
            manifest.push(entry)?;
        }
        Ok(manifest)
    }

    /// The manifest as JSON (one store per line, so diffs stay readable).
    pub fn to_json(&self) -> Vec<u8> {
        let wire = Wire {
            format: FORMAT.to_owned(),
            version: VERSION,
            layout: self.layout.clone(),
            stores: self.stores.clone(),
        };
        serde_json::to_vec_pretty(&wire).unwrap_or_default()
    }

    fn push(&mut self, entry: Entry) -> Result<(), ManifestError> {
        if entry.path.is_empty() {
            return Err(ManifestError::EmptyPath);
        }
        if self.stores.iter().any(|e| e.path == entry.path) {
            return Err(ManifestError::Duplicate(entry.path));
        }
        self.len().checked_add(entry.length).ok_or(ManifestError::TooLong)?;
        self.stores.push(entry);
        Ok(())
    }

    /// Lists a store of `length` records with `schema` (`None` for plain byte stores) after the
    /// others. The first store sets the layout; later ones must match it.
    pub fn add(&mut self, path: &str, length: u64, schema: Option<&Schema>) -> Result<(), ManifestError> {
        let found = LayoutKey::of(schema);
        if self.stores.is_empty() {
            self.layout = found;
        } else if found != self.layout {
            return Err(ManifestError::Mismatch {
                path: path.to_owned(),
                expected: self.layout.describe(),
                found: found.describe(),
            });
        }
        self.push(Entry { path: path.to_owned(), length })
    }

    /// Checks store `k` as opened now against its entry: same length, same layout.
    pub fn check_store(&self, k: usize, length: u64, schema: Option<&Schema>) -> Result<(), ManifestError> {
        let Some(entry) = self.stores.get(k) else {
            return Err(ManifestError::Unreadable(format!("no store {k}")));
        };
        let found = LayoutKey::of(schema);
        if found != self.layout {
            return Err(ManifestError::Mismatch {
                path: entry.path.clone(),
                expected: self.layout.describe(),
                found: found.describe(),
            });
        }
        if length != entry.length {
            return Err(ManifestError::LengthChanged {
                path: entry.path.clone(),
                listed: entry.length,
                actual: length,
            });
        }
        Ok(())
    }

    /// The listed stores, in order.
    pub fn stores(&self) -> &[Entry] {
        &self.stores
    }

    /// Total records.
    pub fn len(&self) -> u64 {
        self.stores.iter().map(|e| e.length).sum()
    }

    /// True when no records are listed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The record kind the stores share, if they have schemas.
    pub fn kind(&self) -> Option<Kind> {
        match self.layout.kind.as_deref() {
            Some("dense") => Some(Kind::Dense),
            Some("ragged") => Some(Kind::Ragged),
            _ => None,
        }
    }

    /// Global index of each store's first record, plus the total at the end.
    pub fn offsets(&self) -> Vec<u64> {
        std::iter::once(0)
            .chain(self.stores.iter().scan(0u64, |at, e| {
                *at += e.length;
                Some(*at)
            }))
            .collect()
    }
}

/// The records of one store that a gather needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Part {
    /// The store's position in the manifest.
    pub store: usize,
    /// Where each record goes in the request (positions into the caller's index list).
    pub positions: Vec<usize>,
    /// Each record's index inside the store.
    pub local: Vec<u64>,
}

/// Splits global `indices` by store, given the manifest's [`Manifest::offsets`]. Indices must
/// already be checked below the total; parts come in store order, each in request order.
pub fn split(offsets: &[u64], indices: &[u64]) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let mut slot: Vec<Option<usize>> = vec![None; offsets.len().saturating_sub(1)];
    for (position, &i) in indices.iter().enumerate() {
        // The last offset not above i, skipping empty stores (equal offsets).
        let store = offsets.partition_point(|&o| o <= i).saturating_sub(1);
        let Some(s) = slot.get_mut(store) else { continue };
        let k = *s.get_or_insert_with(|| {
            parts.push(Part { store, ..Part::default() });
            parts.len() - 1
        });
        parts[k].positions.push(position);
        parts[k].local.push(i - offsets[store]);
    }
    parts.sort_by_key(|p| p.store);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(dtype: &str, shape: &[u64]) -> Schema {
        Schema::new(Kind::Dense, dtype, shape, "zstd")
    }

    #[test]
    fn round_trips_and_refuses_what_breaks_the_rules() {
        let mut m = Manifest::new();
        m.add("a", 3, Some(&dense("<f4", &[2]))).unwrap();
        m.add("s3://b/x", 0, Some(&Schema::new(Kind::Dense, "<f4", &[2], "raw"))).unwrap();
        m.add("c", 5, Some(&dense("<f4", &[2]))).unwrap();
        assert_eq!(Manifest::parse(&m.to_json()).unwrap(), m);
        assert_eq!((m.len(), m.offsets()), (8, vec![0, 3, 3, 8]));
        assert_eq!(m.kind(), Some(Kind::Dense));
        let e = m.add("d", 1, Some(&dense("<f8", &[2]))).unwrap_err();
        assert!(matches!(e, ManifestError::Mismatch { ref path, .. } if path == "d"), "{e}");
        assert!(e.to_string().contains("<f8") && e.to_string().contains("<f4"), "{e}");
        assert_eq!(m.add("a", 1, Some(&dense("<f4", &[2]))), Err(ManifestError::Duplicate("a".into())));
        assert_eq!(m.add("", 1, Some(&dense("<f4", &[2]))), Err(ManifestError::EmptyPath));
        assert_eq!(m.len(), 8, "refused stores are not listed");
        let mut huge = Manifest::new();
        huge.add("a", u64::MAX, None).unwrap();
        assert_eq!(huge.add("b", 1, None), Err(ManifestError::TooLong));
        for bad in [
            &b"{"[..],
            b"{}",
            br#"{"format":"x","version":1,"stores":[]}"#,
            br#"{"format":"loaderx-manifest","version":2,"stores":[]}"#,
        ] {
            assert!(matches!(Manifest::parse(bad), Err(ManifestError::Unreadable(_))), "{bad:?}");
        }
        let twice = br#"{"format":"loaderx-manifest","version":1,"stores":[{"path":"a","length":1},{"path":"a","length":2}]}"#;
        assert_eq!(Manifest::parse(twice), Err(ManifestError::Duplicate("a".into())));
    }

    #[test]
    fn stores_are_checked_against_their_entries() {
        let mut m = Manifest::new();
        m.add("a", 3, None).unwrap();
        assert!(m.check_store(0, 3, None).is_ok());
        let e = m.check_store(0, 4, None).unwrap_err();
        assert_eq!(e, ManifestError::LengthChanged { path: "a".into(), listed: 3, actual: 4 });
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(matches!(
            m.check_store(0, 3, Some(&dense("<f4", &[1]))),
            Err(ManifestError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_location_is_a_store_a_manifest_or_a_named_error() {
        let dir = |store, manifest| identify(Seen::Directory { store, manifest });
        assert_eq!(dir(true, false), Ok(Holds::Store));
        assert_eq!(dir(true, true), Ok(Holds::Store), "a store's own directory stays a store");
        assert_eq!(dir(false, true), Ok(Holds::ManifestInside));
        assert_eq!(dir(false, false), Err(IdentifyError::Neither));
        for name in ["manifest.json", "parts.JSON"] {
            assert_eq!(identify(Seen::File { name }), Ok(Holds::ManifestFile), "{name}");
        }
        assert_eq!(identify(Seen::File { name: "meta.zr" }), Err(IdentifyError::StoreFile));
        let e = identify(Seen::File { name: "x.npy" }).unwrap_err();
        assert!(e.to_string().contains("x.npy") && e.kind() == ErrorKind::Argument, "{e}");
        assert_eq!(identify(Seen::File { name: ".json" }).map_err(|e| e.kind()), Err(ErrorKind::Argument));
        assert_eq!(identify(Seen::Nothing).map_err(|e| e.kind()), Err(ErrorKind::NotFound));
        assert_eq!(dir(false, false).map_err(|e| e.kind()), Err(ErrorKind::NotAStore));
        assert!(names_a_file("meta.zr") && names_a_file("m.json") && !names_a_file("part-0"));
    }

    #[test]
    fn split_sends_each_index_to_its_store_in_request_order() {
        let offsets = [0, 3, 3, 8];
        let parts = split(&offsets, &[7, 0, 3, 2, 5, 7]);
        assert_eq!(
            parts,
            vec![
                Part { store: 0, positions: vec![1, 3], local: vec![0, 2] },
                Part { store: 2, positions: vec![0, 2, 4, 5], local: vec![4, 0, 2, 4] },
            ]
        );
        assert!(split(&offsets, &[]).is_empty());
        // Every index lands once, at its position, as the right local record.
        let indices: Vec<u64> = (0..8).rev().collect();
        let mut seen = vec![false; indices.len()];
        for p in split(&offsets, &indices) {
            for (&pos, &l) in p.positions.iter().zip(&p.local) {
                assert_eq!(indices[pos], offsets[p.store] + l);
                seen[pos] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }
}
