#!/usr/bin/env python3
"""loaderx benchmarks: sampler, store and loader, side by side in one run.

    python scripts/bench.py [sampler|store|gather|loader|many|ragged|transform|remote|torch|jax|arrow|ray|all]
                            [--quick]
                            [--ref-python PATH]
                            [--torch-python PATH] [--workdir DIR]

Every row goes through the binding a client actually uses (Python calls, the GIL and NumPy
allocation are inside the timings). The reference loaderx 0.9.11 runs in its own venv
(``--ref-python``, default ``.venv-ref/bin/python`` when present) as a worker process that
speaks JSON lines; its rounds are interleaved with ours, on the same data files and the same
index batches. Peers (h5py, blosc2) get rows when they are importable. Each section prints the
machine block first; figures are medians of several interleaved rounds.

Every store and loader run prints ours/limit beside the rows: ``native/examples/limits.rs``
(memcpy gathers from a warm mmap on 1 and 2 threads, zstd decoding of frames held in memory)
runs on the same files and index batches, interleaved with the rows (scripts/bench_limits.py).
``gather`` sweeps the batch size from 16 to 4096 for raw 12 KiB and 128 KiB records beside
npy-mmap and those limits.

``transform`` (not part of ``all``) is the loader with the CPU-heavy per-sample transform
:func:`augment`: loaderx with thread workers and with worker processes, beside
torch.utils.data.DataLoader with worker processes. torch runs in its own venv
(``--torch-python``, default ``.venv-bench/bin/python`` when present) as a worker process like
the reference, reading the same data from a NumPy memmap.

``many`` is the loader over 8 stores in a manifest and a 0.7/0.3 mix beside one store; ``ragged``
is RaggedDataset beside the reference's on token-like int32 records; ``torch``
and ``jax`` run ``scripts/bench_ml.py`` (loaderx.torch beside torch's DataLoader over a memmap,
loaderx.jax beside the base loader), ``arrow`` (from_arrow and Arrow export) and ``ray`` (a Ray
conversion with 1 and 2 workers) in the torch/JAX/Ray venv.
"""

import os

# numpy's OpenBLAS threads spin after BLAS calls and steal cores on small machines; no row here
# uses BLAS, so pin it to one thread for every process (the reference worker inherits this).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BATCH = 256
MiB = 1 << 20


# ---------------------------------------------------------------------------------------------
# Shared by the main process and the reference worker: both sides run the same workloads.


def time_sampler(Sampler, batch, iters, length=1_000_000):
    s = Sampler(length, batch, 1, 7)
    s.next()
    t = time.perf_counter()
    for _ in range(iters):
        s.next()
    return (time.perf_counter() - t) / iters


def time_gather(ds, batches, warm=3):
    """Seconds per batch for each batch, through ``ds.__getitems__``. The first ``warm`` batches
    run untimed first: rows run one after another, and a row's threads (and the vCPUs under
    them) have been idle while the other rows ran."""
    for idx in batches[:warm]:
        ds.__getitems__(idx)
    out = []
    for idx in batches:
        t = time.perf_counter()
        ds.__getitems__(idx)
        out.append(time.perf_counter() - t)
    return out


def time_loader(DataLoader, DenseDataset, paths, batches, workers):
    streams = {f"s{i}": DenseDataset(p) for i, p in enumerate(paths)}
    loader = DataLoader(streams, num_workers=workers, batch_size=BATCH, prefetch_size=4, mode=1, seed=3)
    it = iter(loader)
    for _ in range(5):
        next(it)
    t = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batches / (time.perf_counter() - t)
    loader.close()
    return rate


# The transform section's workload: a Python-bound per-sample loop, as a torchvision-style
# pipeline is. Most of its time is interpreter work and small NumPy calls that hold the GIL.
AUG_CROP = 48
AUG_MEAN = np.array([123.7, 116.3, 103.5], np.float32)
AUG_INV_STD = 1.0 / np.array([58.4, 57.1, 57.4], np.float32)


def augment(batch):
    """Per sample: random crop (subsampled by 2), random flip, random gain, per-channel
    normalisation to CHW float32. The randomness is seeded from the sample's pixels, so every
    loader computes the same output for the same records."""
    images = batch["s0"]
    n, h, w, _ = images.shape
    out = np.empty((n, 3, AUG_CROP // 2, AUG_CROP // 2), np.float32)
    for i in range(n):
        img = images[i]
        rnd = random.Random(int(img[0, 0, 0]) << 8 | int(img[-1, -1, -1]))
        dy, dx = rnd.randrange(h - AUG_CROP + 1), rnd.randrange(w - AUG_CROP + 1)
        crop = img[dy : dy + AUG_CROP : 2, dx : dx + AUG_CROP : 2]
        if rnd.random() < 0.5:
            crop = crop[:, ::-1]
        gain = rnd.uniform(0.8, 1.2)
        for c in range(3):
            plane = crop[:, :, c].astype(np.float32)
            plane *= gain
            plane -= AUG_MEAN[c]
            plane *= AUG_INV_STD[c]
            out[i, c] = plane
    return {"image": out, "label": batch["s1"].astype(np.int64)}


def identity(batch):
    return batch


TRANSFORMS = {"augment": augment, "identity": identity}
#: Before each timed window, a loader's ready batches are drained untimed (prefetch 4 plus 4
#: in flight): they were computed while other rows ran.
DRAIN = 8


def tree_cpu():
    """CPU seconds used so far by this process and its live children (Linux; 0.0 elsewhere).
    Throughput depends on what else the shared machine runs; CPU per batch much less so."""
    me, total = str(os.getpid()), 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if entry == me or fields[1] == me:
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / os.sysconf("SC_CLK_TCK")


class TimedLoader:
    """One loader kept open across rounds: ``window(n)`` drains what it prefetched meanwhile,
    then returns ``(batches/s, CPU seconds per batch)`` over the next ``n`` batches. ``first``
    is the seconds from creating the loader to its first batch (worker start-up included)."""

    def __init__(self, make):
        t = time.perf_counter()
        self.it = make()
        next(self.it)
        self.first = time.perf_counter() - t

    def window(self, n):
        for _ in range(DRAIN):
            next(self.it)
        t, cpu = time.perf_counter(), tree_cpu()
        for _ in range(n):
            next(self.it)
        return n / (time.perf_counter() - t), (tree_cpu() - cpu) / n


def our_loader(DataLoader, DenseDataset, paths, transform, workers, kind):
    streams = {f"s{i}": DenseDataset(p) for i, p in enumerate(paths)}
    return DataLoader(
        streams,
        num_workers=workers,
        batch_size=BATCH,
        prefetch_size=4,
        mode=1,
        seed=3,
        transform=TRANSFORMS[transform],
        workers=kind,
    )


class _NpyBatches:
    """torch's map-style dataset over the .npy files: ``__getitems__`` reads a whole batch as
    the ``{"s0": images, "s1": labels}`` dict the transform takes (each worker maps the files)."""

    def __init__(self, images, labels):
        self.paths, self.arrays = (images, labels), None

    def __len__(self):
        return len(np.load(self.paths[1], mmap_mode="r"))

    def __getitem__(self, i):
        return self.__getitems__([i])

    def __getitems__(self, idx):
        if self.arrays is None:
            self.arrays = [np.load(p, mmap_mode="r") for p in self.paths]
        return {"s0": self.arrays[0][idx], "s1": self.arrays[1][idx]}


class _TorchCollate:
    """The same transform, its arrays then made tensors, so torch hands them over through its
    shared memory (a NumPy array would be pickled through the queue's pipe)."""

    def __init__(self, name):
        self.fn = TRANSFORMS[name]

    def __call__(self, batch):
        import torch

        return {k: torch.from_numpy(v) for k, v in self.fn(batch).items()}


def torch_loader(images, labels, transform, workers, n):
    """torch's DataLoader, endless like ours: IID index batches from a generator, so no epoch
    ends inside a measurement (prefetch_factor 2, the default: 8 batches in flight)."""
    from torch.utils.data import DataLoader as TorchLoader

    rng = np.random.default_rng(11)
    sampler = (rng.integers(0, n, BATCH) for _ in iter(int, 1))
    loader = TorchLoader(
        _NpyBatches(images, labels), batch_sampler=sampler, collate_fn=_TorchCollate(transform), num_workers=workers
    )
    return iter(loader)


def torch_worker_main():
    """The torch side: ``open`` a loader, time ``window``s of it, ``version``; JSON lines."""
    loaders = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "version":
            import torch

            res = f"torch {torch.__version__}, numpy {np.__version__}, python {platform.python_version()}"
        elif cmd["op"] == "open":
            args = (cmd["images"], cmd["labels"], cmd["transform"], cmd["workers"], cmd["n"])
            loaders[cmd["name"]] = TimedLoader(lambda args=args: torch_loader(*args))
            res = loaders[cmd["name"]].first
        elif cmd["op"] == "window":
            res = loaders[cmd["name"]].window(cmd["batches"])
        elif cmd["op"] == "close":
            loaders.pop(cmd["name"], None)
            res = None
        else:
            res = None
        print(json.dumps({"result": res}), flush=True)


def worker_main():
    """The reference side: run commands from stdin, answer JSON lines on stdout."""
    from loaderx.converter import from_numpy
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset
    from loaderx.sampler import Sampler

    datasets = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "sampler":
            res = time_sampler(Sampler, cmd["batch"], cmd["iters"])
        elif op == "write":
            arr = np.load(cmd["npy"], mmap_mode="r")
            t = time.perf_counter()
            from_numpy(cmd["store"], arr, codec=cmd["codec"])
            res = time.perf_counter() - t
        elif op == "gather":
            ds = datasets.get(cmd["store"]) or datasets.setdefault(cmd["store"], DenseDataset(cmd["store"]))
            res = time_gather(ds, np.load(cmd["batches"]))
        elif op == "loader":
            res = time_loader(DataLoader, DenseDataset, cmd["stores"], cmd["batches"], cmd["workers"])
        elif op == "ragged":
            from loaderx.dataset import RaggedDataset

            res = time_gather(RaggedDataset(cmd["store"]), np.load(cmd["batches"]))
        else:
            res = None
        print(json.dumps({"result": res}), flush=True)


class Reference:
    """The reference loaderx 0.9.11 (or torch, with ``flag="--torch-worker"``) in its own venv,
    as a persistent worker process."""

    def __init__(self, python, flag="--worker"):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if flag == "--worker":
            # One OpenMP thread for the reference: its multi-threaded zstd gather crashes with
            # SIGSEGV now and then (docs/reference-defects.md), so its rows are one-thread
            # gathers. torch's side keeps its own defaults.
            env["OMP_NUM_THREADS"] = "1"
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), flag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )

    def __call__(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the reference worker died")
        return json.loads(line)["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(10)


# ---------------------------------------------------------------------------------------------


def machine_block():
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f"{kb / (1 << 20):.1f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    print("machine")
    print(f"  CPU      {cpu}, {os.cpu_count()} logical cpus")
    print(f"  memory   {mem}")
    print(f"  OS       {platform.system()} {platform.release()}")
    print(f"  python   {platform.python_version()}, numpy {np.__version__}")
    print()


def median(xs):
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def row(cols, widths):
    print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cols, widths))))


def mild_bytes(rng, shape):
    """Random bytes with one in six forced to zero: zstd gets about 1.08x, like the product's data."""
    a = rng.integers(0, 256, size=shape, dtype=np.uint8)
    a[rng.random(shape) < 1 / 6] = 0
    return a


def disk_usage(path):
    path = Path(path)
    if path.is_file():
        return path.stat().st_blocks * 512
    total = 0
    for p in path.rglob("*"):
        if p.is_file():
            total += p.stat().st_blocks * 512
    return total


def section_sampler(args, ref):
    from loaderx.sampler import Sampler

    print("== sampler: IID over 1M indices, seconds per batch (median of rounds) ==")
    widths = [22, 6, 12, 10, 14]
    row(["sampler", "batch", "per batch", "indices", "vs default_rng"], widths)
    rounds = 3 if args.quick else 5
    for batch in (256, 1024, 8192):
        iters = max(200, 400_000 // batch) // (4 if args.quick else 1)
        rng = np.random.default_rng(1)
        cases = {
            "numpy randint": lambda batch=batch: np.random.randint(0, 1_000_000, batch),
            "numpy default_rng": lambda batch=batch, rng=rng: rng.integers(0, 1_000_000, batch),
        }
        times = {name: [] for name in [*cases, "loaderx", "reference 0.9.11"]}
        for _ in range(rounds):
            for name, fn in cases.items():
                t = time.perf_counter()
                for _ in range(iters):
                    fn()
                times[name].append((time.perf_counter() - t) / iters)
            times["loaderx"].append(time_sampler(Sampler, batch, iters))
            if ref:
                times["reference 0.9.11"].append(ref(op="sampler", batch=batch, iters=iters))
        base = median(times["numpy default_rng"])
        for name, ts in times.items():
            if not ts:
                continue
            t = median(ts)
            row([name, batch, f"{t * 1e6:.2f} us", f"{batch / t / 1e6:.0f} M/s", f"{base / t:.2f}x"], widths)
    print()


def section_store(args, ref, work):
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    rounds = 3 if args.quick else 5
    sizes = [((64, 64, 3), 4000 if args.quick else 20_000), ((128, 256, 4), 800 if args.quick else 4000)]
    for shape, n in sizes:
        rec = int(np.prod(shape))
        print(f"== store: {rec >> 10} KiB records, {n} of them, batch {BATCH} ==")
        rng = np.random.default_rng(0)
        npy = work / f"data_{rec}.npy"
        data = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint8, shape=(n, *shape))
        for start in range(0, n, 1000):
            data[start : start + 1000] = mild_bytes(rng, (min(1000, n - start), *shape))
        data.flush()
        del data
        n_batches = 10 if args.quick else 20
        rnd = np.stack([np.sort(rng.choice(n, BATCH, replace=False)) for _ in range(n_batches)]).astype(np.uint64)
        starts = rng.integers(0, n - BATCH, n_batches)
        seq = np.stack([np.arange(s, s + BATCH) for s in starts]).astype(np.uint64)
        rnd_path, seq_path = work / f"rnd_{rec}.npy", work / f"seq_{rec}.npy"
        np.save(rnd_path, rnd)
        np.save(seq_path, seq)

        rows = {}  # name -> dict(write=s, ds=dataset or None, path)
        source = np.load(npy, mmap_mode="r")
        for codec in ("raw", "zstd", "zstd_dict"):
            path = work / f"ours_{codec}_{rec}"
            shutil.rmtree(path, ignore_errors=True)
            t = time.perf_counter()
            from_numpy(path, source, codec=codec, progress=False)
            rows[f"loaderx-{codec}"] = {"write": time.perf_counter() - t, "ds": DenseDataset(path), "path": path}
        flat = np.load(npy, mmap_mode="r")
        rows["npy-mmap"] = {"write": None, "ds": _NpyRows(flat), "path": npy}
        if ref:
            for codec in ("raw", "zstd"):
                path = work / f"ref_{codec}_{rec}"
                shutil.rmtree(path, ignore_errors=True)
                w = ref(op="write", npy=str(npy), store=str(path), codec=codec)
                rows[f"reference-{codec}"] = {"write": w, "ds": None, "path": path}
        _add_h5py(rows, work, npy, rec)
        for threads in (1, 2):  # the machine's limit: a memcpy gather from a warm mmap
            rows[f"limit {threads} thread{'s' if threads > 1 else ''}"] = {"write": None, "ds": None, "path": npy, "limit": threads}

        total = n * rec
        os.sync()  # let writeback of the fresh files finish before anything is timed
        times = {name: {"rnd": [], "seq": []} for name in rows}
        for r in rows.values():  # warm every path over the data once
            _run(r, ref, seq_path, seq)
        for _ in range(rounds):
            for name, r in rows.items():
                times[name]["rnd"] += _run(r, ref, rnd_path, rnd)
                times[name]["seq"] += _run(r, ref, seq_path, seq)
        widths = [18, 11, 12, 12, 10, 10, 7, 9, 9, 9]
        row(["store", "write", "gather rnd", "gather seq", "per batch", "on disk", "ratio", "vs npy", "vs ref", "vs limit"], widths)
        batch_mib = BATCH * rec / MiB
        npy_rate = batch_mib / median(times["npy-mmap"]["rnd"])
        limit_rate = max(batch_mib / median(times[f"limit {k} thread{'s' if k > 1 else ''}"]["rnd"]) for k in (1, 2))
        for name, r in rows.items():
            t_rnd, t_seq = median(times[name]["rnd"]), median(times[name]["seq"])
            rate = batch_mib / t_rnd
            ref_name = "reference-" + ("zstd" if "zstd" in name else "raw")
            vs_ref = ""
            if ref_name in times and times[ref_name]["rnd"]:
                vs_ref = f"{rate / (batch_mib / median(times[ref_name]['rnd'])):.2f}x"
            disk = None if "limit" in r else disk_usage(r["path"])
            write = f"{total / MiB / r['write']:.0f} MiB/s" if r["write"] else "-"
            row(
                [
                    name,
                    write,
                    f"{rate:.0f} MiB/s",
                    f"{batch_mib / t_seq:.0f} MiB/s",
                    f"{t_rnd * 1e3:.2f} ms",
                    f"{disk / MiB:.0f} MiB" if disk else "-",
                    f"{total / max(disk, 1):.2f}x" if disk else "-",
                    f"{rate / npy_rate:.2f}x",
                    vs_ref,
                    "" if "limit" in r else f"{rate / limit_rate:.2f}x",
                ],
                widths,
            )
        print()
        for r in rows.values():
            if r["ds"] is not None and hasattr(r["ds"], "close"):
                r["ds"].close()


class _NpyRows:
    """npy-mmap: NumPy fancy indexing on a memory-mapped .npy."""

    def __init__(self, arr):
        self.arr = arr

    def __getitems__(self, idx):
        return self.arr[idx]


def _add_h5py(rows, work, npy, rec):
    try:
        import h5py
    except ImportError:
        return
    path = work / f"h5_{rec}.h5"
    src = np.load(npy, mmap_mode="r")
    t = time.perf_counter()
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=src, chunks=(1, *src.shape[1:]))
    f = h5py.File(path, "r")
    rows["h5py"] = {"write": time.perf_counter() - t, "ds": _H5Rows(f["x"]), "path": path}


class _H5Rows:
    def __init__(self, dset):
        self.dset = dset

    def __getitems__(self, idx):
        return self.dset[np.asarray(idx, dtype=np.int64)]


_LIMITS = []


def _run(r, ref, batches_path, batches):
    if r["ds"] is not None:
        return time_gather(r["ds"], batches)
    if "limit" in r:
        if not _LIMITS:
            sys.path.insert(0, str(ROOT / "scripts"))
            from bench_limits import Limits

            _LIMITS.append(Limits())
        return _LIMITS[0].times("gather", r["path"], batches, r["limit"])
    return ref(op="gather", store=str(r["path"]), batches=str(batches_path))


def section_loader(args, ref, work):
    from loaderx.converter import from_numpy
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset

    n = 4000 if args.quick else 20_000
    rounds = 3 if args.quick else 5
    n_batches = 100 if args.quick else 300
    print(f"== loader: 12 KiB records, {n} of them, batch {BATCH}, 4 workers (and one per core), IID ==")
    rng = np.random.default_rng(5)
    npy = work / "loader.npy"
    data = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint8, shape=(n, 64, 64, 3))
    for start in range(0, n, 1000):
        data[start : start + 1000] = mild_bytes(rng, (min(1000, n - start), 64, 64, 3))
    data.flush()
    labels = work / "labels.npy"
    np.save(labels, rng.integers(0, 10, n).astype(np.int64))
    stores = {}
    for codec in ("raw", "zstd"):
        for who in ("ours", "ref"):
            paths = [work / f"loader_{who}_{codec}_img", work / f"loader_{who}_{codec}_lbl"]
            for p in paths:
                shutil.rmtree(p, ignore_errors=True)
            if who == "ours":
                from_numpy(paths[0], np.load(npy, mmap_mode="r"), codec=codec, progress=False)
                from_numpy(paths[1], np.load(labels), codec=codec, progress=False)
            elif ref:
                ref(op="write", npy=str(npy), store=str(paths[0]), codec=codec)
                ref(op="write", npy=str(labels), store=str(paths[1]), codec=codec)
            else:
                continue
            stores[(who, codec)] = paths
    os.sync()  # let writeback of the fresh files finish before anything is timed
    # The two-core limits, in the same rounds: a memcpy gather of the images from a warm mmap,
    # and zstd decoding of their frames held in memory, each core on batches of its own
    # (scripts/bench_limits.py).
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_limits import Limits

    limits = Limits()
    draws = rng.integers(0, n, (min(n_batches, 100), BATCH)).astype(np.uint64)
    kinds = {"raw": "gather", "zstd": "decode"}
    # Ours also with one worker per core: four workers on fewer cores share them by time slices.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    runs = {key: key for key in stores}
    if cores != 4:
        runs.update({("ours", codec, cores): ("ours", codec) for (who, codec) in stores if who == "ours"})
    times = {key: [] for key in [*runs, *(("limit", c) for c in kinds)]}
    for _ in range(rounds):
        for key, (who, codec) in runs.items():
            paths = stores[(who, codec)]
            if who == "ours":
                rate = time_loader(DataLoader, DenseDataset, paths, n_batches, key[2] if len(key) > 2 else 4)
            else:
                rate = ref(op="loader", stores=[str(p) for p in paths], batches=n_batches, workers=4)
            times[key].append(rate)
        for codec, mode in kinds.items():
            times[("limit", codec)].append(1 / median(limits.times(mode, npy, draws, 2, stream=True)))
    limits.close()
    widths = [28, 11, 10, 12, 12, 8, 9]
    row(["loader", "batches/s", "per batch", "samples/s", "throughput", "vs ref", "vs limit"], widths)
    mib = BATCH * (64 * 64 * 3 + 8) / MiB
    for key, rates in times.items():
        who, codec = key[:2]
        rate = median(rates)
        ref_rate = median(times[("ref", codec)]) if ("ref", codec) in times and who != "limit" else None
        limit = median(times[("limit", codec)])
        name = {"ours": "loaderx", "ref": "reference 0.9.11"}.get(who) or f"limit: {kinds[codec]}, 2 threads"
        name += "" if who == "limit" else f"-{codec}"
        name += f", {key[2]} workers" if len(key) > 2 else ""
        vs = f"{rate / ref_rate:.2f}x" if ref_rate else ""
        row([name, f"{rate:.1f}", f"{1e3 / rate:.2f} ms", f"{rate * BATCH:,.0f}", f"{rate * mib:.0f} MiB/s", vs,
             "" if who == "limit" else f"{rate / limit:.2f}x"], widths)
    print()


def section_transform(args, torch_side, work):
    from loaderx.converter import from_numpy
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset

    n = 4000 if args.quick else 20_000
    rounds = 3 if args.quick else 9
    timed = {"augment": 40 if args.quick else 100, "identity": 200 if args.quick else 600}
    workers = 4
    print(f"== loader, CPU-heavy transform: 12 KiB records, {n} of them, batch {BATCH}, {workers} workers, IID ==")
    if torch_side:
        print(f"  torch side: {torch_side(op='version')}")
    rng = np.random.default_rng(5)
    images, labels = work / "transform_images.npy", work / "transform_labels.npy"
    data = np.lib.format.open_memmap(images, mode="w+", dtype=np.uint8, shape=(n, 64, 64, 3))
    for start in range(0, n, 1000):
        data[start : start + 1000] = mild_bytes(rng, (min(1000, n - start), 64, 64, 3))
    data.flush()
    del data
    np.save(labels, rng.integers(0, 10, n).astype(np.int64))
    paths = [work / "transform_img", work / "transform_lbl"]
    for p, src in zip(paths, (images, labels)):
        shutil.rmtree(p, ignore_errors=True)
        from_numpy(p, np.load(src, mmap_mode="r"), codec="raw", progress=False)
    os.sync()
    cases = [("identity", "threads"), ("identity", "processes"), ("augment", "threads"), ("augment", "processes")]
    if torch_side:
        cases.append(("augment", "torch"))
    # Every loader stays open; the rounds interleave short timed windows of each, so a change in
    # the machine's load falls on all rows alike.
    loaders, firsts = {}, {}
    for transform, kind in cases:
        name = f"{transform}-{kind}"
        if kind == "torch":
            firsts[(transform, kind)] = torch_side(
                op="open", name=name, images=str(images), labels=str(labels), transform=transform,
                workers=workers, n=n,
            )
        else:
            loaders[(transform, kind)] = TimedLoader(
                lambda transform=transform, kind=kind: our_loader(DataLoader, DenseDataset, paths, transform, workers, kind))
            firsts[(transform, kind)] = loaders[(transform, kind)].first
    times = {case: [] for case in cases}
    cpus = {case: [] for case in cases}
    try:
        for _ in range(1 + rounds):  # round 0 warms every path up and is not counted
            for transform, kind in cases:
                if kind == "torch":
                    rate, cpu = torch_side(op="window", name=f"{transform}-{kind}", batches=timed[transform])
                else:
                    rate, cpu = loaders[(transform, kind)].window(timed[transform])
                times[(transform, kind)].append(rate)
                cpus[(transform, kind)].append(cpu)
    finally:
        for loader in loaders.values():
            loader.it.close()
        if torch_side:
            torch_side(op="close", name="augment-torch")
    widths = [20, 10, 10, 10, 11, 9, 10, 10]
    row(["loader", "transform", "batches/s", "per batch", "vs threads", "vs torch", "CPU/batch", "1st batch"], widths)
    med = {case: median(times[case][1:]) for case in cases}
    for (transform, kind) in cases:
        rate = med[(transform, kind)]
        torch_rate = med.get((transform, "torch"))
        vs_torch = f"{rate / torch_rate:.2f}x" if torch_rate else ""
        name = "torch processes" if kind == "torch" else f"loaderx {kind}"
        cpu = f"{median(cpus[(transform, kind)][1:]) * 1e3:.2f} ms"
        first = f"{firsts[(transform, kind)]:.2f} s"
        vs_threads = f"{rate / med[(transform, 'threads')]:.2f}x"
        row([name, transform, f"{rate:.1f}", f"{1e3 / rate:.2f} ms", vs_threads, vs_torch, cpu, first], widths)
    if ("augment", "torch") in med:
        per_round = [p / t for p, t in zip(times[("augment", "processes")][1:], times[("augment", "torch")][1:])]
        print(
            f"  processes / torch (augment): {med[('augment', 'processes')] / med[('augment', 'torch')]:.2f}x "
            f"(per round: {' '.join(f'{r:.2f}' for r in per_round)})"
        )
    print()


def section_many(args, work):
    """The loader over 8 stores listed in a manifest, and a 0.7/0.3 mix of two of them, against
    one store of the same records (rounds interleaved, medians): what reading many stores as one
    and mixing cost."""
    from loaderx import manifest
    from loaderx.converter import from_numpy
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset

    n = 4000 if args.quick else 20_000
    rounds = 3 if args.quick else 5
    n_batches = 100 if args.quick else 300
    print(f"== many stores as one: 12 KiB records, {n} of them, batch {BATCH}, 4 workers, IID ==")
    rng = np.random.default_rng(8)
    data = mild_bytes(rng, (n, 64, 64, 3))
    for codec in ("raw", "zstd"):
        one, many = work / f"many_one_{codec}", work / f"many_{codec}"
        shutil.rmtree(one, ignore_errors=True)
        shutil.rmtree(many, ignore_errors=True)
        from_numpy(one, data, codec=codec, progress=False)
        bounds = np.linspace(0, n, 9).astype(int)
        for k in range(8):
            from_numpy(many / f"part-{k}", data[bounds[k] : bounds[k + 1]], codec=codec, progress=False)
        manifest.commit(many, [f"part-{k}" for k in range(8)])
        os.sync()
        halves = [{"x": DenseDataset(many / f"part-{k}")} for k in (0, 1)]

        def mix_rate(halves=halves):
            loader = DataLoader.mix(halves, [0.7, 0.3], num_workers=4, batch_size=BATCH, prefetch_size=4, seed=3)
            with loader:
                for _ in range(5):
                    next(loader)
                t = time.perf_counter()
                for _ in range(n_batches):
                    next(loader)
                return n_batches / (time.perf_counter() - t)

        rates = {"one": [], "many": [], "mix": []}
        for _ in range(rounds):
            rates["one"].append(time_loader(DataLoader, DenseDataset, [one], n_batches, 4))
            rates["many"].append(time_loader(DataLoader, DenseDataset, [many], n_batches, 4))
            rates["mix"].append(mix_rate())
        a, b, c = median(rates["one"]), median(rates["many"]), median(rates["mix"])
        print(f"{codec:<5} one store {a:8.1f} batches/s   8 stores as one {b:8.1f} ({b / a:.2f}x)   "
              f"mix of 2 stores 0.7/0.3 {c:8.1f} ({c / a:.2f}x)")
    print()


def section_ragged(args, ref, work):
    """RaggedDataset gathers of token-like records (int32, 64 to 511 tokens each), ours and the
    reference's on the same store, rounds interleaved, median seconds per batch."""
    from loaderx.converter import from_iterator
    from loaderx.dataset import RaggedDataset

    n = 4000 if args.quick else 20_000
    rounds = 3 if args.quick else 5
    print(f"== ragged: {n} int32 records of 64-511 tokens (1.1 KiB on average), random batches ==")
    rng = np.random.default_rng(9)
    records = [rng.integers(0, 50_000, int(k), dtype=np.int32) for k in rng.integers(64, 512, n)]
    widths = [8, 6, 16, 16, 8]
    row(["codec", "batch", "ours µs/batch", "ref µs/batch", "vs ref"], widths)
    for codec in ("raw", "zstd"):
        store = work / f"ragged_{codec}"
        shutil.rmtree(store, ignore_errors=True)
        from_iterator(store, iter(records), codec=codec, progress=False)
        ds = RaggedDataset(store)
        for batch in (16, 256, 4096):
            draws = rng.integers(0, n, (max(10, 20_000 // batch), batch)).astype(np.uint64)
            batches = work / f"ragged_{batch}.npy"
            np.save(batches, draws)
            ours, theirs = [], []
            for _ in range(rounds):
                ours.append(median(time_gather(ds, draws)))
                if ref:
                    theirs.append(median(ref(op="ragged", store=str(store), batches=str(batches))))
            a = median(ours) * 1e6
            b = median(theirs) * 1e6 if theirs else None
            row([codec, str(batch), f"{a:.1f}", f"{b:.1f}" if b else "-", f"{b / a:.2f}x" if b else ""], widths)
        ds.close()
    print()


#: The sections whose code is in a script of its own, by the module that holds them.
SCRIPT_SECTIONS = {"gather": "bench_limits", "remote": "bench_remote", "verify": "bench_verify", "packed": "bench_packed"}


def main():
    if "--worker" in sys.argv:
        worker_main()
        return
    if "--torch-worker" in sys.argv:
        torch_worker_main()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("section", nargs="?", default="all", choices=["sampler", "store", "gather", "loader", "many", "ragged", "transform", "remote", "verify", "packed", "torch", "jax", "arrow", "ray", "all"])
    parser.add_argument("--quick", action="store_true", help="a small, fast run")
    default_ref = ROOT / ".venv-ref" / "bin" / "python"
    parser.add_argument("--ref-python", default=str(default_ref) if default_ref.exists() else None)
    default_torch = ROOT / ".venv-bench" / "bin" / "python"
    parser.add_argument(
        "--torch-python",
        default=str(default_torch) if default_torch.exists() else None,
        help="an interpreter with torch, for the transform section's torch row",
    )
    parser.add_argument("--workdir", default=None, help="where the data and stores go (default: a temp dir)")
    parser.add_argument(
        "--baseline-python",
        default=None,
        help="the verify section: an interpreter with the loaderx before checksums, for from_numpy's row",
    )
    args = parser.parse_args()
    if args.section in ("torch", "jax", "arrow", "ray"):
        # loaderx.torch and loaderx.jax: in the venv with torch and JAX that setup.sh keeps.
        ml = Path(os.environ.get("LOADERX_ML_VENV", Path.home() / ".cache/loaderx-tools/venv-ml")) / "bin/python"
        os.execv(ml, [str(ml), str(ROOT / "scripts/bench_ml.py"), *sys.argv[1:]])
    work = Path(args.workdir or tempfile.mkdtemp(prefix="loaderx-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    # The other side of the comparison: torch for the transform section, else the reference.
    if args.section == "transform":
        ref = Reference(args.torch_python, "--torch-worker") if args.torch_python else None
    else:
        ref = Reference(args.ref_python) if args.ref_python else None
    try:
        for name in ("sampler", "store", "gather", "loader", "many", "ragged", "transform", "remote", "verify", "packed"):
            if args.section == name or (args.section == "all" and name not in ("transform", "remote", "many", "ragged", "verify", "packed")):
                machine_block()
                if name == "sampler":
                    section_sampler(args, ref)
                elif name == "store":
                    section_store(args, ref, work)
                elif name == "loader":
                    section_loader(args, ref, work)
                elif name in SCRIPT_SECTIONS:
                    # Sections kept in scripts of their own: scripts/<module>.py, section_<name>.
                    import importlib

                    sys.path.insert(0, str(ROOT / "scripts"))
                    getattr(importlib.import_module(SCRIPT_SECTIONS[name]), f"section_{name}")(args, work)
                elif name == "many":
                    section_many(args, work)
                elif name == "ragged":
                    section_ragged(args, ref, work)
                else:
                    section_transform(args, ref, work)
    finally:
        if ref:
            ref.close()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
