//! `loaderx`: inspect and check a store from the command line.
//!
//! Exit codes: 0 success, 1 problems found (verify), 2 the store could not be opened or read.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use loaderx_core::schema::Schema;
use loaderx_native::Store;
use serde_json::json;

#[derive(Parser)]
#[command(name = "loaderx", version, about = "Inspect and check loaderx record stores")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schema, length, codecs and sizes of a store.
    Info {
        store: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Decode every record and report the ones that fail (exit code 1 if any).
    Verify {
        store: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { store, json } => info(&store, json),
        Command::Verify { store, json } => verify(&store, json),
    };
    result.unwrap_or_else(|e| {
        eprintln!("loaderx: {e}");
        ExitCode::from(2)
    })
}

fn info(path: &PathBuf, as_json: bool) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let store = Store::open(path)?;
    let stats = store.stats()?;
    let header = store.header();
    let indices: Vec<u64> = (0..store.len()).collect();
    let mut codecs = [0u64; 3];
    for loc in store.entries(&indices)? {
        codecs[usize::from(loc.compress.min(2))] += 1;
    }
    let schema = match std::fs::read(path.join("schema.msgpack")) {
        Ok(bytes) => Some(Schema::from_msgpack(&bytes)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let schema_json = schema.as_ref().map(|s| {
        json!({
            "kind": s.kind().map(|k| k.as_str()).ok(),
            "dtype": s.dtype_str().ok(),
            "item_shape": s.item_shape().ok(),
            "codec": s.codec().ok(),
        })
    });
    let report = json!({
        "path": path,
        "length": store.len(),
        "tail_chunk": header.tail_chunk,
        "tail_offset": header.tail_offset,
        "records_by_codec": {"raw": codecs[0], "zstd": codecs[1], "zstd_dict": codecs[2]},
        "stats": {
            "records": stats.records, "live_bytes": stats.live_bytes,
            "chunk_bytes": stats.chunk_bytes, "reclaimable": stats.reclaimable,
        },
        "dict_bytes": store.dict_bytes().map(|d| d.len()),
        "schema": schema_json,
    });
    if as_json {
        println!("{report:#}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("store        {}", path.display());
    if let Some(s) = &schema_json {
        let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        println!(
            "schema       {} {} {} codec {}",
            text(&s["kind"]),
            text(&s["dtype"]),
            s["item_shape"],
            text(&s["codec"])
        );
    } else {
        println!("schema       none (a plain Zrecord store)");
    }
    println!("records      {} (raw {}, zstd {}, zstd_dict {})", store.len(), codecs[0], codecs[1], codecs[2]);
    println!("live bytes   {}", stats.live_bytes);
    println!("chunk bytes  {} (reclaimable {})", stats.chunk_bytes, stats.reclaimable);
    match store.dict_bytes() {
        Some(d) => println!("dictionary   {} bytes", d.len()),
        None => println!("dictionary   none"),
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(path: &PathBuf, as_json: bool) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let store = Store::open(path)?;
    let tty = std::io::stderr().is_terminal() && !as_json;
    let report = store.verify(|done, total| {
        if tty {
            eprint!("\rverifying {done}/{total}");
        }
    });
    if tty {
        eprintln!();
    }
    if as_json {
        let bad: Vec<_> = report.bad.iter().map(|(i, why)| json!({"index": i, "error": why})).collect();
        println!("{:#}", json!({"checked": report.checked, "bad": bad}));
    } else {
        for (index, why) in &report.bad {
            println!("bad record {index}: {why}");
        }
        println!("{} records checked, {} bad", report.checked, report.bad.len());
    }
    Ok(if report.bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
