"""Peers for the remote benchmark: MosaicML Streaming and LitData reading the same records from
the same local S3 server (moto) that ``scripts/bench_remote.py`` serves our own store from.

    .venv-bench/bin/python scripts/bench_remote_peers.py --data recs.npy --endpoint URL \
        --read-endpoint PROXY_URL --bucket bench --work DIR [--batch 256] [--workers N] [--skip-upload]

Unless --skip-upload, each library writes the records (uint8 array ``records x record_bytes``) in
its own format (Streaming: MDSWriter, LitData: optimize; one ``bytes`` column and one int index
column) with 64 MiB shards (--shard-mb; both libraries' usual size), and the files go up to
``s3://BUCKET/mds/`` and ``s3://BUCKET/litdata/`` through --endpoint. Then, for each library, in
a child process with a time limit (--timeout): one shuffled epoch over the whole dataset, from an
empty local cache, read through --read-endpoint (the delay proxy) by a torch DataLoader (batch
--batch, --workers workers).

Measured: seconds from dataset construction to the last batch (so it includes the index fetch and
every shard download) and samples/s over that time. Every sample's bytes are compared with
``data[index]``: ``exact`` is true when all match, ``unique`` counts distinct indices seen.
Prints one JSON line on stdout; a library that fails or times out gets ``{"error": ...}``.

Note: a dataset smaller than a shard per DataLoader worker puts several LitData workers on one
shared chunk, which LitData 0.2.76 reads very slowly (mostly system time); a smaller --shard-mb
avoids that.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_DATA = None  # the records, for the LitData optimize workers (forked)


def _litdata_item(i):
    return {"idx": int(i), "data": _DATA[i].tobytes()}


def _collate(samples):
    """The same batch shape from both libraries: index list and a list of ``bytes`` (LitData hands
    out memoryviews, which torch's default collate would split byte by byte and cannot pickle)."""
    return {"idx": [int(s["idx"]) for s in samples], "data": [bytes(s["data"]) for s in samples]}


def _env(args):
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                      AWS_DEFAULT_REGION="us-east-1", S3_ENDPOINT_URL=args.read_endpoint)


def upload(lib, args, data):
    """Writes the records in ``lib``'s own format under --work and uploads them to s3://BUCKET/PREFIX/."""
    global _DATA
    import boto3

    prefix = {"streaming": "mds", "litdata": "litdata"}[lib]
    root = Path(args.work) / prefix
    shutil.rmtree(root, ignore_errors=True)
    if lib == "streaming":
        from streaming import MDSWriter
        columns = {"data": "bytes", "idx": "int"}
        with MDSWriter(out=str(root), columns=columns, size_limit=args.shard_mb << 20) as w:
            for i in range(len(data)):
                w.write({"data": data[i].tobytes(), "idx": i})
    else:
        from litdata import optimize
        _DATA = data
        optimize(fn=_litdata_item, inputs=list(range(len(data))), output_dir=str(root),
                 chunk_bytes=args.shard_mb << 20, num_workers=1, start_method="fork", verbose=False)
    s3 = boto3.client("s3", endpoint_url=args.endpoint)
    for f in sorted(root.rglob("*")):
        if f.is_file():
            s3.upload_file(str(f), args.bucket, f"{prefix}/{f.relative_to(root).as_posix()}")


def _dataset_factory(lib, args):
    """Imports the library (outside the timing) and returns ``cache dir -> dataset``."""
    if lib == "streaming":
        from streaming import StreamingDataset
        return lambda cache: StreamingDataset(remote=f"s3://{args.bucket}/mds", local=cache, shuffle=True,
                                              batch_size=args.batch)
    from litdata import StreamingDataset
    from litdata.streaming import downloader
    # LitData fetches chunks with obstore and passes it fixed client options, which drops the
    # AWS_ALLOW_HTTP env setting: without this, a plain-http endpoint fails with "BadScheme".
    getattr(downloader, "_OBSTORE_CLIENT_OPTIONS", {})["allow_http"] = True
    opts = {"endpoint_url": args.read_endpoint, "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench", "region_name": "us-east-1"}
    return lambda cache: StreamingDataset(f"s3://{args.bucket}/litdata", cache_dir=cache, shuffle=True,
                                          storage_options=opts)


def read_epoch(lib, args, data):
    from torch.utils.data import DataLoader

    make = _dataset_factory(lib, args)
    cache = tempfile.mkdtemp(prefix=f"cache-{lib}-", dir=args.work)
    try:
        t = time.perf_counter()
        loader = DataLoader(make(cache), batch_size=args.batch, num_workers=args.workers,
                            collate_fn=_collate)
        samples, exact, seen = 0, True, set()
        for batch in loader:
            for i, b in zip(batch["idx"], batch["data"]):
                exact = exact and 0 <= i < len(data) and np.array_equal(np.frombuffer(b, np.uint8), data[i])
                seen.add(i)
            samples += len(batch["data"])
        seconds = time.perf_counter() - t
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    exact = exact and samples == len(data) and len(seen) == len(data)
    return {"samples_per_s": samples / seconds, "seconds": seconds, "samples": samples,
            "unique": len(seen), "exact": exact}


def run_child(lib, args):
    """Runs one library in a child process (own session) so a hang is killed at the time limit."""
    cmd = [sys.executable, os.path.abspath(__file__), "--run", lib] + [
        a for k, v in vars(args).items() if k not in ("run", "skip_upload") and v is not None
        for a in (f"--{k.replace('_', '-')}", str(v))]
    # Streaming keeps state in /dev/shm/NNNNNN_* (left behind if the run is killed) and leaves a
    # pair of /tmp/NNNNNN_*_filelock files after every run: remove what this run added.
    def shm():
        return set(Path("/dev/shm").glob("[0-9]" * 6 + "_*")) | set(
            Path(tempfile.gettempdir()).glob("[0-9]" * 6 + "_*_filelock"))

    before = shm()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True, text=True)
    try:
        out, _ = p.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"error": f"timed out after {args.timeout} s"}
    finally:  # a killed child leaves its cache behind
        for d in Path(args.work).glob(f"cache-{lib}-*"):
            shutil.rmtree(d, ignore_errors=True)
        for f in shm() - before:
            f.unlink(missing_ok=True)
    lines = out.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": f"child exited {p.returncode} without a result"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--read-endpoint", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--shard-mb", type=int, default=64, help="shard size, MiB")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per library")
    ap.add_argument("--skip-upload", action="store_true")
    ap.add_argument("--run", choices=("streaming", "litdata"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    # The libraries (and their worker processes) may print; only our JSON line goes to stdout.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _env(args)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    data = np.load(args.data)
    if args.run:
        try:
            result = read_epoch(args.run, args, data)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            result = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(result), file=out, flush=True)
        return
    results = {}
    for lib in ("streaming", "litdata"):
        try:
            if not args.skip_upload:
                upload(lib, args, data)
        except Exception as e:  # noqa: BLE001
            results[lib] = {"error": f"upload: {type(e).__name__}: {e}"}
            continue
        results[lib] = run_child(lib, args)
    print(json.dumps(results), file=out, flush=True)


if __name__ == "__main__":
    main()
