//! A store of either kind behind one type: a local directory (read and write) or, with the
//! `remote` feature, a URL (read-only). The Python binding and the CLI open stores through
//! [`Opened::open`], so a path and a URL work wherever a store is read.
//!
//! Invariant: every write on a remote store is refused with [`Error::BadArgument`] naming the URL
//! before anything is sent; reads behave as the local store's (same checks, same errors).

use std::collections::BTreeMap;
use std::time::Duration;

use loaderx_core::format::{Codec, Header, RecordLoc};
use loaderx_core::schema::{Layout, Schema};

use crate::error::{Error, Result};
use crate::location::is_url;
use crate::store::{OpenOptions, Stats, Store, VerifyReport};

/// A local disk cache of remote stores: a directory (shared by every process that names it)
/// and an upper bound on the bytes it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    pub dir: std::path::PathBuf,
    pub max_bytes: u64,
}

/// How a remote store is reached. `Debug` shows the option keys, not their values (which may be
/// credentials).
#[derive(Clone)]
pub struct RemoteOptions {
    /// `object_store` configuration keys (`aws_endpoint`, `aws_access_key_id`, `allow_http`,
    /// `google_service_account`, `azure_storage_account_name`, …); they override the
    /// environment, which is read too (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …).
    pub options: BTreeMap<String, String>,
    /// The longest a whole call may take.
    pub deadline: Duration,
    /// A local disk cache of the store's blocks (opt-in).
    pub cache: Option<CacheConfig>,
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field(
                "options",
                &self.options.keys().map(|k| (k, loaderx_core::url::HIDDEN)).collect::<BTreeMap<_, _>>(),
            )
            .field("deadline", &self.deadline)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions { options: BTreeMap::new(), deadline: Duration::from_secs(120), cache: None }
    }
}

/// One open store.
#[derive(Debug)]
#[non_exhaustive]
pub enum Opened {
    Local(Store),
    #[cfg(feature = "remote")]
    Remote(crate::remote::RemoteStore),
}

/// Calls `$call` on whichever store it is.
macro_rules! either {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Opened::Local($s) => $call,
            #[cfg(feature = "remote")]
            Opened::Remote($s) => $call,
        }
    };
}

impl Opened {
    /// A URL opens read-only over the network; anything else is a local directory (created when
    /// `create` is set and there is none; a collapsed URL such as `s3:/b/x` is refused then, see
    /// [`crate::check_writable`]).
    pub fn open(location: &str, create: bool, remote: &RemoteOptions) -> Result<Opened> {
        if is_url(location) {
            #[cfg(feature = "remote")]
            return crate::remote::RemoteStore::open(location, remote).map(Opened::Remote);
            #[cfg(not(feature = "remote"))]
            {
                let _ = remote;
                return Err(Error::BadArgument(format!(
                    "{}: this build of loaderx reads local stores only (it has no remote support)",
                    loaderx_core::url::redact(location)
                )));
            }
        }
        Store::open_with(location, OpenOptions { create }).map(Opened::Local)
    }

    /// The path or URL, as shown (a URL without its userinfo and query values).
    pub fn location(&self) -> String {
        match self {
            Opened::Local(s) => s.path().display().to_string(),
            #[cfg(feature = "remote")]
            Opened::Remote(r) => r.shown_url().to_owned(),
        }
    }

    /// True for a store opened by URL.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Opened::Local(_))
    }

    /// The local store, for a write: a remote one is refused.
    #[cfg_attr(not(feature = "remote"), allow(unused_variables))]
    pub fn local(&self, what: &str) -> Result<&Store> {
        match self {
            Opened::Local(s) => Ok(s),
            #[cfg(feature = "remote")]
            Opened::Remote(r) => Err(Error::BadArgument(format!(
                "{} is a remote store, which is read-only: cannot {what}",
                r.shown_url()
            ))),
        }
    }

    pub fn len(&self) -> u64 {
        either!(self, s => s.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn header(&self) -> Header {
        either!(self, s => s.header())
    }

    pub fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        either!(self, s => s.entries(indices))
    }

    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        either!(self, s => s.lengths(indices))
    }

    pub fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        either!(self, s => s.lengths_fitting(indices, layout))
    }

    pub fn gather(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64]) -> Result<()> {
        either!(self, s => s.gather(indices, dst, offsets))
    }

    pub fn gather_pieces(
        &self,
        indices: &[u64],
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        either!(self, s => s.gather_pieces(indices, pieces, layout))
    }

    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        either!(self, s => s.gather_fixed(indices, dst, stride))
    }

    /// Decodes records `indices`, each exactly `stride` bytes, into the rows `positions` of
    /// `dst` (rows of `stride` bytes): how a mix fills each source's rows of one batch.
    pub fn gather_rows(&self, indices: &[u64], dst: &mut [u8], positions: &[u64], stride: u64) -> Result<()> {
        let (rows, layout) = crate::store::rows_at(indices, dst, positions, stride)?;
        self.gather_pieces(indices, rows, Some(layout))
    }

    pub fn stats(&self) -> Result<Stats> {
        either!(self, s => s.stats())
    }

    pub fn has_dict(&self) -> bool {
        either!(self, s => s.has_dict())
    }

    pub fn dict_bytes(&self) -> Option<Vec<u8>> {
        either!(self, s => s.dict_bytes())
    }

    pub fn verify(&self, progress: impl FnMut(u64, u64)) -> VerifyReport {
        either!(self, s => s.verify(progress))
    }

    /// The store's schema, if it has one.
    pub fn schema(&self) -> Result<Option<Schema>> {
        match self {
            Opened::Local(s) => crate::files::read_schema(s.path()),
            #[cfg(feature = "remote")]
            Opened::Remote(r) => Ok(r.schema().cloned()),
        }
    }

    /// Makes appended records durable (nothing to do for a remote store).
    pub fn sync(&self) -> Result<()> {
        match self {
            Opened::Local(s) => s.sync(),
            #[cfg(feature = "remote")]
            Opened::Remote(_) => Ok(()),
        }
    }

    pub fn append(&self, src: &[u8], offsets: &[u64], codec: Codec) -> Result<u64> {
        self.local("append")?.append(src, offsets, codec)
    }

    pub fn delete(&self, indices: &[u64]) -> Result<()> {
        self.local("delete")?.delete(indices)
    }

    pub fn compact(&self) -> Result<()> {
        self.local("compact")?.compact()
    }

    pub fn train_dict(&self, samples: &[u8], sizes: &[usize], capacity: usize) -> Result<usize> {
        self.local("train a dictionary")?.train_dict(samples, sizes, capacity)
    }

    pub fn train_dict_for(&self, src: &[u8], offsets: &[u64], capacity: Option<usize>) -> Result<usize> {
        self.local("train a dictionary")?.train_dict_for(src, offsets, capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_store_opens_and_writes_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let opened = Opened::open(path.to_str().unwrap(), true, &RemoteOptions::default()).unwrap();
        assert!(!opened.is_remote());
        assert_eq!(opened.append(b"abcdef", &[0, 2], Codec::Raw).unwrap(), 0);
        assert_eq!(opened.lengths(&[1, 0]).unwrap(), vec![4, 2]);
        assert!(opened.schema().unwrap().is_none());
    }
}
