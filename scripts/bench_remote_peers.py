"""Peers for the remote benchmark: MosaicML Streaming and LitData reading the same records from
the same local S3 server (moto) that ``scripts/bench_remote.py`` serves our own store from.

    .venv-bench/bin/python scripts/bench_remote_peers.py --data recs.npy --endpoint URL \
        --read-endpoint PROXY_URL --bucket bench --work DIR [--batch 256] [--workers N] [--skip-upload]

Unless --skip-upload, each library writes the records (uint8 array ``records x record_bytes``) in
its own format with its default shard size (Streaming: MDSWriter, LitData: optimize; one
``bytes`` column and one int index column), and the files go up to ``s3://BUCKET/mds/`` and
``s3://BUCKET/litdata/`` through --endpoint. Then, for each library, in a child process with a
time limit: one shuffled epoch over the whole dataset, from an empty local cache, read through
--read-endpoint (the delay proxy) by a torch DataLoader (batch --batch, --workers workers).

Measured: seconds from dataset construction to the last batch (so it includes the index fetch and
every shard download) and samples/s over that time. Every sample's bytes are compared with
``data[index]``: ``exact`` is true when all match, ``unique`` counts distinct indices seen.
Prints one JSON line on stdout; a library that fails or times out gets ``{"error": ...}``.
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


def _env(args):
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                      AWS_DEFAULT_REGION="us-east-1", S3_ENDPOINT_URL=args.read_endpoint)


def upload(args, data):
    global _DATA
    import boto3
    from litdata import optimize
    from streaming import MDSWriter

    work = Path(args.work)
    mds, lit = work / "mds", work / "litdata"
    for d in (mds, lit):
        shutil.rmtree(d, ignore_errors=True)
    with MDSWriter(out=str(mds), columns={"data": "bytes", "idx": "int"}) as w:
        for i in range(len(data)):
            w.write({"data": data[i].tobytes(), "idx": i})
    _DATA = data
    optimize(fn=_litdata_item, inputs=list(range(len(data))), output_dir=str(lit), chunk_bytes="64MB",
             num_workers=1, start_method="fork", verbose=False)
    s3 = boto3.client("s3", endpoint_url=args.endpoint)
    for prefix, root in (("mds", mds), ("litdata", lit)):
        for f in sorted(root.rglob("*")):
            if f.is_file():
                s3.upload_file(str(f), args.bucket, f"{prefix}/{f.relative_to(root).as_posix()}")


def _dataset(lib, args, cache):
    if lib == "streaming":
        from streaming import StreamingDataset
        return StreamingDataset(remote=f"s3://{args.bucket}/mds", local=cache, shuffle=True, batch_size=args.batch)
    from litdata import StreamingDataset
    from litdata.streaming import downloader
    # LitData fetches chunks with obstore and passes it fixed client options, which drops the
    # AWS_ALLOW_HTTP env setting: without this, a plain-http endpoint fails with "BadScheme".
    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
    opts = {"endpoint_url": args.read_endpoint, "aws_access_key_id": "bench",
            "aws_secret_access_key": "bench", "region_name": "us-east-1"}
    return StreamingDataset(f"s3://{args.bucket}/litdata", cache_dir=cache, shuffle=True, storage_options=opts)


def read_epoch(lib, args, data):
    from torch.utils.data import DataLoader

    cache = tempfile.mkdtemp(prefix=f"cache-{lib}-", dir=args.work)
    try:
        t = time.perf_counter()
        loader = DataLoader(_dataset(lib, args, cache), batch_size=args.batch, num_workers=args.workers)
        samples, exact, seen = 0, True, set()
        for batch in loader:
            for i, b in zip(batch["idx"].tolist(), batch["data"]):
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
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True, text=True)
    try:
        out, _ = p.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"error": f"timed out after {args.timeout} s"}
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
    if not args.skip_upload:
        try:
            upload(args, data)
        except Exception as e:  # noqa: BLE001
            results = {lib: {"error": f"upload: {type(e).__name__}: {e}"} for lib in ("streaming", "litdata")}
    for lib in ("streaming", "litdata"):
        if lib not in results:
            results[lib] = run_child(lib, args)
    try:  # Streaming keeps its state in /dev/shm; a killed or crashed run leaves it behind
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()
    except Exception:  # noqa: BLE001
        pass
    print(json.dumps(results), file=out, flush=True)


if __name__ == "__main__":
    main()
