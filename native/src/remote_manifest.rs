//! Manifests on object storage: read by URL, and committed with conditional writes so that
//! concurrent committers never lose an entry.
//!
//! A commit reads the manifest and its version (ETag), adds its stores, and writes the result
//! only if the manifest is still that version (`If-Match`), or still absent (`If-None-Match:
//! *`). A committer that loses the race reads the new manifest and tries again, up to
//! [`ATTEMPTS`] times with a growing pause, then fails with [`Error::RemoteConflict`]. So every
//! committed entry survives: a write never replaces a manifest it did not read.
//!
//! Invariants: the stores are opened and checked once, before the first attempt; an attempt
//! that fails for any reason but a lost race fails the commit; nothing is written unless the
//! whole new list is valid (core's [`Manifest::add`]).

use std::time::Duration;

use loaderx_core::manifest::Manifest;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, Result};
use crate::options::RemoteOptions;
use crate::sources::object::{connect, runtime, Connection};

/// Attempts a commit makes before it gives up on a manifest others keep changing.
pub(crate) const ATTEMPTS: u32 = 12;

/// The connection to the manifest object at `url`, and the object's path.
fn manifest_object(url: &str, options: &RemoteOptions) -> Result<(Connection, object_store::path::Path)> {
    let (dir, name) =
        url.rsplit_once('/').ok_or_else(|| Error::BadArgument(format!("{url} names no object")))?;
    let conn = connect(dir, options)?;
    let path = conn.path(name);
    Ok((conn, path))
}

/// The manifest at `url` and its version, or `None` where there is none.
async fn fetch(
    conn: &Connection,
    path: &object_store::path::Path,
) -> Result<Option<(Manifest, UpdateVersion)>> {
    match conn.store.get(path).await {
        Ok(got) => {
            let version = UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
            let bytes = got.bytes().await.map_err(|e| conn.explain(e))?;
            let shown = format!("{}/{}", conn.shown, path.filename().unwrap_or_default());
            let manifest =
                Manifest::parse(&bytes).map_err(|e| Error::classified(std::path::Path::new(&shown), e))?;
            Ok(Some((manifest, version)))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(conn.explain(e)),
    }
}

/// Reads the manifest at `url`.
pub(crate) fn read(url: &str, options: &RemoteOptions) -> Result<Manifest> {
    let (conn, path) = manifest_object(url, options)?;
    runtime()?.block_on(fetch(&conn, &path))?.map(|(m, _)| m).ok_or_else(|| Error::RemoteMissing {
        url: loaderx_core::url::redact(url),
        what: "no manifest there".into(),
    })
}

/// Adds stores to the manifest at `url` with `add` (the caller's checked stores), creating it if
/// there is none, with conditional writes (see the module docs): `add` runs again on the new
/// manifest after a lost race.
pub(crate) fn commit(
    url: &str,
    add: impl Fn(&mut Manifest) -> Result<()>,
    options: &RemoteOptions,
) -> Result<Manifest> {
    let (conn, path) = manifest_object(url, options)?;
    let shown = loaderx_core::url::redact(url);
    runtime()?.block_on(async {
        for attempt in 0..ATTEMPTS {
            let current = fetch(&conn, &path).await?;
            let (mut manifest, mode) = match current {
                Some((m, version)) => (m, PutMode::Update(version)),
                None => (Manifest::new(), PutMode::Create),
            };
            add(&mut manifest)?;
            let opts = PutOptions { mode, ..PutOptions::default() };
            match conn.store.put_opts(&path, PutPayload::from(manifest.to_json()), opts).await {
                Ok(_) => return Ok(manifest),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                    // Another committer wrote first: read its manifest and add ours to it.
                    tokio::time::sleep(Duration::from_millis(20 << attempt.min(6))).await;
                }
                Err(e) => return Err(conn.explain(e)),
            }
        }
        Err(Error::RemoteConflict {
            url: shown.clone(),
            what: format!(
                "the manifest kept changing under this commit ({ATTEMPTS} attempts lost to other committers)"
            ),
        })
    })
}
