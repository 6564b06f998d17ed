"""``python -m loaderx``: the ``loaderx`` command-line tool on the Python package.

The same subcommands, options and exit codes as the native binary: ``info``, ``stats``,
``verify``, ``compact``, ``head``, ``cat``, ``export`` (dense store to ``.npy``) and ``convert``
(``.npy`` to a new dense store). Exit codes: 0 success, 1 bad records found (``verify``),
2 bad usage or a store that cannot be opened, read or written. Inspecting never creates a store.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import msgpack
import numpy as np

from . import _loaderx, __version__
from .converter import from_numpy

SCHEMA = "schema.msgpack"


def _open(path):
    if not (Path(path) / "meta.zr").is_file():
        raise FileNotFoundError(f"no loaderx store at {path}: meta.zr is missing")
    return _loaderx.Store(os.fspath(path), False)


def _schema(path):
    p = Path(path) / SCHEMA
    return msgpack.unpackb(p.read_bytes(), raw=False) if p.is_file() else None


def _records(store, schema, idxs):
    """Each record as a NumPy array shaped like the Python datasets return it."""
    lengths = store.lengths(np.asarray(idxs, dtype=np.uint64)) if len(idxs) else []
    for i, n in zip(idxs, lengths):
        buf = np.empty(int(n), dtype=np.uint8)
        store.gather(np.asarray([i], dtype=np.uint64), buf, np.zeros(1, dtype=np.uint64))
        if schema is None:
            yield i, buf
            continue
        dt = np.dtype(schema["dtype"])
        item = tuple(schema["item_shape"])
        arr = buf.view(dt)
        yield i, arr.reshape(item if schema["kind"] == "dense" else (-1, *item))


def _jsonable(a, limit):
    flat = a.reshape(-1)[:limit]
    if flat.dtype.kind in "fc":
        return [v if np.isfinite(v) else str(v) for v in flat.astype(np.float64 if flat.dtype.kind == "f" else np.complex128).real.tolist()]
    if flat.dtype.kind in "SUV":
        return [str(v) for v in flat.tolist()]
    return flat.tolist()


def cmd_info(a):
    store, schema = _open(a.store), _schema(a.store)
    stats = store.stats()
    out = {"path": str(a.store), "length": len(store), "stats": dict(stats), "has_dict": store.has_dict(), "schema": schema}
    if a.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print(f"store        {a.store}")
        print(f"schema       {schema['kind']} {schema['dtype']} {schema['item_shape']} codec {schema.get('codec')}" if schema else "schema       none (a plain Zrecord store)")
        print(f"records      {len(store)}")
        print(f"live bytes   {stats['live_bytes']}")
        print(f"chunk bytes  {stats['chunk_bytes']} (reclaimable {stats['reclaimable']})")
        print(f"dictionary   {'yes' if store.has_dict() else 'none'}")
    return 0


def cmd_stats(a):
    store = _open(a.store)
    stats = dict(store.stats())
    files = {p.name: {"size": p.stat().st_size, "disk": p.stat().st_blocks * 512} for p in sorted(Path(a.store).iterdir()) if p.is_file()}
    stats["files"] = files
    if a.json:
        print(json.dumps(stats, indent=2))
    else:
        for k, v in stats.items():
            if k != "files":
                print(f"{k:<12} {v}")
        for name, f in files.items():
            print(f"  {name:<16} {f['disk']:>14} on disk ({f['size']} apparent)")
    return 0


def cmd_verify(a):
    checked, bad = _open(a.store).verify()
    if a.json:
        print(json.dumps({"checked": checked, "bad": [{"index": i, "error": e} for i, e in bad]}, indent=2))
    else:
        for i, e in bad:
            print(f"bad record {i}: {e}")
        print(f"{checked} records checked, {len(bad)} bad")
    return 1 if bad else 0


def cmd_compact(a):
    store = _open(a.store)
    before = store.stats()["chunk_bytes"]
    store.compact()
    store.sync()
    after = store.stats()
    freed = before - after["chunk_bytes"]
    if a.json:
        print(json.dumps({"records": after["records"], "chunk_bytes_before": before, "chunk_bytes_after": after["chunk_bytes"], "freed": freed}, indent=2))
    else:
        print(f"compacted {after['records']} records: chunk bytes {before} -> {after['chunk_bytes']} ({freed} freed)")
    return 0


def _print(a, idxs):
    store, schema = _open(a.store), _schema(a.store)
    n = len(store)
    bad = [i for i in idxs if not 0 <= i < n]
    if bad:
        raise IndexError(f"index {bad[0]} out of range for a store of {n} records")
    rows = []
    for i, arr in _records(store, schema, idxs):
        if getattr(a, "raw", False):
            sys.stdout.buffer.write(arr.tobytes())
            continue
        row = {"index": i, "shape": list(arr.shape), "bytes": arr.nbytes, "values": _jsonable(arr, a.values), "values_total": arr.size}
        if a.json:
            rows.append(row)
        else:
            more = f", … ({arr.size} values)" if arr.size > a.values else ""
            print(f"{i}: shape {list(arr.shape)} [{', '.join(map(str, row['values']))}{more}]")
    if a.json:
        print(json.dumps(rows, indent=2))
    return 0


def cmd_head(a):
    return _print(a, list(range(min(a.count, len(_open(a.store))))))


def cmd_cat(a):
    return _print(a, a.indices)


def cmd_export(a):
    schema = _schema(a.store)
    if schema is None or schema["kind"] != "dense":
        raise ValueError("only dense stores export to one .npy array (ragged records differ in length)")
    from .dataset import DenseDataset

    ds = DenseDataset(a.store)
    out = np.lib.format.open_memmap(a.out, mode="w+", dtype=np.dtype(schema["dtype"]), shape=(len(ds), *schema["item_shape"]))
    step = max(1, (64 << 20) // max(1, out[0:1].nbytes)) if len(ds) else 1
    for start in range(0, len(ds), step):
        out[start : start + step] = ds[list(range(start, min(len(ds), start + step)))]
    out.flush()
    print(f"wrote {len(ds)} records to {a.out}", file=sys.stderr)
    return 0


def cmd_convert(a):
    if (Path(a.store) / "meta.zr").exists():
        raise ValueError(f"{a.store} already holds a store; convert makes a new one")
    array = np.load(a.input, mmap_mode="r", allow_pickle=False)
    if array.ndim == 0:
        raise ValueError("a 0-d array has no rows to store")
    from_numpy(a.store, array, codec=a.codec)
    print(f"wrote {len(array)} records to {a.store}", file=sys.stderr)
    return 0


def parser():
    p = argparse.ArgumentParser(prog="python -m loaderx", description="Inspect, check, repack and convert loaderx record stores")
    p.add_argument("--version", action="version", version=f"loaderx {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, fn, help, json_flag=True):
        s = sub.add_parser(name, help=help, description=help)
        s.set_defaults(fn=fn)
        if json_flag:
            s.add_argument("--json", action="store_true", help="print JSON instead of text")
        return s

    for name, fn, help in [
        ("info", cmd_info, "schema, length, codecs and sizes of a store"),
        ("stats", cmd_stats, "storage usage and file sizes"),
        ("verify", cmd_verify, "decode every record and report the ones that fail (exit code 1 if any)"),
        ("compact", cmd_compact, "repack live records and free the space deleted records held"),
    ]:
        add(name, fn, help).add_argument("store", type=Path)
    s = add("head", cmd_head, "print the first records")
    s.add_argument("store", type=Path)
    s.add_argument("-n", "--count", type=int, default=10)
    s.add_argument("--values", type=int, default=16, help="values shown per record")
    s = add("cat", cmd_cat, "print records by index")
    s.add_argument("store", type=Path)
    s.add_argument("indices", type=int, nargs="+")
    s.add_argument("--values", type=int, default=16, help="values shown per record")
    s.add_argument("--raw", action="store_true", help="write the decoded record bytes to stdout")
    s = add("export", cmd_export, "write a dense store to a .npy file", json_flag=False)
    s.add_argument("store", type=Path)
    s.add_argument("out", type=Path)
    s = add("convert", cmd_convert, "make a new dense store from a .npy file, one record per row", json_flag=False)
    s.add_argument("input", type=Path)
    s.add_argument("store", type=Path)
    s.add_argument("--codec", choices=["raw", "zstd", "zstd_dict"], default="zstd")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (OSError, ValueError, IndexError, KeyError) as e:
        print(f"loaderx: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
