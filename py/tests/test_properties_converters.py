"""from_numpy and from_iterator under any array, records, codec, chunk size and schema: the store
reads back what was given, or a Python exception leaves nothing behind (no new directory, an
existing store unchanged).

The shared properties, profile and strategies are in _strategies.py.
"""

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _strategies import (
    API_ERRORS,
    attempt,
    budget,
    codec_like,
    codec_valid,
    np_arrays,
    one_bad,
    records_at,
    scratch,
    tally,
)
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import MAX_RECORD_LEN

# --- converters -----------------------------------------------------------------------------

ARRAY_DTYPES = ["u1", "i2", "<f4", ">i4", "f2", "c8", "?", "U2", "S3", "M8[s]", "m8[ms]", "V3", "O",
                [("a", "<i4"), ("b", "u1")]]


@st.composite
def array_like(draw):
    kind = draw(st.sampled_from(["array"] * 6 + ["noncontig", "zero_items", "big_items", "list", "none", "bytes", "scalar"]))
    if kind == "array":
        return draw(np_arrays(ARRAY_DTYPES, max_dims=3, max_side=5))
    if kind == "noncontig":
        return draw(np_arrays(["u1", "<i4", "f8"], max_dims=2, max_side=6)).T
    if kind == "zero_items":
        return np.zeros((draw(st.integers(0, 3)), 0, 2), np.uint8)
    if kind == "big_items":
        return np.zeros((2, MAX_RECORD_LEN + 1), np.uint8)
    if kind == "list":
        return [[1, 2], [3, 4]]
    if kind == "none":
        return None
    if kind == "bytes":
        return b"\x01\x02"
    return np.int32(7)


def from_numpy_must_succeed(array, codec, chunk_bytes, schema, onto_existing):
    """True/False when the documentation decides, None when it does not (zstd_dict training on
    a few bytes may or may not succeed)."""
    if not codec_valid(codec) or not isinstance(array, np.ndarray) or array.ndim < 1 or array.dtype.hasobject:
        return False
    if array.dtype.names is not None:  # structured: refused, its field names would be lost
        return False
    itemsize = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
    if not 0 < itemsize <= MAX_RECORD_LEN:
        return False
    try:
        int(chunk_bytes)
        schema is None or dict(schema)
    except Exception:
        return False
    if onto_existing and (schema is not None or array.dtype.str != "|u1" or array.shape[1:] != (4,)):
        return False
    if codec == "zstd_dict" and len(array):
        return None
    return True


schema_like = st.one_of(st.none(), st.none(), st.sampled_from([{}, {"note": "hi"}, {"kind": "ragged"}, 5, [1], "str"]))
chunk_like = st.one_of(st.just(64 << 20), st.integers(-5, 64), st.sampled_from([2**70, "12", "x", None, 2.5]))
dict_size_like = st.one_of(st.none(), st.integers(-2, 1 << 15), st.sampled_from([2**62, "x", 1.5]))


FROM_NUMPY_GOOD = {
    "array": np_arrays([d for d in ARRAY_DTYPES if d != "O"], max_dims=3, max_side=5, min_dims=1),
    "codec": st.sampled_from(["raw", "zstd", "zstd", "zstd_dict"]),
    "chunk_bytes": st.one_of(st.just(64 << 20), st.integers(1, 64)),
    "dict_size": st.one_of(st.none(), st.integers(256, 1 << 15)),
    "schema": st.none(),
    "onto_existing": st.booleans(),
    "fit_existing": st.booleans(),  # reshape the array's bytes to the existing store's uint8 (n, 4)
}
FROM_NUMPY_BAD = {"array": array_like(), "codec": codec_like, "chunk_bytes": chunk_like, "dict_size": dict_size_like,
                  "schema": schema_like}


@budget(120)
@given(args=one_bad(FROM_NUMPY_GOOD, FROM_NUMPY_BAD))
def test_from_numpy_with_any_array(args):
    array, codec, chunk_bytes, dict_size, schema, onto_existing = (args[k] for k in (
        "array", "codec", "chunk_bytes", "dict_size", "schema", "onto_existing"))
    if onto_existing and args["fit_existing"] and isinstance(array, np.ndarray) and not array.dtype.hasobject:
        raw = array.tobytes()
        array = np.frombuffer(raw[: len(raw) // 4 * 4], np.uint8).reshape(-1, 4)
    old = np.arange(12, dtype=np.uint8).reshape(3, 4)
    with scratch() as d:
        path = d / ("old" if onto_existing else "new")
        if onto_existing:
            from_numpy(path, old, codec="raw")
            schema_bytes = (path / "schema.msgpack").read_bytes()
        must = from_numpy_must_succeed(array, codec, chunk_bytes, schema, onto_existing)
        outcome, value = attempt(lambda: from_numpy(path, array, codec=codec, chunk_bytes=chunk_bytes,
                                                     dict_size=dict_size, schema=schema, progress=False))
        tally("from_numpy", outcome, value)
        assert must is None or (outcome == "ok") == must, f"from_numpy: {outcome} {value!r}"
        if outcome == "ok":
            assert value == len(array)
            flat = np.ascontiguousarray(array)
            rows = [flat[i : i + 1].tobytes() for i in range(len(flat))]  # slices keep the byte order
            assert records_at(path) == ([r.tobytes() for r in old] if onto_existing else []) + rows
            if schema is None:  # an inferred schema: the dataset reads the array back
                with DenseDataset(path) as ds:
                    got = ds[:]
                    want = (old.tobytes() if onto_existing else b"") + b"".join(rows)
                    assert got.tobytes() == want and got.shape[1:] == array.shape[1:]
                    assert ds.dtype.str == array.dtype.str
        elif onto_existing:
            with DenseDataset(path) as ds:
                assert ds[:].tobytes() == old.tobytes(), "a failed from_numpy changed the existing store"
            assert (path / "schema.msgpack").read_bytes() == schema_bytes
        else:
            assert not path.exists(), f"a failed from_numpy ({type(value).__name__}) left {sorted(os.listdir(path))}"


def _raising(items, at):
    for k, item in enumerate(items):
        if k == at:
            raise RuntimeError("the source broke")
        yield item


record_like = st.one_of(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6).map(lambda v: np.array(v, np.int32)),
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6).map(lambda v: np.array(v, np.int32)),
    np_arrays(["<i4", "u1", "f8", "<i8", "O", "U2"], max_dims=2, max_side=3),
    st.binary(max_size=8),
    st.binary(min_size=1, max_size=8).map(bytearray),
    st.binary(min_size=1, max_size=8).map(memoryview),
    st.sampled_from([None, 5, 2.5, "ab", {"a": 1}, [[1], [1, 2]], [1, 2], np.zeros(0, np.int32),
                     np.zeros(MAX_RECORD_LEN // 4 + 1, np.int32), np.zeros((2, 2), np.int32)]),
)


def record_bytes_model(record):
    if isinstance(record, (bytes, bytearray, memoryview)):
        return bytes(record)
    return np.ascontiguousarray(np.asarray(record)).tobytes()


@budget(120)
@given(records=st.lists(record_like, max_size=6), shape=st.sampled_from(["list", "generator", "raises", "tuple"]),
       other=st.sampled_from([None, None, None, None, b"one record", 5, "abc"]),
       onto_existing=st.booleans(), chunk_bytes=st.sampled_from([64 << 20, 16, 1]), codec=codec_like)
def test_from_iterator_with_any_records(records, shape, other, onto_existing, chunk_bytes, codec):
    old = [np.arange(1 + i, dtype=np.int32) * 3 for i in range(4)]
    raises = False
    if other is not None:  # a source that is not a list of records
        source = other
        items = [other] if isinstance(other, bytes) else list(other) if isinstance(other, str) else None
    elif shape == "list":
        source, items = list(records), list(records)
    elif shape == "tuple":
        source, items = tuple(records), list(records)
    elif shape == "generator":
        source, items = iter(records), list(records)
    else:
        at = len(records) // 2
        raises = at < len(records)
        source, items = _raising(records, at), records[:at]
    with scratch() as d:
        path = d / ("old" if onto_existing else "new")
        if onto_existing:
            from_iterator(path, old, codec="raw")
            before = records_at(path)
            schema_bytes = (path / "schema.msgpack").read_bytes()
        outcome, value = attempt(lambda: from_iterator(path, source, codec=codec, chunk_bytes=chunk_bytes, progress=False),
                                 allowed=API_ERRORS + (RuntimeError,))
        tally("from_iterator", outcome, value)
        if not codec_valid(codec) or raises or items is None:
            assert outcome == "error", f"from_iterator accepted codec {codec!r} / a source that raised / {other!r}"
        if outcome == "ok":
            got = records_at(path)
            if onto_existing:
                assert got[: len(old)] == before
            if not (items and items[0] is None):  # see test_from_iterator_does_not_drop_records_after_a_leading_none
                assert value == len(items), f"from_iterator wrote {value} of {len(items)} records"
                assert got[len(old) if onto_existing else 0 :] == [record_bytes_model(r) for r in items]
            mixes_bytes = isinstance(other, bytes) or any(isinstance(r, (bytes, bytearray, memoryview)) for r in items)
            if (path / "schema.msgpack").is_file() and not mixes_bytes:  # see test_from_iterator_refuses_bytes...
                # whatever was accepted must still read as the dataset the schema describes
                outcome, value = attempt(lambda: RaggedDataset(path)[:])
                assert outcome == "ok", f"after a successful from_iterator the dataset does not read: {value!r}"
        elif onto_existing:
            assert records_at(path) == before, "a failed from_iterator changed the existing records"
            assert (path / "schema.msgpack").read_bytes() == schema_bytes
            with RaggedDataset(path) as rs:
                assert [r.tolist() for r in rs[:]] == [o.tolist() for o in old]
        else:
            assert not path.exists(), f"a failed from_iterator ({type(value).__name__}) left a store behind"


# --- regressions: defects the properties above found (all fixed now); each docstring says what
# --- the defect was, and the test checks the fixed behaviour with its reproducer.

def test_from_iterator_does_not_drop_records_after_a_leading_none():
    """A None first record makes from_iterator treat the source as empty: it returns 0 and
    silently drops every record after it (``next(it, None)`` cannot tell None from the end).
    A None anywhere else raises TypeError."""
    with scratch() as d:
        records = [None, np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32)]
        outcome, value = attempt(lambda: from_iterator(d / "s", records, progress=False))
        written = records_at(d / "s") if (d / "s").exists() else None
        assert outcome == "error" or value == 3, f"from_iterator returned {value} for 3 items; the store holds {written}"


@pytest.mark.parametrize("onto_existing", [False, True], ids=["new", "existing"])
def test_converter_with_an_unserializable_schema_writes_nothing(onto_existing):
    """converter.py: everything that can be checked is checked before the first byte, and a
    failure rolls the store back. A ``schema=`` value msgpack cannot encode (a NumPy integer,
    as in ``item_shape=[np.int64(4)]``) raises TypeError only after the records were appended.
    On an existing store the records stay, so a retry duplicates them. A new store is left
    behind with data but no schema."""
    old = np.zeros((3, 4), np.uint8)
    with scratch() as d:
        path = d / "s"
        if onto_existing:
            from_numpy(path, old)
        outcome, value = attempt(lambda: from_numpy(path, np.ones((2, 4), np.uint8), progress=False,
                                                    schema={"dtype": "|u1", "item_shape": [np.int64(4)]}))
        if outcome == "error":
            if onto_existing:
                assert len(records_at(path)) == 3, f"{type(value).__name__} raised, but the records were appended"
            else:
                left = sorted(os.listdir(path)) if path.exists() else None
                assert left is None, f"{type(value).__name__} raised, but the store was left: {left}"


@pytest.mark.parametrize("case", ["bytes_after_int32", "bytes_onto_int32_store"])
def test_from_iterator_refuses_bytes_records_in_a_typed_store(case):
    """converter.py: "Array records must share their dtype and trailing shape (the first one sets
    them)", and a store that already has a schema is checked before anything is written. But
    bytes records skip both checks. ``[int32 array, b"\\x00"]`` writes an ``<i4`` schema over a
    1-byte record, and ``from_iterator(int32_store, b"abc")`` appends 3 bytes to it. Either way the
    call "succeeds" and RaggedDataset then fails on the record (or, for a multiple of 4 bytes,
    silently reads it as int32)."""
    with scratch() as d:
        path = d / "s"
        if case == "bytes_after_int32":
            call = lambda: from_iterator(path, [np.arange(3, dtype=np.int32), b"\x00"], progress=False)  # noqa: E731
        else:
            from_iterator(path, [np.arange(3, dtype=np.int32)], progress=False)
            call = lambda: from_iterator(path, b"abc", progress=False)  # noqa: E731
        outcome, value = attempt(call)
        if outcome == "ok":
            outcome, value = attempt(lambda: RaggedDataset(path)[:])
            assert outcome == "ok", f"from_iterator accepted the records, then the dataset fails: {value!r}"
