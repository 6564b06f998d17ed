"""Run the same loaderx API calls under any implementation and print the results as JSON.

Usage: parity_cases.py WORKDIR

Run once under the reference (loaderx 0.9.11) and once under ours; test_parity_with_reference.py
compares the two documents. Only the 0.9.11 public API is used. Each case catches its own
exceptions and reports the exception's class hierarchy (names) and ``code``, so an error is a
result to compare, not a crash of the script. Nothing here may crash the reference (no zstd_dict
on multi-byte dtypes, no length-0 sampler).
"""

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

# _lxhelpers (py/tests) needs only the standard library and NumPy, so both interpreters import it.
sys.path.append(str(Path(__file__).resolve().parents[1]))

import loaderx
from _lxhelpers import read_records, used_bytes_digest
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset, pad
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

WORK = Path(sys.argv[1])
WORK.mkdir(parents=True, exist_ok=True)
os.chdir(WORK)
OUT = {"version": loaderx.__version__}


def err(e):
    return {"error": [c.__name__ for c in type(e).__mro__], "code": getattr(e, "code", None)}


def case(fn):
    try:
        OUT[fn.__name__] = fn()
    except Exception as e:  # a result like any other
        OUT[fn.__name__] = err(e)
    return fn


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def store_facts(path):
    path = Path(path)
    # checksums.lx is loaderx 0.10's own (the reference neither writes nor reads it).
    facts = {"files": sorted(p.name for p in path.iterdir() if p.name != "checksums.lx")}
    if (path / "schema.msgpack").exists():
        facts["schema"] = (path / "schema.msgpack").read_bytes().hex()
    if (path / "dict.zr").exists():
        facts["dict"] = sha((path / "dict.zr").read_bytes())
    if (path / "meta.zr").exists():
        facts["used"] = used_bytes_digest(path)
        z = Zrecord(path)
        n = len(z)
        facts["len"] = n
        facts["stats"] = {k: int(v) for k, v in z.stats().items()}
        facts["has_dict"] = bool(z.has_dict())
        if n:
            facts["lengths"] = [int(x) for x in z.lengths(np.arange(n, dtype=np.uint64))]
            facts["content"] = sha(b"".join(read_records(z)))
        z.close()
    return facts


def content_of(z):
    """Each record's bytes, hex, in index order."""
    return [r.hex() for r in read_records(z)]


def pack(recs):
    src = np.frombuffer(b"".join(recs), dtype=np.uint8).copy()
    offsets = np.zeros(len(recs), dtype=np.uint64)
    offsets[1:] = np.cumsum([len(r) for r in recs[:-1]])
    return src, offsets


def six_records():
    return [bytes([k]) * (10 + 7 * k) for k in range(6)]


# --- Zrecord ---------------------------------------------------------------------------------

DELETE_PATTERNS = [[1, 3], [3, 1], [1, 1, 3], [1, 3, 3, 1], [0], [5], [0, 5], [5, 0], [2, 4], [4, 5], [0, 1, 2, 3, 4, 5]]


@case
def zrecord_delete_orders():
    out = {}
    for k, pattern in enumerate(DELETE_PATTERNS):
        path = WORK / f"del{k}"
        z = Zrecord(path, codec="raw")
        src, offsets = pack(six_records())
        first = z.append(src, offsets)
        z.delete(np.array(pattern, dtype=np.uint64))
        order = [int(bytes.fromhex(h)[0]) for h in content_of(z)]
        before = {k2: int(v) for k2, v in z.stats().items()}
        z.compact()
        after = {k2: int(v) for k2, v in z.stats().items()}
        order_after = [int(bytes.fromhex(h)[0]) for h in content_of(z)]
        out[str(pattern)] = {"first": int(first), "order": order, "stats": before, "compacted": after, "order_after": order_after}
        z.close()
    return out


@case
def zrecord_ops():
    path = WORK / "zops"
    z = Zrecord(path)
    res = {"len0": len(z), "has_dict0": bool(z.has_dict())}
    recs1 = [bytes([(i * 13 + j // 3) % 256 for j in range(50 + 31 * i)]) for i in range(5)]
    src, offsets = pack(recs1)
    res["first1"] = int(z.append(src, offsets, "raw"))
    recs2 = [bytes([(i + j // 9) % 7 for j in range(300 + 100 * i)]) for i in range(4)]
    src, offsets = pack(recs2)
    res["first2"] = int(z.append(src, offsets))  # default codec zstd
    # offsets[0] > 0: the leading bytes are ignored
    src = np.frombuffer(b"IGNORED" + b"x" * 40 + b"y" * 60, dtype=np.uint8).copy()
    res["first3"] = int(z.append(src, np.array([7, 47], dtype=np.uint64), "zstd"))
    res["stats1"] = {k: int(v) for k, v in z.stats().items()}
    res["lengths"] = [int(x) for x in z.lengths(np.arange(len(z), dtype=np.uint64))]
    # gather into a larger buffer at scattered offsets; untouched bytes stay as they were
    idx = np.array([10, 0, 7, 3], dtype=np.uint64)
    lens = z.lengths(idx).astype(np.uint64)
    offs = np.zeros(4, dtype=np.uint64)
    offs[1:] = np.cumsum(lens + 5)[:-1]
    dst = np.full(int((lens + 5).sum()), 0xEE, dtype=np.uint8)
    z.gather(idx, dst, offs)
    res["gather"] = dst.tobytes().hex()
    samples = b"".join(recs2 * 20)
    sizes = [len(r) for r in recs2] * 20
    dsize = z.train_dict(np.frombuffer(samples, dtype=np.uint8), np.array(sizes), 4096)
    res["dict_size"] = int(dsize)
    res["has_dict1"] = bool(z.has_dict())
    src, offsets = pack(recs2[::-1])
    res["first4"] = int(z.append(src, offsets, "zstd_dict"))
    res["stats2"] = {k: int(v) for k, v in z.stats().items()}
    z.delete(np.array([0, 12, 4], dtype=np.uint64))
    res["stats3"] = {k: int(v) for k, v in z.stats().items()}
    z.compact()
    res["stats4"] = {k: int(v) for k, v in z.stats().items()}
    res["content"] = content_of(z)
    z.sync()
    z.close()
    res["facts"] = store_facts(path)
    z = Zrecord(path)
    res["reopened"] = content_of(z)
    res["has_dict_reopened"] = bool(z.has_dict())
    z.close()
    return res


# --- converters ------------------------------------------------------------------------------

def _structured(n):
    a = np.zeros(n, dtype=[("a", "<i4"), ("b", "<f8")])
    a["a"] = np.arange(n)
    a["b"] = np.arange(n) / 4
    return a


def _arrays():
    i = np.arange(120)[:, None, None]
    j = np.arange(28)[None, :, None]
    k = np.arange(28)[None, None, :]
    img = (((i // 5) * 9 + j // 4 * 3 + k // 7) % 256).astype(np.uint8)
    s5 = np.zeros((6, 2), dtype=[("a", "u1"), ("b", "<i4")])
    s5["a"] = np.arange(12).reshape(6, 2)
    s5["b"] = -np.arange(12).reshape(6, 2)
    return {
        "u8_raw": (img, "raw"),
        "u8_zstd": (img, "zstd"),
        "u8_zstd_dict": (np.concatenate([img] * 4), "zstd_dict"),
        "f32_zstd": (np.arange(64 * 8, dtype=np.float32).reshape(64, 2, 4) / 3, "zstd"),
        "i64_1d": ((np.arange(200, dtype=np.int64) * 37) % 10, "zstd"),
        "bool": (((np.arange(50 * 64) % 5) == 0).reshape(50, 64), "zstd"),
        "f16": (np.linspace(-2, 2, 50 * 64).astype(np.float16).reshape(50, 64), "zstd"),
        "be_i4": (np.arange(300, dtype=">i4").reshape(50, 2, 3), "raw"),
        "c8": ((np.arange(40) + 1j * np.arange(40)).astype(np.complex64).reshape(10, 4), "zstd"),
        "U2": (np.array([["ab", "c"], ["de", "fg"], ["h", "ij"]], dtype="<U2"), "raw"),
        "M8": (np.arange(12).astype("datetime64[s]").reshape(4, 3), "raw"),
        # Plain void views: both write |V12 and |V5. A structured array itself is stored by the
        # reference with its field names dropped and refused here (test_newcomer_papercuts).
        "V12": (_structured(20).view("V12"), "raw"),
        "V5x2": (s5.view("V5"), "raw"),
    }


@case
def converters_from_numpy():
    out = {}
    for name, (array, codec) in _arrays().items():
        path = WORK / f"np_{name}"
        n = from_numpy(path, array, codec=codec)
        facts = store_facts(path)
        facts["returned"] = int(n)
        ds = DenseDataset(path)
        back = ds[:]
        facts["read"] = [str(back.dtype), list(back.shape), sha(back.tobytes())]
        facts["roundtrip"] = back.tobytes() == np.ascontiguousarray(array).tobytes()
        ds.close()
        out[name] = facts
    return out


@case
def converters_from_numpy_twice():
    x = (np.arange(60 * 64) % 17).astype(np.uint8).reshape(60, 64)
    from_numpy(WORK / "twice", x[:30], codec="zstd")
    from_numpy(WORK / "twice", x[30:], codec="raw")
    facts = store_facts(WORK / "twice")
    facts["read"] = sha(DenseDataset(WORK / "twice")[:].tobytes())
    return facts


@case
def converters_user_schema():
    schema = {"dtype": "<i2", "item_shape": [3], "extra": "hello"}
    from_numpy(WORK / "user_schema", np.arange(30, dtype=np.int16).reshape(10, 3), codec="raw", schema=schema)
    return store_facts(WORK / "user_schema")


@case
def converters_from_iterator():
    out = {}
    seqs = [(np.arange(1 + (i * 7) % 23, dtype=np.int32) * (i + 1)) % 50 for i in range(150)]
    rows = [np.arange(3 * (1 + i % 5), dtype=np.float32).reshape(-1, 3) / (i + 1) for i in range(40)]
    scalars = [np.int64(i * 3) for i in range(25)]
    inputs = {
        "i32_zstd": (seqs, "zstd"),
        "i32_raw": (iter(seqs), "raw"),
        "i32_zstd_dict": (seqs * 6, "zstd_dict"),
        "f32x3_raw": (rows, "raw"),
        "scalars": (scalars, "zstd"),
        "empty": ([], "zstd"),
        "one_bytes_object": (b"just one record", "raw"),
    }
    for name, (src, codec) in inputs.items():
        path = WORK / f"it_{name}"
        n = from_iterator(path, src, codec=codec)
        facts = store_facts(path)
        facts["returned"] = int(n)
        if "schema" in facts:
            rs = RaggedDataset(path)
            got = rs[:]
            facts["read"] = [[str(r.dtype), list(r.shape), sha(r.tobytes())] for r in got]
            rs.close()
        out[name] = facts
    return out


@case
def converters_from_iterator_bytes_list():
    path = WORK / "it_bytes"
    n = from_iterator(path, [b"abc", b"defgh", b"ij"], codec="raw")
    facts = store_facts(path)
    facts["returned"] = int(n)
    return facts


# --- datasets --------------------------------------------------------------------------------

INDEXES = {
    "int": 3,
    "np_int": np.int64(4),
    "neg_int": -1,
    "neg_int_first": -10,
    "slice": slice(2, 7),
    "slice_step": slice(1, None, 3),
    "slice_neg": slice(-3, None),
    "slice_rev": slice(None, None, -2),
    "slice_rev_bounds": slice(8, 2, -3),
    "slice_empty": slice(5, 5),
    "slice_past_end": slice(7, 100),
    "list": [0, 5, 2],
    "list_dup": [9, 9, 0],
    "empty_list": [],
    "bool_mask": [bool(i % 3 == 0) for i in range(10)],
    "ndarray_i64": np.array([1, 1, 9, 0], dtype=np.int64),
    "ndarray_u64": np.array([8, 3], dtype=np.uint64),
    "ndarray_i32": np.array([4, 2], dtype=np.int32),
    "bool_ndarray": np.arange(10) > 6,
}


def _describe(v):
    if isinstance(v, list):
        return {"list": [_describe(x) for x in v]}
    v = np.asarray(v)
    return {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.tolist()}


def index_all(ds):
    """``ds[idx]`` for every index form of INDEXES: the value, or the error it raised."""
    out = {}
    for name, idx in INDEXES.items():
        try:
            out[name] = _describe(ds[idx])
        except Exception as e:
            out[name] = err(e)
    return out


@case
def dense_indexing():
    x = (np.arange(30, dtype=np.int32) * 3 - 7).reshape(10, 3)
    from_numpy(WORK / "idx_dense", x)
    ds = DenseDataset(WORK / "idx_dense")
    out = {"len": len(ds), **index_all(ds)}
    out["getitems_list"] = _describe(ds.__getitems__([3, 1]))
    out["getitems_array"] = _describe(ds.__getitems__(np.array([7, 0, 7], dtype=np.uint64)))
    out["out_of_range"] = None
    try:
        ds[10]
    except Exception as e:
        out["out_of_range"] = err(e)
    return out


@case
def ragged_indexing():
    seqs = [np.arange(1 + i % 4, dtype=np.int16) + 10 * i for i in range(10)]
    from_iterator(WORK / "idx_ragged", seqs)
    rs = RaggedDataset(WORK / "idx_ragged")
    out = {"len": len(rs), **index_all(rs)}
    out["getitems_list"] = _describe(rs.__getitems__([3, 1]))
    out["pad"] = _describe(list(pad(rs[[0, 3, 5]], max_len=6, pad_value=-1)))
    return out


# --- sampler and loader ----------------------------------------------------------------------

@case
def sampler_sequential():
    out = {}
    for L, B in [(10, 4), (7, 3), (3, 5), (1, 1), (16, 16), (1000, 7), (5, 1)]:
        s = Sampler(L, B, 0, 99)
        steps = [s.next().tolist() for _ in range(12)]
        seeks = {}
        for k in [0, 1, 5, 17, 3, 100, 10**12, 2**62]:
            s.seek(k)
            seeks[str(k)] = [s.next().tolist(), s.next().tolist()]
        out[f"{L}x{B}"] = {"steps": steps, "seeks": seeks}
    # the seed does not matter in SEQUENTIAL mode
    out["seed_ignored"] = Sampler(10, 4, 0, 1).next().tolist() == Sampler(10, 4, 0, 12345).next().tolist()
    return out


@case
def sampler_random():
    out = {}
    for L, B in [(10, 4), (7, 3), (3, 5), (100, 10), (10, 1)]:
        for mode in (1, 2):
            for seed in (1, 42):
                s = Sampler(L, B, mode, seed)
                steps = [s.next().tolist() for _ in range(24)]
                s.seek(13)
                again = s.next().tolist()
                s2 = Sampler(L, B, mode, seed)
                out[f"{L}x{B}m{mode}s{seed}"] = {
                    "steps": steps,
                    "seek13": again,
                    "fresh_same": [s2.next().tolist() for _ in range(24)] == steps,
                }
    return out


@case
def loader_sequential_one_worker():
    x = (np.arange(50 * 6, dtype=np.float32) / 7).reshape(50, 6)
    y = np.arange(50, dtype=np.int64) * 11
    from_numpy(WORK / "ld_x", x)
    from_numpy(WORK / "ld_y", y, codec="raw")
    loader = DataLoader(
        {"x": DenseDataset(WORK / "ld_x"), "y": DenseDataset(WORK / "ld_y")}, num_workers=1, batch_size=8, mode=0
    )
    batches = []
    for _ in range(9):
        b = next(loader)
        batches.append({k: _describe(v) for k, v in sorted(b.items())})
    loader.close()
    loader = DataLoader(
        {"y": DenseDataset(WORK / "ld_y")},
        num_workers=1,
        batch_size=5,
        mode=0,
        prefetch_size=2,
        transform=lambda b: {"y2": b["y"] * 2, "n": int(len(b["y"]))},
    )
    transformed = []
    for _ in range(4):
        b = next(loader)
        transformed.append({"y2": b["y2"].tolist(), "n": b["n"]})
    loader.close()
    return {"batches": batches, "transformed": transformed}


# --- errors ----------------------------------------------------------------------------------

def _errors():
    from_numpy(WORK / "e_dense", np.arange(40, dtype=np.uint8).reshape(10, 4), codec="raw")
    from_iterator(WORK / "e_ragged", [np.arange(3, dtype=np.int32)] * 4)
    (WORK / "e_file").write_text("not a directory")
    (WORK / "e_garbage").mkdir(exist_ok=True)
    (WORK / "e_garbage" / "meta.zr").write_bytes(b"GARBAGE!" * 4)
    (WORK / "e_version").mkdir(exist_ok=True)
    (WORK / "e_version" / "meta.zr").write_bytes(b"ZREC" + (4).to_bytes(2, "little") + bytes(10))
    (WORK / "e_noschema").mkdir(exist_ok=True)
    z = Zrecord(WORK / "e_dense")
    u8 = lambda n: np.zeros(n, dtype=np.uint8)  # noqa: E731
    u64 = lambda *v: np.array(v, dtype=np.uint64)  # noqa: E731
    ds = DenseDataset(WORK / "e_dense")
    return {
        "gather_index_out_of_range": lambda: z.gather(u64(10), u8(4), u64(0)),
        "gather_huge_index": lambda: z.gather(u64(2**40), u8(4), u64(0)),
        "lengths_index_out_of_range": lambda: z.lengths(u64(3, 10)),
        "delete_index_out_of_range": lambda: z.delete(u64(10)),
        "dense_index_out_of_range": lambda: ds[10],
        "dense_list_out_of_range": lambda: ds[[0, 10]],
        "ragged_index_out_of_range": lambda: RaggedDataset(WORK / "e_ragged")[4],
        "append_over_1mib": lambda: z.append(u8((1 << 20) + 1), u64(0)),
        "append_zero_length_record": lambda: z.append(u8(8), u64(0, 4, 4)),
        "append_offset_past_src": lambda: z.append(u8(8), u64(0, 9)),
        "append_zstd_dict_without_dict": lambda: z.append(u8(64), u64(0), "zstd_dict"),
        "gather_dst_too_small": lambda: z.gather(u64(0, 1), u8(7), u64(0, 4)),
        "gather_dst_not_contiguous": lambda: z.gather(u64(0), u8(16)[::2], u64(0)),
        "append_src_not_contiguous": lambda: z.append(u8(16)[::2], u64(0)),
        "zrecord_bad_codec": lambda: Zrecord(WORK / "e_codec", codec="lz4"),
        "zrecord_on_regular_file": lambda: Zrecord(WORK / "e_file"),
        "zrecord_garbage_meta": lambda: Zrecord(WORK / "e_garbage"),
        "zrecord_newer_version": lambda: Zrecord(WORK / "e_version"),
        "dense_missing_schema": lambda: DenseDataset(WORK / "e_noschema"),
        "dense_missing_path": lambda: DenseDataset(WORK / "e_nothing_here"),
        "dense_on_ragged_store": lambda: DenseDataset(WORK / "e_ragged"),
        "ragged_on_dense_store": lambda: RaggedDataset(WORK / "e_dense"),
        "from_numpy_bad_codec": lambda: from_numpy(WORK / "e_c1", np.zeros((2, 2)), codec="lz4"),
        "from_iterator_bad_codec": lambda: from_iterator(WORK / "e_c2", [np.zeros(2)], codec="lz4"),
        "from_numpy_over_1mib": lambda: from_numpy(WORK / "e_big", np.zeros((1, (1 << 20) + 1), dtype=np.uint8)),
        "from_iterator_over_1mib": lambda: from_iterator(WORK / "e_big2", [np.zeros((1 << 20) + 1, dtype=np.uint8)]),
        "from_numpy_not_ndarray": lambda: from_numpy(WORK / "e_list", [[1, 2], [3, 4]]),
        "from_numpy_0d": lambda: from_numpy(WORK / "e_0d", np.array(3)),
        "from_numpy_other_dtype": lambda: from_numpy(WORK / "e_dense", np.zeros((2, 4), dtype=np.int16)),
        "from_numpy_other_shape": lambda: from_numpy(WORK / "e_dense", np.zeros((2, 5), dtype=np.uint8)),
        "pad_empty": lambda: pad([]),
        "pad_over_max_len": lambda: pad([np.arange(5)], max_len=3),
        "loader_len": lambda: len(DataLoader({"x": ds}, num_workers=1, batch_size=2)),
        "loader_no_streams": lambda: DataLoader({}),
        "loader_unequal_streams": lambda: DataLoader({"a": ds, "b": DenseDataset(WORK / "np_u8_raw")}),
    }


def run_errors():
    out = {}
    loaders = []
    for name, fn in _errors().items():
        try:
            r = fn()
            if isinstance(r, DataLoader):
                loaders.append(r)
            out[name] = {"ok": True}
        except Exception as e:
            out[name] = err(e)
    return out


OUT["errors"] = run_errors()

print(json.dumps(OUT))
sys.stdout.flush()
os._exit(0)  # the reference's loaders can linger in daemon threads; do not wait for them
