"""The machine's limits beside our rows: ``native/examples/limits.rs`` (a memcpy gather from a warm
mmap, and zstd decoding of frames held in memory, on 1 or 2 threads) runs on the same files and
the same index batches as the rows, interleaved with them, so every run prints ours/limit.

``section_gather`` (``python scripts/bench.py gather``) sweeps the batch size for raw 12 KiB and
128 KiB records: loaderx, npy-mmap and both limits, rounds interleaved, medians.
"""

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


class Limits:
    """The probe binary, built once (release, incremental) on first use."""

    def __init__(self):
        subprocess.run(
            ["cargo", "build", "-q", "-j2", "--release", "--example", "limits", "-p", "loaderx-native"],
            cwd=ROOT,
            check=True,
        )
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        self.exe = target / "release" / "examples" / "limits"
        self._files = {}

    def _batches_file(self, batches):
        key = id(batches)
        if key not in self._files:
            f = tempfile.NamedTemporaryFile(prefix="loaderx-limits-", suffix=".u64", delete=False)
            f.write(np.ascontiguousarray(batches, dtype="<u8").tobytes())
            f.close()
            self._files[key] = (batches, f.name)  # keeps `batches` alive, so its id stays unique
        return self._files[key][1]

    def times(self, mode, npy, batches, threads, stream=False):
        """Seconds per batch of ``mode`` (``gather`` or ``decode``) over the records of the
        ``.npy`` file ``npy`` (one record per row), ``threads`` 1 or 2: each batch split across
        the threads, or with ``stream`` whole batches per thread with no step between them (one
        figure: the wall time per batch, the throughput a loader is measured against)."""
        arr = np.load(npy, mmap_mode="r")
        record = arr.itemsize * int(np.prod(arr.shape[1:]))
        out = subprocess.run(
            [str(self.exe), mode, str(npy), str(arr.offset), str(record), self._batches_file(batches),
             str(batches.shape[1]), str(threads), *(["stream"] if stream else [])],
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(out.stdout)

    def close(self):
        for _, name in self._files.values():
            os.unlink(name)
        self._files.clear()


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def sweep(args, work, limits, rec_shape, n, sizes):
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    rec = int(np.prod(rec_shape))
    rng = np.random.default_rng(1)
    npy = work / f"sweep_{rec}.npy"
    data = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint8, shape=(n, *rec_shape))
    for start in range(0, n, 500):
        k = min(500, n - start)
        block = rng.integers(0, 256, (k, *rec_shape), dtype=np.uint8)
        block[:, ::6] = 0
        data[start : start + k] = block
    data.flush()
    del data
    store = work / f"sweep_raw_{rec}"
    from_numpy(store, np.load(npy, mmap_mode="r"), codec="raw", progress=False)
    ours, flat = DenseDataset(store), np.load(npy, mmap_mode="r")
    rounds = 3 if args.quick else 5
    print(f"== raw gathers by batch size: {rec >> 10} KiB records, {n} of them, sorted random draws ==")
    print(f"{'batch':>6} {'loaderx':>12} {'npy-mmap':>12} {'limit 1t':>12} {'limit 2t':>12}"
          f" {'vs npy':>7} {'vs 1t':>6} {'vs 2t':>6} {'per call':>9}")
    for batch in sizes:
        count = int(np.clip((24 if args.quick else 64) * MiB // (batch * rec), 5, 400))
        batches = np.stack([np.sort(rng.choice(n, batch, replace=False)) for _ in range(count)]).astype(np.uint64)
        rows = {
            "ours": lambda batches=batches: _timed(ours.__getitems__, batches),
            "npy": lambda batches=batches: _timed(flat.__getitem__, batches),
            "1t": lambda batches=batches: limits.times("gather", npy, batches, 1),
            "2t": lambda batches=batches: limits.times("gather", npy, batches, 2),
        }
        for f in rows.values():  # warm every path once
            f()
        times = {k: [] for k in rows}
        for _ in range(rounds):
            for k, f in rows.items():
                times[k].append(_median(f()))
        mib = batch * rec / MiB
        rate = {k: mib / _median(v) for k, v in times.items()}
        print(f"{batch:>6} {rate['ours']:>7.0f} MiB/s {rate['npy']:>7.0f} MiB/s {rate['1t']:>7.0f} MiB/s"
              f" {rate['2t']:>7.0f} MiB/s {rate['ours'] / rate['npy']:>6.2f}x {rate['ours'] / rate['1t']:>5.2f}x"
              f" {rate['ours'] / rate['2t']:>5.2f}x {_median(times['ours']) * 1e6:>6.1f} us", flush=True)
    ours.close()
    print()


def _timed(fn, batches, warm=3):
    """Seconds per batch; the first ``warm`` batches run untimed first, as in bench.py's
    time_gather: the rows take turns, and the pool threads (and the vCPUs under them) of this
    row have been idle meanwhile. The limit's helper thread is awake from its start."""
    import time

    for idx in batches[:warm]:
        fn(idx)
    out = []
    for idx in batches:
        t = time.perf_counter()
        fn(idx)
        out.append(time.perf_counter() - t)
    return out


def section_gather(args, work):
    limits = Limits()
    try:
        sweep(args, work, limits, (64, 64, 3), 8000 if args.quick else 20_000, [16, 64, 256, 1024, 4096])
        sweep(args, work, limits, (128, 256, 4), 800 if args.quick else 4000, [16, 64, 256, 1024] if not args.quick else [16, 64, 256])
    finally:
        limits.close()
