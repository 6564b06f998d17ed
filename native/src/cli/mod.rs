//! The `loaderx` command-line tool: inspect, check, repack, print, export and convert record
//! stores. The `loaderx` binary and `python -m loaderx` both call [`run`], so they are one tool.
//!
//! The read commands (`info`, `stats`, `verify`, `head`, `cat`, `export`) take a store or a
//! manifest (its `.json` file, or a directory holding `manifest.json`): a manifest's stores are
//! read as one dataset, in one index space ([`crate::Many`]).
//!
//! Exit codes: 0 success, 1 problems found (`verify`), 2 bad usage or a store that cannot be
//! opened, read or written. `--json` prints one JSON document on stdout; progress bars go to
//! stderr, and only when it is a terminal. Inspecting never creates a store, and a URL is never
//! written to (stores at URLs are read-only). Every URL printed is redacted
//! ([`loaderx_core::url::redact`]: no userinfo, no query values).

mod copy;
mod images;
mod npy;
mod show;
mod source;

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::Codec;
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use loaderx_core::schema::{Kind, Schema};
use loaderx_core::url::redact;
use loaderx_core::view::ElementView;
use serde_json::{json, Value};
use source::Source;

#[derive(Parser)]
#[command(
    name = "loaderx",
    version,
    disable_help_subcommand = true,
    about = "Inspect, check, repack and convert loaderx record stores"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum ChecksumAction {
    /// Give every record that has none a checksum (a store written by the reference or an older
    /// loaderx, or changed by them), and make the store's checksums vouch for it again.
    Add {
        store: PathBuf,
        /// Take records whose checksum does not match as they are now, instead of reporting
        /// them as damaged (exit code 1) and leaving their checksum in place.
        #[arg(long)]
        adopt: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Schema, length, codecs and sizes of a store (or a manifest's stores).
    Info {
        store: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Storage usage: live, decoded and reclaimable bytes, compression ratio, file sizes (a
    /// manifest: over its stores).
    Stats {
        store: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check every record and report the ones that fail (exit code 1 if any): its checksum
    /// where one covers it (checksums.lx), else by decoding it.
    Verify {
        store: PathBuf,
        /// Decode every record too, whether or not a checksum vouched for it.
        #[arg(long)]
        deep: bool,
        /// Also decode every record as an image (JPEG, PNG, WebP) and list the undecodable ones.
        #[arg(long)]
        images: bool,
        /// With --images: the largest image (width x height) that decodes (Pillow's bomb limit).
        #[arg(long, default_value_t = loaderx_core::image::DEFAULT_MAX_PIXELS)]
        max_pixels: u64,
        /// Bad records listed; the rest are counted.
        #[arg(long, default_value_t = 20)]
        show: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Per-record checksums (checksums.lx).
    Checksum {
        #[command(subcommand)]
        action: ChecksumAction,
    },
    /// Repack live records to the front and free the space deleted records held (one store).
    Compact {
        store: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the first records.
    Head {
        store: PathBuf,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 10)]
        count: u64,
        /// Values shown per record.
        #[arg(long, default_value_t = 16)]
        values: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print records by index.
    Cat {
        store: PathBuf,
        /// Record indices.
        #[arg(required = true)]
        indices: Vec<u64>,
        /// Values shown per record.
        #[arg(long, default_value_t = 16)]
        values: usize,
        /// Write the decoded record bytes to stdout, back to back, instead of text.
        #[arg(long, conflicts_with = "json")]
        raw: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a dense store (or a manifest's stores, in order) to a .npy file, shaped
    /// [records, ...item_shape].
    Export {
        store: PathBuf,
        /// The .npy file to write.
        out: PathBuf,
    },
    /// Make a new dense store from a .npy file, one record per row (as Python's from_numpy),
    /// or with --images a store of the image files under a directory (as from_images). STORE
    /// may be an s3://, gs:// or az:// URL where no store is: staged in a temporary directory
    /// (LOADERX_STAGING_DIR) and streamed up as it is written, each chunk part by part, so the
    /// staging space is the table and a few 16 MiB parts, not the store; meta.zr goes up last.
    Convert {
        /// The .npy file to read (with --images: the directory of .jpg, .jpeg, .png, .webp files).
        input: PathBuf,
        /// The store directory to create, or a URL.
        store: PathBuf,
        /// Per-record codec (`zstd_dict` may be spelled `zstd-dict`); zstd by default, raw for
        /// images (encoded images do not compress further).
        #[arg(long, value_enum)]
        codec: Option<CodecArg>,
        /// Store the encoded image files under INPUT, in the order of their relative paths.
        #[arg(long)]
        images: bool,
    },
    /// Copy a local store to object storage (s3://, gs://, az://) or a new directory: only its live bytes (the
    /// table up to its length, each chunk up to its last record), meta.zr last, so readers see
    /// the store only once it is whole. An interrupted copy resumes where it stopped; the copy
    /// is read back and its length and content digest checked. A URL that holds a store is
    /// refused. Credentials and endpoints come from the environment (AWS_*, GOOGLE_*, AZURE_*)
    /// and --option. DST may also be a new local directory: the files are made at their full
    /// sizes with only the live bytes written (sparse, as writers leave them), then renamed into
    /// place.
    Cp {
        /// The local store directory.
        src: PathBuf,
        /// The destination: a URL, or a local directory that does not exist yet or is empty.
        dst: String,
        /// An object_store option KEY=VALUE (aws_endpoint, allow_http, ...); repeatable.
        #[arg(long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum CodecArg {
    Raw,
    Zstd,
    #[value(name = "zstd_dict", alias = "zstd-dict")]
    ZstdDict,
}

/// Why a command failed (exit code 2).
#[derive(Debug)]
pub(crate) enum Fail {
    Usage(String),
    Data(String),
    Store(crate::Error),
    Io(PathBuf, std::io::Error),
}

impl Fail {
    pub(crate) fn usage(why: &str) -> Fail {
        Fail::Usage(why.to_owned())
    }
    pub(crate) fn data(e: impl std::fmt::Display) -> Fail {
        Fail::Data(e.to_string())
    }
    pub(crate) fn store(e: crate::Error) -> Fail {
        Fail::Store(e)
    }
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Fail + '_ {
        move |e| Fail::Io(path.to_path_buf(), e)
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Usage(s) | Fail::Data(s) => f.write_str(s),
            Fail::Store(e) => write!(f, "{e}"),
            Fail::Io(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// A progress bar on stderr, drawn only when stderr is a terminal and output is not JSON.
pub(crate) fn progress(total: u64, quiet: bool, what: &str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} records ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// Runs the tool on `args` (the first one is the program name) and returns the exit code.
/// Output goes to this process's stdout and stderr.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print and succeed; usage errors print and exit 2.
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Info { store, json } => info(&store, json),
        Command::Stats { store, json } => stats(&store, json),
        Command::Verify { store, deep, images, max_pixels, show, json } => {
            verify(&store, deep, images.then_some(max_pixels), show, json)
        }
        Command::Checksum { action: ChecksumAction::Add { store, adopt, json } } => {
            checksum_add(&store, adopt, json)
        }
        Command::Compact { store, json } => compact(&store, json),
        Command::Head { store, count, values, json } => head(&store, count, values, json),
        Command::Cat { store, indices, values, raw, json } => cat(&store, &indices, values, raw, json),
        Command::Export { store, out } => export(&store, &out),
        Command::Convert { input, store, codec, images } => convert(&input, &store, codec, images),
        Command::Cp { src, dst, options, json, quiet } => copy::run(&src, &dst, &options, json, quiet),
    };
    let code = result.unwrap_or_else(|e| {
        eprintln!("loaderx: {}", redact(&e.to_string()));
        2
    });
    let _ = std::io::stdout().flush();
    code
}

/// The store at a path or URL (`s3://`, `gs://`, `az://`, `http(s)://`, read with the
/// environment's credentials), or the manifest at a path. Inspecting never creates a store.
fn open(path: &Path) -> Result<Source, Fail> {
    Source::open(path).map_err(Fail::store)
}

/// Refuses to write at a URL (see [`crate::check_writable`]), before anything is opened.
fn writable(path: &Path) -> Result<(), Fail> {
    crate::check_writable(&path.to_string_lossy()).map_err(Fail::store)
}

/// A path or URL as printed.
fn shown(path: &Path) -> String {
    redact(&path.to_string_lossy())
}

fn read_schema(store: &Source) -> Result<Option<Schema>, Fail> {
    store.schema().map_err(Fail::store)
}

fn schema_json(schema: &Option<Schema>) -> Value {
    schema.as_ref().map_or(Value::Null, |s| {
        json!({
            "kind": s.kind().map(|k| k.as_str()).ok(),
            "dtype": s.dtype_str().ok(),
            "item_shape": s.item_shape().ok(),
            "codec": s.codec().ok(),
        })
    })
}

fn codec_counts(store: &Source) -> Result<[u64; 3], Fail> {
    store.codec_counts().map_err(Fail::store)
}

/// A manifest's stores as `[{"path", "length"}]` (as listed), or null for one store.
fn listing_json(source: &Source) -> Value {
    match source {
        Source::One(_) => Value::Null,
        Source::Many(m) => {
            let stores = m.manifest().stores().iter();
            Value::Array(stores.map(|e| json!({"path": redact(&e.path), "length": e.length})).collect())
        }
    }
}

fn print_json(v: &Value) {
    println!("{v:#}");
}

fn info(path: &Path, as_json: bool) -> Result<u8, Fail> {
    let store = open(path)?;
    let stats = store.stats().map_err(Fail::store)?;
    let header = match &store {
        Source::One(s) => Some(s.header()),
        Source::Many(_) => None,
    };
    let codecs = codec_counts(&store)?;
    let schema = schema_json(&read_schema(&store)?);
    // A manifest's dictionaries are its stores' own: their sizes added up.
    let dicts: Vec<usize> = store.stores().iter().filter_map(|s| s.dict_bytes()).map(|d| d.len()).collect();
    let dict_bytes = (!dicts.is_empty()).then(|| dicts.iter().sum::<usize>());
    let listing = listing_json(&store);
    let digest = store.content_digest().map_err(Fail::store)?;
    let report = json!({
        "path": shown(path),
        "length": store.len(),
        "tail_chunk": header.map(|h| h.tail_chunk),
        "tail_offset": header.map(|h| h.tail_offset),
        "records_by_codec": {"raw": codecs[0], "zstd": codecs[1], "zstd_dict": codecs[2]},
        "stats": {
            "records": stats.records, "live_bytes": stats.live_bytes,
            "chunk_bytes": stats.chunk_bytes, "reclaimable": stats.reclaimable,
        },
        "dict_bytes": dict_bytes,
        "schema": schema,
        "stores": listing,
        "digest": digest,
    });
    if as_json {
        print_json(&report);
        return Ok(0);
    }
    match &store {
        Source::One(_) => println!("store        {}", shown(path)),
        Source::Many(m) => {
            let n = m.stores().len();
            println!(
                "manifest     {} ({n} store{}, read as one)",
                shown(path),
                if n == 1 { "" } else { "s" }
            );
            for e in m.manifest().stores() {
                println!("  {} ({} records)", redact(&e.path), e.length);
            }
        }
    }
    if schema.is_null() {
        println!("schema       none (a plain Zrecord store)");
    } else {
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        let (k, d, c) = (text(&schema["kind"]), text(&schema["dtype"]), text(&schema["codec"]));
        let stored = stored_as(&c, codecs);
        println!("schema       {k} {d} {} codec {c}{stored}", schema["item_shape"]);
    }
    println!("records      {} (raw {}, zstd {}, zstd_dict {})", store.len(), codecs[0], codecs[1], codecs[2]);
    println!("live bytes   {}", stats.live_bytes);
    println!("chunk bytes  {} (reclaimable {})", stats.chunk_bytes, stats.reclaimable);
    match dict_bytes {
        Some(d) => println!("dictionary   {d} bytes"),
        None => println!("dictionary   none"),
    }
    match &digest {
        Some(d) => println!("digest       {d}"),
        None => println!("digest       none (not every record has a checksum: loaderx checksum add)"),
    }
    Ok(0)
}

/// Sizes of the store's files as they take space on disk (sparse files count what is written).
fn file_sizes(path: &Path) -> Result<Vec<(String, u64, u64)>, Fail> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(Fail::io(path))? {
        let entry = entry.map_err(Fail::io(path))?;
        let meta = entry.metadata().map_err(Fail::io(path))?;
        if meta.is_file() {
            let file = entry.path();
            let disk = crate::disk_usage(&file).map_err(Fail::io(&file))?;
            files.push((entry.file_name().to_string_lossy().into_owned(), meta.len(), disk));
        }
    }
    files.sort();
    Ok(files)
}

fn stats(path: &Path, as_json: bool) -> Result<u8, Fail> {
    let store = open(path)?;
    let s = store.stats().map_err(Fail::store)?;
    let codecs = codec_counts(&store)?;
    // A remote store's objects have no local disk usage to report. A manifest's files are its
    // local stores', named `store/file`.
    let files = match &store {
        Source::One(s) if s.is_remote() => Vec::new(),
        Source::One(_) => file_sizes(path)?,
        Source::Many(m) => {
            let mut files = Vec::new();
            for (s, e) in m.stores().iter().zip(m.manifest().stores()).filter(|(s, _)| !s.is_remote()) {
                let listed = redact(&e.path);
                let local = file_sizes(Path::new(&s.location()))?;
                files.extend(local.into_iter().map(|(n, len, disk)| (format!("{listed}/{n}"), len, disk)));
            }
            files
        }
    };
    let ratio = if s.live_bytes == 0 { 1.0 } else { s.logical_bytes as f64 / s.live_bytes as f64 };
    let on_disk: u64 = files.iter().map(|f| f.2).sum();
    if as_json {
        let files: serde_json::Map<_, _> =
            files.iter().map(|(n, len, disk)| (n.clone(), json!({"size": len, "disk": disk}))).collect();
        print_json(&json!({
            "records": s.records, "live_bytes": s.live_bytes, "logical_bytes": s.logical_bytes,
            "chunk_bytes": s.chunk_bytes, "reclaimable": s.reclaimable, "compression_ratio": ratio,
            "records_by_codec": {"raw": codecs[0], "zstd": codecs[1], "zstd_dict": codecs[2]},
            "disk_bytes": on_disk, "files": files,
        }));
        return Ok(0);
    }
    println!("records        {} (raw {}, zstd {}, zstd_dict {})", s.records, codecs[0], codecs[1], codecs[2]);
    println!("decoded bytes  {}", s.logical_bytes);
    println!("stored bytes   {} (compression {ratio:.2}x)", s.live_bytes);
    println!("chunk bytes    {} (reclaimable by compact: {})", s.chunk_bytes, s.reclaimable);
    println!("on disk        {on_disk} bytes in {} files", files.len());
    for (name, len, disk) in &files {
        println!("  {name:<16} {disk:>14} on disk ({len} apparent)");
    }
    Ok(0)
}

/// What the schema's `codec` means for the records actually stored, when they differ: zstd keeps
/// a record raw when compressing does not make it smaller (always under 25 bytes).
fn stored_as(codec: &str, [raw, zstd, dict]: [u64; 3]) -> String {
    let total = raw + zstd + dict;
    let same = match codec {
        "raw" => raw,
        "zstd" => zstd,
        "zstd_dict" => dict,
        _ => total,
    };
    if total == same {
        String::new()
    } else if raw == total {
        format!(" (all {total} records stored raw: compressing did not make them smaller)")
    } else {
        format!(" (records stored raw {raw}, zstd {zstd}, zstd_dict {dict})")
    }
}

fn verify(path: &Path, deep: bool, images: Option<u64>, show: usize, as_json: bool) -> Result<u8, Fail> {
    let store = open(path)?;
    let bar = progress(store.len(), as_json, "verifying");
    let report = store.verify(deep, |done, _| bar.set_position(done));
    bar.finish_and_clear();
    let undecodable = match images {
        Some(max_pixels) => {
            let limits = loaderx_core::image::Limits { max_pixels };
            // Records the store itself cannot read are listed above; they are not images either.
            let unread: std::collections::HashSet<u64> = report.bad.iter().map(|(i, _)| *i).collect();
            let readable = store.records();
            Some(images::undecodable_except(readable, &limits, &unread, as_json)?)
        }
        None => None,
    };
    let bad_count = report.bad.len() as u64 + report.unlisted;
    let listed = &report.bad[..report.bad.len().min(show)];
    let more = bad_count - listed.len() as u64;
    let c = report.coverage;
    if as_json {
        let bad: Vec<_> = listed.iter().map(|(i, why)| json!({"index": i, "error": redact(why)})).collect();
        let image_report = undecodable.as_ref().map(|u| {
            let listed: Vec<_> =
                u.iter().take(show).map(|(i, why)| json!({"index": i, "error": why})).collect();
            json!({"undecodable_count": u.len(), "undecodable": listed})
        });
        print_json(&json!({
            "checked": report.checked, "deep": deep, "bad_count": bad_count, "bad": bad,
            "images": image_report,
            "checksums": {
                "verified": c.verified, "mismatched": c.mismatched,
                "uncovered": c.uncovered, "unverified": c.unverified,
            },
        }));
    } else {
        let mut out = std::io::stdout().lock();
        for (index, why) in listed {
            let _ = writeln!(out, "bad record {index}: {}", redact(why));
        }
        if more > 0 {
            let _ = writeln!(out, "… and {more} more bad records (--show N lists more)");
        }
        let _ = writeln!(out, "checksums: {}", coverage_text(&c));
        let _ = writeln!(out, "{} records checked, {bad_count} bad", report.checked);
        if let Some(u) = &undecodable {
            for (index, why) in u.iter().take(show) {
                let _ = writeln!(out, "undecodable image {index}: {why}");
            }
            if u.len() > show {
                let _ =
                    writeln!(out, "… and {} more undecodable images (--show N lists more)", u.len() - show);
            }
            let _ = writeln!(out, "{} records decoded as images, {} undecodable", report.checked, u.len());
        }
    }
    let images_bad = undecodable.as_ref().is_some_and(|u| !u.is_empty());
    Ok(if bad_count == 0 && !images_bad { 0 } else { 1 })
}

/// How many records checksums verified, and how many they do not vouch for, and why.
fn coverage_text(c: &crate::Coverage) -> String {
    let mut text = format!("{} verified, {} mismatched", c.verified, c.mismatched);
    if c.uncovered > 0 {
        text.push_str(&format!(", {} without a checksum (loaderx checksum add covers them)", c.uncovered));
    }
    if c.unverified > 0 {
        text.push_str(&format!(
            ", {} unverified (the table changed since their checksums were written, by another \
             writer such as loaderx 0.9.11; loaderx checksum add checks them again)",
            c.unverified
        ));
    }
    text
}

/// The one store at `path` that `command` writes (refused at a URL, or for a manifest).
fn store_to_write(path: &Path, command: &str) -> Result<crate::Store, Fail> {
    writable(path)?;
    match open(path)? {
        Source::One(store) => Ok(store),
        Source::Many(m) => Err(Fail::Usage(format!(
            "{} is a manifest; {command} works on one store: run it on each of its {} stores",
            shown(path),
            m.stores().len()
        ))),
    }
}

fn checksum_add(path: &Path, adopt: bool, as_json: bool) -> Result<u8, Fail> {
    let store = store_to_write(path, "checksum add")?;
    let bar = progress(store.len(), as_json, "checksumming");
    let fill = store.add_checksums(adopt, |done, _| bar.set_position(done)).map_err(Fail::store)?;
    bar.finish_and_clear();
    let digest = store.content_digest().map_err(Fail::store)?;
    if as_json {
        print_json(&json!({
            "verified": fill.verified, "added": fill.added, "replaced": fill.replaced,
            "mismatched": fill.mismatched, "digest": digest,
        }));
    } else {
        println!(
            "{} records: {} already verified, {} checksums added, {} replaced",
            store.len(),
            fill.verified,
            fill.added,
            fill.replaced
        );
        if !fill.mismatched.is_empty() {
            let shown: Vec<String> = fill.mismatched.iter().take(20).map(u64::to_string).collect();
            println!(
                "{} records do not match their checksum (damaged; --adopt takes them as they are): {}",
                fill.mismatched.len(),
                shown.join(", ")
            );
        }
        if let Some(d) = &digest {
            println!("digest       {d}");
        }
    }
    Ok(if fill.mismatched.is_empty() { 0 } else { 1 })
}

fn compact(path: &Path, as_json: bool) -> Result<u8, Fail> {
    let store = store_to_write(path, "compact")?;
    let before = store.stats().map_err(Fail::store)?;
    store.compact().map_err(Fail::store)?;
    store.sync().map_err(Fail::store)?;
    let after = store.stats().map_err(Fail::store)?;
    let freed = before.chunk_bytes.saturating_sub(after.chunk_bytes);
    if as_json {
        print_json(&json!({
            "records": after.records, "chunk_bytes_before": before.chunk_bytes,
            "chunk_bytes_after": after.chunk_bytes, "freed": freed,
        }));
    } else {
        println!(
            "compacted {} records: chunk bytes {} -> {} ({freed} freed)",
            after.records, before.chunk_bytes, after.chunk_bytes
        );
    }
    Ok(0)
}

fn head(path: &Path, count: u64, values: usize, as_json: bool) -> Result<u8, Fail> {
    let store = open(path)?;
    let indices: Vec<u64> = (0..count.min(store.len())).collect();
    print_records(&store, &indices, values, as_json)
}

fn cat(path: &Path, indices: &[u64], values: usize, raw: bool, as_json: bool) -> Result<u8, Fail> {
    let store = open(path)?;
    if raw {
        let mut out = std::io::stdout().lock();
        for (_, bytes) in read_records(&store, indices)? {
            out.write_all(&bytes).map_err(Fail::io(Path::new("stdout")))?;
        }
        out.flush().map_err(Fail::io(Path::new("stdout")))?;
        return Ok(0);
    }
    print_records(&store, indices, values, as_json)
}

/// Decoded records, one gather each (the commands print a handful).
fn read_records(store: &Source, indices: &[u64]) -> Result<Vec<(u64, Vec<u8>)>, Fail> {
    let lens = store.lengths(indices).map_err(Fail::store)?;
    let mut out = Vec::with_capacity(indices.len());
    for (&index, &len) in indices.iter().zip(&lens) {
        let mut buf = vec![0u8; len as usize];
        store.gather(&[index], &mut buf, &[0]).map_err(Fail::store)?;
        out.push((index, buf));
    }
    Ok(out)
}

fn print_records(store: &Source, indices: &[u64], limit: usize, as_json: bool) -> Result<u8, Fail> {
    let schema = read_schema(store)?;
    let dense = schema.as_ref().and_then(|s| s.kind().ok()) == Some(Kind::Dense);
    let dtype = schema.as_ref().and_then(|s| s.dtype().ok());
    let shape = show::Shape {
        view: dtype.as_ref().map(ElementView::of),
        dtype,
        item_shape: schema.as_ref().and_then(|s| s.item_shape().ok()).unwrap_or_default(),
    };
    let mut rows = Vec::new();
    for (index, bytes) in read_records(store, indices)? {
        let dims = shape.of(bytes.len(), dense);
        let total = shape.values(&bytes, usize::MAX).len();
        let vals = shape.values(&bytes, limit);
        if as_json {
            rows.push(json!({"index": index, "shape": dims, "bytes": bytes.len(), "values": vals, "values_total": total}));
        } else {
            println!("{}", show::line(index, &dims, &vals, total));
        }
    }
    if as_json {
        print_json(&Value::Array(rows));
    }
    Ok(0)
}

fn export(path: &Path, out: &Path) -> Result<u8, Fail> {
    writable(out)?;
    let store = open(path)?;
    let schema = read_schema(&store)?
        .ok_or_else(|| Fail::usage("the store has no schema.msgpack, so no dtype to export"))?;
    let n = npy::export(&store, &schema, out, false)?;
    eprintln!("wrote {n} records to {}", out.display());
    Ok(0)
}

fn convert(input: &Path, store: &Path, codec: Option<CodecArg>, as_images: bool) -> Result<u8, Fail> {
    let target = store.to_string_lossy().into_owned();
    // A URL is checked first (writable, no store there, credentials), so a refusal costs no
    // conversion; the store is then staged locally and streamed up as it is written.
    if !crate::is_url(&target) {
        writable(store)?;
    }
    let n = convert_into(input, &target, codec, as_images)?;
    eprintln!("wrote {n} records to {}", loaderx_core::url::redact(&target));
    Ok(0)
}

/// Starts the conversion of `loaderx convert` into a new store at `target` (a directory, or a
/// URL staged and streamed up), checked before anything is written: the item size, the target
/// and that no store is there.
pub(crate) fn new_store(target: &str, schema: Schema, codec: Codec) -> Result<crate::Conversion, Fail> {
    let options = crate::ConvertOptions { codec, mode: crate::WriteMode::Error, dict_size: None };
    crate::Conversion::begin_at(target, Some(schema), options, &crate::RemoteOptions::default()).map_err(
        |e| match e {
            crate::Error::Exists(_) => Fail::usage(&format!("{e}; convert makes a new one")),
            e => Fail::store(e),
        },
    )
}

/// Converts `input` into the store at `target` (a directory or URL): the records written.
fn convert_into(input: &Path, target: &str, codec: Option<CodecArg>, as_images: bool) -> Result<u64, Fail> {
    let fallback = if as_images { CodecArg::Raw } else { CodecArg::Zstd };
    let codec = match codec.unwrap_or(fallback) {
        CodecArg::Raw => Codec::Raw,
        CodecArg::Zstd => Codec::Zstd,
        CodecArg::ZstdDict => Codec::ZstdDict,
    };
    let n = if as_images {
        images::convert(input, target, codec, false)?
    } else {
        npy::convert(input, target, codec, false)?
    };
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_codec_is_qualified_by_what_records_are_stored_as() {
        assert_eq!(stored_as("zstd", [0, 5, 0]), "");
        assert_eq!(stored_as("zstd", [0, 0, 0]), "");
        assert_eq!(stored_as("raw", [7, 0, 0]), "");
        assert!(stored_as("zstd", [5, 0, 0]).starts_with(" (all 5 records stored raw"));
        assert!(stored_as("zstd_dict", [5, 0, 0]).starts_with(" (all 5 records stored raw"));
        assert_eq!(stored_as("zstd_dict", [2, 0, 3]), " (records stored raw 2, zstd 0, zstd_dict 3)");
    }

    #[test]
    fn both_spellings_of_the_dictionary_codec_parse() {
        for spelling in ["zstd_dict", "zstd-dict"] {
            let cli = Cli::try_parse_from(["loaderx", "convert", "x.npy", "s", "--codec", spelling]).unwrap();
            assert!(matches!(cli.command, Command::Convert { codec: Some(CodecArg::ZstdDict), .. }));
        }
    }
}
