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
import json
import os
import subprocess
import time
from pathlib import Path
from statistics import median

import numpy as np
from bench_packed_peers import _rate as peer_rate

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
    """Tokens per second of a fresh loader (``make()``), as the peers' are measured."""
    loader = make()
    try:
        return peer_rate(loader, seq_len, seconds)
    finally:
        loader.close()


def _peers(work, lengths, tokens, seconds):
    """LitData's and Grain's rows (scripts/bench_packed_peers.py in the peers' venv), or None
    when that venv is missing."""
    python = Path(os.environ.get("LOADERX_PEERS_PYTHON", Path.home() / ".cache/loaderx-tools/venv-peers/bin/python"))
    if not python.exists():
        print(f"(no {python}: `make bench-peers-venv` installs LitData and Grain; their rows are skipped)\n")
        return None
    docs = Path(work) / "peers-docs.npz"
    np.savez(docs, lengths=lengths, tokens=tokens)
    script = Path(__file__).resolve().parent / "bench_packed_peers.py"
    run = subprocess.run(
        [str(python), str(script), "--docs", str(docs), "--work", str(Path(work) / "peers"), "--seconds", str(seconds)],
        capture_output=True, text=True, check=False,
    )
    if run.returncode != 0:
        print(f"(peers failed: {run.stderr.strip().splitlines()[-1:]})\n")
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])


def _peer_rates(ours, peers):
    """Tokens/s beside LitData's TokensLoader and Grain's packing, and the ratio to the better."""
    v = peers["versions"]
    print(f"Beside LitData {v['litdata']} (TokensLoader, 2 loader workers) and Grain {v['grain']} (ArrayRecord,")
    print("the better of 0 and 2 mp_prefetch workers), the same documents, M tokens/s:\n")
    print("| store | seq_len | packing | loaderx | LitData TokensLoader | Grain | loaderx / better peer |")
    print("|---|---|---|---|---|---|---|")
    for (codec, seq_len, packing), rate in ours.items():
        lit = peers["litdata"].get(str(seq_len)) if codec == "raw" and packing == "concat" else None
        grain = max(peers["grain"].get(f"{codec}/{seq_len}/{packing}/{w}", 0.0) for w in (0, 2))
        best = max(lit or 0.0, grain)
        lit_s = f"{lit / 1e6:.1f}" if lit else "–"
        print(f"| {codec} | {seq_len} | {packing} | {rate / 1e6:.1f} | {lit_s} | {grain / 1e6:.2f} | {rate / best:.1f}x |")
    print()


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
    ours = {}
    print("| store | seq_len | packing | M tokens/s |")
    print("|---|---|---|---|")
    for codec, path in stores.items():
        for seq_len in (2048, 8192):
            for packing in ("concat", "best_fit"):
                rates = []
                for _ in range(1 if quick else 3):
                    make = functools.partial(DataLoader.packed, RaggedDataset(path), seq_len, 8, packing, "cyclic", seed=1, num_workers=2)
                    rates.append(_rate(make, seq_len, seconds))
                ours[codec, seq_len, packing] = median(rates)
                print(f"| {codec} | {seq_len} | {packing} | {median(rates) / 1e6:.1f} |")
    print()
    peers = _peers(work, lengths, tokens, 1.0 if quick else seconds)

    if peers is not None:
        _peer_rates(ours, peers)
    print("Padding of best_fit (share of slots), one epoch of these lengths; in store order (SEQUENTIAL)")
    print("beside Grain's BestFitPackIterDataset over the same lengths in the same order, and shuffled (CYCLIC):\n")
    print("| seq_len | bins | loaderx, store order | Grain, store order | loaderx, shuffled |")
    print("|---|---|---|---|---|")
    lens32 = lengths.astype(np.uint32)
    for seq_len in (2048, 8192):
        for bins in (8, 128, 1024):
            pads = []
            for mode in (0, 2):
                p = _loaderx.Packer(lens32, seq_len, "best_fit", bins, mode, 1)
                pads.append(1 - p.tokens / (p.epoch_rows(0) * seq_len))
            grain = (peers or {}).get("grain_padding", {}).get(f"{seq_len}/{bins}")
            g = f"{grain:.4f}" if grain is not None else "n/a"
            print(f"| {seq_len} | {bins} | {pads[0]:.4f} | {g} | {pads[1]:.4f} |")
    print()

    big = 1_000_000 if quick else 10_000_000
    rng = np.random.default_rng(5)
    big_lengths = np.clip(np.exp(rng.normal(np.log(300), 1.0, big)), 1, 60000).astype(np.uint32)
    print(f"The plan over {big / 1e6:.0f} M documents (lengths as above, CYCLIC):\n")
    print("| packing | plan (s) | first batch (s) | seek p50 / max (ms) | plan bytes per document | with the lengths |")
    print("|---|---|---|---|---|---|")
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
        with_lengths = (p.plan_bytes + p.lengths_bytes) / big
        print(f"| {packing} | {plan:.3f} | {first:.6f} | {median(seeks) * 1e3:.3f} / {max(seeks) * 1e3:.3f} | {per_doc:.2f} | {with_lengths:.2f} |")
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
    metrics_overhead(quick, work)


def metrics_overhead(quick, work):
    """The loader over raw 12 KiB records with metrics, without, and with a trace."""
    from loaderx.dataloader import DataLoader

    print("Metrics overhead, the loader over raw 12 KiB records (batch 256, 2 workers), GB/s:\n")
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    path = Path(work) / "metrics-12k"
    if not (path / "meta.zr").exists():
        rows_n = 4000 if quick else 20000
        data = np.random.default_rng(0).integers(0, 256, (rows_n, 12 << 10), dtype=np.uint8)
        from_numpy(path, data, codec="raw", progress=False)
    from loaderx import dataloader as _dataloader

    real_produce = _dataloader.produce_timed
    unmarked = (0.0,) * 9

    def bare(source, transform, step):
        return transform(source.batch_timed(step)[0]), unmarked, 0

    def nothing(*args):
        return None

    def run(mode):
        if mode == "off":
            _dataloader.produce_timed = bare
        try:
            trace = Path(work) / "trace.json" if mode == "trace" else None
            dl = DataLoader({"x": DenseDataset(path)}, num_workers=2, batch_size=256, trace=trace)
            if mode == "off":
                dl._metrics.waited = dl._metrics.step = nothing
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
            _dataloader.produce_timed = real_produce

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
    # The same cost without the loader's noise: the recording calls of one step against the bare
    # calls, in a loop, as a share of one step of the loader above.
    cost = _recording_cost()
    step_us = 256 * (12 << 10) / (off * 1e9) * 1e6
    print(f"Recording costs {cost:.2f} us of Python per step (a step of the loader above: {step_us:.0f} us): {cost / step_us:.2%}.\n")


def _recording_cost(n=200_000):
    """Microseconds the metrics add to a step: produce_timed, Metrics.step and Metrics.waited
    against the bare produce, medians of 5 rounds."""
    from loaderx._metrics import Metrics, clock, produce_timed

    class Source:
        batch = {"x": np.zeros(4)}

        def batch_timed(self, step):
            return self.batch, clock()

    source, same, m = Source(), (lambda b: b), Metrics()
    timed, bare = [], []
    for _ in range(5):
        t = time.perf_counter()
        for k in range(n):
            _, marks, nbytes = produce_timed(source, same, k)
            m.step(k, marks, nbytes, 1)
            t0 = clock()
            m.waited(t0, clock(), 1, k)
        timed.append(time.perf_counter() - t)
        t = time.perf_counter()
        for k in range(n):
            same(source.batch_timed(k)[0])
        bare.append(time.perf_counter() - t)
    return (median(timed) - median(bare)) / n * 1e6
