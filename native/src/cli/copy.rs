//! `loaderx cp`: a local store's live bytes to object storage or to a new local directory
//! (`crate::upload::copy`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use super::{print_json, Fail};
use crate::upload::copy;
use crate::RemoteOptions;

/// `KEY=VALUE` options, or a usage error naming the bad one.
fn options_of(pairs: &[String]) -> Result<RemoteOptions, Fail> {
    let mut options = BTreeMap::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| Fail::usage(&format!("--option takes KEY=VALUE, got {pair:?}")))?;
        options.insert(k.to_owned(), v.to_owned());
    }
    Ok(RemoteOptions { options, ..RemoteOptions::default() })
}

pub(super) fn run(src: &Path, dst: &str, pairs: &[String], as_json: bool, quiet: bool) -> Result<u8, Fail> {
    let options = options_of(pairs)?;
    let bar = if quiet || as_json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let style = ProgressStyle::with_template("uploading {bytes} ({binary_bytes_per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        ProgressBar::new_spinner().with_style(style)
    };
    let report = copy(src, dst, &options, &|n| bar.inc(n)).map_err(Fail::store)?;
    bar.finish_and_clear();
    if as_json {
        print_json(&json!({
            "url": report.url,
            "objects": report.objects,
            "skipped": report.skipped,
            "sent_bytes": report.sent,
            "live_bytes": report.live,
            "apparent_bytes": report.apparent,
            "digest": report.digest,
        }));
    } else {
        println!(
            "copied {} to {}: {} objects ({} already there), {} bytes sent of {} live ({} apparent on disk)",
            src.display(),
            report.url,
            report.objects,
            report.skipped,
            report.sent,
            report.live,
            report.apparent
        );
        match &report.digest {
            Some(d) => println!("read back: digest {d}"),
            None => println!("read back: length checked (no content digest: loaderx checksum add)"),
        }
    }
    Ok(0)
}
