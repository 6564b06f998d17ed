//! A store handle of either kind: a local directory (read and write) or a URL (read-only).
//! Each method is the native store's; writes on a remote store are refused with a clear error.

use loaderx_core::format::Codec;
use loaderx_core::schema::{Layout, Schema};
use loaderx_native::{Error, OpenOptions, RemoteOptions, RemoteStore, Result, Stats, Store, VerifyReport};

/// One open store.
#[derive(Debug)]
pub(crate) enum Handle {
    Local(Store),
    Remote(RemoteStore),
}

/// Calls `$call` on whichever store it is.
macro_rules! either {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Handle::Local($s) => $call,
            Handle::Remote($s) => $call,
        }
    };
}

impl Handle {
    /// A URL opens read-only over the network; anything else is a local directory.
    pub(crate) fn open(path: &str, create: bool, remote: &RemoteOptions) -> Result<Handle> {
        if loaderx_native::is_url(path) {
            return RemoteStore::open(path, remote).map(Handle::Remote);
        }
        Store::open_with(path, OpenOptions { create }).map(Handle::Local)
    }

    fn local(&self, what: &str) -> Result<&Store> {
        match self {
            Handle::Local(s) => Ok(s),
            Handle::Remote(r) => Err(Error::BadArgument(format!(
                "{} is a remote store, which is read-only: cannot {what}",
                r.url()
            ))),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        either!(self, s => s.len())
    }

    pub(crate) fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        either!(self, s => s.lengths(indices))
    }

    pub(crate) fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        either!(self, s => s.lengths_fitting(indices, layout))
    }

    pub(crate) fn gather(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64]) -> Result<()> {
        either!(self, s => s.gather(indices, dst, offsets))
    }

    pub(crate) fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        either!(self, s => s.gather_fixed(indices, dst, stride))
    }

    pub(crate) fn stats(&self) -> Result<Stats> {
        either!(self, s => s.stats())
    }

    pub(crate) fn has_dict(&self) -> bool {
        either!(self, s => s.has_dict())
    }

    /// The store's schema, if it has one.
    pub(crate) fn schema(&self) -> Result<Option<Schema>> {
        match self {
            Handle::Local(s) => loaderx_native::read_schema(s.path()),
            Handle::Remote(r) => Ok(r.schema().cloned()),
        }
    }

    pub(crate) fn verify(&self) -> VerifyReport {
        match self {
            Handle::Local(s) => s.verify(|_, _| {}),
            Handle::Remote(r) => {
                let mut report = VerifyReport { checked: r.len(), bad: Vec::new() };
                for index in 0..r.len() {
                    let result = r.lengths(&[index]).and_then(|lens| {
                        let mut buf = vec![0u8; lens.first().copied().unwrap_or(0) as usize];
                        r.gather(&[index], &mut buf, &[0])
                    });
                    if let Err(e) = result {
                        report.bad.push((index, e.to_string()));
                    }
                }
                report
            }
        }
    }

    pub(crate) fn sync(&self) -> Result<()> {
        match self {
            Handle::Local(s) => s.sync(),
            Handle::Remote(_) => Ok(()),
        }
    }

    pub(crate) fn append(&self, src: &[u8], offsets: &[u64], codec: Codec) -> Result<u64> {
        self.local("append")?.append(src, offsets, codec)
    }

    pub(crate) fn delete(&self, indices: &[u64]) -> Result<()> {
        self.local("delete")?.delete(indices)
    }

    pub(crate) fn compact(&self) -> Result<()> {
        self.local("compact")?.compact()
    }

    pub(crate) fn train_dict(&self, samples: &[u8], sizes: &[usize], capacity: usize) -> Result<usize> {
        self.local("train a dictionary")?.train_dict(samples, sizes, capacity)
    }

    pub(crate) fn train_dict_for(
        &self,
        src: &[u8],
        offsets: &[u64],
        capacity: Option<usize>,
    ) -> Result<usize> {
        self.local("train a dictionary")?.train_dict_for(src, offsets, capacity)
    }
}
