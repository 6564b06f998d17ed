#!/usr/bin/env python3
"""Checks readers' outputs against the golden manifest, exactly.

    python tests/golden/compare.py GOLDEN_DIR READER.json [READER.json ...]

Each READER.json is ``{"reader", "stores": {...}, "sampler": {...}}`` (see generate.py); a file
may instead hold ``{"readers": [ ... ]}`` with several (the browser writes one per variant).
Prints one summary line per reader and every mismatch; exits 1 on any mismatch or missing store.
"""

import json
import sys
from pathlib import Path

MAX_SHOWN = 30


def first_diff(a, b):
    """Where two equal-length lists first differ, for the message."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at {k}: {x!r} != {y!r}"
    return f"lengths {len(a)} != {len(b)}"


def compare_store(name, want, got):
    errs = []
    if got.get("error"):
        return [f"{name}: reader failed: {got['error']}"]
    if got.get("length") != want["length"]:
        errs.append(f"{name}: length {got.get('length')} != {want['length']}")
    if got.get("records") != want["records"]:
        errs.append(f"{name}: record sha256 differ ({first_diff(got.get('records') or [], want['records'])})")
    if got.get("typed_sha256") != want["typed"]["sha256"]:
        errs.append(f"{name}: typed sha256 {got.get('typed_sha256')} != {want['typed']['sha256']}")
    if got.get("shapes") != want["typed"]["shapes"]:
        errs.append(f"{name}: typed shapes differ ({first_diff(got.get('shapes') or [], want['typed']['shapes'])})")
    if "lengths" in got and got["lengths"] != want["lengths"]:
        errs.append(f"{name}: lengths differ ({first_diff(got['lengths'], want['lengths'])})")
    if "digest" in got and got["digest"] != want.get("digest"):
        errs.append(f"{name}: content digest {got['digest']} != {want.get('digest')}")
    if got.get("schema") != want["schema"]:
        errs.append(f"{name}: schema {got.get('schema')} != {want['schema']}")
    if "array_type" in got and got["array_type"] != want["typed"]["array_type"]:
        errs.append(f"{name}: array type {got['array_type']} != {want['typed']['array_type']}")
    return errs


def compare_sampler(name, want, got):
    if got.get("error"):
        return [f"sampler {name}: reader failed: {got['error']}"]
    errs = []
    for step, batch in want["batch_at"].items():
        if got.get("batch_at", {}).get(step) != batch:
            errs.append(f"sampler {name}: batch_at({step}) {got.get('batch_at', {}).get(step)} != {batch}")
    if got.get("first") != want["first"]:
        errs.append(f"sampler {name}: first batches {got.get('first')} != {want['first']}")
    nxt = got.get("next", {})
    if nxt.get("batches") != want["next"]["batches"]:
        errs.append(f"sampler {name}: seek+next {nxt.get('batches')} != {want['next']['batches']}")
    if nxt.get("step_after") != want["next"]["step_after"]:
        errs.append(f"sampler {name}: step after next {nxt.get('step_after')} != {want['next']['step_after']}")
    return errs


def compare_each(label, wants, gots, compare):
    """``compare(name, want, got)`` for every entry of ``wants`` against its namesake in ``gots``
    (one the reader left out is a mismatch): (every mismatch, the names that matched)."""
    errs, equal = [], []
    for name, want in wants.items():
        if name not in gots:
            errs.append(f"{label}{name}: missing")
            continue
        e = compare(name, want, gots[name])
        errs += e
        if not e:
            equal.append(name)
    return errs, equal


def readers_in(path):
    data = json.loads(Path(path).read_text())
    return data["readers"] if "readers" in data else [data]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    manifest = json.loads((Path(sys.argv[1]) / "manifest.json").read_text())
    if manifest.get("version") != 1:
        sys.exit(f"unsupported golden manifest version {manifest.get('version')}")
    stores, cases = manifest["stores"], manifest["sampler"]["cases"]
    failed = False
    for path in sys.argv[2:]:
        for r in readers_in(path):
            errs = []
            got_stores = r.get("stores", {})
            for name in sorted(set(got_stores) - set(stores)):
                errs.append(f"{name}: not in the manifest")
            e, equal = compare_each("", stores, got_stores, compare_store)
            errs += e
            records, ok_stores = sum(stores[name]["length"] for name in equal), len(equal)
            got_sampler = r.get("sampler")
            n_cases = 0
            if got_sampler is None:
                errs.append("no sampler output")
            else:
                e, equal = compare_each("sampler ", cases, got_sampler, compare_sampler)
                errs += e
                n_cases = len(equal)
            status = "ok  " if not errs else "FAIL"
            print(f"{status} {r.get('reader', path):<28} stores {ok_stores}/{len(stores)}"
                  f"  records {records}  sampler cases {n_cases}/{len(cases)}"
                  + (f"  {r['note']}" if r.get("note") else ""))
            for e in errs[:MAX_SHOWN]:
                print(f"     {e}")
            if len(errs) > MAX_SHOWN:
                print(f"     ... {len(errs) - MAX_SHOWN} more")
            failed |= bool(errs)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
