"""Remote reads of a wheel on an interpreter of another platform (run under emulation).

Usage: remote_smoke.py REPO URL_PREFIX
Each reference fixture of REPO/tests/fixtures/v3 has been copied to URL_PREFIX/<name> (by
`loaderx cp`; release_check.sh does it, with the AWS_* environment of the S3 server). Every
record of each copy must read back as the local fixture's, through this wheel's own object-store
client (TLS stack, request signing, Range reads). Prints one line per store and exits non-zero on
the first difference.
"""

import json
import platform
import sys
from pathlib import Path

import numpy as np

from loaderx.zrecord import Zrecord

repo, prefix = Path(sys.argv[1]).resolve(), sys.argv[2].rstrip("/")
fixtures = repo / "tests" / "fixtures" / "v3"
manifest = json.loads((fixtures / "manifest.json").read_text())


def records(z):
    """Every record of `z` as one byte string each."""
    n = len(z)
    if n == 0:
        return []
    idx = np.arange(n, dtype=np.uint64)
    lens = z.lengths(idx).astype(np.uint64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint64)
    out = np.empty(int(lens.sum()), np.uint8)
    z.gather(idx, out, offs)
    return [out[int(o):int(o + k)].tobytes() for o, k in zip(offs, lens)]


checked = 0
for case in manifest["stores"]:
    name = case["name"]
    with Zrecord(str(fixtures / case["store"])) as local, Zrecord(f"{prefix}/{name}") as remote:
        want, got = records(local), records(remote)
        assert len(got) == len(want) == case["length"], (name, len(got), len(want))
        assert got == want, f"{name}: records read from {prefix}/{name} differ from the local store's"
    checked += 1
    print(f"ok  {name}: {len(got)} records read from {prefix}/{name}")
assert checked, "no fixture was checked"
print(f"remote reads on {platform.machine()}: {checked} stores equal")
