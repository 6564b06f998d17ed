"""Read a store with the reference loaderx 0.9.11 and dump what it sees.

Usage: ref_read.py STORE OUT_BIN
Writes every record, concatenated in index order, to OUT_BIN and prints a JSON object with
len, lengths, stats and has_dict. Run it with the reference's own venv (.venv-ref).
"""
import json
import os
import sys

import numpy as np

from loaderx.zrecord import Zrecord

store, out = sys.argv[1], sys.argv[2]
zr = Zrecord(store)
n = len(zr)
idx = np.arange(n, dtype=np.uint64)
lengths = zr.lengths(idx) if n else np.zeros(0, dtype=np.uint32)
offsets = np.zeros(n, dtype=np.uint64)
if n:
    offsets[1:] = np.cumsum(lengths.astype(np.uint64))[:-1]
dst = np.zeros(int(lengths.sum()), dtype=np.uint8)
if n:
    zr.gather(idx, dst, offsets)
dst.tofile(out)
print(json.dumps({
    "len": n,
    "lengths": [int(x) for x in lengths],
    "stats": {k: int(v) for k, v in zr.stats().items()},
    "has_dict": bool(zr.has_dict()),
}))
# Everything is synced and printed: leave without finalizing, where the reference sometimes
# crashes with SIGSEGV (docs/reference-defects.md).
sys.stdout.flush()
os._exit(0)
