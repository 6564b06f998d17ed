"""The remote section of the benchmarks: a store on a local S3 server (moto's server mode on
127.0.0.1), read through a proxy that adds a fixed delay per request, beside the same store
read locally and beside the server's own ceiling (a plain loop of concurrent ranged GETs).

    python scripts/bench.py remote [--quick]

Rows, for each added delay (0, 5 and 50 ms per request): gather batches/s and MiB/s of 256
random 12 KiB records, cold (no cache) and warm (a disk cache filled by one pass), and the
ranged-GET ceiling at the same concurrency, in requests/s.
"""

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from http_proxy import Proxy
from store_files import trimmed_files

RECORDS = 5000
RECORD = 12 << 10
BATCH = 256
MiB = 1 << 20


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def section_remote(args, work):
    import boto3

    from loaderx.converter import from_numpy
    from loaderx.zrecord import Zrecord

    rounds = 3 if args.quick else 6
    records = 1000 if args.quick else RECORDS
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(records, RECORD), dtype=np.uint8)
    data[rng.random(data.shape) < 1 / 6] = 0
    local_path = Path(work) / "remote_src"
    from_numpy(local_path, data, codec="zstd", progress=False)
    server = Path(sys.executable).with_name("moto_server")
    port = _free_port()
    moto = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench", "region_name": "us-east-1"}
    try:
        client = boto3.client("s3", endpoint_url=endpoint, **creds)
        for _ in range(100):
            try:
                client.create_bucket(Bucket="bench")
                break
            except Exception:
                time.sleep(0.1)
        for name, body in trimmed_files(local_path):
            client.put_object(Bucket="bench", Key=f"store/{name}", Body=body)
        local = Zrecord(local_path)
        batches = [rng.permutation(records)[:BATCH] for _ in range(rounds)]
        lens = local.lengths(batches[0])
        offs = (np.arange(BATCH, dtype=np.uint64) * RECORD).astype(np.uint64)
        out = np.empty(BATCH * RECORD, np.uint8)

        def rate(z, bs):
            t = time.perf_counter()
            for b in bs:
                z.gather(b, out, offs)
            return len(bs) / (time.perf_counter() - t)

        local_bps = rate(local, batches)
        print(f"records {records} x {RECORD // 1024} KiB zstd, batch {BATCH}, rounds {rounds}")
        print(f"{'row':<34}{'batches/s':>12}{'MiB/s':>10}{'x local':>9}")
        mib = BATCH * RECORD / MiB
        print(f"{'local store':<34}{local_bps:>12.1f}{local_bps * mib:>10.1f}{1:>9.2f}")
        for delay_ms in (0, 5, 50):
            proxy = Proxy(endpoint, delay=delay_ms / 1000)
            url = proxy.url
            opts = {"aws_endpoint": url, "aws_allow_http": "true", "aws_access_key_id": "bench",
                    "aws_secret_access_key": "bench", "aws_region": "us-east-1"}
            cold = Zrecord("s3://bench/store", storage_options=opts)
            cold.gather(batches[0], out, offs)  # table pages once
            cold_bps = rate(cold, batches[1:] or batches)
            cache = (Path(work) / f"cache-{delay_ms}", 1 << 30)
            warm = Zrecord("s3://bench/store", storage_options=opts, cache=cache)
            everything = np.arange(records)
            for start in range(0, records, 1024):
                part = everything[start : start + 1024]
                warm.gather(part, np.empty(len(part) * RECORD, np.uint8), (np.arange(len(part), dtype=np.uint64) * RECORD))
            warm_bps = rate(warm, batches)
            # The ceiling: BATCH ranged GETs of one record each, 10 at a time (object_store's
            # concurrency per call), straight to the server through the same proxy.
            c = boto3.client("s3", endpoint_url=url, **creds)
            t = time.perf_counter()
            with ThreadPoolExecutor(10) as pool:
                list(pool.map(lambda i: c.get_object(Bucket="bench", Key="store/0.zr", Range=f"bytes={i * 4096}-{i * 4096 + RECORD - 1}")["Body"].read(), range(BATCH)))
            ceiling = BATCH / (time.perf_counter() - t)
            for name, bps in ((f"s3 +{delay_ms} ms cold", cold_bps), (f"s3 +{delay_ms} ms warm cache", warm_bps)):
                print(f"{name:<34}{bps:>12.1f}{bps * mib:>10.1f}{bps / local_bps:>9.2f}")
            print(f"{f'ceiling +{delay_ms} ms (GETs/s, 10 at once)':<34}{ceiling:>12.1f}")
            proxy.close()
    finally:
        moto.terminate()
        moto.wait(timeout=10)
