//! Many stores read as one: the stores a manifest (`loaderx_core::manifest`) lists, opened
//! together, in one index space. Read-only; a dataset grows by writing new stores and
//! committing them to the manifest.
//!
//! Invariants:
//! * Opening checks every store against its entry (length and layout); a store that changed
//!   since it was listed, or is missing, fails the open naming it.
//! * A gather checks every index against the total, then splits the request by store and
//!   gathers the stores' shares in parallel, each straight into its records' places in the
//!   caller's buffer (disjoint pieces, checked once). Each store checks its share before
//!   writing, but the shares run at once: when one fails, the buffer may already hold other
//!   stores' records (unspecified contents, as after a failed remote gather; never a wrong record
//!   reported as read).
//! * A manifest file is replaced atomically (temporary file, fsync, rename, directory fsync): a
//!   reader sees the old list or the new one, and a commit that fails (a store that does not
//!   open or does not match) writes nothing.

use std::path::{Path, PathBuf};

use loaderx_core::manifest::{self, Holds, Manifest, Seen, MANIFEST_FILE};
use loaderx_core::schema::{Layout, Schema};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::location::is_url;
use crate::options::RemoteOptions;
use crate::reader::{check_offsets, check_pieces, decode_planned, fixed_layout, rows_at, split_dst};
use crate::store::Store;
use crate::{Stats, VerifyReport};

/// What a location holds: a store (open it as one) or a manifest (its file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A store directory or URL.
    Store(String),
    /// The manifest file to read.
    Manifest(PathBuf),
}

/// Store or manifest: looks at `location` and asks [`manifest::identify`]. A URL is a store,
/// or a manifest when it names a `.json` object; a local path that is neither is the core's
/// typed error.
pub fn identify(location: &str) -> Result<Found> {
    if is_url(location) {
        // A manifest at a URL is named by its file (`.../manifest.json`); a prefix is a store.
        if location.to_ascii_lowercase().ends_with(".json") {
            return Ok(Found::Manifest(PathBuf::from(location)));
        }
        return Ok(Found::Store(location.to_owned()));
    }
    let path = Path::new(location);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let seen = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Seen::Nothing,
        Err(e) => return Err(Error::io("inspect", path)(e)),
        Ok(meta) if meta.is_dir() => Seen::Directory {
            store: path.join(loaderx_core::open::META_FILE).exists(),
            manifest: path.join(MANIFEST_FILE).is_file(),
        },
        Ok(_) => Seen::File { name: &name },
    };
    match manifest::identify(seen) {
        Ok(Holds::Store) => Ok(Found::Store(location.to_owned())),
        Ok(Holds::ManifestFile) => Ok(Found::Manifest(path.to_owned())),
        Ok(Holds::ManifestInside) => Ok(Found::Manifest(path.join(MANIFEST_FILE))),
        Err(manifest::IdentifyError::Missing) => Err(Error::NotFound(path.to_owned())),
        Err(e) => Err(Error::classified(path, e)),
    }
}

/// Reads the manifest at `path`, a local file or (`remote`) a URL.
fn read_manifest_at(path: &Path, remote: &RemoteOptions) -> Result<Manifest> {
    let location = path.to_string_lossy();
    if is_url(&location) {
        #[cfg(feature = "remote")]
        return crate::remote_manifest::read(&location, remote);
        #[cfg(not(feature = "remote"))]
        return Err(Error::BadArgument(format!("{location}: this build reads local manifests only")));
    }
    let _ = remote;
    read_manifest(path)
}

/// Reads the manifest at `path`.
pub fn read_manifest(path: &Path) -> Result<Manifest> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound(path.to_owned()),
        _ => Error::io("read", path)(e),
    })?;
    Manifest::parse(&bytes).map_err(|e| Error::classified(path, e))
}

/// Replaces the manifest at `path` atomically.
pub fn write_manifest(path: &Path, manifest: &Manifest) -> Result<()> {
    crate::files::replace(path, &manifest.to_json(), 0)?;
    crate::io::sync_dir(directory_of(path))
}

/// The directory a manifest file is in (`.` for a bare file name, whose parent is empty).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Where a listed store is: URLs and absolute paths as they are, relative paths from the
/// manifest's directory.
fn resolve(manifest_path: &Path, listed: &str) -> String {
    if is_url(listed) || Path::new(listed).is_absolute() {
        return listed.to_owned();
    }
    let location = manifest_path.to_string_lossy();
    if is_url(&location) {
        // Relative to the manifest object's prefix.
        let dir = location.rsplit_once('/').map_or(&*location, |(d, _)| d);
        return format!("{dir}/{}", listed.trim_start_matches("./"));
    }
    directory_of(manifest_path).join(listed).to_string_lossy().into_owned()
}

/// Adds `stores` (paths as they should be listed: relative to the manifest's directory,
/// absolute, or URLs) to the manifest at `path`, creating it if there is none. Every store is
/// opened and checked before anything is written; then the new list replaces the old one in
/// one atomic step. One committer at a time: concurrent commits to one manifest would each
/// keep only their own additions.
pub fn commit(path: &Path, stores: &[String], remote: &RemoteOptions) -> Result<Manifest> {
    // Every store opened and checked once, before anything is read or written.
    let checked: Vec<Checked> = stores
        .par_iter()
        .map(|listed| {
            let store = Store::open_location(&resolve(path, listed), false, remote)?;
            Ok((listed.clone(), store.len(), store.schema()?))
        })
        .collect::<Result<_>>()?;
    let location = path.to_string_lossy();
    if is_url(&location) {
        // A manifest at a URL: conditional writes, so concurrent committers lose nothing.
        #[cfg(feature = "remote")]
        return crate::remote_manifest::commit(&location, |m| add_checked(m, &checked, path), remote);
        #[cfg(not(feature = "remote"))]
        return Err(Error::BadArgument(format!("{location}: this build writes local manifests only")));
    }
    let mut manifest = match read_manifest(path) {
        Ok(m) => m,
        Err(Error::NotFound(_)) => Manifest::new(),
        Err(e) => return Err(e),
    };
    add_checked(&mut manifest, &checked, path)?;
    write_manifest(path, &manifest)?;
    Ok(manifest)
}

/// A store to list: as listed, its length and its schema (opened and checked).
pub(crate) type Checked = (String, u64, Option<Schema>);

/// Adds `checked` stores to `manifest` (core's rules: one layout, each store once); errors name
/// the manifest at `at`.
pub(crate) fn add_checked(manifest: &mut Manifest, checked: &[Checked], at: &Path) -> Result<()> {
    for (listed, len, schema) in checked {
        manifest.add(listed, *len, schema.as_ref()).map_err(|e| Error::classified(at, e))?;
    }
    Ok(())
}

/// The stores of a manifest, open.
#[derive(Debug)]
pub struct Many {
    path: PathBuf,
    manifest: Manifest,
    stores: Vec<Store>,
    offsets: Vec<u64>,
    schema: Option<Schema>,
}

impl Many {
    /// Opens every store the manifest at `path` lists (concurrently) and checks each against
    /// its entry.
    pub fn open(path: &Path, remote: &RemoteOptions) -> Result<Many> {
        let manifest = read_manifest_at(path, remote)?;
        let stores: Vec<Store> = manifest
            .stores()
            .par_iter()
            .map(|entry| Store::open_location(&resolve(path, &entry.path), false, remote))
            .collect::<Result<_>>()?;
        let mut schema = None;
        for (k, store) in stores.iter().enumerate() {
            let found = store.schema()?;
            manifest.check_store(k, store.len(), found.as_ref()).map_err(|e| Error::classified(path, e))?;
            schema = schema.or(found);
        }
        let offsets = manifest.offsets();
        Ok(Many { path: path.to_owned(), manifest, stores, offsets, schema })
    }

    /// The manifest's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The manifest as read.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The first store's schema (all stores' layouts match it).
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// Records over all stores.
    pub fn len(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// True when the stores hold no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stores, open, in the manifest's order.
    pub fn stores(&self) -> &[Store] {
        &self.stores
    }

    /// Global index of each store's first record, plus the total at the end.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// Sets which reads of every store are checked against its checksums.
    pub fn set_verify_mode(&self, mode: crate::VerifyMode) {
        self.stores.iter().for_each(|s| s.set_verify_mode(mode));
    }

    /// The digest of the stores' content read as one
    /// (`loaderx_core::checksum::combined_digest`): `None` unless every store has one.
    pub fn content_digest(&self) -> Result<Option<String>> {
        combined(self.stores.iter().map(Store::content_digest))
    }

    /// The identity of the stores read as one, for exclusion masks
    /// (`loaderx_core::mask::combined_identity` of theirs, in order).
    pub fn mask_identity(&self) -> Result<[u8; 32]> {
        let parts = self.stores.iter().map(Store::mask_identity).collect::<Result<Vec<_>>>()?;
        Ok(loaderx_core::mask::combined_identity(parts))
    }

    /// The stores' usage, added up (`chunk_bytes` and `reclaimable` are sums over the stores).
    pub fn stats(&self) -> Result<Stats> {
        let all: Vec<Stats> = self.stores.par_iter().map(Store::stats).collect::<Result<_>>()?;
        Ok(all.into_iter().sum())
    }

    /// Verifies every store in turn (as [`crate::Store::verify`]), reporting bad records by
    /// global index; `progress(done, total)` counts over all stores.
    pub fn verify(&self, progress: impl FnMut(u64, u64)) -> VerifyReport {
        self.verify_with(true, progress)
    }

    /// [`Many::verify`]; unless `deep`, records their checksums verify are not decoded
    /// ([`Store::verify_with`]).
    pub fn verify_with(&self, deep: bool, mut progress: impl FnMut(u64, u64)) -> VerifyReport {
        let total = self.len();
        let mut report = VerifyReport::default();
        for (store, &first) in self.stores.iter().zip(&self.offsets) {
            report.add_part(store.verify_with(deep, |done, _| progress(first + done, total)), first);
        }
        progress(total, total);
        report
    }

    /// `indices` checked against the total, split by store.
    fn split(&self, indices: &[u64]) -> Result<Vec<manifest::Part>> {
        loaderx_core::plan::check_indices(self.len(), indices)?;
        Ok(manifest::split(&self.offsets, indices))
    }

    /// Decoded length of each record, each checked to fit `layout` if given.
    fn lengths_with(&self, indices: &[u64], layout: Option<Layout>) -> Result<Vec<u32>> {
        self.lengths_of(indices.len(), &self.split(indices)?, layout)
    }

    /// Decoded length of each record of `parts` (a split of `n` indices), in request order.
    fn lengths_of(&self, n: usize, parts: &[manifest::Part], layout: Option<Layout>) -> Result<Vec<u32>> {
        let found: Vec<Vec<u32>> = parts
            .par_iter()
            .map(|p| {
                let store = &self.stores[p.store];
                match layout {
                    Some(layout) => store.lengths_fitting(&p.local, layout),
                    None => store.lengths(&p.local),
                }
            })
            .collect::<Result<_>>()?;
        let mut lens = vec![0u32; n];
        for (part, part_lens) in parts.iter().zip(found) {
            for (&pos, len) in part.positions.iter().zip(part_lens) {
                lens[pos] = len;
            }
        }
        Ok(lens)
    }

    /// Decoded length of each record.
    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        self.lengths_with(indices, None)
    }

    /// Decoded lengths, each checked to fit `layout`.
    pub fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        self.lengths_with(indices, Some(layout))
    }

    /// Gathers the stores' shares, each record into its own piece (`pieces` in request order).
    fn gather_split(
        &self,
        parts: Vec<manifest::Part>,
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        let mut slots: Vec<Option<&mut [u8]>> = pieces.into_iter().map(Some).collect();
        let shares: Vec<(manifest::Part, Vec<&mut [u8]>)> = parts
            .into_iter()
            .map(|p| {
                let mine = p.positions.iter().filter_map(|&pos| slots[pos].take()).collect();
                (p, mine)
            })
            .collect();
        // Every share is checked and fetched first, then all are decoded in one fan-out: nested
        // per-store fan-outs would each wake the pool for a fraction of the batch. Shares of
        // remote stores wait on the network, so they are fetched side by side on the pool.
        let views = shares
            .iter()
            .map(|(p, _)| self.stores[p.store].reader().source().view())
            .collect::<Result<Vec<_>>>()?;
        let remote =
            shares.iter().filter(|(p, _)| !self.stores[p.store].reader().source().in_place()).count();
        let plan = |((p, mine), view)| self.plan_share(view, p, mine, layout);
        let views: Vec<&dyn crate::source::View> = views.iter().map(|v| &**v).collect();
        let plans = if remote > 1 {
            shares.into_par_iter().zip(views).map(plan).collect::<Result<Vec<_>>>()?
        } else {
            shares.into_iter().zip(views).map(plan).collect::<Result<Vec<_>>>()?
        };
        decode_planned(plans)
    }

    /// Store `p.store`'s share of a gather, checked and fetched through `view`.
    fn plan_share<'v, 'd>(
        &'v self,
        view: &'v dyn crate::source::View,
        p: manifest::Part,
        mine: Vec<&'d mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<crate::reader::Planned<'v, 'd>> {
        self.stores[p.store].reader().plan(view, &p.local, layout, |lens| {
            check_pieces(lens.iter().copied(), &mine)?;
            Ok(mine)
        })
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]` (as
    /// [`crate::Store::gather`]).
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        check_offsets(indices, dst_offsets)?;
        let parts = self.split(indices)?;
        let lens: Vec<u64> =
            self.lengths_of(indices.len(), &parts, None)?.into_iter().map(u64::from).collect();
        self.gather_split(parts, split_dst(dst, dst_offsets, &lens)?, None)
    }

    /// Decodes records of exactly `stride` bytes back to back into `dst` (as
    /// [`crate::Store::gather_fixed`]).
    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        let layout = fixed_layout(indices, dst, stride)?;
        let parts = self.split(indices)?;
        self.gather_split(parts, dst.chunks_exact_mut(stride as usize).collect(), Some(layout))
    }

    /// Decodes records `indices` into the rows `positions` of `dst` (as
    /// [`crate::Store::gather_rows`]).
    pub fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()> {
        let (rows, layout) = rows_at(indices, dst, positions, stride)?;
        let parts = self.split(indices)?;
        self.gather_split(parts, rows, Some(layout))
    }
}

/// The digest of parts read as one, in order (`loaderx_core::checksum::combined_digest`), from
/// each part's digest: `None` unless every part has one.
pub(crate) fn combined(digests: impl Iterator<Item = Result<Option<String>>>) -> Result<Option<String>> {
    let digests: Option<Vec<String>> = digests.collect::<Result<_>>()?;
    Ok(digests.map(|d| loaderx_core::checksum::combined_digest(d.iter().map(String::as_str))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_manifest_name_is_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("manifest.json")), Path::new("."));
        assert_eq!(directory_of(Path::new("d/m.json")), Path::new("d"));
        assert_eq!(Path::new(&resolve(Path::new("manifest.json"), "p0")), Path::new(".").join("p0"));
    }

    #[test]
    fn identify_answers_from_what_the_path_holds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let at = |p: &Path| identify(&p.to_string_lossy());
        assert!(matches!(at(&root.join("none")), Err(Error::NotFound(_))));
        assert!(matches!(at(root), Err(Error::NotAStore { .. })), "an empty directory is neither");
        std::fs::write(root.join(MANIFEST_FILE), b"{}").unwrap();
        assert_eq!(at(root).unwrap(), Found::Manifest(root.join(MANIFEST_FILE)));
        assert_eq!(at(&root.join(MANIFEST_FILE)).unwrap(), Found::Manifest(root.join(MANIFEST_FILE)));
        std::fs::write(root.join("meta.zr"), b"").unwrap();
        assert_eq!(at(root).unwrap(), Found::Store(root.to_string_lossy().into_owned()));
        assert!(matches!(at(&root.join("meta.zr")), Err(Error::BadArgument(_))));
        assert_eq!(identify("s3://b/x").unwrap(), Found::Store("s3://b/x".into()));
    }
}
