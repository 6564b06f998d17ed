"""The remote section of the benchmarks: a store on a local S3 server on 127.0.0.1 (s3s-fs, or
moto's server mode when s3s-fs is not installed), read through a proxy that adds a fixed delay
per request, beside the same store read locally and beside MosaicML Streaming and LitData
reading their own formats of the same records from the same server.

    python scripts/bench.py remote [--quick]

For each added delay (0, 5 and 50 ms per request), with 12 KiB records (zstd) and batches of 256:

* cold epoch, samples/s: one shuffled pass over every record from an empty start, with no cache
  (each batch fetches only its records' byte ranges) and with an empty disk cache (whole 4 MiB
  blocks, fetched once); Streaming and LitData the same way, each from an empty local cache,
  through torch's DataLoader (scripts/bench_remote_peers.py, in .venv-bench);
* warm cache: random-batch gathers and the DataLoader (4 workers) once the cache holds the
  store, against the same calls on the local store (rounds interleaved, medians);
* the ranged-GET ceiling: single-record GETs through the same proxy, 10 at a time.
"""

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median

import numpy as np
from http_proxy import Proxy
from store_files import trimmed_files

ROOT = Path(__file__).resolve().parents[1]
RECORD = 12 << 10
BATCH = 256
MiB = 1 << 20
CREDS = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench", "region_name": "us-east-1"}


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


S3S_FS = Path.home() / ".cache" / "loaderx-tools" / "bin" / "s3s-fs"


def _start_s3(work):
    """A local S3 server: s3s-fs (a Rust S3 server over a directory, installed by `make
    bench-remote`) when present, else moto's server mode. moto copies the whole object for every
    ranged GET (about 1 ms per MiB of object), which no real service does: a 12 KiB range of a
    60 MiB chunk file costs 58 ms there against 5 ms from s3s-fs."""
    import boto3

    port = _free_port()
    if S3S_FS.exists():
        root = Path(work) / "s3s-root"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        cmd = [str(S3S_FS), "--host", "127.0.0.1", "--port", str(port), "--access-key", "bench", "--secret-key", "bench", str(root)]
        name = "s3s-fs"
    else:
        cmd = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)]
        name = "moto (ranged GETs cost O(object size): install s3s-fs with make bench-remote)"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, **CREDS)
    for _ in range(100):
        try:
            client.create_bucket(Bucket="bench")
            return proc, endpoint, client, name
        except Exception:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"{name} did not start")


def _epoch(z, perm, out, offs):
    """One pass over ``perm`` in batches: samples/s."""
    t = time.perf_counter()
    for start in range(0, len(perm), BATCH):
        b = perm[start : start + BATCH]
        z.gather(b, out[: len(b) * RECORD], offs[: len(b)])
    return len(perm) / (time.perf_counter() - t)


def _loader_rate(dataset, n_batches):
    from loaderx.dataloader import DataLoader

    loader = DataLoader({"x": dataset}, num_workers=4, batch_size=BATCH, prefetch_size=8, seed=3)
    try:
        for _ in range(20):  # past the batches prefetched while the loader started
            next(loader)
        t = time.perf_counter()
        for _ in range(n_batches):
            next(loader)
        return n_batches / (time.perf_counter() - t)
    finally:
        loader.close()


def _peers(npy, endpoint, read_endpoint, work, upload):
    """Streaming's and LitData's cold epochs, run by .venv-bench's Python (they need torch),
    each with 0 and with 2 DataLoader workers: the better of the two, with its worker count.
    Shards of 8 MiB: with their 64 MiB default the store is one shard, which LitData reads
    from two workers about 30 times slower (see bench_remote_peers.py)."""
    best = {}
    for workers in (0, 2):
        got = _peer_run(npy, endpoint, read_endpoint, work, upload and workers == 0, workers)
        for lib, r in got.items():
            if isinstance(r, dict) and "samples_per_s" in r:
                r["workers"] = workers
                if r["samples_per_s"] > best.get(lib, {}).get("samples_per_s", 0):
                    best[lib] = r
            else:
                best.setdefault(lib, r)
    return best


def _peer_run(npy, endpoint, read_endpoint, work, upload, workers):
    python = ROOT / ".venv-bench" / "bin" / "python"
    if not python.exists():
        return {"note": "no .venv-bench (make bench installs it)"}
    cmd = [str(python), str(ROOT / "scripts" / "bench_remote_peers.py"), "--data", str(npy), "--endpoint", endpoint,
           "--read-endpoint", read_endpoint, "--bucket", "bench", "--work", str(work), "--batch", str(BATCH),
           "--workers", str(workers), "--shard-mb", "8"]
    if not upload:
        cmd.append("--skip-upload")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"note": f"peer worker failed: {p.stderr.strip()[-300:]}"}


def section_remote(args, work):
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset
    from loaderx.zrecord import Zrecord

    work = Path(work)
    rounds = 3 if args.quick else 7
    records = 1000 if args.quick else 5000
    loader_batches = 60 if args.quick else 300
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(records, RECORD), dtype=np.uint8)
    data[rng.random(data.shape) < 1 / 6] = 0
    npy = work / "remote_records.npy"
    np.save(npy, data)
    local_path = work / "remote_src"
    shutil.rmtree(local_path, ignore_errors=True)
    from_numpy(local_path, data, codec="zstd", progress=False)
    server, endpoint, client, server_name = _start_s3(work)
    try:
        for name, body in trimmed_files(local_path):
            client.put_object(Bucket="bench", Key=f"store/{name}", Body=body)
        local = Zrecord(local_path)
        offs = np.arange(BATCH, dtype=np.uint64) * RECORD
        out = np.empty(BATCH * RECORD, np.uint8)
        check = np.empty_like(out)
        perm = rng.permutation(records)
        batches = [rng.permutation(records)[:BATCH] for _ in range(rounds)]

        def gather_rate(z):
            t = time.perf_counter()
            for b in batches:
                z.gather(b, out, offs)
            return len(batches) / (time.perf_counter() - t)

        print(f"server {server_name}; records {records} x {RECORD // 1024} KiB zstd, batch {BATCH}, rounds {rounds}")
        print(f"{'row':<44}{'samples/s':>11}{'batches/s':>11}{'MiB/s':>9}{'ratio':>12}")

        def line(name, samples_per_s, ratio=None, unit=""):
            bps = samples_per_s / BATCH
            r = f"{ratio:.2f}{unit}" if ratio is not None else ""
            print(f"{name:<44}{samples_per_s:>11,.0f}{bps:>11.1f}{samples_per_s * RECORD / MiB:>9.1f}{r:>12}")

        for k, delay_ms in enumerate((0, 5, 50)):
            proxy = Proxy(endpoint, delay=delay_ms / 1000)
            opts = {"aws_endpoint": proxy.url, "aws_allow_http": "true", "aws_access_key_id": "bench",
                    "aws_secret_access_key": "bench", "aws_region": "us-east-1"}
            url = "s3://bench/store"
            cold = _epoch(Zrecord(url, storage_options=opts), perm, out, offs)
            cache = (work / f"cache-{delay_ms}", 1 << 30)
            shutil.rmtree(cache[0], ignore_errors=True)
            cached = Zrecord(url, storage_options=opts, cache=cache)
            cold_cached = _epoch(cached, perm, out, offs)
            # The cache now holds the store: warm rows, interleaved with the local ones.
            warm, here = [], []
            for _ in range(3):
                here.append(gather_rate(local))
                warm.append(gather_rate(cached))
            cached.gather(batches[0], out, offs)
            local.gather(batches[0], check, offs)
            assert np.array_equal(out, check), "a warm remote gather differs from the local one"
            ds_remote = DenseDataset(url, storage_options=opts, cache=cache)
            loader_remote = _loader_rate(ds_remote, loader_batches)
            loader_local = _loader_rate(DenseDataset(local_path), loader_batches)
            peers = _peers(npy, endpoint, proxy.url, work / "peers", upload=k == 0)
            c = __import__("boto3").client("s3", endpoint_url=proxy.url, **CREDS)
            t = time.perf_counter()
            with ThreadPoolExecutor(10) as pool:
                list(pool.map(lambda i, c=c: c.get_object(Bucket="bench", Key="store/0.zr", Range=f"bytes={i * 4096}-{i * 4096 + RECORD - 1}")["Body"].read(), range(BATCH)))
            ceiling = BATCH / (time.perf_counter() - t)
            proxy.close()

            best_peer = max((v.get("samples_per_s", 0) for v in peers.values() if isinstance(v, dict)), default=0)
            print(f"-- +{delay_ms} ms per request")
            ours_cold = max(cold, cold_cached)
            line("  cold epoch, no cache", cold, cold / best_peer if best_peer else None, "x peer")
            line("  cold epoch, empty disk cache", cold_cached, cold_cached / best_peer if best_peer else None, "x peer")
            for name in ("streaming", "litdata"):
                got = peers.get(name)
                if isinstance(got, dict) and "samples_per_s" in got:
                    exact = "" if got.get("exact") else " (NOT exact)"
                    label = f"  {name} cold epoch ({got['workers']} workers){exact}"
                    line(label, got["samples_per_s"], got["samples_per_s"] / ours_cold, "x ours")
                else:
                    print(f"  {name}: {got.get('error') if isinstance(got, dict) else peers.get('note')}")
            line("  warm cache gather", median(warm) * BATCH, median(warm) / median(here), "x local")
            line("  local store gather", median(here) * BATCH)
            line("  loader, 4 workers, warm cache", loader_remote * BATCH, loader_remote / loader_local, "x local")
            line("  loader, 4 workers, local store", loader_local * BATCH)
            print(f"  {'ranged-GET ceiling, 10 at once (GETs/s)':<42}{ceiling:>11,.0f}")
    finally:
        server.terminate()
        server.wait(timeout=10)
