//! Where a store is: a URL (read-only, opened by `remote`) or a local directory. The one rule
//! for telling them apart and for refusing to write at a URL lives here.

use crate::error::{Error, Result};

/// True for the URL forms a store opens by: `s3://`, `gs://`, `az://`, `http(s)://` (and the
/// `s3a`, `abfs(s)` spellings).
pub fn is_url(s: &str) -> bool {
    ["s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "http://", "https://"]
        .iter()
        .any(|p| s.len() > p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
}

/// The URL a path names when it is a URL, or a URL whose `//` a path type collapsed into `/`
/// (`pathlib.Path("s3://b/x")` is `s3:/b/x`): its first component is a store URL scheme and a
/// colon. `None` for anything else.
fn url_of(location: &str) -> Option<String> {
    if is_url(location) {
        return Some(location.to_owned());
    }
    let (scheme, rest) = location.split_once(':')?;
    let rest = rest.strip_prefix(['/', '\\'])?;
    let known = ["s3", "s3a", "gs", "az", "abfs", "abfss", "http", "https"];
    let plain = !rest.is_empty() && !rest.starts_with(['/', '\\']);
    (plain && known.iter().any(|k| k.eq_ignore_ascii_case(scheme))).then(|| format!("{scheme}://{rest}"))
}

/// Refuses a write (creating, appending, converting, compacting) at `location` when it is a URL
/// or a collapsed one ([`url_of`]), with [`Error::BadArgument`] naming it: stores at URLs are
/// read-only, and such a path must never become a local directory named `s3:`.
pub fn check_writable(location: &str) -> Result<()> {
    match url_of(location) {
        None => Ok(()),
        Some(url) => {
            let shown = loaderx_core::url::redact(&url);
            let named =
                if url == location { shown } else { format!("{shown} (given as a path: `//` became `/`)") };
            Err(Error::BadArgument(format!(
                "{named}: stores at URLs are read-only (written once, never changed in place); \
                 write the store to a local directory and `loaderx cp` it there, or give the URL \
                 to a converter (from_numpy, from_iterator, from_arrow, from_images)"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_forms() {
        for url in ["s3://b/p", "S3://b", "gs://b/x", "az://c/x", "https://h/x", "http://127.0.0.1:9/s"] {
            assert!(is_url(url), "{url}");
        }
        for path in ["s3:/b", "/tmp/s3://x", "store", "file:///tmp/x", "s3://", "C:\\data"] {
            assert!(!is_url(path), "{path}");
        }
    }

    #[test]
    fn writes_at_urls_are_refused_naming_them() {
        for (location, named) in [
            ("s3://b/y", "s3://b/y: "),
            ("http://user:pa55word@h/x?sig=abc", "http://***@h/x?sig=***: "),
            ("s3:/b/y", "s3://b/y (given as a path"),
            ("GS:\\b\\y", "GS://b\\y (given as a path"),
        ] {
            let e = check_writable(location).unwrap_err();
            assert!(matches!(e, Error::BadArgument(_)), "{e}");
            let message = e.to_string();
            assert!(message.starts_with(named) && message.contains("read-only"), "{message}");
        }
        for path in
            ["store", "/tmp/s3:/x", "s3:", "s3:/", "s3://", "C:\\data", "c:/data", "file:///tmp/x", "./s3:/b"]
        {
            assert!(check_writable(path).is_ok(), "{path}");
        }
    }
}
