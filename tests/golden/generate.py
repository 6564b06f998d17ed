#!/usr/bin/env python3
"""Writes the cross-language golden set: stores of every kind, codec and dtype, and sampler cases.

    python tests/golden/generate.py [OUT]        (default OUT: artifacts/golden)

Deterministic: every store draws from its own generator seeded with (SEED, crc32(name)), so
adding a store changes no other. OUT is emptied first (it must be empty, missing, or a golden dir
written by this script).

Layout of OUT/manifest.json, ``"version": 1``:

    {"version": 1, "generator": ..., "seed": SEED, "canonical": "...",
     "stores": {NAME: {
        "path":    store directory, relative to OUT,
        "kind":    "dense" | "ragged" | "bytes" (plain Zrecord records, no schema.msgpack),
        "codecs":  codecs the records were appended with,
        "ops":     what was done to the store, in words,
        "schema":  {"kind", "dtype", "item_shape", "codec"} or null,
        "length":  live records,
        "lengths": decoded bytes of each record,
        "records": sha256 (hex) of each record's decoded bytes,
        "typed":   {"sha256": sha256 of every record's values in canonical form, in order,
                    "shapes": each record's typed shape (see below),
                    "array_type": the JavaScript typed array the values come in}}},
     (each store also lists "files": {file: size}; stores are cut to their used sizes, as
      shipped fixtures are, so in-memory copies stay small)
     "sampler": {"cases": {NAME: {"length", "batch_size", "mode", "seed": decimal strings
                                   (they may exceed 2**53), "mode_name",
                                   "batch_at": {STEP (decimal string): [indices]},
                                   "first": next() x 4 from step 0,
                                   "next": {"seek": STEP, "count": n, "batches": [[indices] * n],
                                            "step_after": the step after them}}}}}

Every hash is computed from the source data in this script, never by reading the store back.

Canonical form of typed values (what a typed reader without NumPy sees; the JS typed arrays):
little-endian; bool as one byte 0/1; ints, datetimes and timedeltas as their integers of the same
width (datetime/timedelta as int64); float16 widened to float32; float32/64 as they are; complex
as (real, imag) floats of half the width, adding a trailing dimension 2; bytes ``S``/void ``V`` as
their bytes, adding a trailing dimension of the item size; text ``U`` as uint32 code points,
adding a trailing dimension of the character count. Stores without a schema: the record bytes.
Typed shape of a record: dense ``item_shape + extra``; ragged ``[rows] + item_shape + extra``;
no schema ``[nbytes]``.

Readers (read_py.py, the Rust test, read_node.mjs, read_browser.mjs) write
``{"reader", "stores": {NAME: {"length", "records", "typed_sha256", "shapes", "schema",
optionally "lengths" and (JS) "array_type"}}, "sampler": {NAME: {"batch_at", "first",
"next": {"batches", "step_after"}}}}`` and compare.py checks them against this manifest, exactly.
"""

import hashlib
import json
import os
import shutil
import sys
import zlib
from pathlib import Path

import numpy as np

from loaderx.converter import from_iterator, from_numpy
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

SEED = 20240611
VERSION = 1
CANONICAL = (
    "little-endian; b1 as u1; ints/M8/m8 as same-width ints; f2 widened to f4; c8/c16 as "
    "(re, im) f4/f8 pairs (+dim 2); S/V as bytes (+dim itemsize); U as u32 code points "
    "(+dim chars); no schema: raw bytes"
)
U64_MAX = (1 << 64) - 1


def sha(b):
    return hashlib.sha256(b).hexdigest()


def rng_for(name):
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


# ---------------------------------------------------------------- canonical typed values


def array_type(dtype):
    """The JavaScript typed array a dtype's values come in (mirrors the documented mapping)."""
    k, n = dtype.kind, dtype.itemsize
    if k == "b" or (k == "u" and n == 1):
        return "Uint8Array"
    table = {
        ("i", 1): "Int8Array", ("i", 2): "Int16Array", ("u", 2): "Uint16Array",
        ("i", 4): "Int32Array", ("u", 4): "Uint32Array", ("i", 8): "BigInt64Array",
        ("u", 8): "BigUint64Array", ("M", 8): "BigInt64Array", ("m", 8): "BigInt64Array",
        ("f", 2): "Float32Array", ("f", 4): "Float32Array", ("f", 8): "Float64Array",
        ("c", 8): "Float32Array", ("c", 16): "Float64Array", ("U", n): "Uint32Array",
    }
    return table.get((k, n), "Uint8Array")


def canonical(a):
    """(canonical bytes, extra trailing dims) of an array's values."""
    a = np.ascontiguousarray(a)
    dt = a.dtype
    k, n = dt.kind, dt.itemsize
    flat = a.reshape(-1)
    if k == "f" and n == 2:
        return flat.astype("<f4").tobytes(), []
    raw = flat.view(np.uint8)
    if k in "SV" or (k == "f" and n not in (4, 8)) or (k == "c" and n not in (8, 16)):
        return raw.tobytes(), [n]
    comp, extra = n, []
    if k == "c":
        comp, extra = n // 2, [2]
    elif k == "U":
        comp, extra = 4, [n // 4]
    if dt.byteorder == ">" and comp > 1:
        raw = raw.reshape(-1, comp)[:, ::-1]
    return np.ascontiguousarray(raw).tobytes(), extra


# ---------------------------------------------------------------- source data


def values(rng, dtype, shape):
    """Random values of `dtype` with `shape`, with the awkward values of each kind mixed in."""
    dt = np.dtype(dtype)
    k, n = dt.kind, dt.itemsize
    size = int(np.prod(shape, dtype=np.int64))
    if k in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, size=size, endpoint=True, dtype=dt.newbyteorder("="))
        edge = [info.min, info.max, 0, 1]
    elif k == "b":
        v = rng.random(size) < 0.5
        edge = []
    elif k == "f":
        v = rng.standard_normal(size) * (100.0 if n == 2 else 1e3)
        fi = np.finfo(dt)
        edge = [0.0, -0.0, np.inf, -np.inf, np.nan, float(fi.max), float(fi.smallest_subnormal),
                -float(fi.smallest_subnormal), float(fi.tiny)]
    elif k == "c":
        v = rng.standard_normal(size) + 1j * rng.standard_normal(size)
        edge = [complex(np.nan, 1.0), complex(-0.0, np.inf), 0j]
    elif k == "V":
        return np.frombuffer(rng.bytes(size * n), dtype=dt).reshape(shape).copy()
    elif k == "S":
        alphabet = list(b"abcXYZ019 \x00\xff\x80")
        items = [bytes(rng.choice(alphabet, size=rng.integers(0, n + 1)).tolist()).rstrip(b"\x00") for _ in range(size)]
        return np.array(items, dtype=dt).reshape(shape)
    elif k == "U":
        alphabet = list("abz AZ09\u00e9\u00df\u4e2d\U0001f600\u0000\uffff")
        chars = n // 4
        items = ["".join(rng.choice(alphabet, size=rng.integers(0, chars + 1))).rstrip("\x00") for _ in range(size)]
        return np.array(items, dtype=dt).reshape(shape)
    elif k in "Mm":
        v = rng.integers(-(1 << 40), 1 << 40, size=size, dtype=np.int64)
        edge = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]  # min is NaT
        v[: min(size, len(edge))] = edge[: min(size, len(edge))]
        return v.view(dt.newbyteorder("=")).astype(dt).reshape(shape)
    else:
        raise ValueError(f"no generator for {dtype}")
    v = np.asarray(v)
    m = min(size, len(edge))
    if m:
        v[:m] = np.array(edge[:m], dtype=v.dtype)
    return v.astype(dt).reshape(shape)


# ---------------------------------------------------------------- stores


class Golden:
    def __init__(self, out):
        self.out = out
        self.stores = {}

    def add(self, name, kind, records, schema, codecs, ops):
        """Records: list of NumPy arrays (dense/ragged, one per record) or bytes (bytes kind)."""
        digests, lengths, shapes, typed = [], [], [], hashlib.sha256()
        for r in records:
            if kind == "bytes":
                b = bytes(r)
                digests.append(sha(b))
                lengths.append(len(b))
                shapes.append([len(b)])
                typed.update(b)
                continue
            arr = np.asarray(r)
            arr = arr if arr.flags.c_contiguous else arr.copy()  # (ascontiguousarray makes 0-d arrays 1-d)
            b = arr.tobytes()
            digests.append(sha(b))
            lengths.append(len(b))
            cb, extra = canonical(arr)
            typed.update(cb)
            shapes.append([int(d) for d in arr.shape] + extra)
        if schema is not None:
            at = array_type(np.dtype(schema["dtype"]))
        else:
            at = "Uint8Array"
        # The content digest (checksums.lx), which every reader must compute the same.
        z = Zrecord(self.out / name)
        try:
            digest = z.digest
        finally:
            z.close()
        self.stores[name] = {
            "path": name,
            "digest": digest,
            "kind": kind,
            "codecs": codecs,
            "ops": ops,
            "schema": schema,
            "length": len(records),
            "lengths": lengths,
            "records": digests,
            "typed": {"sha256": typed.hexdigest(), "shapes": shapes, "array_type": at},
        }

    def path(self, name):
        return self.out / name

    # -- the three ways of writing

    def dense(self, name, arr, codec, ops=None):
        from_numpy(self.path(name), arr, codec=codec, progress=False)
        schema = {"kind": "dense", "dtype": arr.dtype.str, "item_shape": list(arr.shape[1:]), "codec": codec}
        self.add(name, "dense", rows(arr), schema, [codec], ops or f"from_numpy({arr.dtype.str} {arr.shape}, {codec})")

    def ragged(self, name, records, codec, dtype=None, item_shape=None, ops=None):
        if records:
            from_iterator(self.path(name), records, codec=codec, progress=False)
            first = np.asarray(records[0]) if not isinstance(records[0], bytes) else None
            dtype = first.dtype.str if first is not None else "|u1"
            item_shape = list(first.shape[1:]) if first is not None else []
        else:
            from_iterator(self.path(name), records, codec=codec, progress=False,
                          schema={"dtype": dtype, "item_shape": item_shape})
        schema = {"kind": "ragged", "dtype": dtype, "item_shape": item_shape, "codec": codec}
        recs = [np.frombuffer(r, dtype=np.uint8) if isinstance(r, bytes) else np.asarray(r) for r in records]
        self.add(name, "ragged", recs, schema, [codec], ops or f"from_iterator({len(records)} x {dtype} rows {item_shape}, {codec})")

    def plain(self, name, batches, ops, dict_from=None):
        """A Zrecord store without schema: `batches` is [(codec, [bytes, ...]), ...] appended in order."""
        z = Zrecord(self.path(name), codec="raw")
        try:
            if dict_from is not None:
                sizes = np.array([len(s) for s in dict_from], dtype=np.uint64)
                z.train_dict(np.frombuffer(b"".join(dict_from), dtype=np.uint8), sizes, 16 << 10)
            records = []
            for codec, recs in batches:
                append(z, recs, codec)
                records += recs
            z.sync()
        finally:
            z.close()
        self.add(name, "bytes", records, None, sorted({c for c, _ in batches}), ops)


def rows(arr):
    """The records of a dense array: 0-d arrays for scalar items, keeping the dtype (a list()
    of a 1-d array would give NumPy scalars, and np.bytes_ drops trailing NULs)."""
    return [arr[i : i + 1].reshape(arr.shape[1:]) for i in range(len(arr))]


def append(z, recs, codec):
    if not recs:
        return
    buf = np.frombuffer(b"".join(recs), dtype=np.uint8)
    offsets = np.zeros(len(recs), dtype=np.uint64)
    offsets[1:] = np.cumsum([len(r) for r in recs[:-1]])
    z.append(buf, offsets, codec=codec)


def simulate_delete(records, indices):
    """What Zrecord.delete does to the order: holes filled by the current last record, largest first."""
    records = list(records)
    n = len(records)
    order = sorted(set(int(i) for i in indices), reverse=True)
    for k, hole in enumerate(order):
        records[hole] = records[n - 1 - k]
    return records[: n - len(order)]


def byte_records(rng, n, lo, hi, compressible=0.5):
    out = []
    for k in range(n):
        size = int(rng.integers(lo, hi + 1))
        if rng.random() < compressible:
            out.append(bytes((i // 7 + k) % 251 for i in range(size)))
        else:
            out.append(rng.bytes(size))
    return out


DENSE = [
    # (name, dtype, item_shape, codec, n)
    ("dense_u1_28x28_raw", "|u1", (28, 28), "raw", 60),
    ("dense_u1_28x28_zstd", "|u1", (28, 28), "zstd", 60),
    ("dense_u1_28x28_zstd_dict", "|u1", (28, 28), "zstd_dict", 300),
    ("dense_i1_scalar_zstd", "|i1", (), "zstd", 300),
    ("dense_u2_4_raw", "<u2", (4,), "raw", 50),
    ("dense_i2_3x2_zstd_dict", "<i2", (3, 2), "zstd_dict", 400),
    ("dense_i4be_5_raw", ">i4", (5,), "raw", 50),
    ("dense_i4le_5_zstd", "<i4", (5,), "zstd", 50),
    ("dense_u4_2x2x2_zstd", "<u4", (2, 2, 2), "zstd", 40),
    ("dense_i8_scalar_zstd", "<i8", (), "zstd", 500),
    ("dense_u8_3_raw", "<u8", (3,), "raw", 40),
    ("dense_u8be_2_zstd", ">u8", (2,), "zstd", 40),
    ("dense_f2_3x3_zstd", "<f2", (3, 3), "zstd", 50),
    ("dense_f2be_7_raw", ">f2", (7,), "raw", 30),
    ("dense_f4_8x2x4_zstd", "<f4", (8, 2, 4), "zstd", 40),
    ("dense_f4_2x1x3x1x2_raw", "<f4", (2, 1, 3, 1, 2), "raw", 30),
    ("dense_f4be_3_zstd", ">f4", (3,), "zstd", 30),
    ("dense_f8be_6_zstd_dict", ">f8", (6,), "zstd_dict", 400),
    ("dense_f8_4_raw", "<f8", (4,), "raw", 30),
    ("dense_b1_10_zstd", "|b1", (10,), "zstd", 60),
    ("dense_c8_4_raw", "<c8", (4,), "raw", 30),
    ("dense_c16be_2_zstd", ">c16", (2,), "zstd", 30),
    ("dense_V12_scalar_raw", "|V12", (), "raw", 40),
    ("dense_V3_2x2_zstd", "|V3", (2, 2), "zstd", 40),
    ("dense_S5_scalar_zstd", "|S5", (), "zstd", 60),
    ("dense_S5_3_raw", "|S5", (3,), "raw", 30),
    ("dense_U3_scalar_raw", "<U3", (), "raw", 60),
    ("dense_U3be_2_zstd", ">U3", (2,), "zstd", 40),
    ("dense_M8s_scalar_zstd", "<M8[s]", (), "zstd", 50),
    ("dense_M8msbe_2_raw", ">M8[ms]", (2,), "raw", 30),
    ("dense_m8us_3_zstd", "<m8[us]", (3,), "zstd", 30),
]

RAGGED = [
    # (name, dtype, item_shape, codec, n, max rows)
    ("ragged_i4_tokens_zstd", "<i4", (), "zstd", 200, 300),
    ("ragged_i4_tokens_zstd_dict", "<i4", (), "zstd_dict", 400, 120),
    ("ragged_i4_tokens_raw", "<i4", (), "raw", 60, 50),
    ("ragged_f4_rows3_raw", "<f4", (3,), "raw", 80, 20),
    ("ragged_u2_2x2_zstd", "<u2", (2, 2), "zstd", 60, 10),
    ("ragged_f2_zstd", "<f2", (), "zstd", 50, 40),
    ("ragged_i8be_raw", ">i8", (), "raw", 40, 12),
    ("ragged_c8_zstd", "<c8", (), "zstd", 40, 9),
    ("ragged_U3_2_raw", "<U3", (2,), "raw", 40, 6),
    ("ragged_b1_zstd", "|b1", (), "zstd", 50, 70),
    ("ragged_S5_zstd_dict", "|S5", (), "zstd_dict", 300, 30),
    ("ragged_M8s_zstd", "<M8[s]", (), "zstd", 30, 8),
]


def tokens(rng, dtype, item_shape, n, max_rows):
    """Ragged records; integer tokens come from a small vocabulary so zstd has something to find."""
    out = []
    for _ in range(n):
        rows = int(rng.integers(1, max_rows + 1))
        if np.dtype(dtype).kind == "i" and not item_shape:
            out.append(rng.integers(0, 500, size=rows).astype(dtype))
        else:
            out.append(values(rng, dtype, (rows, *item_shape)))
    return out


def build(g):
    for name, dtype, shape, codec, n in DENSE:
        g.dense(name, values(rng_for(name), dtype, (n, *shape)), codec)

    for name, dtype, shape, codec, n, max_rows in RAGGED:
        g.ragged(name, tokens(rng_for(name), dtype, shape, n, max_rows), codec)

    rng = rng_for("ragged_bytes_records_zstd")
    g.ragged("ragged_bytes_records_zstd", byte_records(rng, 80, 1, 3000), "zstd", ops="from_iterator(80 bytes records, zstd)")

    # Plain Zrecord stores (no schema.msgpack).
    rng = rng_for("bytes")
    g.plain("bytes_raw", [("raw", byte_records(rng, 70, 1, 5000))], "Zrecord.append(raw)")
    g.plain("bytes_zstd", [("zstd", byte_records(rng, 70, 1, 5000))], "Zrecord.append(zstd)")
    sample = byte_records(rng, 400, 50, 400, compressible=0.9)
    g.plain("bytes_zstd_dict", [("zstd_dict", byte_records(rng, 120, 1, 600, compressible=0.9))],
            "train_dict + Zrecord.append(zstd_dict)", dict_from=sample)
    g.plain("bytes_mixed_codecs",
            [("raw", byte_records(rng, 20, 1, 2000)), ("zstd", byte_records(rng, 20, 1, 2000)),
             ("zstd_dict", byte_records(rng, 20, 1, 2000, compressible=0.9)), ("raw", byte_records(rng, 5, 1, 10))],
            "train_dict, then appends raw, zstd, zstd_dict, raw", dict_from=sample)
    g.plain("bytes_one_byte_records", [("zstd", [bytes([k % 256]) for k in range(257)])], "257 records of 1 byte, zstd")
    g.plain("bytes_empty", [], "Zrecord(path) created, nothing appended")

    # Empty stores with a schema.
    g.dense("dense_empty_f4_3", np.zeros((0, 3), dtype="<f4"), "zstd", ops="from_numpy of 0 records")
    g.ragged("ragged_empty_i4", [], "zstd", dtype="<i4", item_shape=[], ops="from_iterator([], schema=<i4 rows)")

    # Two appends with different codecs into one dense store.
    name = "dense_appended_twice_mixed"
    rng = rng_for(name)
    a1, a2 = values(rng, "<i2", (30, 5)), values(rng, "<i2", (25, 5))
    from_numpy(g.path(name), a1, codec="zstd", progress=False)
    from_numpy(g.path(name), a2, codec="raw", progress=False)
    g.add(name, "dense", rows(a1) + rows(a2), {"kind": "dense", "dtype": "<i2", "item_shape": [5], "codec": "raw"},
          ["raw", "zstd"], "from_numpy(30, zstd) then from_numpy(25, raw)")

    # Deletes: uncompacted, compacted, delete-all, delete then append.
    dels = [0, 5, 50, 50, 97, 99, 63]
    for name, compact in (("deleted_uncompacted", False), ("deleted_compacted", True)):
        arr = values(rng_for("deleted"), "<f4", (100, 4))
        from_numpy(g.path(name), arr, codec="zstd", progress=False)
        z = Zrecord(g.path(name))
        z.delete(np.array(dels, dtype=np.uint64))
        if compact:
            z.compact()
        z.sync()
        z.close()
        g.add(name, "dense", simulate_delete(rows(arr), dels),
              {"kind": "dense", "dtype": "<f4", "item_shape": [4], "codec": "zstd"}, ["zstd"],
              f"from_numpy(100 x <f4[4], zstd), delete {dels}" + (", compact" if compact else ""))

    name = "deleted_all_uncompacted"
    arr = values(rng_for(name), "|u1", (20, 16))
    from_numpy(g.path(name), arr, codec="raw", progress=False)
    z = Zrecord(g.path(name))
    z.delete(np.arange(20, dtype=np.uint64))
    z.sync()
    z.close()
    g.add(name, "dense", [], {"kind": "dense", "dtype": "|u1", "item_shape": [16], "codec": "raw"}, ["raw"],
          "from_numpy(20), delete all")

    name = "ragged_deleted_then_appended"
    rng = rng_for(name)
    first, more = tokens(rng, "<i4", (), 50, 40), tokens(rng, "<i4", (), 15, 40)
    from_iterator(g.path(name), first, codec="zstd", progress=False)
    z = Zrecord(g.path(name))
    rdels = [1, 2, 3, 40, 49, 10]
    z.delete(np.array(rdels, dtype=np.uint64))
    z.close()
    from_iterator(g.path(name), more, codec="raw", progress=False)
    g.add(name, "ragged", simulate_delete(first, rdels) + more,
          {"kind": "ragged", "dtype": "<i4", "item_shape": [], "codec": "raw"}, ["raw", "zstd"],
          f"from_iterator(50, zstd), delete {rdels}, from_iterator(15, raw)")

    name = "bytes_mixed_deleted_compacted"
    rng = rng_for(name)
    batches = [("raw", byte_records(rng, 30, 1, 3000)), ("zstd", byte_records(rng, 30, 1, 3000))]
    z = Zrecord(g.path(name), codec="raw")
    for codec, recs in batches:
        append(z, recs, codec)
    bdels = [0, 29, 30, 59, 15, 44]
    z.delete(np.array(bdels, dtype=np.uint64))
    z.compact()
    z.sync()
    z.close()
    g.add(name, "bytes", simulate_delete(batches[0][1] + batches[1][1], bdels), None, ["raw", "zstd"],
          f"appends raw 30, zstd 30, delete {bdels}, compact")

    # Records of about 1 MiB (the limit is exactly 1 MiB).
    name = "bigrec_1mib_dense_zstd"
    rng = rng_for(name)
    mib = 1 << 20
    big = np.stack([
        np.frombuffer(rng.bytes(mib), dtype=np.uint8),
        np.zeros(mib, dtype=np.uint8),
        (np.arange(mib) // 3 % 256).astype(np.uint8),
        np.frombuffer(rng.bytes(mib), dtype=np.uint8),
    ])
    g.dense(name, big, "zstd")
    name = "bigrec_ragged_bytes_raw"
    rng = rng_for(name)
    g.plain(name, [("raw", [rng.bytes(mib), b"x", rng.bytes(mib - 1), rng.bytes(12345)]),
                   ("zstd", [bytes(mib), rng.bytes(mib)])], "records of 1 MiB, 1 B, 1 MiB-1, 12345 B raw; 1 MiB zstd")


# ---------------------------------------------------------------- sampler cases


SAMPLER = [
    # (length, batch_size, seed)
    (10, 4, 1),
    (7, 3, 42),
    (3, 5, 0),
    (1, 1, 7),
    (8, 4, U64_MAX),
    (1000, 32, 123),
    (1 << 40, 6, 99),
]
STEPS = [0, 1, 2, 3, 5, 17, 1000, 123456789, 10**12, (1 << 53) + 1, U64_MAX]
# seek(2**64-3) then next() four times: steps 2**64-3 .. 2**64-1, then the cursor wraps to step 0.
NEXT = {"seek": str(U64_MAX - 2), "count": 4}


def sampler_cases():
    cases = {}
    for length, batch, seed in SAMPLER:
        for mode in Sampler.Mode:
            name = f"len{length}_b{batch}_{mode.name.lower()}_seed{seed}"
            s = Sampler(length, batch, int(mode), seed)
            batch_at = {str(step): [int(x) for x in s.batch_at(step)] for step in STEPS}
            s.seek(int(NEXT["seek"]))
            nxt = [[int(x) for x in s.next()] for _ in range(NEXT["count"])]
            step_after = str(s.step)
            s.seek(0)
            head = [[int(x) for x in s.next()] for _ in range(4)]
            cases[name] = {
                "length": str(length), "batch_size": str(batch), "mode": int(mode), "mode_name": mode.name,
                "seed": str(seed), "batch_at": batch_at,
                "next": {"seek": NEXT["seek"], "count": NEXT["count"], "batches": nxt, "step_after": step_after},
                "first": head,
            }
    return cases


def truncate_to_used(store):
    """Cuts the files to their used sizes, as the shipped fixtures are: meta.zr to the header and
    the live table, the tail chunk to the tail offset, checksums.lx to the live records' slots.
    Returns {file: size}."""
    meta = store / "meta.zr"
    with open(meta, "rb") as f:
        head = f.read(16)
    assert head[:4] == b"ZREC", f"{meta}: no ZREC magic"
    tail_chunk = int.from_bytes(head[6:8], "little")
    tail_offset = int.from_bytes(head[8:12], "little")
    length = int.from_bytes(head[12:16], "little")
    os.truncate(meta, 16 + 16 * length)
    os.truncate(store / f"{tail_chunk}.zr", tail_offset)
    # checksums.lx: its 128-byte header and 24 bytes per live record.
    if (store / "checksums.lx").is_file():
        os.truncate(store / "checksums.lx", 128 + 24 * length)
    return {f.name: f.stat().st_size for f in sorted(store.iterdir())}


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "artifacts/golden")
    if out.exists():
        if any(out.iterdir()) and not (out / "manifest.json").is_file():
            sys.exit(f"{out} is not empty and holds no golden manifest.json: refusing to clear it")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    g = Golden(out)
    build(g)
    for entry in g.stores.values():
        entry["files"] = truncate_to_used(out / entry["path"])
    manifest = {
        "version": VERSION,
        "generator": "tests/golden/generate.py",
        "seed": SEED,
        "canonical": CANONICAL,
        "stores": g.stores,
        "sampler": {"cases": sampler_cases()},
    }
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / "manifest.json")
    n = sum(s["length"] for s in g.stores.values())
    print(f"golden: {len(g.stores)} stores, {n} records, {len(manifest['sampler']['cases'])} sampler cases -> {out}")


if __name__ == "__main__":
    main()
