"""Run a list of store operations with whichever loaderx is importable, report as JSON.

Usage: store_ops.py OPS.json

OPS.json is a list of operations, run in order in this one process:

* ``{"op": "from_numpy", "path": P, "npy": F, "codec": C}``: convert the array in F.
* ``{"op": "from_iterator", "path": P, "npz": F, "codec": C}``: convert the arrays
  ``arr_0 .. arr_{n-1}`` of F, in order, as a ragged store.
* ``{"op": "append", "path": P, "npz": F, "codec": C}``: ``Zrecord.append`` of those arrays'
  bytes, one record each.
* ``{"op": "delete", "path": P, "idx": [...], "compact": bool}``: ``Zrecord.delete`` then,
  optionally, ``compact``.
* ``{"op": "dump", "path": P, "kind": "dense"|"ragged"|"raw", "out": D}``: read the whole store
  (and a shuffled subset) with DenseDataset / RaggedDataset / Zrecord and save D/values.npy
  (ragged: concatenated rows plus D/row_splits.npy; raw: all bytes plus D/row_splits.npy as
  byte offsets) and D/subset_idx.npy + D/subset.npy (dense only).

Prints one JSON list with a result per operation: the converter's return value or the store's
len, lengths, stats and has_dict. Only the loaderx 0.9.11 public API is used.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

import loaderx
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord


def facts(path):
    z = Zrecord(path)
    n = len(z)
    out = {
        "len": n,
        "lengths": [int(x) for x in z.lengths(np.arange(n, dtype=np.uint64))] if n else [],
        "stats": {k: int(v) for k, v in z.stats().items()},
        "has_dict": bool(z.has_dict()),
    }
    z.close()
    return out


def arrays(npz):
    with np.load(npz, allow_pickle=False) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def dump(path, kind, out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if kind == "dense":
        ds = DenseDataset(path)
        np.save(out / "values.npy", ds[:])
        n = len(ds)
        idx = np.random.default_rng(5).permutation(n)[: max(1, n // 2)] if n else np.zeros(0, dtype=np.int64)
        np.save(out / "subset_idx.npy", idx)
        np.save(out / "subset.npy", ds[idx])
        ds.close()
    elif kind == "ragged":
        rs = RaggedDataset(path)
        recs = rs[:]
        np.save(out / "values.npy", np.concatenate(recs) if recs else np.zeros(0))
        np.save(out / "row_splits.npy", np.cumsum([0] + [len(r) for r in recs]).astype(np.int64))
        rs.close()
    else:
        z = Zrecord(path)
        n = len(z)
        lengths = z.lengths(np.arange(n, dtype=np.uint64)).astype(np.uint64)
        offsets = np.zeros(n, dtype=np.uint64)
        offsets[1:] = np.cumsum(lengths)[:-1]
        dst = np.zeros(int(lengths.sum()), dtype=np.uint8)
        z.gather(np.arange(n, dtype=np.uint64), dst, offsets)
        np.save(out / "values.npy", dst)
        np.save(out / "row_splits.npy", np.concatenate([offsets, [lengths.sum()]]).astype(np.int64))
        z.close()
    return facts(path)


def run(op):
    kind = op["op"]
    if kind == "from_numpy":
        return {"returned": int(from_numpy(op["path"], np.load(op["npy"]), codec=op["codec"]))}
    if kind == "from_iterator":
        return {"returned": int(from_iterator(op["path"], arrays(op["npz"]), codec=op["codec"]))}
    if kind == "append":
        recs = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays(op["npz"])]
        src = np.concatenate(recs)
        offsets = np.zeros(len(recs), dtype=np.uint64)
        offsets[1:] = np.cumsum([r.size for r in recs[:-1]])
        z = Zrecord(op["path"])
        first = z.append(src, offsets, op["codec"])
        z.sync()
        z.close()
        return {"first": int(first)}
    if kind == "delete":
        z = Zrecord(op["path"])
        z.delete(np.array(op["idx"], dtype=np.uint64))
        if op["compact"]:
            z.compact()
        z.sync()
        z.close()
        return facts(op["path"])
    if kind == "dump":
        return dump(op["path"], op["kind"], op["out"])
    raise ValueError(f"unknown op {kind}")


ops = json.loads(Path(sys.argv[1]).read_text())
print(json.dumps({"version": loaderx.__version__, "results": [run(op) for op in ops]}))
# Everything is synced and printed: leave without finalizing, where the reference sometimes
# crashes with SIGSEGV (docs/reference-defects.md).
sys.stdout.flush()
os._exit(0)
