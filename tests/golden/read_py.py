#!/usr/bin/env python3
"""Reads the golden set with the Python API and writes what it saw as JSON.

    python tests/golden/read_py.py GOLDEN_DIR [OUT.json]     (default: stdout)

Record bytes come from ``Zrecord.gather``; typed values from ``DenseDataset`` / ``RaggedDataset``
(stores without a schema: the record bytes), put in the canonical form generate.py describes.
"""

import hashlib
import json
import sys
from pathlib import Path

import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import canonical  # noqa: E402

from loaderx.dataset import DenseDataset, RaggedDataset  # noqa: E402
from loaderx.sampler import Sampler  # noqa: E402
from loaderx.zrecord import Zrecord  # noqa: E402


def read_store(path):
    out = {}
    z = Zrecord(path, codec="raw")
    try:
        n = len(z)
        idx = np.arange(n, dtype=np.uint64)
        lens = z.lengths(idx).astype(np.uint64) if n else np.empty(0, dtype=np.uint64)
        offsets = np.zeros(n, dtype=np.uint64)
        if n > 1:
            offsets[1:] = np.cumsum(lens[:-1])
        buf = np.empty(int(lens.sum()), dtype=np.uint8)
        if n:
            z.gather(idx, buf, offsets)
        out["length"] = n
        out["digest"] = z.digest
        out["lengths"] = [int(x) for x in lens]
        out["records"] = [hashlib.sha256(buf[int(o) : int(o + size)].tobytes()).hexdigest() for o, size in zip(offsets, lens)]
    finally:
        z.close()

    schema_file = path / "schema.msgpack"
    typed = hashlib.sha256()
    shapes = []
    if not schema_file.is_file():
        out["schema"] = None
        for o, size in zip(offsets, lens):
            typed.update(buf[int(o) : int(o + size)].tobytes())
            shapes.append([int(size)])
    else:
        s = msgpack.unpackb(schema_file.read_bytes(), raw=False)
        out["schema"] = {k: s.get(k) for k in ("kind", "dtype", "item_shape", "codec")}
        ds = (DenseDataset if s["kind"] == "dense" else RaggedDataset)(path)
        try:
            if s["kind"] == "dense":
                arr = ds[:]
                cb, extra = canonical(arr)
                typed.update(cb)
                shapes = [list(arr.shape[1:]) + extra] * len(arr)
            else:
                for rec in ds[:] if len(ds) else []:
                    cb, extra = canonical(rec)
                    typed.update(cb)
                    shapes.append(list(rec.shape) + extra)
        finally:
            ds.close()
    out["typed_sha256"] = typed.hexdigest()
    out["shapes"] = [[int(d) for d in s] for s in shapes]
    return out


def read_sampler(case):
    s = Sampler(int(case["length"]), int(case["batch_size"]), case["mode"], int(case["seed"]))
    batch_at = {step: [int(x) for x in s.batch_at(int(step))] for step in case["batch_at"]}
    first = [[int(x) for x in s.next()] for _ in range(len(case["first"]))]
    s.seek(int(case["next"]["seek"]))
    nxt = [[int(x) for x in s.next()] for _ in range(case["next"]["count"])]
    return {"batch_at": batch_at, "first": first, "next": {"batches": nxt, "step_after": str(s.step)}}


def main():
    golden = Path(sys.argv[1])
    manifest = json.loads((golden / "manifest.json").read_text())
    result = {
        "reader": "python",
        "stores": {name: read_store(golden / e["path"]) for name, e in manifest["stores"].items()},
        "sampler": {name: read_sampler(c) for name, c in manifest["sampler"]["cases"].items()},
    }
    text = json.dumps(result, sort_keys=True)
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
