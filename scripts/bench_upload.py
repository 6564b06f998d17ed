"""Writing to object storage, side by side in one run, on the local S3 server (moto, or s3s-fs
when `make bench-remote` installed it; docs/benchmarks.md, "Writing to object storage"):

1. ``loaderx cp`` (``loaderx.remote.copy``) of a store, against boto3's transfer manager copying
   the same store: its directory as it is (what ``aws s3 cp --recursive`` sends: every file whole,
   the preallocated sparse space too), and only its live bytes (``scripts/store_files.py``).
2. ``from_numpy`` to ``s3://`` of the same records as MosaicML Streaming's ``MDSWriter`` and
   LitData's ``optimize`` write to the same server (in .venv-bench, `make bench-venv`; skipped
   without it): the seconds from the first record to the last object in place. (LitData's
   object-store client is given ``allow_http``, which it has no option for: the server is plain
   HTTP.)

Records are incompressible bytes (``--mb`` MB of ``--record-kb`` KiB records), stored raw by all.

    python scripts/bench_upload.py [--mb 256] [--record-kb 64] [--rounds 2] [--no-full-copy]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_remote import CREDS, _start_s3  # noqa: E402
from store_files import trimmed_files  # noqa: E402

PEERS = r'''
import json, os, sys, time
import numpy as np
data = np.load(sys.argv[1], mmap_mode="r")
which, out = sys.argv[2], sys.argv[3]
t = time.perf_counter()
if which == "streaming":
    from streaming import MDSWriter
    with MDSWriter(out=out, columns={"x": "bytes"}, size_limit=64 << 20) as w:
        for row in data:
            w.write({"x": row.tobytes()})
elif which == "litdata":
    # LitData's object-store client takes no allow_http option; the local server is plain HTTP.
    import litdata.streaming.downloader as dl
    dl._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"
    from litdata import optimize
    def make(i):
        return {"x": data[i].tobytes()}
    optimize(fn=make, inputs=list(range(len(data))), output_dir=out, chunk_bytes="64MB", num_workers=2, mode="overwrite")
print(json.dumps({"seconds": time.perf_counter() - t}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--record-kb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-full-copy", action="store_true")
    args = ap.parse_args()
    from boto3.s3.transfer import TransferConfig

    from loaderx import remote
    from loaderx.converter import from_numpy

    work = Path(tempfile.mkdtemp(prefix="lx-bench-upload-"))
    proc, endpoint, client, server = _start_s3(work)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": CREDS["aws_access_key_id"], "AWS_SECRET_ACCESS_KEY": CREDS["aws_secret_access_key"],
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "S3_ENDPOINT_URL": endpoint}
    os.environ.update(env)
    try:
        n = args.mb * 1_000_000 // (args.record_kb * 1024)
        data = np.random.default_rng(0).integers(0, 256, (n, args.record_kb * 1024), dtype=np.uint8)
        mb = data.nbytes / 1e6
        np.save(work / "recs.npy", data)
        store = work / "store"
        from_numpy(store, data, codec="raw", progress=False)
        apparent = sum(f.stat().st_size for f in store.iterdir())
        live = sum(len(b) for _, b in trimmed_files(store))
        transfer = TransferConfig(multipart_chunksize=16 << 20, max_concurrency=10)
        rows = {k: [] for k in ("loaderx cp", "boto3 live bytes", "from_numpy s3://", "streaming MDSWriter", "litdata optimize")}
        bench_py = ROOT / ".venv-bench" / "bin" / "python"
        for r in range(args.rounds):
            t = time.perf_counter()
            remote.copy(store, f"s3://bench/cp-{r}")
            rows["loaderx cp"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for name, body in trimmed_files(store):
                tmp = work / f"live-{name}"
                tmp.write_bytes(body)
                client.upload_file(str(tmp), "bench", f"live-{r}/{name}", Config=transfer)
                tmp.unlink()
            rows["boto3 live bytes"].append(time.perf_counter() - t)
            t = time.perf_counter()
            from_numpy(f"s3://bench/np-{r}", data, codec="raw", progress=False)
            rows["from_numpy s3://"].append(time.perf_counter() - t)
            if bench_py.exists():
                for peer, key in (("streaming", "streaming MDSWriter"), ("litdata", "litdata optimize")):
                    p = subprocess.run([str(bench_py), "-c", PEERS, str(work / "recs.npy"), peer, f"s3://bench/{peer}-{r}"],
                                       capture_output=True, text=True, env={**os.environ, **env}, timeout=900)
                    if p.returncode == 0:
                        rows[key].append(json.loads(p.stdout.strip().splitlines()[-1])["seconds"])
                    else:
                        print(f"{peer}: failed: {p.stderr[-800:]}", file=sys.stderr)
        full = None
        if not args.no_full_copy:
            t = time.perf_counter()
            for f in sorted(store.iterdir()):
                client.upload_file(str(f), "bench", f"full/{f.name}", Config=transfer)
            full = time.perf_counter() - t
        print(f"server: {server}; {n} records of {args.record_kb} KiB = {mb:.0f} MB; store: {live / 1e6:.0f} MB live, {apparent / 1e9:.2f} GB apparent")
        for name, secs in rows.items():
            if secs:
                best = min(secs)
                print(f"  {name:<24}{best:>8.2f} s  {mb / best:>7.1f} MB/s   rounds: {' '.join(f'{s:.2f}' for s in secs)}")
        if full is not None:
            print(f"  {'boto3 whole directory':<24}{full:>8.2f} s  ({apparent / 1e9:.2f} GB sent, as aws s3 cp --recursive)")
        ours = min(rows["from_numpy s3://"])
        peers = [min(v) for k, v in rows.items() if k in ("streaming MDSWriter", "litdata optimize") and v]
        if peers:
            print(f"  from_numpy s3:// vs the faster peer: {min(peers) / ours:.2f}x")
        print(f"  loaderx cp vs boto3 live bytes: {min(rows['boto3 live bytes']) / min(rows['loaderx cp']):.2f}x")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
