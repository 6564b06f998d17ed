//! Read-only stores on object storage and HTTP: `s3://`, `gs://`, `az://`, `http(s)://`.
//!
//! The protocols, credentials, retries and request timeouts are `object_store`'s; what to read
//! is core's ranged-read planning (`loaderx_core::read`), as in the wasm reader:
//! 1. opening follows core's open protocol (`loaderx_core::open`): it fetches the header, then
//!    the schema, the dictionary, `delete.journal` and the chunk sizes (one round of concurrent
//!    requests); a standing journal is applied in memory (the finished deletion), a damaged one
//!    is corrupt data naming `delete.journal`;
//! 2. a call fetches the table pages it needs that are not cached yet, then the records' byte
//!    ranges, merged where they are close and fetched concurrently, each asking for the version seen at
//!    open (`If-Match`);
//! 3. records are decoded from those bytes into the caller's buffer, on the rayon pool.
//!
//! Invariants:
//! * Every index, table entry and returned range is checked by core before use; a short read is
//!   an error, never a partial record, and a failed call leaves the caller's buffer as it was
//!   only up to the records already decoded (the same all-or-error contract as local gathers:
//!   on error the buffer's contents are unspecified, never a wrong record reported as good).
//! * One async runtime per process, hidden here. A child after `fork()` builds its own; it never
//!   touches the parent's runtime or connections.
//! * Every call has a deadline ([`RemoteOptions::deadline`]) on top of `object_store`'s per-request
//!   timeout, so nothing waits forever.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use loaderx_core::format::RecordLoc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use loaderx_core::codec::{Decoder, Dictionary};
use loaderx_core::format::{Header, HEADER_SIZE, MAX_CHUNKS};
use loaderx_core::open::{self, Fetched, Table, DICT_FILE, JOURNAL_FILE, META_FILE, SCHEMA_FILE};
use loaderx_core::read::{self, GatherPlan, PlanRules};
use loaderx_core::schema::{Layout, Schema};
use loaderx_core::stats::Stats;
use loaderx_core::url::redact;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};
use rayon::prelude::*;

use crate::cache::{DiskCache, ObjectKey, BLOCK};
use crate::error::{Error, Result};
use crate::opened::RemoteOptions;
use crate::store::{check_fit, check_offsets, check_pieces, fixed_layout};

/// Largest decoded output of one call.
const MAX_OUT: u64 = 4 << 30;
/// Chunk ranges closer than this are read in one request.
const MAX_GAP: u64 = 64 << 10;
/// Cache blocks held mapped per store; past this the set is dropped and mapped again on use.
const MAX_MAPPED: usize = 256;
/// A block held mapped is marked recently used in the cache at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(10);
/// Block requests in flight at once, through the cache.
const MAX_FETCHES: usize = 16;
/// Range requests in flight at once without the cache: a batch of 256 records is one round.
const MAX_REQUESTS: usize = 256;
/// Most bytes asked for in one request through the cache: neighbouring missing blocks are
/// fetched together up to this (the range size AWS recommends for parallel ranged GETs).
const FETCH_SPAN: u64 = 16 << 20;

/// The process's async runtime, made again in a child after `fork()`.
fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
        // Inherited from the parent through fork(): its threads do not exist here. Forget it
        // without running its destructor, which would wait for those threads.
        if let Some((_, old)) = slot.take() {
            std::mem::forget(old);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("loaderx-remote")
        .enable_all()
        .build()
        .map_err(Error::io("start the I/O runtime for", "remote"))?;
    let rt = Arc::new(rt);
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// The typed error of a failed request: a version mismatch (the object changed after open) is
/// named as such; everything else keeps `object_store`'s error.
fn remote_error(url: &str, source: object_store::Error) -> Error {
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
fn within<T>(url: &str, after: Duration, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let url = url.to_owned();
    runtime()?.block_on(async move {
        tokio::time::timeout(after, fut).await.map_err(|_| Error::Deadline { url, after })?
    })
}

/// A read-only store behind a URL.
pub struct RemoteStore {
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
    /// The table under the journal rule (`loaderx_core::open`).
    table: Mutex<Table>,
    /// Blocks of chunk files on local disk, when a cache directory was given.
    cache: Option<DiskCache>,
    /// Cache blocks mapped by earlier calls, by (chunk, block), with when each was last
    /// marked used.
    mapped: Mutex<HashMap<(u16, u64), (Bytes, Instant)>>,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore").field("url", &self.shown).field("length", &self.len()).finish()
    }
}

impl RemoteStore {
    /// Opens the store at `url`, reading the environment's credentials and `options`.
    pub fn open(url: &str, options: &RemoteOptions) -> Result<RemoteStore> {
        let shown = redact(url.trim_end_matches('/'));
        let parsed = url::Url::parse(url.trim_end_matches('/'))
            .map_err(|e| Error::BadArgument(format!("{shown} is not a URL: {e}")))?;
        check_option_keys(&parsed, &options.options)?;
        let env = std::env::vars().map(|(k, v)| (k.to_ascii_lowercase(), v));
        // An http:// URL asks for plain HTTP; other schemes need AWS_ALLOW_HTTP or allow_http.
        let plain = (parsed.scheme() == "http").then(|| ("allow_http".to_owned(), "true".to_owned()));
        let config: Vec<(String, String)> =
            plain.into_iter().chain(env).chain(options.options.clone()).collect();
        // Keys that may carry credentials: the services' own environment variables and options.
        let config_keys: Vec<String> = config
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| ["aws_", "google_", "azure_"].iter().any(|p| k.starts_with(p)))
            .chain(options.options.keys().map(|k| k.to_ascii_lowercase()))
            .collect();
        let (store, prefix) = object_store::parse_url_opts(&parsed, config)
            .map_err(|e| Error::Remote { url: shown.clone(), source: e })?;
        let store: Arc<dyn ObjectStore> = Arc::from(store);
        let url = url.trim_end_matches('/').to_owned();
        let deadline = options.deadline;
        let cache = match &options.cache {
            Some(config) => {
                Some(DiskCache::new(config.clone()).map_err(Error::io("create cache", &config.dir))?)
            }
            None => None,
        };
        let mut opened = within(&shown, deadline, Self::open_async(url.clone(), store, prefix, deadline))
            .map_err(|e| match e {
                // A failure other than "not found" with no credentials configured: say so.
                Error::Remote { url, source } if !matches!(source, object_store::Error::NotFound { .. }) => {
                    match missing_credentials(parsed.scheme(), &config_keys) {
                        Some(hint) => Error::Credentials { url, hint, source },
                        None => Error::Remote { url, source },
                    }
                }
                other => other,
            })?;
        opened.cache = cache;
        Ok(opened)
    }

    async fn open_async(
        url: String,
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        deadline: Duration,
    ) -> Result<RemoteStore> {
        let shown = redact(&url);
        let remote = |e| remote_error(&shown, e);
        let meta_path = prefix.clone().join(META_FILE);
        let meta = match store.head(&meta_path).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(why_missing(&url, &*store, &prefix).await)
            }
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
        let (schema, dict, journal, chunk_lens) = futures::join!(
            optional(SCHEMA_FILE),
            optional(DICT_FILE),
            optional(JOURNAL_FILE),
            futures::future::join_all(sizes)
        );
        let chunks = chunk_lens.into_iter().collect::<std::result::Result<Vec<_>, _>>().map_err(remote)?;
        let mut etags = BTreeMap::from([(META_FILE.to_owned(), meta.e_tag.clone())]);
        for (id, found) in chunks.iter().enumerate() {
            if let Some((_, etag)) = found {
                etags.insert(open::chunk_name(id as u16), etag.clone());
            }
        }
        let bytes = |got: std::result::Result<Option<Bytes>, _>| got.map(|b| b.map(|b: Bytes| b.to_vec()));
        let fetched = Fetched {
            schema: bytes(schema).map_err(remote)?,
            dict: bytes(dict).map_err(remote)?,
            journal: bytes(journal).map_err(remote)?,
            chunk_lens: chunks.into_iter().map(|c| c.map(|(size, _)| size)).collect(),
        };
        // The one open protocol: checks, and a delete journal applied in memory.
        let view = open::open(header, fetched).map_err(|e| Error::classified(&at, e))?;
        debug_assert!(view.chunk_lens.len() as u64 <= MAX_CHUNKS);
        let table = Mutex::new(view.table());
        let (header, schema, chunk_lens) = (view.header, view.schema, view.chunk_lens);
        let dict = view.dict.map(Arc::new);
        Ok(RemoteStore {
            url,
            shown,
            store,
            prefix,
            deadline,
            header,
            schema,
            dict,
            chunk_lens,
            etags,
            table,
            cache: None,
            mapped: Mutex::new(HashMap::new()),
        })
    }

    /// The URL it was opened with (secrets included: for requests, not for showing).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL as shown: without userinfo and query values ([`redact`]).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// Number of live records.
    pub fn len(&self) -> u64 {
        u64::from(self.header.length)
    }

    /// True when the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The header read at open.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The schema, if the store has one.
    pub fn schema(&self) -> Option<&Schema> {
        self.schema.as_ref()
    }

    /// True if the store has a dictionary.
    pub fn has_dict(&self) -> bool {
        self.dict.is_some()
    }

    /// The URL as the location of errors.
    fn at(&self) -> &std::path::Path {
        std::path::Path::new(&self.shown)
    }

    fn classified<E: loaderx_core::error::Classify + std::fmt::Display>(&self, e: E) -> Error {
        Error::classified(self.at(), e)
    }

    /// Runs `fut` on the runtime within the deadline.
    fn block<T>(&self, fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        within(&self.shown, self.deadline, fut)
    }

    /// Table entries of `indices`, fetching the pages not cached yet (one round of requests).
    fn located(&self, indices: &[u64]) -> Result<Vec<(u64, RecordLoc)>> {
        read::check_indices(indices, self.len()).map_err(|e| match e {
            read::ReadError::Index { index, length } => Error::IndexOutOfRange { index, length },
            other => self.classified(other),
        })?;
        let missing = self.table.lock().unwrap_or_else(|e| e.into_inner()).missing(indices.iter().copied());
        if !missing.is_empty() {
            let pages = self.block(self.ranges(META_FILE, &missing))?;
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            for (range, bytes) in missing.iter().zip(pages) {
                table.insert(range.start, &bytes).map_err(|e| self.classified(e))?;
            }
        }
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        indices
            .iter()
            .map(|&i| {
                let loc = table.entry(i).ok_or_else(|| {
                    self.classified(read::ReadError::ShortTable {
                        available: 0,
                        needed: loaderx_core::format::table_end(self.len()),
                    })
                })?;
                Ok((i, loc))
            })
            .collect()
    }

    /// Byte ranges of object `name`, of the version seen at open, fetched concurrently (up to
    /// [`MAX_REQUESTS`] at once, so a batch's ranges are one round of requests). Callers merge
    /// close ranges first (core's planning does).
    async fn ranges(&self, name: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let calls = ranges.iter().map(|r| self.get_range(name.to_owned(), r.clone()));
        futures::stream::iter(calls).buffered(MAX_REQUESTS).try_collect().await
    }

    /// A plan's ranges through the disk cache. Each range is cut from the [`BLOCK`]s of its
    /// chunk file, mapped from the cache (zero-copy unless a range spans two blocks); blocks
    /// not cached are fetched whole first (one round of concurrent requests, each pinned to
    /// the version seen at open) and stored. Blocks stay mapped across calls, up to
    /// [`MAX_MAPPED`] of them.
    fn fetch_cached(&self, cache: &DiskCache, plan: &GatherPlan) -> Result<Vec<Bytes>> {
        let size = |chunk: u16| self.chunk_lens.get(usize::from(chunk)).copied().flatten().unwrap_or(0);
        let block_len = |chunk: u16, b: u64| BLOCK.min(size(chunk).saturating_sub(b * BLOCK));
        // Reads past the object's end come back short, as a direct read would.
        let clipped: Vec<(u16, Range<u64>)> = plan
            .ranges
            .iter()
            .map(|r| (r.chunk, r.start.min(size(r.chunk))..r.end.min(size(r.chunk))))
            .collect();
        let mut blocks: BTreeMap<(u16, u64), Bytes> = BTreeMap::new();
        let mut missing = Vec::new();
        {
            let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            for (chunk, r) in clipped.iter().filter(|(_, r)| r.end > r.start) {
                for b in r.start / BLOCK..=(r.end - 1) / BLOCK {
                    let id = (*chunk, b);
                    if blocks.contains_key(&id) || missing.contains(&id) {
                        continue;
                    }
                    if let Some((bytes, touched)) = mapped.get_mut(&id) {
                        if touched.elapsed() > TOUCH_EVERY {
                            cache.touch(&self.key(*chunk), b);
                            *touched = Instant::now();
                        }
                        blocks.insert(id, bytes.clone());
                    } else if let Some(bytes) = cache.map(&self.key(*chunk), b, block_len(*chunk, b)) {
                        if mapped.len() >= MAX_MAPPED {
                            mapped.clear();
                        }
                        mapped.insert(id, (bytes.clone(), Instant::now()));
                        blocks.insert(id, bytes);
                    } else {
                        missing.push(id);
                    }
                }
            }
        }
        if !missing.is_empty() {
            // Neighbouring missing blocks of a chunk go in one request, up to FETCH_SPAN bytes.
            missing.sort_unstable();
            let mut runs: Vec<(u16, u64, u64)> = Vec::new(); // (chunk, first block, blocks)
            for &(chunk, b) in &missing {
                match runs.last_mut() {
                    Some((c, first, n))
                        if *c == chunk && *first + *n == b && (*n + 1) * BLOCK <= FETCH_SPAN =>
                    {
                        *n += 1
                    }
                    _ => runs.push((chunk, b, 1)),
                }
            }
            let fetch = runs.iter().map(|&(chunk, first, n)| {
                let end = (first + n - 1) * BLOCK + block_len(chunk, first + n - 1);
                self.get_range(open::chunk_name(chunk), first * BLOCK..end)
            });
            let got =
                self.block(futures::stream::iter(fetch).buffered(MAX_FETCHES).try_collect::<Vec<_>>())?;
            let mut pieces = Vec::with_capacity(missing.len());
            for (&(chunk, first, n), bytes) in runs.iter().zip(got) {
                for b in first..first + n {
                    // get_range answers exactly the bytes asked for.
                    let from = ((b - first) * BLOCK) as usize;
                    pieces.push(((chunk, b), bytes.slice(from..from + block_len(chunk, b) as usize)));
                }
            }
            let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            for ((chunk, b), bytes) in pieces {
                let key = self.key(chunk);
                cache.put(&key, b, &bytes);
                // Served from the page cache from now on; the fetched copy if storing failed.
                let bytes = match cache.map(&key, b, bytes.len() as u64) {
                    Some(m) => {
                        if mapped.len() >= MAX_MAPPED {
                            mapped.clear();
                        }
                        mapped.insert((chunk, b), (m.clone(), Instant::now()));
                        m
                    }
                    None => bytes,
                };
                blocks.insert((chunk, b), bytes);
            }
            cache.evict();
        }
        Ok(clipped
            .iter()
            .map(|(chunk, r)| {
                if r.end <= r.start {
                    return Bytes::new();
                }
                let (first, last) = (r.start / BLOCK, (r.end - 1) / BLOCK);
                let cut = |b: u64, from: u64, to: u64| {
                    blocks[&(*chunk, b)].slice((from - b * BLOCK) as usize..(to - b * BLOCK) as usize)
                };
                if first == last {
                    return cut(first, r.start, r.end);
                }
                let mut out = Vec::with_capacity((r.end - r.start) as usize);
                for b in first..=last {
                    out.extend_from_slice(&cut(b, r.start.max(b * BLOCK), r.end.min((b + 1) * BLOCK)));
                }
                Bytes::from(out)
            })
            .collect())
    }

    /// The cache identity of chunk file `chunk`.
    fn key(&self, chunk: u16) -> ObjectKey {
        let name = open::chunk_name(chunk);
        let size = self.chunk_lens.get(usize::from(chunk)).copied().flatten().unwrap_or(0);
        let etag = self.etags.get(&name).cloned().flatten();
        ObjectKey::new(&format!("{}/{name}", self.url), etag.as_deref(), size)
    }

    /// One byte range of object `name`, of the version seen at open.
    async fn get_range(&self, name: String, range: Range<u64>) -> Result<Bytes> {
        let path = self.prefix.clone().join(name.as_str());
        let if_match = self.etags.get(&name).cloned().flatten();
        let want = range.end - range.start;
        let options = GetOptions { range: Some(range.into()), if_match, ..Default::default() };
        let got = async { self.store.get_opts(&path, options).await?.bytes().await };
        let bytes = got.await.map_err(|e| self.remote(e))?;
        if bytes.len() as u64 != want {
            let why = format!("{name}: {} bytes in answer to a ranged read of {want}", bytes.len());
            return Err(self.remote(object_store::Error::Generic { store: "loaderx", source: why.into() }));
        }
        Ok(bytes)
    }

    fn remote(&self, source: object_store::Error) -> Error {
        remote_error(&self.shown, source)
    }

    /// Logical (decoded) length of each record.
    pub fn lengths(&self, indices: &[u64]) -> Result<Vec<u32>> {
        Ok(self.located(indices)?.into_iter().map(|(_, loc)| loc.logic_length).collect())
    }

    /// Logical lengths of `indices`, each checked to fit `layout`.
    pub fn lengths_fitting(&self, indices: &[u64], layout: Layout) -> Result<Vec<u32>> {
        let lens = self.lengths(indices)?;
        check_fit(self.at(), indices.iter().copied().zip(lens.iter().copied()), layout)?;
        Ok(lens)
    }

    /// Plans `indices` (entries checked against the limits and the chunk sizes).
    fn plan(&self, indices: &[u64]) -> Result<GatherPlan> {
        let entries = self.located(indices)?;
        // Through the cache nothing is read twice, so records are not merged across gaps.
        let max_gap = if self.cache.is_some() { 0 } else { MAX_GAP };
        let rules = PlanRules { chunk_lens: &self.chunk_lens, typed: None, max_gap, max_out: MAX_OUT };
        read::plan_gather(&entries, &rules, false).map_err(|e| self.classified(e))
    }

    /// Fetches a plan's ranges (merged by core when closer than [`MAX_GAP`]): through the disk
    /// cache when there is one, otherwise directly, all at once.
    fn fetch(&self, plan: &GatherPlan) -> Result<Vec<Bytes>> {
        if let Some(cache) = &self.cache {
            return self.fetch_cached(cache, plan);
        }
        let calls = plan.ranges.iter().map(|r| self.get_range(open::chunk_name(r.chunk), r.start..r.end));
        self.block(futures::stream::iter(calls).buffered(MAX_REQUESTS).try_collect())
    }

    /// Decodes a fetched plan into one destination slice per slot.
    fn decode(&self, plan: &GatherPlan, data: &[Bytes], dsts: Vec<&mut [u8]>) -> Result<()> {
        let dict = self.dict.as_deref();
        plan.slots.par_iter().zip(dsts).try_for_each_init(
            || Decoder::new(dict),
            |decoder, (slot, dst)| {
                let range = &plan.ranges[slot.range];
                read::decode_slot(slot, range, &data[slot.range], decoder, None, dst)
                    .map_err(|e| self.classified(e))
            },
        )
    }

    /// Decodes records `indices` into `dst`, record `k` at byte `dst_offsets[k]` (as
    /// [`crate::Store::gather`]).
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], dst_offsets: &[u64]) -> Result<()> {
        check_offsets(indices, dst_offsets)?;
        let plan = self.plan(indices)?;
        let lens: Vec<u64> = plan.slots.iter().map(|s| u64::from(s.logic)).collect();
        let dsts = crate::store::split_dst(dst, dst_offsets, &lens)?;
        let data = self.fetch(&plan)?;
        self.decode(&plan, &data, dsts)
    }

    /// Decodes records `indices` into `pieces`, one per record of exactly its decoded length
    /// (as [`crate::Store::gather_pieces`]).
    pub fn gather_pieces(
        &self,
        indices: &[u64],
        pieces: Vec<&mut [u8]>,
        layout: Option<Layout>,
    ) -> Result<()> {
        let plan = self.plan(indices)?;
        if let Some(layout) = layout {
            check_fit(self.at(), plan.slots.iter().map(|s| (s.index, s.logic)), layout)?;
        }
        check_pieces(plan.slots.iter().map(|s| s.logic), &pieces)?;
        let data = self.fetch(&plan)?;
        self.decode(&plan, &data, pieces)
    }

    /// Decodes records of exactly `stride` bytes back to back into `dst` (as
    /// [`crate::Store::gather_fixed`]).
    pub fn gather_fixed(&self, indices: &[u64], dst: &mut [u8], stride: u64) -> Result<()> {
        let layout = fixed_layout(indices, dst, stride)?;
        let plan = self.plan(indices)?;
        check_fit(self.at(), plan.slots.iter().map(|s| (s.index, s.logic)), layout)?;
        let data = self.fetch(&plan)?;
        self.decode(&plan, &data, dst.chunks_exact_mut(stride as usize).collect())
    }

    /// Storage usage, from the whole table (fetched once).
    pub fn stats(&self) -> Result<Stats> {
        let all: Vec<u64> = (0..self.len()).collect();
        Ok(Stats::from_entries(&self.header, self.entries(&all)?))
    }

    /// The checked table entries of `indices`.
    pub fn entries(&self, indices: &[u64]) -> Result<Vec<RecordLoc>> {
        Ok(self.located(indices)?.into_iter().map(|(_, loc)| loc).collect())
    }

    /// The dictionary bytes, if the store has one.
    pub fn dict_bytes(&self) -> Option<Vec<u8>> {
        self.dict.as_ref().map(|d| d.bytes().to_vec())
    }

    /// Decodes every record, in blocks (one round of requests each); a block that fails is
    /// retried record by record to name the bad ones. `progress(done, total)` after each block.
    pub fn verify(&self, mut progress: impl FnMut(u64, u64)) -> crate::VerifyReport {
        const BLOCK: u64 = 1024;
        let total = self.len();
        let mut report = crate::VerifyReport::default();
        let read = |indices: &[u64]| -> Result<()> {
            let lens = self.lengths(indices)?;
            let ends: Vec<u64> =
                lens.iter().scan(0u64, |at, &n| Some(*at + u64::from(n)).inspect(|&e| *at = e)).collect();
            let starts: Vec<u64> = std::iter::once(0).chain(ends.iter().copied()).take(lens.len()).collect();
            self.gather(indices, &mut vec![0u8; ends.last().map_or(0, |&e| e as usize)], &starts)
        };
        let mut start = 0;
        while start < total {
            let end = (start + BLOCK).min(total);
            let block: Vec<u64> = (start..end).collect();
            if read(&block).is_err() {
                for &i in &block {
                    if let Err(e) = read(&[i]) {
                        report.bad.push((i, e.to_string()));
                    }
                }
            }
            report.checked = end;
            progress(end, total);
            start = end;
        }
        report
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
        let missing = RemoteStore::open(
            "s3://bucket/store",
            &RemoteOptions { options: options(&["secret_acess_key"]), ..Default::default() },
        );
        assert!(matches!(missing, Err(Error::BadArgument(_))));
    }
}
