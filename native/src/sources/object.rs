//! Read-only stores on object storage and HTTP (`s3://`, `gs://`, `az://`, `http(s)://`) as a
//! [`ChunkSource`].
//!
//! The protocols, credentials, retries and request timeouts are `object_store`'s:
//! 1. opening fetches the header, then in one round of concurrent requests the schema, the
//!    dictionary, the delete journal and the chunk sizes;
//! 2. a view fetches the table pages a call needs that are not cached yet, then the byte ranges
//!    the reader planned (merged where records are close), concurrently, each asking for the
//!    version seen at open (`If-Match`).
//!
//! Invariants:
//! * Every range is answered whole or the call fails: a short answer is an error, never a
//!   partial record.
//! * One async runtime per process (`process::PerProcess`), hidden here. A child after `fork()`
//!   builds its own; it never touches the parent's runtime or connections.
//! * Every call has a deadline ([`RemoteOptions::deadline`]) on top of `object_store`'s
//!   per-request timeout, so nothing waits forever.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use loaderx_core::checksum::{SidecarError, SidecarHeader, Slot, SlotCache, SIDECAR_HEADER};
use loaderx_core::codec::Dictionary;
use loaderx_core::format::{
    entry_offset, Header, RecordLoc, ENTRY_SIZE, HEADER_SIZE, MAX_CHUNKS, MAX_RECORDS,
};
use loaderx_core::open::{
    self, Fetched, Overlay, CHECKSUM_FILE, DICT_FILE, JOURNAL_FILE, META_FILE, SCHEMA_FILE,
};
use loaderx_core::read::{ReadRange, TableCache, MAX_RANGE};
use loaderx_core::schema::Schema;
use loaderx_core::url::redact;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};

use crate::cache::DiskCache;
use crate::error::{Error, Result};
use crate::options::RemoteOptions;
use crate::process::PerProcess;
use crate::source::{ChunkSource, Piece, View};
use crate::sources::cached::CachedSource;

/// Range requests in flight at once: a batch of 256 records is one round.
const MAX_REQUESTS: usize = 256;

/// This process's async runtime ([`PerProcess`]): a forked child builds its own and never
/// touches (nor drops, which would wait for threads it lacks) the parent's.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: PerProcess<tokio::runtime::Runtime> = PerProcess::new();
    RUNTIME.get_or_try_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("loaderx-remote")
            .enable_all()
            .build()
            .map_err(Error::io("start the I/O runtime for", "remote"))
    })
}

/// Makes ring the process's rustls provider, once, before the first client is built (the build
/// enables reqwest's rustls without a provider; see native/Cargo.toml). A provider that another
/// library of the process installed first is kept: any rustls provider serves.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err means a provider is already installed, which is all this needs.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The typed error of a failed request: a version mismatch (the object changed after open) is
/// named as such; everything else keeps `object_store`'s error.
pub(crate) fn remote_error(url: &str, source: object_store::Error) -> Error {
    match source {
        object_store::Error::Precondition { path, .. } | object_store::Error::NotModified { path, .. } => {
            let object = path.rsplit('/').next().unwrap_or(&path).to_owned();
            Error::RemoteChanged { url: url.to_owned(), object }
        }
        // object_store's words for a 200 answer to a ranged GET (HTTP store; S3 and the others).
        source
            if ["Range request not supported", "non-partial response"]
                .iter()
                .any(|w| source.to_string().contains(w)) =>
        {
            Error::NoRange { url: url.to_owned(), source }
        }
        source => Error::Remote { url: url.to_owned(), source },
    }
}

/// Why there is no `meta.zr` under `prefix`, by listing it: no such bucket, nothing under the
/// prefix, or objects that are not a store. A store that cannot list (plain HTTP) says only
/// that `meta.zr` is missing.
async fn why_missing(url: &str, store: &dyn ObjectStore, prefix: &ObjectPath) -> Error {
    let shown = redact(url);
    let missing = |what: String| Error::RemoteMissing { url: shown.clone(), what };
    let no_meta = || missing("no meta.zr there: no such store".to_owned());
    if url.starts_with("http://") || url.starts_with("https://") {
        return no_meta();
    }
    let parsed = url::Url::parse(url).ok();
    let bucket = parsed.as_ref().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
    let azure = parsed.is_some_and(|u| matches!(u.scheme(), "az" | "abfs" | "abfss" | "azure" | "adl"));
    let container = if azure { "container" } else { "bucket" };
    match store.list_with_delimiter(Some(prefix)).await {
        Ok(list) if list.objects.is_empty() && list.common_prefixes.is_empty() => {
            missing(format!("nothing under this prefix in {container} {bucket} (no meta.zr): no such store"))
        }
        Ok(_) => Error::NotAStore { path: shown.into(), reason: "it holds objects but no meta.zr".into() },
        Err(e)
            if matches!(e, object_store::Error::NotFound { .. })
                || ["NoSuchBucket", "ContainerNotFound"].iter().any(|w| e.to_string().contains(w)) =>
        {
            missing(format!("no such {container}: {bucket}"))
        }
        Err(_) => no_meta(),
    }
}

/// For a service that needs credentials: a hint on how to give them, when none of the
/// configuration `keys` (environment variables and options, lower case) looks like one.
fn missing_credentials(scheme: &str, keys: &[String]) -> Option<&'static str> {
    const CREDENTIAL_WORDS: [&str; 10] = [
        "access_key",
        "secret",
        "token",
        "sas",
        "credential",
        "service_account",
        "skip_signature",
        "use_emulator",
        "use_azure_cli",
        "account_key",
    ];
    let hint = match scheme {
        "s3" | "s3a" => {
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or pass them in storage_options, \
             or AWS_SKIP_SIGNATURE=true for a public bucket"
        }
        "gs" => {
            "set GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS or pass \
             service_account_key in storage_options, or GOOGLE_SKIP_SIGNATURE=true for a public bucket"
        }
        "az" | "abfs" | "abfss" | "azure" | "adl" => {
            "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or a SAS token) or pass \
             them in storage_options"
        }
        _ => return None,
    };
    let configured = keys.iter().any(|k| CREDENTIAL_WORDS.iter().any(|w| k.contains(w)));
    (!configured).then_some(hint)
}

/// The `storage_options` keys a URL's service takes: its own (`aws_…`, `google_…`, `azure_…`,
/// also without the prefix) and the HTTP client's (`allow_http`, `timeout`, …). Which service
/// is `object_store`'s reading of the URL (an `https://…amazonaws.com` URL is S3).
fn check_option_keys(parsed: &url::Url, options: &BTreeMap<String, String>) -> Result<()> {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;
    use object_store::{ClientConfigKey, ObjectStoreScheme};
    use std::str::FromStr;
    fn parses<K: FromStr>(key: &str) -> bool {
        key.parse::<K>().is_ok()
    }
    let scheme = ObjectStoreScheme::parse(parsed).map(|(s, _)| s).ok();
    let (service, takes, own): (&str, fn(&str) -> bool, &[&str]) = match scheme {
        Some(ObjectStoreScheme::AmazonS3) => ("S3", parses::<AmazonS3ConfigKey>, &S3_KEYS),
        Some(ObjectStoreScheme::GoogleCloudStorage) => ("GCS", parses::<GoogleConfigKey>, &GCS_KEYS),
        Some(ObjectStoreScheme::MicrosoftAzure) => ("Azure", parses::<AzureConfigKey>, &AZURE_KEYS),
        _ => ("HTTP", parses::<ClientConfigKey>, &[]),
    };
    let unknown: Vec<&str> =
        options.keys().map(String::as_str).filter(|k| !takes(&k.to_ascii_lowercase())).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let known: Vec<&str> = own.iter().chain(&CLIENT_KEYS).copied().collect();
    Err(Error::BadArgument(format!(
        "unknown storage_options key{} {} for {service} ({}); known keys: {}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", "),
        redact(parsed.as_str()),
        known.join(", ")
    )))
}

/// The S3 keys `storage_options` takes (each also without its `aws_` prefix).
const S3_KEYS: [&str; 27] = [
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_default_region",
    "aws_endpoint",
    "aws_endpoint_url_s3",
    "aws_bucket",
    "aws_virtual_hosted_style_request",
    "aws_s3_express",
    "aws_skip_signature",
    "aws_unsigned_payload",
    "aws_checksum_algorithm",
    "aws_imdsv1_fallback",
    "aws_metadata_endpoint",
    "aws_container_credentials_relative_uri",
    "aws_container_credentials_full_uri",
    "aws_container_authorization_token_file",
    "aws_web_identity_token_file",
    "aws_role_arn",
    "aws_role_session_name",
    "aws_endpoint_url_sts",
    "aws_request_payer",
    "aws_server_side_encryption",
    "aws_sse_kms_key_id",
    "aws_sse_bucket_key_enabled",
    "aws_sse_customer_key_base64",
];

/// The Google Cloud Storage keys (each also without its `google_` prefix).
const GCS_KEYS: [&str; 7] = [
    "google_service_account",
    "google_service_account_key",
    "google_application_credentials",
    "google_bucket",
    "google_base_url",
    "google_bearer_token",
    "google_skip_signature",
];

/// The Azure keys (most also without their `azure_storage_` or `azure_` prefix).
const AZURE_KEYS: [&str; 20] = [
    "azure_storage_account_name",
    "azure_storage_account_key",
    "azure_storage_sas_token",
    "azure_storage_token",
    "azure_storage_client_id",
    "azure_storage_client_secret",
    "azure_storage_tenant_id",
    "azure_storage_authority_host",
    "azure_storage_use_emulator",
    "azure_storage_endpoint",
    "azure_msi_endpoint",
    "azure_object_id",
    "azure_msi_resource_id",
    "azure_federated_token_file",
    "azure_use_fabric_endpoint",
    "azure_use_azure_cli",
    "azure_skip_signature",
    "azure_container_name",
    "azure_credential_type",
    "azure_storage_encryption_key",
];

/// The HTTP client's keys, which every service takes.
const CLIENT_KEYS: [&str; 20] = [
    "allow_http",
    "allow_invalid_certificates",
    "disable_system_certificates",
    "connect_timeout",
    "default_content_type",
    "http1_only",
    "http2_only",
    "http2_keep_alive_interval",
    "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle",
    "http2_max_frame_size",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "read_timeout",
    "timeout",
    "user_agent",
];

/// Runs `fut` on the process's runtime, failing with [`Error::Deadline`] after `after`.
pub(crate) fn within<T>(
    url: &str,
    after: Duration,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let url = url.to_owned();
    runtime()?.block_on(async move {
        tokio::time::timeout(after, fut).await.map_err(|_| Error::Deadline { url, after })?
    })
}

/// A read-only store behind a URL: the open protocol's facts, the table pages fetched so far,
/// and the connection.
pub(crate) struct ObjectSource {
    /// The URL as given: what requests use.
    url: String,
    /// The URL as shown in errors and `Debug` ([`redact`]: no userinfo, no query values).
    shown: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    deadline: Duration,
    header: Header,
    schema: Option<Schema>,
    dict: Option<Arc<Dictionary>>,
    chunk_lens: Vec<Option<u64>>,
    /// The ETag of each object read by range (`meta.zr`, chunk files) when the store was
    /// opened: every later read asks for that version (`If-Match`), so a store replaced
    /// remotely is an error, never a mix of old and new bytes.
    etags: BTreeMap<String, Option<String>>,
    table: Mutex<TableCache>,
    /// `meta.zr`'s size: whether the entry past the live table can be read.
    meta_len: u64,
    /// `checksums.lx`, when the store has one.
    sidecar: Option<RemoteSidecar>,
    /// The entry past the live table, once read (`None` inside: the file ends first).
    stale: std::sync::OnceLock<Option<RecordLoc>>,
}

/// A remote store's `checksums.lx`: its header, read at open, and the slot pages read since.
#[derive(Debug)]
struct RemoteSidecar {
    header: std::result::Result<SidecarHeader, SidecarError>,
    slots: Mutex<SlotCache>,
}

impl std::fmt::Debug for ObjectSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSource").field("url", &self.shown).field("length", &self.header.length).finish()
    }
}

/// A connection to the objects under a URL: `object_store`'s client for its service, built from
/// the environment's configuration and `storage_options`, and the prefix the URL names.
#[derive(Clone)]
pub(crate) struct Connection {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: ObjectPath,
    /// The URL as given (no trailing `/`), and as shown in errors ([`redact`]).
    pub(crate) url: String,
    pub(crate) shown: String,
    scheme: String,
    /// Keys that may carry credentials: the services' own environment variables and options.
    config_keys: Vec<String>,
}

impl Connection {
    /// A failed request's error: [`Error::Credentials`] when no credentials were configured
    /// for the service (and the failure is not "not found"), else `object_store`'s.
    pub(crate) fn explain(&self, source: object_store::Error) -> Error {
        let url = self.shown.clone();
        if matches!(source, object_store::Error::NotFound { .. }) {
            return Error::Remote { url, source };
        }
        match missing_credentials(&self.scheme, &self.config_keys) {
            Some(hint) => Error::Credentials { url, hint, source },
            None => Error::Remote { url, source },
        }
    }

    /// The object `name` under the prefix.
    pub(crate) fn path(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }
}

/// Connects to `url` with the environment's configuration and `options` (unknown option keys
/// are [`Error::BadArgument`]).
pub(crate) fn connect(url: &str, options: &RemoteOptions) -> Result<Connection> {
    install_tls_provider();
    let shown = redact(url.trim_end_matches('/'));
    let parsed = url::Url::parse(url.trim_end_matches('/'))
        .map_err(|e| Error::BadArgument(format!("{shown} is not a URL: {e}")))?;
    check_option_keys(&parsed, &options.options)?;
    let env = std::env::vars().map(|(k, v)| (k.to_ascii_lowercase(), v));
    // An http:// URL asks for plain HTTP; other schemes need AWS_ALLOW_HTTP or allow_http.
    let plain = (parsed.scheme() == "http").then(|| ("allow_http".to_owned(), "true".to_owned()));
    let config: Vec<(String, String)> = plain.into_iter().chain(env).chain(options.options.clone()).collect();
    let config_keys: Vec<String> = config
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| ["aws_", "google_", "azure_"].iter().any(|p| k.starts_with(p)))
        .chain(options.options.keys().map(|k| k.to_ascii_lowercase()))
        .collect();
    let (store, prefix) = object_store::parse_url_opts(&parsed, config)
        .map_err(|e| Error::Remote { url: shown.clone(), source: e })?;
    Ok(Connection {
        store: Arc::from(store),
        prefix,
        url: url.trim_end_matches('/').to_owned(),
        shown,
        scheme: parsed.scheme().to_owned(),
        config_keys,
    })
}

/// Opens the store at `url`, reading the environment's credentials and `options`: its source
/// (through the disk cache when `options` names one) and the delete journal found there, if
/// any, checked to apply to the table (the reader applies it in memory).
pub(crate) fn open(url: &str, options: &RemoteOptions) -> Result<(Arc<dyn ChunkSource>, Overlay)> {
    let conn = connect(url, options)?;
    let deadline = options.deadline;
    let cache = match &options.cache {
        Some(config) => Some(DiskCache::new(config.clone()).map_err(Error::io("create cache", &config.dir))?),
        None => None,
    };
    let (source, journal) = within(
        &conn.shown,
        deadline,
        open_async(conn.url.clone(), conn.store.clone(), conn.prefix.clone(), deadline),
    )
    .map_err(|e| match e {
        Error::Remote { source, .. } => conn.explain(source),
        other => other,
    })?;
    let source: Arc<dyn ChunkSource> = match cache {
        Some(cache) => Arc::new(CachedSource::new(Box::new(source), cache)),
        None => Arc::new(source),
    };
    Ok((source, journal))
}

async fn open_async(
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    deadline: Duration,
) -> Result<(ObjectSource, Overlay)> {
    let shown = redact(&url);
    let remote = |e| remote_error(&shown, e);
    let meta_path = prefix.clone().join(META_FILE);
    let meta = match store.head(&meta_path).await {
        Ok(m) => m,
        Err(object_store::Error::NotFound { .. }) => return Err(why_missing(&url, &*store, &prefix).await),
        Err(e) => return Err(remote(e)),
    };
    let head = if meta.size < HEADER_SIZE {
        Bytes::new()
    } else {
        store.get_range(&meta_path, 0..HEADER_SIZE).await.map_err(remote)?
    };
    let at = std::path::Path::new(&shown).to_path_buf();
    let header = open::read_header(&head, meta.size).map_err(|e| Error::classified(&at, e))?;
    let optional = |name: &str| {
        let path = prefix.clone().join(name);
        let store = store.clone();
        async move {
            match store.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
    };
    let sizes = open::chunk_ids(&header).map(|id| {
        let path = prefix.clone().join(open::chunk_name(id));
        let store = store.clone();
        async move {
            match store.head(&path).await {
                Ok(m) => Ok(Some((m.size, m.e_tag))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
    });
    // The sidecar's size, version and header: the slots are read by range as records are.
    let sidecar = async {
        let path = prefix.clone().join(CHECKSUM_FILE);
        let found = match store.head(&path).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let head = match found.size.min(SIDECAR_HEADER) {
            0 => Bytes::new(),
            n => store.get_range(&path, 0..n).await?,
        };
        Ok(Some((found.size, found.e_tag, head)))
    };
    let (schema, dict, journal, chunk_lens, sidecar) = futures::join!(
        optional(SCHEMA_FILE),
        optional(DICT_FILE),
        optional(JOURNAL_FILE),
        futures::future::join_all(sizes),
        sidecar
    );
    let sidecar = sidecar.map_err(remote)?;
    let chunks = chunk_lens.into_iter().collect::<std::result::Result<Vec<_>, _>>().map_err(remote)?;
    let mut etags = BTreeMap::from([(META_FILE.to_owned(), meta.e_tag.clone())]);
    for (id, found) in chunks.iter().enumerate() {
        if let Some((_, etag)) = found {
            etags.insert(open::chunk_name(id as u16), etag.clone());
        }
    }
    let sidecar = sidecar.map(|(len, etag, head)| {
        etags.insert(CHECKSUM_FILE.to_owned(), etag);
        RemoteSidecar { header: SidecarHeader::parse(&head), slots: Mutex::new(SlotCache::new(len)) }
    });
    let bytes = |got: std::result::Result<Option<Bytes>, _>| got.map(|b| b.map(|b: Bytes| b.to_vec()));
    let fetched = Fetched {
        schema: bytes(schema).map_err(remote)?,
        dict: bytes(dict).map_err(remote)?,
        journal: bytes(journal).map_err(remote)?,
        chunk_lens: chunks.into_iter().map(|c| c.map(|(size, _)| size)).collect(),
    };
    // The one open protocol: checks, and the delete journal's overlay (the reader applies it).
    let view = open::open(header, fetched).map_err(|e| Error::classified(&at, e))?;
    debug_assert!(view.chunk_lens.len() as u64 <= MAX_CHUNKS);
    let source = ObjectSource {
        url,
        shown,
        store,
        prefix,
        deadline,
        // The table as it is; the reader applies the journal's overlay.
        header: Header { length: view.table_length, ..view.header },
        schema: view.schema,
        dict: view.dict.map(Arc::new),
        chunk_lens: view.chunk_lens,
        etags,
        table: Mutex::new(TableCache::new(u64::from(view.table_length))),
        meta_len: meta.size,
        sidecar,
        stale: std::sync::OnceLock::new(),
    };
    Ok((source, view.overlay))
}

impl ObjectSource {
    fn classified<E: loaderx_core::error::Classify + std::fmt::Display>(&self, e: E) -> Error {
        Error::classified(std::path::Path::new(&self.shown), e)
    }

    /// Runs `fut` on the runtime within the deadline.
    fn block<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        within(&self.shown, self.deadline, fut)
    }

    /// Byte ranges of object `name`, of the version seen at open, fetched concurrently (up to
    /// [`MAX_REQUESTS`] at once, so a batch's ranges are one round of requests). Callers merge
    /// close ranges first (core's planning does).
    async fn ranges(&self, name: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let calls = ranges.iter().map(|r| self.get_range(name.to_owned(), r.clone()));
        futures::stream::iter(calls).buffered(MAX_REQUESTS).try_collect().await
    }

    /// One byte range of object `name`, of the version seen at open.
    async fn get_range(&self, name: String, range: Range<u64>) -> Result<Bytes> {
        let path = self.prefix.clone().join(name.as_str());
        let if_match = self.etags.get(&name).cloned().flatten();
        let want = range.end - range.start;
        let options = GetOptions { range: Some(range.into()), if_match, ..Default::default() };
        let got = async { self.store.get_opts(&path, options).await?.bytes().await };
        let bytes = got.await.map_err(|e| remote_error(&self.shown, e))?;
        if bytes.len() as u64 != want {
            let why = format!("{name}: {} bytes in answer to a ranged read of {want}", bytes.len());
            let source = object_store::Error::Generic { store: "loaderx", source: why.into() };
            return Err(remote_error(&self.shown, source));
        }
        Ok(bytes)
    }
}

impl ChunkSource for ObjectSource {
    fn view(&self) -> Result<Box<dyn View + '_>> {
        Ok(Box::new(ObjectView(self)))
    }

    fn in_place(&self) -> bool {
        false
    }

    fn shown(&self) -> &str {
        &self.shown
    }

    fn header(&self) -> Header {
        self.header
    }

    fn dict(&self) -> Option<Arc<Dictionary>> {
        self.dict.clone()
    }

    fn schema(&self) -> Result<Option<Schema>> {
        Ok(self.schema.clone())
    }

    fn cache_identity(&self, chunk: u16) -> Option<(String, Option<String>)> {
        let name = open::chunk_name(chunk);
        let etag = self.etags.get(&name).cloned().flatten();
        Some((format!("{}/{name}", self.url), etag))
    }
}

/// A view of a remote store: everything it shows was fixed at open (the version pin), so the
/// view is the source itself.
struct ObjectView<'s>(&'s ObjectSource);

impl View for ObjectView<'_> {
    fn header(&self) -> Header {
        self.0.header
    }

    fn chunk_lens(&self) -> &[Option<u64>] {
        &self.0.chunk_lens
    }

    fn dict(&self) -> Option<&Dictionary> {
        self.0.dict.as_deref()
    }

    /// Fetches the table pages the entries need that are not cached yet, and their checksum
    /// slots' pages with them (one round of requests: a checked read then waits no longer).
    fn entries(&self, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>> {
        let src = self.0;
        let missing = src.table.lock().unwrap_or_else(|e| e.into_inner()).missing(indices.iter().copied());
        let slots = match &src.sidecar {
            Some(s) => {
                s.slots.lock().unwrap_or_else(|e| e.into_inner()).missing(indices.iter().copied(), MAX_RANGE)
            }
            None => Vec::new(),
        };
        if !missing.is_empty() || !slots.is_empty() {
            let (pages, slot_pages) = src.block(async {
                futures::try_join!(src.ranges(META_FILE, &missing), src.ranges(CHECKSUM_FILE, &slots))
            })?;
            if let Some(sidecar) = &src.sidecar {
                let mut cache = sidecar.slots.lock().unwrap_or_else(|e| e.into_inner());
                slots.iter().zip(slot_pages).for_each(|(range, bytes)| cache.insert(range.start, &bytes));
            }
            let mut table = src.table.lock().unwrap_or_else(|e| e.into_inner());
            for (range, bytes) in missing.iter().zip(pages) {
                table.insert(range.start, &bytes).map_err(|e| src.classified(e))?;
            }
        }
        let table = src.table.lock().unwrap_or_else(|e| e.into_inner());
        let at = std::path::Path::new(&src.shown);
        indices
            .iter()
            .map(|&i| table.entry(i).map(|loc| (i, loc)).ok_or_else(|| Error::entry_past_end(at, i)))
            .collect()
    }

    fn sidecar_header(&self) -> Option<std::result::Result<SidecarHeader, SidecarError>> {
        self.0.sidecar.as_ref().map(|s| s.header.clone())
    }

    /// Fetches the sidecar pages the slots need that are not cached yet (one round of requests).
    fn slots(&self, indices: &[u64]) -> Result<Vec<Option<Slot>>> {
        let src = self.0;
        let Some(sidecar) = &src.sidecar else { return Ok(Vec::new()) };
        let missing = sidecar
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .missing(indices.iter().copied(), MAX_RANGE);
        if !missing.is_empty() {
            let pages = src.block(src.ranges(CHECKSUM_FILE, &missing))?;
            let mut cache = sidecar.slots.lock().unwrap_or_else(|e| e.into_inner());
            for (range, bytes) in missing.iter().zip(pages) {
                cache.insert(range.start, &bytes);
            }
        }
        let cache = sidecar.slots.lock().unwrap_or_else(|e| e.into_inner());
        Ok(indices.iter().map(|&i| cache.slot(i).flatten()).collect())
    }

    fn stale_entry(&self) -> Result<Option<RecordLoc>> {
        let src = self.0;
        if let Some(stale) = src.stale.get() {
            return Ok(*stale);
        }
        let at = entry_offset(u64::from(src.header.length));
        let stale = if at + ENTRY_SIZE <= src.meta_len && u64::from(src.header.length) < MAX_RECORDS {
            let bytes = src.block(src.get_range(META_FILE.to_owned(), at..at + ENTRY_SIZE))?;
            RecordLoc::read(&bytes)
        } else {
            None
        };
        Ok(*src.stale.get_or_init(|| stale))
    }

    /// All ranges at once, concurrently.
    fn fetch(&self, ranges: &[ReadRange]) -> Result<Vec<Piece<'_>>> {
        let src = self.0;
        let calls = ranges.iter().map(|r| src.get_range(open::chunk_name(r.chunk), r.start..r.end));
        let got: Vec<Bytes> = src.block(futures::stream::iter(calls).buffered(MAX_REQUESTS).try_collect())?;
        let bytes: u64 = got.iter().map(|b| b.len() as u64).sum();
        crate::meter::add(|m| m.network_bytes = m.network_bytes.wrapping_add(bytes));
        Ok(got.into_iter().map(Piece::Owned).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_option_keys_are_the_ones_object_store_takes() {
        use object_store::aws::AmazonS3ConfigKey;
        use object_store::azure::AzureConfigKey;
        use object_store::gcp::GoogleConfigKey;
        use object_store::ClientConfigKey;
        for k in S3_KEYS {
            assert!(k.parse::<AmazonS3ConfigKey>().is_ok(), "{k}");
        }
        for k in GCS_KEYS {
            assert!(k.parse::<GoogleConfigKey>().is_ok(), "{k}");
        }
        for k in AZURE_KEYS {
            assert!(k.parse::<AzureConfigKey>().is_ok(), "{k}");
        }
        for k in CLIENT_KEYS {
            assert!(k.parse::<ClientConfigKey>().is_ok(), "{k}");
        }
    }

    #[test]
    fn unknown_option_keys_are_refused_before_any_request() {
        let options = |keys: &[&str]| keys.iter().map(|k| (k.to_string(), "x".to_owned())).collect();
        let s3 = url::Url::parse("s3://bucket/store").unwrap();
        assert!(check_option_keys(&s3, &options(&["aws_access_key_id", "REGION", "timeout"])).is_ok());
        let e = check_option_keys(&s3, &options(&["aws_acess_key_id"])).unwrap_err();
        let message = e.to_string();
        assert!(matches!(e, Error::BadArgument(_)), "{message}");
        assert!(
            message.contains("\"aws_acess_key_id\"") && message.contains("aws_access_key_id, "),
            "{message}"
        );
        let plain = url::Url::parse("http://user:pw@h/x?sig=s").unwrap();
        let e = check_option_keys(&plain, &options(&["aws_region", "allow_http"])).unwrap_err().to_string();
        assert!(
            e.contains("\"aws_region\" for HTTP (http://***@h/x?sig=***)") && !e.contains("\"allow_http\""),
            "{e}"
        );
        let missing = open(
            "s3://bucket/store",
            &RemoteOptions { options: options(&["secret_acess_key"]), ..Default::default() },
        );
        assert!(matches!(missing, Err(Error::BadArgument(_))));
    }
}
