"""The packed section of the benchmarks: packed token batches (``DataLoader.packed``), in one run.

    python scripts/bench.py packed [--quick]

* tokens/s of packed batches (batch 8, ``"concat"`` and ``"best_fit"``, CYCLIC) at seq_len 2048
  and 8192, from a raw and a zstd store of the same uint16 token documents (lengths drawn from a
  log-normal, median 300 tokens), 2 worker threads, after a warm-up;
* padding of ``"best_fit"`` (the share of slots that are padding) on those lengths, per bin
  count;
* the plan over 10 million documents: making it (the first epoch planned), the next batch's rows,
  seeks to random rows of the epoch, and the plan's bytes per document; then a packed loader over
  a store of those 10 million documents: time to its first batch (lengths read from the table,
  the epoch planned, the rows read) and to a batch after a seek;
* metrics overhead: the loader over raw 12 KiB records with its metrics recorded (always, as
  shipped) against the same loader with recording replaced by no-ops, and with a trace;
  rounds interleaved, medians.
"""

import functools
import time
from pathlib import Path
from statistics import median

import numpy as np

MiB = 1 << 20


def _docs(n, seed=0):
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.exp(rng.normal(np.log(300), 1.0, n)), 1, 60000).astype(np.int64)
    # Zipf-like token ids: compressible the way text tokens are.
    tokens = np.minimum(rng.zipf(1.2, int(lengths.sum())), 50000).astype(np.uint16)
    return lengths, tokens


def _write(path, lengths, tokens, codec):
    from loaderx.converter import from_iterator

    if (path / "meta.zr").exists():
        return
    ends = np.cumsum(lengths)
    starts = ends - lengths
    from_iterator(path, (tokens[a:b] for a, b in zip(starts, ends)), codec=codec, progress=False)


def _rate(make, seq_len, seconds):
    """Tokens per second of a fresh loader, after 3 warm-up batches, over ``seconds``."""
    loader = make()
    for _ in range(3):
        next(loader)
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        next(loader)
        n += 1
    rate = n * 8 * seq_len / (time.perf_counter() - t)
    loader.close()
    return rate


def section_packed(args, work):
    from loaderx import _loaderx
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import RaggedDataset

    quick = args.quick
    print("## Packed token batches\n")
    n = 20_000 if quick else 100_000
    lengths, tokens = _docs(n)
    print(f"{n} documents, {tokens.size / 1e6:.1f} M uint16 tokens (median {int(np.median(lengths))}, mean {lengths.mean():.0f})\n")
    stores = {}
    for codec in ("raw", "zstd"):
        stores[codec] = Path(work) / f"packed-{codec}-{n}"
        _write(stores[codec], lengths, tokens, codec)
    seconds = 1.0 if quick else 3.0
    print("| store | seq_len | packing | M tokens/s |")
    print("|---|---|---|---|")
    for codec, path in stores.items():
        for seq_len in (2048, 8192):
            for packing in ("concat", "best_fit"):
                rates = []
                for _ in range(1 if quick else 3):
                    make = functools.partial(DataLoader.packed, RaggedDataset(path), seq_len, 8, packing, "cyclic", seed=1, num_workers=2)
                    rates.append(_rate(make, seq_len, seconds))
                print(f"| {codec} | {seq_len} | {packing} | {median(rates) / 1e6:.1f} |")
    print()

    print("Padding of best_fit (share of slots), one epoch of these lengths:\n")
    print("| seq_len | bins | padding |")
    print("|---|---|---|")
    lens32 = lengths.astype(np.uint32)
    for seq_len in (2048, 8192):
        for bins in (8, 128, 1024):
            p = _loaderx.Packer(lens32, seq_len, "best_fit", bins, 2, 1)
            rows = p.epoch_rows(0)
            print(f"| {seq_len} | {bins} | {1 - p.tokens / (rows * seq_len):.4f} |")
    print()

    big = 1_000_000 if quick else 10_000_000
    rng = np.random.default_rng(5)
    big_lengths = np.clip(np.exp(rng.normal(np.log(300), 1.0, big)), 1, 60000).astype(np.uint32)
    print(f"The plan over {big / 1e6:.0f} M documents (lengths as above, CYCLIC):\n")
    print("| packing | plan (s) | first batch (s) | seek p50 / max (ms) | plan bytes per document |")
    print("|---|---|---|---|---|")
    for packing in ("concat", "best_fit"):
        t = time.perf_counter()
        p = _loaderx.Packer(big_lengths, 2048, packing, 128, 2, 1)
        p.segments(0, 8)  # plans epoch 0
        plan = time.perf_counter() - t
        t = time.perf_counter()
        p.segments(8, 8)
        first = time.perf_counter() - t
        rows = p.epoch_rows(0) or p.tokens // 2048
        seeks = []
        for k in np.random.default_rng(0).integers(0, rows - 8, 200):
            t = time.perf_counter()
            p.segments(int(k), 8)
            seeks.append(time.perf_counter() - t)
        per_doc = p.plan_bytes / big
        print(f"| {packing} | {plan:.3f} | {first:.6f} | {median(seeks) * 1e3:.3f} / {max(seeks) * 1e3:.3f} | {per_doc:.2f} (+4 of lengths) |")
    print()

    # Short documents (median 16 tokens) keep a store of 10 M of them near 400 MB.
    store_lengths = np.clip(np.exp(rng.normal(np.log(16), 0.8, big)), 1, 512).astype(np.uint32)
    mean = store_lengths.mean()
    print(f"A packed loader over a store of {big / 1e6:.0f} M documents (raw uint16, median 16 tokens, mean {mean:.0f}; seq_len 2048, batch 8, best_fit):\n")
    path = Path(work) / f"packed-docs-{big}"
    big_lengths = store_lengths
    if not (path / "meta.zr").exists():
        from loaderx.converter import from_iterator
        from loaderx.zrecord import Zrecord

        ends = np.cumsum(big_lengths.astype(np.int64))
        from_iterator(path, iter([np.zeros(int(big_lengths[0]), np.uint16)]), codec="raw", progress=False)
        z = Zrecord(path, codec="raw")
        step = 1_000_000
        for a in range(1, big, step):
            b = min(big, a + step)
            first = int(ends[a - 1])
            offsets = (ends[a - 1 : b - 1] - first).astype(np.uint64) * 2
            z.append(np.zeros(int(ends[b - 1] - first), np.uint16).view(np.uint8), offsets, codec="raw")
        z.close()
    print("| loader | seconds |")
    print("|---|---|")
    t = time.perf_counter()
    dl = DataLoader.packed(RaggedDataset(path), 2048, 8, "best_fit", "cyclic", seed=1, num_workers=2)
    next(dl)
    print(f"| time to the first batch (lengths read, epoch planned, 8 rows read) | {time.perf_counter() - t:.3f} |")
    steps = dl._source.packer(0).epoch_rows(0) // 8  # the first epoch's steps
    seeks = []
    for k in np.random.default_rng(1).integers(0, steps, 20):
        t = time.perf_counter()
        dl.seek(int(k))
        next(dl)
        seeks.append(time.perf_counter() - t)
    print(f"| seek to a random step of the epoch and take its batch (median of 20) | {median(seeks):.4f} |")
    t = time.perf_counter()
    dl.seek(3 * steps + 5)
    next(dl)
    print(f"| seek into the fourth epoch and take its batch (counts epochs 1-3's rows once) | {time.perf_counter() - t:.3f} |")
    dl.close()
    print()

    print("Metrics overhead, the loader over raw 12 KiB records (batch 256, 2 workers), GB/s:\n")
    from loaderx import _metrics
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    path = Path(work) / "metrics-12k"
    if not (path / "meta.zr").exists():
        rows_n = 4000 if quick else 20000
        data = np.random.default_rng(0).integers(0, 256, (rows_n, 12 << 10), dtype=np.uint8)
        from_numpy(path, data, codec="raw", progress=False)
    real_step, real_waited = _metrics.Metrics.step, _metrics.Metrics.waited

    def run(mode):
        if mode == "off":
            _metrics.Metrics.step = lambda *a, **k: None  # type: ignore[method-assign]
            _metrics.Metrics.waited = lambda *a, **k: None  # type: ignore[method-assign]
        try:
            trace = Path(work) / "trace.json" if mode == "trace" else None
            dl = DataLoader({"x": DenseDataset(path)}, num_workers=2, batch_size=256, trace=trace)
            for _ in range(5):
                next(dl)
            k, t = 0, time.perf_counter()
            while time.perf_counter() - t < (0.5 if quick else 2.0):
                next(dl)
                k += 1
            rate = k * 256 * (12 << 10) / (time.perf_counter() - t) / 1e9
            dl.close()
            return rate
        finally:
            _metrics.Metrics.step, _metrics.Metrics.waited = real_step, real_waited

    results = {"off": [], "on": [], "trace": []}
    for _ in range(3 if quick else 7):
        for mode in results:
            results[mode].append(run(mode))
    off = median(results["off"])
    print("| recording | GB/s | against none |")
    print("|---|---|---|")
    for mode, label in (("off", "none (no-op)"), ("on", "metrics (shipped)"), ("trace", "metrics and trace")):
        print(f"| {label} | {median(results[mode]):.2f} | {median(results[mode]) / off:.3f} |")
    print()
