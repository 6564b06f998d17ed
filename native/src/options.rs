//! How stores behind URLs are reached ([`RemoteOptions`]) and cached ([`CacheConfig`]): what
//! [`crate::Store::open_location`] takes besides the location.

use std::collections::BTreeMap;
use std::time::Duration;

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
