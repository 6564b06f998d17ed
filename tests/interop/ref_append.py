"""Write into an existing store with the reference loaderx 0.9.11.

Usage: ref_append.py STORE
Appends 3 records with each codec the store supports (raw, zstd, and zstd_dict when the store
has a dictionary), syncs, and prints the new records as hex in JSON so the caller can
check them. Run it with the reference's own venv (.venv-ref).
"""
import json
import os
import sys

import numpy as np

from loaderx.zrecord import Zrecord

zr = Zrecord(sys.argv[1])
codecs = ["raw", "zstd"] + (["zstd_dict"] if zr.has_dict() else [])
added = []
for c, codec in enumerate(codecs):
    recs = [bytes([(7 * c + i + j // 9) % 256 for j in range(200 + 50 * i)]) for i in range(3)]
    src = np.frombuffer(b"".join(recs), dtype=np.uint8)
    offsets = np.cumsum([0] + [len(r) for r in recs[:-1]]).astype(np.uint64)
    first = zr.append(src, offsets, codec)
    added.append({"first": int(first), "codec": codec, "records": [r.hex() for r in recs]})
zr.sync()
print(json.dumps({"added": added, "len": len(zr)}))
# Everything is synced and printed: leave without finalizing, where the reference sometimes
# crashes with SIGSEGV (docs/reference-defects.md).
sys.stdout.flush()
os._exit(0)
