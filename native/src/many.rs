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

use loaderx_core::manifest::{self, Manifest};
use loaderx_core::schema::{Layout, Schema};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::location::is_url;
use crate::options::RemoteOptions;
use crate::reader::{check_offsets, check_pieces, decode_planned, fixed_layout, rows_at, split_dst};
use crate::store::Store;

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
    crate::io::sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Where a listed store is: URLs and absolute paths as they are, relative paths from the
/// manifest's directory.
fn resolve(manifest_path: &Path, listed: &str) -> String {
    if is_url(listed) || Path::new(listed).is_absolute() {
        return listed.to_owned();
    }
    let dir = manifest_path.parent().unwrap_or(Path::new("."));
    dir.join(listed).to_string_lossy().into_owned()
}

/// Adds `stores` (paths as they should be listed: relative to the manifest's directory,
/// absolute, or URLs) to the manifest at `path`, creating it if there is none. Every store is
/// opened and checked before anything is written; then the new list replaces the old one in
/// one atomic step. One committer at a time: concurrent commits to one manifest would each
/// keep only their own additions.
pub fn commit(path: &Path, stores: &[String], remote: &RemoteOptions) -> Result<Manifest> {
    let mut manifest = match read_manifest(path) {
        Ok(m) => m,
        Err(Error::NotFound(_)) => Manifest::new(),
        Err(e) => return Err(e),
    };
    let opened: Vec<(u64, Option<Schema>)> = stores
        .par_iter()
        .map(|listed| {
            let store = Store::open_location(&resolve(path, listed), false, remote)?;
            Ok((store.len(), store.schema()?))
        })
        .collect::<Result<_>>()?;
    for (listed, (len, schema)) in stores.iter().zip(&opened) {
        manifest.add(listed, *len, schema.as_ref()).map_err(|e| Error::classified(path, e))?;
    }
    write_manifest(path, &manifest)?;
    Ok(manifest)
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
        let manifest = read_manifest(path)?;
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
