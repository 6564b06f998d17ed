#!/usr/bin/env python3
"""The torch and JAX front ends, side by side in one run (``scripts/bench.py torch|jax`` runs this
in the venv with torch and JAX that ``scripts/setup.sh`` keeps, ``~/.cache/loaderx-tools/venv-ml``).

``torch``: torch's own DataLoader with 4 worker processes over a NumPy memmap (per-sample
``__getitem__`` and default collation, as torch's tutorials read a dataset; and reading whole
batches with ``__getitems__``, the fastest way a torch dataset can read a memmap), beside
loaderx.torch in the same torch DataLoader: the IterableDataset over a loaderx DataLoader with
its own 4 worker threads (torch's ``num_workers=0``: no inter-process copy), and with 4 torch
worker processes; the map-style Dataset with BatchSampler and collate. Same records, IID
batches of 256, rounds interleaved, medians.

``jax``: loaderx.jax.DataLoader (global arrays over 4 host devices) beside the base loader.

``arrow``: from_arrow (from a Table and from a Parquet file) and Arrow export beside from_numpy
and a plain pyarrow read of the same Parquet data, in MiB/s of records.

``ray``: a Ray Data conversion into a manifest (LoaderxDatasink) with 1 and 2 tasks at a time.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import BATCH, machine_block, median, mild_bytes  # noqa: E402

from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.dataset import DenseDataset  # noqa: E402

WORKERS = 4


class NpyRows:
    """A torch map-style dataset over .npy memmaps, one sample per ``__getitem__``."""

    def __init__(self, images, labels):
        self.paths, self.arrays = (images, labels), None

    def _open(self):
        if self.arrays is None:
            self.arrays = [np.load(p, mmap_mode="r") for p in self.paths]
        return self.arrays

    def __len__(self):
        return len(np.load(self.paths[1], mmap_mode="r"))

    def __getitem__(self, i):
        images, labels = self._open()
        return {"x": np.array(images[i]), "y": labels[i]}


class NpyBatches(NpyRows):
    """The same, reading a whole batch per ``__getitems__`` (fancy indexing on the memmap)."""

    def __getitems__(self, idx):
        import torch

        images, labels = self._open()
        idx = np.sort(np.asarray(idx))
        return [{"x": torch.from_numpy(images[idx]), "y": torch.from_numpy(labels[idx])}]


def first(batch):
    return batch[0]


def endless(n, seed):
    rng = np.random.default_rng(seed)
    while True:
        yield rng.integers(0, n, BATCH).tolist()


def rate(it, n_batches, warm=8):
    for _ in range(warm):
        next(it)
    t = time.perf_counter()
    for _ in range(n_batches):
        next(it)
    return n_batches / (time.perf_counter() - t)


def sizes(args, quick_batches, full_batches):
    """Records, rounds and batches per round."""
    return (4000, 3, quick_batches) if args.quick else (20_000, 5, full_batches)


def write_data(work, n):
    from loaderx.converter import from_numpy

    rng = np.random.default_rng(5)
    images = np.lib.format.open_memmap(work / "images.npy", mode="w+", dtype=np.uint8, shape=(n, 64, 64, 3))
    for start in range(0, n, 1000):
        images[start : start + 1000] = mild_bytes(rng, (min(1000, n - start), 64, 64, 3))
    images.flush()
    np.save(work / "labels.npy", rng.integers(0, 10, n).astype(np.int64))
    for codec in ("raw", "zstd"):
        for name in ("images", "labels"):
            shutil.rmtree(work / f"{name}_{codec}", ignore_errors=True)
            from_numpy(work / f"{name}_{codec}", np.load(work / f"{name}.npy", mmap_mode="r"), codec=codec,
                       progress=False)
    os.sync()


def section_torch(args, work):
    import torch
    from torch.utils.data import DataLoader as TorchLoader

    import loaderx.torch as lt

    n, rounds, n_batches = sizes(args, 60, 200)
    print(f"== torch: 12 KiB records, {n} of them, batch {BATCH}, IID, torch DataLoader with {WORKERS} workers "
          f"(torch {torch.__version__}) ==")
    write_data(work, n)
    images, labels = work / "images.npy", work / "labels.npy"

    def streams(codec):
        return {"x": DenseDataset(work / f"images_{codec}"), "y": DenseDataset(work / f"labels_{codec}")}

    makers = {
        "torch, npy-mmap, per sample": lambda: TorchLoader(
            NpyRows(images, labels), batch_sampler=endless(n, 1), num_workers=WORKERS),
        "torch, npy-mmap, __getitems__": lambda: TorchLoader(
            NpyBatches(images, labels), batch_sampler=endless(n, 1), num_workers=WORKERS, collate_fn=first),
    }
    for codec in ("raw", "zstd"):
        # loaderx's own 4 worker threads inside torch's DataLoader (num_workers=0): no IPC.
        makers[f"loaderx.torch IterableDataset, {codec}, 4 threads"] = lambda codec=codec: TorchLoader(
            lt.IterableDataset(DataLoader(streams(codec), batch_size=BATCH, num_workers=WORKERS, seed=1)),
            batch_size=None, num_workers=0)
        makers[f"loaderx.torch IterableDataset, {codec}"] = lambda codec=codec: TorchLoader(
            lt.IterableDataset(DataLoader(streams(codec), batch_size=BATCH, num_workers=1, seed=1)),
            batch_size=None, num_workers=WORKERS)
        makers[f"loaderx.torch Dataset + BatchSampler, {codec}"] = lambda codec=codec: TorchLoader(
            lt.Dataset(streams(codec)), batch_sampler=lt.BatchSampler(n, BATCH, seed=1, shard_index=0, shard_count=1),
            collate_fn=lt.collate, num_workers=WORKERS)
    iters = {name: iter(make()) for name, make in makers.items()}
    rates = {name: [] for name in makers}
    for _ in range(rounds):
        for name, it in iters.items():
            rates[name].append(rate(it, n_batches))
    base = median(rates["torch, npy-mmap, per sample"])
    print(f"{'loader (4 torch worker processes unless said)':<52} {'batches/s':>10} {'samples/s':>11} "
          f"{'vs torch per sample':>20}")
    for name, rs in rates.items():
        r = median(rs)
        print(f"{name:<52} {r:10.1f} {r * BATCH:11,.0f} {r / base:19.2f}x")
    del iters
    print()


def section_jax(args, work):
    import jax

    import loaderx.jax as lj

    n, rounds, n_batches = sizes(args, 100, 300)
    print(f"== jax: 12 KiB records, {n} of them, batch {BATCH}, IID, 4 loader workers, "
          f"{len(jax.devices())} {jax.devices()[0].platform} devices (jax {jax.__version__}) ==")
    write_data(work, n)
    for codec in ("raw", "zstd"):
        streams = {"x": DenseDataset(work / f"images_{codec}"), "y": DenseDataset(work / f"labels_{codec}")}
        loaders = {
            "DataLoader (numpy)": DataLoader(streams, batch_size=BATCH, num_workers=4, seed=1),
            "loaderx.jax.DataLoader (global jax.Array)": lj.DataLoader(streams, batch_size=BATCH, num_workers=4,
                                                                     seed=1),
        }
        rates = {name: [] for name in loaders}
        for _ in range(rounds):
            for name, loader in loaders.items():
                if isinstance(loader, lj.DataLoader):
                    it = (jax.block_until_ready(b) for b in loader)
                else:
                    it = loader
                rates[name].append(rate(it, n_batches))
        base = median(rates["DataLoader (numpy)"])
        for name, rs in rates.items():
            r = median(rs)
            print(f"{codec:<5} {name:<44} {r:8.1f} batches/s  {r / base:5.2f}x")
        for loader in loaders.values():
            loader.close()
    print()


def section_arrow(args, work):
    """Arrow in and out beside from_numpy and a plain pyarrow read of the same Parquet data."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from loaderx.converter import from_arrow, from_numpy

    n, rounds, _ = sizes(args, 0, 0)
    print(f"== arrow: 12 KiB records (64x64x3 uint8), {n} of them (pyarrow {pa.__version__}) ==")
    rng = np.random.default_rng(5)
    images = mild_bytes(rng, (n, 64, 64, 3))
    mib = images.nbytes / (1 << 20)
    table = pa.table({"image": pa.FixedSizeListArray.from_arrays(pa.array(images.reshape(-1)), 64 * 64 * 3)})
    parquet = work / "images.parquet"
    pq.write_table(table, parquet, row_group_size=1000, compression="none")
    os.sync()

    def once(fn):
        t = time.perf_counter()
        fn()
        return mib / (time.perf_counter() - t)

    def fresh(name):
        shutil.rmtree(work / name, ignore_errors=True)
        return work / name

    for codec in ("raw", "zstd"):
        from_numpy(fresh(f"out_{codec}"), images, codec=codec, progress=False)
    rows = {}
    for _ in range(rounds):
        for codec in ("raw", "zstd"):
            rows.setdefault(f"from_numpy, {codec}", []).append(
                once(lambda codec=codec: from_numpy(fresh("np"), images, codec=codec, progress=False)))
            rows.setdefault(f"from_arrow (Table), {codec}", []).append(
                once(lambda codec=codec: from_arrow(fresh("tbl"), table, codec=codec, progress=False)))
            rows.setdefault(f"from_arrow (Parquet file), {codec}", []).append(
                once(lambda codec=codec: from_arrow(fresh("pq"), parquet, codec=codec, progress=False)))
        rows.setdefault("pyarrow read_table (Parquet, uncompressed)", []).append(once(lambda: pq.read_table(parquet)))
        for codec in ("raw", "zstd"):
            ds = DenseDataset(work / f"out_{codec}")
            rows.setdefault(f"Arrow out: pa.table(DenseDataset), {codec}", []).append(once(lambda ds=ds: pa.table(ds)))
    for name, rs in rows.items():
        print(f"{name:<48} {median(rs):8.0f} MiB/s")
    print()


def section_ray(args, work):
    """A Ray Data conversion into a manifest with 1 and with 2 write tasks at a time."""
    import ray

    from loaderx.ray import LoaderxDatasink

    n, rounds, _ = sizes(args, 0, 0)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    print(f"== ray: {n} records of 12 KiB made by a map, written with LoaderxDatasink (ray {ray.__version__}) ==")

    def make(batch):
        # Bytes that zstd cannot shrink much, as from a decoder: a multiplicative hash of (id, offset).
        ids = batch["id"].astype(np.uint32)[:, None]
        noise = (ids * np.uint32(2654435761) + np.arange(64 * 64 * 3, dtype=np.uint32) * np.uint32(40503)) >> 24
        return {"image": noise.astype(np.uint8).reshape(-1, 64, 64, 3)}

    rates = {1: [], 2: []}
    try:
        for _ in range(rounds):
            for k in (1, 2):
                out = work / f"ray{k}"
                shutil.rmtree(out, ignore_errors=True)
                t = time.perf_counter()
                (ray.data.range(n, override_num_blocks=8).map_batches(make, concurrency=k)
                 .write_datasink(LoaderxDatasink(out, column="image"), concurrency=k))
                rates[k].append(n / (time.perf_counter() - t))
    finally:
        ray.shutdown()
    one, two = median(rates[1]), median(rates[2])
    print(f"1 worker  {one:10.0f} records/s  {one * 12 / 1024:6.0f} MiB/s")
    print(f"2 workers {two:10.0f} records/s  {two * 12 / 1024:6.0f} MiB/s  ({two / one:.2f}x)")
    print()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", choices=["torch", "jax", "arrow", "ray"])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--workdir", default=None)
    args, _ = p.parse_known_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="loaderx-bench-ml-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        machine_block()
        sections = {"torch": section_torch, "jax": section_jax, "arrow": section_arrow, "ray": section_ray}
        sections[args.section](args, work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
