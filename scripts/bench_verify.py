"""The verify section of the benchmarks: what checking per-record checksums (checksums.lx)
costs, each row against the same work unchecked, in one run, rounds interleaved, medians.

    python scripts/bench.py verify [--quick] [--baseline-python PY]

* 12 KiB raw gathers: random batches of 256 from a local store, ``verify="always"`` against
  ``"off"``: ``Zrecord.gather`` into one buffer, ``DenseDataset[batch]`` (a new array each), and
  the DataLoader with 2 workers;
* cold remote epoch: one shuffled pass over a 12 KiB zstd store served over HTTP by nginx
  (through the test proxy, with 0 and 5 ms added per request), ``verify="fetched"`` (the
  default) against ``"off"``, no cache;
* from_numpy: writing the store (12 KiB records, raw and zstd) with checksums against the
  loaderx before them, ``--baseline-python`` (an interpreter with that loaderx installed), each
  in its own process, interleaved.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

RECORD = 12 << 10
BATCH = 256
MiB = 1 << 20


def _records(n, seed=0):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, RECORD), dtype=np.uint8)
    data[rng.random(data.shape) < 1 / 6] = 0
    return data


def _gather_rate(z, batches, out, offs):
    t = time.perf_counter()
    for b in batches:
        z.gather(b, out, offs)
    return len(batches) * BATCH / (time.perf_counter() - t)


def _loader_rate(ds, n):
    from loaderx.dataloader import DataLoader

    with DataLoader({"x": ds}, batch_size=BATCH, num_workers=2, mode="cyclic") as loader:
        for _ in range(5):
            next(loader)
        t = time.perf_counter()
        for _ in range(n):
            next(loader)
        return n * BATCH / (time.perf_counter() - t)


def _line(name, rate, ratio=None):
    r = f"{ratio:.3f}x" if ratio is not None else ""
    print(f"  {name:<46}{rate:>12,.0f}{rate * RECORD / MiB:>10,.0f}{r:>10}")


def _gathers(args, work, data):
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset
    from loaderx.zrecord import Zrecord

    path = work / "verify_raw"
    shutil.rmtree(path, ignore_errors=True)
    from_numpy(path, data, codec="raw", progress=False)
    rng = np.random.default_rng(1)
    n = len(data)
    batches = [rng.integers(0, n, BATCH).astype(np.uint64) for _ in range(40 if args.quick else 200)]
    offs = np.arange(BATCH, dtype=np.uint64) * RECORD
    out = np.empty(BATCH * RECORD, np.uint8)
    off, always = Zrecord(path, verify="off"), Zrecord(path, verify="always")
    _gather_rate(off, batches, out, offs)  # page cache warm
    rates = {"off": [], "always": []}
    for _ in range(5 if args.quick else 9):
        rates["off"].append(_gather_rate(off, batches, out, offs))
        rates["always"].append(_gather_rate(always, batches, out, offs))
    # DenseDataset indexing, as training code reads: a new array per batch.
    views = {"off": DenseDataset(path, verify="off"), "always": DenseDataset(path, verify="always")}
    indexed = {"off": [], "always": []}
    for _ in range(5 if args.quick else 9):
        for mode, ds in views.items():
            t = time.perf_counter()
            for b in batches:
                ds[b]
            indexed[mode].append(len(batches) * BATCH / (time.perf_counter() - t))
    print(f"12 KiB raw gathers, {n} records, batch {BATCH}   {'samples/s':>12}{'MiB/s':>10}{'ratio':>10}")
    o, a = median(rates["off"]), median(rates["always"])
    _line('Zrecord.gather into a buffer, verify="off"', o)
    _line('Zrecord.gather into a buffer, verify="always"', a, a / o)
    o, a = median(indexed["off"]), median(indexed["always"])
    _line('DenseDataset[batch], verify="off"', o)
    _line('DenseDataset[batch], verify="always"', a, a / o)
    loads = {"off": [], "always": []}
    steps = 40 if args.quick else 150
    for _ in range(3 if args.quick else 5):
        for mode in ("off", "always"):
            loads[mode].append(_loader_rate(DenseDataset(path, verify=mode), steps))
    o, a = median(loads["off"]), median(loads["always"])
    _line('DataLoader 2 workers, verify="off"', o)
    _line('DataLoader 2 workers, verify="always"', a, a / o)
    print()


def _remote(args, work, data):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py" / "tests"))
    from bench_remote import _epoch
    from http_proxy import Proxy
    from store_files import trimmed_files

    from _lxhelpers import NGINX, nginx_serving
    from loaderx.converter import from_numpy
    from loaderx.zrecord import Zrecord

    if NGINX is None:
        print("cold remote epoch: nginx is not installed; skipped")
        return
    path = work / "verify_remote"
    shutil.rmtree(path, ignore_errors=True)
    from_numpy(path, data, codec="zstd", progress=False)
    www = work / "verify_www"
    shutil.rmtree(www, ignore_errors=True)
    (www / "store").mkdir(parents=True)
    for f, body in trimmed_files(path):
        (www / "store" / f).write_bytes(body)
    conf = work / "verify_nginx"
    shutil.rmtree(conf, ignore_errors=True)
    conf.mkdir()
    n = len(data)
    perm = np.random.default_rng(2).permutation(n)
    offs = np.arange(BATCH, dtype=np.uint64) * RECORD
    out = np.empty(BATCH * RECORD, np.uint8)
    with nginx_serving(conf, f"        root {www};", "/store/meta.zr") as base:
        print(f"cold remote epoch, {n} x 12 KiB zstd over HTTP (nginx), no cache   {'samples/s':>12}{'MiB/s':>10}{'ratio':>10}")
        for delay_ms in (0, 5):
            proxy = Proxy(base, delay=delay_ms / 1000)
            rates = {"off": [], "fetched": []}
            for _ in range(3 if args.quick else 5):
                for mode in ("off", "fetched"):
                    z = Zrecord(f"{proxy.url}/store", verify=mode)
                    rates[mode].append(_epoch(z, perm, out, offs))
                    z.close()
            o, f = median(rates["off"]), median(rates["fetched"])
            _line(f'+{delay_ms} ms/request, verify="off"', o)
            _line(f'+{delay_ms} ms/request, verify="fetched"', f, f / o)
            proxy.close()
    print()


WRITE = """
import sys, time, shutil, numpy as np
from loaderx.converter import from_numpy
data = np.load(sys.argv[1], mmap_mode="r"); data = np.ascontiguousarray(data)
out, codec = sys.argv[2], sys.argv[3]
shutil.rmtree(out, ignore_errors=True)
t = time.perf_counter(); from_numpy(out, data, codec=codec, progress=False); dt = time.perf_counter() - t
shutil.rmtree(out, ignore_errors=True)
print(len(data) / dt)
"""


def _writes(args, work, data):
    if not args.baseline_python:
        print("from_numpy: no --baseline-python (an interpreter with the loaderx before checksums); skipped")
        return
    npy = work / "verify_write.npy"
    np.save(npy, data)
    print(f"from_numpy, {len(data)} x 12 KiB, own process each   {'samples/s':>12}{'MiB/s':>10}{'ratio':>10}")
    for codec in ("raw", "zstd"):
        rates = {"before": [], "now": []}
        for _ in range(3 if args.quick else 5):
            for side, python in (("before", args.baseline_python), ("now", sys.executable)):
                run = subprocess.run([python, "-c", WRITE, npy, work / "verify_write", codec], capture_output=True, text=True, check=True)
                rates[side].append(float(run.stdout.strip().splitlines()[-1]))
        b, n = median(rates["before"]), median(rates["now"])
        _line(f"{codec}, loaderx before checksums", b)
        _line(f"{codec}, with checksums", n, n / b)
    print()


def section_verify(args, work):
    work = Path(work)
    data = _records(3000 if args.quick else 20000)
    _gathers(args, work, data)
    _remote(args, work, data[: 1000 if args.quick else 5000])
    _writes(args, work, data[: 2000 if args.quick else 10000])


if __name__ == "__main__":
    print(json.dumps({"usage": "python scripts/bench.py verify [--quick] [--baseline-python PY]"}))
