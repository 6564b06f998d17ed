"""What the property tests of the public Python API (py/tests/test_properties_<api>.py, one module
per API) check, and what they share: the Hypothesis profile, the outcome checks, small models of
each call, the argument strategies and the read-only stores (the ``stores`` fixture of conftest.py).

Whatever is thrown at the public Python API, the answer is a result or a Python exception, never a
crash, and a failed call loses nothing.

Hypothesis (a derandomized profile, so CI runs the same examples every time) throws wrong types,
shapes, indices, dtypes, buffers and codecs at Zrecord (constructor, lengths, gather, append,
delete, train_dict), Sampler, from_numpy / from_iterator, DenseDataset / RaggedDataset / pad and
DataLoader. The properties:

* Every call returns, or raises an ``Exception`` subclass: a builtin ValueError / TypeError /
  IndexError / OverflowError or a loaderx ``ZrecordError``. Never a ``BaseException`` that is not an
  Exception (a Rust panic reaching Python), and never the death of the interpreter: the calls run
  in-process, so a crash takes the test run down with it and cannot pass unnoticed.
* Where the API documents the outcome, it is that outcome. Valid input gives the right data (a
  small model of each call says what that is). An out-of-range integer index is an IndexError. A
  failed gather leaves ``dst`` untouched.
* After a failed call, the store reads back exactly what it held before. Zrecord calls validate
  before they write, so their store's files are byte-for-byte unchanged too. A converter that
  fails on a new path leaves no directory behind.

Three kinds of call are not run in-process, because they would take the whole process down or
exhaust the machine: a Sampler/DataLoader batch of more than 4096 indices, a pad to a length that
could really be allocated, and a dictionary target between 64 KiB and 2**62. The defects they
found (all fixed) have regression tests at the end of each API's module. The generic properties
leave those cases to them, each with a pointer.
"""

import contextlib
import operator
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _lxhelpers import read_records, snapshot, worker_threads
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import ZrecordError
from loaderx.sampler import Sampler
from loaderx.zrecord import CODECS, MAX_RECORD_LEN, Zrecord

settings.register_profile(
    "loaderx-bad-input",
    derandomize=True,  # the same examples on every run: CI is reproducible
    database=None,  # and nothing is written into the repository
    deadline=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
PROFILE = settings.get_profile("loaderx-bad-input")


def budget(max_examples):
    """The module's profile with ``max_examples`` (sized so the module runs in well under a minute)."""
    return settings(PROFILE, max_examples=max_examples)


#: What a bad argument may raise.
API_ERRORS = (ZrecordError, ValueError, TypeError, IndexError, OverflowError)
#: Largest Sampler / DataLoader batch the tests draw in-process (bigger ones: test_properties_sampler.py, at its end).
SAFE_BATCH = 4096
#: Every record of the read-only stores fits in a slot of this many bytes.
SLOT = 4096


# --- outcomes -------------------------------------------------------------------------------

def attempt(call, allowed=API_ERRORS):
    """``("ok", value)`` or ``("error", exception)``. Fails the test for an exception outside
    ``allowed``, and for a BaseException that is not an Exception (a Rust panic)."""
    try:
        return "ok", call()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        assert isinstance(e, allowed), f"unexpected exception type {type(e).__module__}.{type(e).__qualname__}: {e}"
        return "error", e
    except BaseException as e:  # noqa: B036 - exactly what the property is about
        pytest.fail(f"{type(e).__module__}.{type(e).__qualname__} is not an Exception subclass: {e}")


def tally(label, outcome, value):
    """Counts outcomes in Hypothesis' statistics (``--hypothesis-show-statistics``)."""
    event(f"{label}: {outcome}" + (f" {type(value).__name__}" if outcome == "error" else ""))


@contextlib.contextmanager
def scratch():
    """A fresh temporary directory for one example (not under tmp_path: nothing to export)."""
    with tempfile.TemporaryDirectory(prefix="lx-prop-") as d:
        yield Path(d)


def records_at(path):
    """The records of the store at ``path``, through a handle of its own."""
    with Zrecord(path) as z:
        return read_records(z)


def assert_records(path, expected, what="the store"):
    got = records_at(path)
    assert got == list(expected), f"{what} does not read back as expected: {len(got)} vs {len(expected)} records"


def wait_no_worker_threads():
    deadline = time.monotonic() + 3.0
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not worker_threads(), f"DataLoader threads outlived close(): {worker_threads()}"


# --- models of the arguments ----------------------------------------------------------------

def as_int_list(x):
    """The integers ``x`` stands for when it is an int, a NumPy integer, a flat list/tuple of
    those or a 1-D integer array; None otherwise (bools included: whether True is 1 or a mask is
    not documented)."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return [int(x)]
    if isinstance(x, (list, tuple)):
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in x):
            return [int(v) for v in x]
        return None
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "iu":
        return [int(v) for v in x]
    return None


def numpy_keeps_integers(x):
    """False when ``np.asarray`` turns these integers into floats or objects: a list mixing
    values of int64 and uint64 range, or a value outside 64 bits. The library rejects those with
    TypeError instead of treating them as integers (see test_properties_zrecord.py,
    test_out_of_range_integer_indices...)."""
    try:
        a = np.asarray(x)
    except Exception:
        return False
    return a.size == 0 or a.dtype.kind in "iu"


class Want(NamedTuple):
    """What the documentation says an index argument must give."""

    kind: str  # "valid", "out_of_range", "must_raise" or "any" (not documented)
    norm: tuple = ()  # the indices, negatives counted from the end, when valid
    scalar: bool = False  # a single int (a dataset returns one item, not a batch)
    numpy_ints: bool = True  # False: NumPy promotes the integers to float/object (known defect)


def want_indices(idx, n, masks=False):
    """The documented outcome of indexing ``n`` records with ``idx``. ``masks``: a boolean array
    of shape (n,) selects (datasets); any other boolean array must raise."""
    if masks and not isinstance(idx, (bool, np.bool_)):
        try:
            a = np.asarray(idx) if isinstance(idx, (list, tuple, np.ndarray)) else None
        except Exception:
            a = None
        if a is not None and a.dtype == np.bool_ and a.size:
            if a.shape == (n,):
                return Want("valid", tuple(int(i) for i in np.flatnonzero(a)))
            return Want("must_raise")
    ints = as_int_list(idx)
    if ints is None:
        return Want("any")
    norm = tuple(i + n if i < 0 else i for i in ints)
    scalar = isinstance(idx, (int, np.integer))
    keeps = numpy_keeps_integers(idx)
    if all(0 <= i < n for i in norm):
        return Want("valid", norm, scalar, keeps)
    return Want("out_of_range", (), scalar, keeps)


def check_index_outcome(outcome, value, want):
    """Asserts the documented part of an indexing outcome. True when the caller should compare
    the returned data against the model."""
    if want.kind == "valid":
        if outcome == "error" and isinstance(value, TypeError) and not want.numpy_ints:
            return False  # known defect, pinned by test_out_of_range_integer_indices...
        assert outcome == "ok", f"valid indices {list(want.norm)} raised {type(value).__name__}: {value}"
        return True
    if want.kind == "out_of_range":
        assert outcome == "error", "out-of-range indices were accepted"
        if not want.numpy_ints and isinstance(value, TypeError):
            return False  # known defect, pinned by test_out_of_range_integer_indices...
        assert isinstance(value, IndexError), f"out of range must be IndexError, got {type(value).__name__}: {value}"
    if want.kind == "must_raise":
        assert outcome == "error", "an invalid argument was accepted"
    return False


def codec_valid(codec):
    return isinstance(codec, str) and codec in CODECS


def bytes_of(src):
    """What the library reads from ``src`` (a C-contiguous array or bytes-like object), or None
    when it must refuse it."""
    if isinstance(src, np.ndarray):
        if not src.flags.c_contiguous or src.dtype.hasobject:
            return None
        return src.tobytes()
    if isinstance(src, (bytes, bytearray)):
        return bytes(src)
    if isinstance(src, memoryview):
        return src.tobytes() if src.c_contiguous else None
    return None


def writable_nbytes(dst):
    """How many bytes the library may write into ``dst``, or None when it must refuse it."""
    if isinstance(dst, np.ndarray):
        ok = dst.flags.c_contiguous and dst.flags.writeable and not dst.dtype.hasobject
        return dst.nbytes if ok else None
    if isinstance(dst, bytearray):
        return len(dst)
    if isinstance(dst, memoryview):
        return dst.nbytes if (dst.c_contiguous and not dst.readonly) else None
    return None


def as_index(v):
    try:
        return operator.index(v)
    except TypeError:
        return None


# --- strategies -----------------------------------------------------------------------------

HUGE = [2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**100, -(2**31), -(2**63), -(2**63) - 1, -(2**64)]
any_int = st.one_of(st.integers(-30, 30), st.sampled_from(HUGE), st.integers())
INT_DTYPES = ["i1", "i2", "<i4", ">i4", "i8", "u1", "u2", "u4", "<u8", ">u8"]
OTHER_DTYPES = ["f2", "f4", "f8", "c8", "?", "U3", "S2", "M8[s]", "m8[s]", "V4", "O", [("a", "<i4"), ("b", "u1")]]


@st.composite
def np_arrays(draw, dtypes, max_dims=3, max_side=4, near=None, min_dims=0):
    """Arrays of a dtype from ``dtypes``; integer arrays mostly hold values in ``near`` (a range),
    the rest any bytes. Object arrays hold ints, None and strings."""
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side))
    size = int(np.prod(shape))
    if dt.hasobject:
        a = np.empty(size, dtype=object)
        values = st.lists(st.one_of(any_int, st.none(), st.text(max_size=2)), min_size=size, max_size=size)
        for k, v in enumerate(draw(values)):
            a[k] = v
    elif dt.kind in "iu" and near is not None and draw(st.booleans()):
        vals = draw(st.lists(st.integers(*near), min_size=size, max_size=size))
        a = np.array(vals, dtype=np.int64).astype(dt)  # negatives wrap for unsigned dtypes
    else:
        a = np.frombuffer(draw(st.binary(min_size=size * dt.itemsize, max_size=size * dt.itemsize)), dtype=dt).copy()
    return a.reshape(shape)


def index_like(n, slices=False):
    """Anything a caller might pass as indices into ``n`` records."""
    near = st.integers(-n - 3, n + 3)
    options = [
        near,
        any_int,
        st.lists(near, max_size=6),
        st.lists(any_int, max_size=4),
        st.tuples(near, near),
        st.builds(np.int64, near),
        st.builds(np.uint64, st.integers(0, n + 3)),
        st.builds(np.int8, st.integers(-100, 100)),
        np_arrays(INT_DTYPES, max_dims=1, near=(-n - 2, n + 2)),
        np_arrays(INT_DTYPES + OTHER_DTYPES, near=(-n - 2, n + 2)),
        st.floats(),
        st.lists(st.floats(), max_size=3),
        st.text(max_size=3),
        st.binary(max_size=3),
        st.none(),
        st.booleans(),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.booleans(), max_size=n + 2),
        st.lists(st.lists(near, max_size=3), max_size=3),
        st.lists(st.one_of(near, st.none(), st.text(max_size=1), st.floats()), max_size=3),
        st.lists(st.one_of(st.builds(np.int64, near), st.builds(np.uint64, st.integers(0, n))), max_size=3),
        st.just(Ellipsis),
        st.sets(near, max_size=3),
        st.dictionaries(near, near, max_size=2),
    ]
    if slices:
        bound = st.one_of(st.none(), near, st.sampled_from(HUGE))
        options += [
            st.builds(slice, bound, bound, st.one_of(st.none(), st.integers(-4, 4), st.sampled_from(HUGE))),
            st.builds(slice, st.one_of(st.floats(), st.text(max_size=1)), bound),
        ]
    return st.one_of(*options)


codec_like = st.one_of(
    st.sampled_from(sorted(CODECS)),
    st.sampled_from(["", "ZSTD", "lz4", "raw ", "zstd\x00", b"raw", 0, 1, 2, -1, None, [], ["raw"], {}, 1.0, True, False]),
    st.builds(np.str_, st.sampled_from(sorted(CODECS))),
    st.text(max_size=5),
)


@st.composite
def src_like(draw):
    """A source buffer for append / train_dict: mostly bytes-like, sometimes not."""
    kind = draw(st.sampled_from(
        ["u8", "u8", "u8", "typed", "noncontig", "readonly", "bytes", "bytearray", "memoryview",
         "memoryview_strided", "object", "list", "str", "none", "int", "empty", "big"]
    ))
    data = draw(st.binary(max_size=600))
    if kind == "u8":
        return np.frombuffer(data, np.uint8).copy()
    if kind == "typed":
        return draw(np_arrays([d for d in INT_DTYPES + OTHER_DTYPES if d != "O"]))
    if kind == "noncontig":
        return np.frombuffer(data + b"\0\0", np.uint8).copy()[::2]
    if kind == "readonly":
        a = np.frombuffer(data, np.uint8).copy()
        a.setflags(write=False)
        return a
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "memoryview_strided":
        return memoryview(data + b"\0\0")[::2]
    if kind == "object":
        return np.array([1, None, "x"], dtype=object)
    if kind == "list":
        return list(data[:8])
    if kind == "str":
        return data.hex()
    if kind == "none":
        return None
    if kind == "int":
        return 7
    if kind == "empty":
        return np.zeros(0, np.uint8)
    return np.zeros(MAX_RECORD_LEN + 1 + draw(st.integers(0, 3)), np.uint8)  # "big"


def offsets_for(nbytes):
    """Offsets into a source of ``nbytes`` bytes: mostly sorted positions inside it, sometimes
    anything."""
    inside = st.integers(0, max(nbytes, 0) + 2)
    return st.one_of(
        st.lists(inside, min_size=1, max_size=5, unique=True).map(sorted),
        st.lists(inside, min_size=1, max_size=5, unique=True).map(sorted).map(lambda v: np.array(v, dtype=np.uint64)),
        st.lists(inside, max_size=5),
        st.lists(any_int, max_size=4),
        np_arrays(INT_DTYPES + OTHER_DTYPES, max_dims=2, near=(-2, nbytes + 2)),
        st.sampled_from([[], (), None, 0, 1.5, "0", [0.0], [[0]], [True], np.zeros((1, 1), np.uint64)]),
    )


@st.composite
def dst_like(draw):
    """A gather destination: writable or not, contiguous or not, of any dtype, or not a buffer."""
    kind = draw(st.sampled_from(
        ["u8", "u8", "u8", "typed", "noncontig", "fortran", "readonly", "bytearray", "bytes",
         "memoryview", "memoryview_ro", "memoryview_strided", "object", "list", "none", "str"]
    ))
    nbytes = draw(st.integers(0, 3 * SLOT))
    if kind == "u8":
        return np.full(nbytes, 0xAB, np.uint8)
    if kind == "typed":
        dt = np.dtype(draw(st.sampled_from(["<f4", ">i2", "u8", "c16", "?", "U2", "M8[s]", "V3"])))
        return np.frombuffer(b"\xab" * (nbytes // dt.itemsize * dt.itemsize), dtype=dt).copy()
    if kind == "noncontig":
        return np.full(2 * nbytes + 2, 0xAB, np.uint8)[::2]
    if kind == "fortran":
        return np.full((max(nbytes // 8, 2), 8), 0xAB, np.uint8, order="F")
    if kind == "readonly":
        a = np.full(nbytes, 0xAB, np.uint8)
        a.setflags(write=False)
        return a
    if kind == "bytearray":
        return bytearray(b"\xab" * nbytes)
    if kind == "bytes":
        return b"\xab" * nbytes
    if kind == "memoryview":
        return memoryview(bytearray(b"\xab" * nbytes))
    if kind == "memoryview_ro":
        return memoryview(b"\xab" * nbytes)
    if kind == "memoryview_strided":
        return memoryview(bytearray(b"\xab" * (2 * nbytes + 2)))[::2]
    if kind == "object":
        return np.full(max(nbytes // 8, 1), None, dtype=object)
    if kind == "list":
        return [0] * 8
    if kind == "none":
        return None
    return "x" * 8


@st.composite
def one_bad(draw, good, bad):
    """Keyword arguments drawn from ``good`` (name -> strategy), then, in most examples, one of
    them replaced by a draw from ``bad`` (name -> strategy): mostly valid calls with one wrong
    argument, so each check is reached."""
    kwargs = {name: draw(strategy, label=name) for name, strategy in good.items()}
    which = draw(st.sampled_from([None] + sorted(bad) * 2), label="bad argument")
    if which is not None:
        kwargs[which] = draw(bad[which], label=f"bad {which}")
    return kwargs


def dst_bytes(dst):
    """The current content of a destination, for "nothing was written" checks."""
    if isinstance(dst, np.ndarray):
        return dst.tobytes() if not dst.dtype.hasobject else None
    if isinstance(dst, (bytes, bytearray, memoryview)):
        return bytes(dst)
    return None


# --- stores ---------------------------------------------------------------------------------

def record_bytes(i, size):
    """Deterministic, compressible content of record ``i``."""
    return (((np.arange(size, dtype=np.int64) * (i % 5 + 1)) // 3 + i * 7) % 251).astype(np.uint8).tobytes()


#: Records of the read-only Zrecord store: 1 byte .. 3000 bytes, raw, zstd and zstd_dict.
BARE_SIZES = [1, 3, 8, 24, 25, 40, 100, 257, 300, 1000, 2000, 3000]
#: Two records the mutating tests start from.
BASE = [b"alpha record", bytes(30)]


def packed(records):
    src = np.frombuffer(b"".join(records), np.uint8)
    offsets = np.zeros(len(records), np.uint64)
    offsets[1:] = np.cumsum([len(r) for r in records[:-1]])
    return src, offsets


def fresh_store(path, records=BASE, codec="zstd"):
    with Zrecord(path, codec=codec) as z:
        if records:
            z.append(*packed(list(records)))
    return path


class Stores(NamedTuple):
    bare: Path
    z: Zrecord
    records: list
    bare_snapshot: dict
    dense_path: Path
    dense: DenseDataset
    rows: np.ndarray
    labels: DenseDataset
    ragged_path: Path
    ragged: RaggedDataset
    seqs: list

    def __repr__(self):  # keep Hypothesis' falsifying-example reports short
        return f"Stores({self.bare.parent})"


def read_only_stores():
    """Read-only stores shared by the read tests (the ``stores`` fixture of conftest.py): a bare Zrecord with all three codecs, a dense
    uint8 (12, 40) dataset with int64 labels, and a ragged int32 dataset of 9 records."""
    with tempfile.TemporaryDirectory(prefix="lx-prop-") as d:
        d = Path(d)
        records = [record_bytes(i, s) for i, s in enumerate(BARE_SIZES)]
        with Zrecord(d / "bare", codec="raw") as z:
            z.append(*packed(records[:4]))
            z.append(*packed(records[4:8]), codec="zstd")
            z.train_dict(np.frombuffer(b"".join(records * 3), np.uint8), [len(r) for r in records * 3], 4096)
            z.append(*packed(records[8:]), codec="zstd_dict")
        rows = (np.arange(12 * 40).reshape(12, 40) * 7 // 3 % 256).astype(np.uint8)
        from_numpy(d / "dense", rows, codec="zstd")
        from_numpy(d / "labels", np.arange(12, dtype=np.int64) * 11, codec="raw")
        seqs = [np.arange(1 + i % 5, dtype=np.int32) * (i + 1) for i in range(9)]
        from_iterator(d / "ragged", seqs, codec="zstd")
        z = Zrecord(d / "bare")
        assert read_records(z) == records
        ds, labels, rs = DenseDataset(d / "dense"), DenseDataset(d / "labels"), RaggedDataset(d / "ragged")
        try:
            yield Stores(d / "bare", z, records, snapshot(d / "bare"), d / "dense", ds, rows, labels, d / "ragged", rs, seqs)
        finally:
            for h in (z, ds, labels, rs):
                h.close()


def assert_read_only_stores_intact(s):
    assert read_records(s.z) == s.records, "the bare store no longer reads back as before"
    assert snapshot(s.bare) == s.bare_snapshot, "a read call changed the bare store's files"
    assert s.dense[:].tobytes() == s.rows.tobytes()
    assert [r.tolist() for r in s.ragged[:]] == [q.tolist() for q in s.seqs]


# --- Sampler and DataLoader arguments ----------------------------------------------------

uint_arg = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([2**32, 2**63, 2**64 - 1, 2**64, 2**70, -(2**64)]),
    st.floats(),
    st.text(max_size=2),
    st.none(),
    st.booleans(),
    st.builds(np.int64, st.integers(-3, 70)),
    st.builds(np.uint8, st.integers(0, 70)),
    st.just(np.float32(3)),
)


mode_arg = st.one_of(
    st.integers(-2, 5),
    st.sampled_from(list(Sampler.Mode) + [255, 2**64, "0", "IID", "cyclic", "epoch", None, 1.0, np.int8(2), True]),
)



def mode_value(mode):
    """The mode the documentation says ``mode`` names: a name (any case), a Mode or its number;
    None for anything else (bools and floats included)."""
    if isinstance(mode, str):
        return {"SEQUENTIAL": 0, "IID": 1, "CYCLIC": 2}.get(mode.upper())
    if isinstance(mode, (bool, float)):
        return None
    return as_index(mode)



def sampler_args_valid(length, batch, mode, seed):
    L, B, S = (as_index(v) for v in (length, batch, seed))
    M = mode_value(mode)
    return (
        L is not None and 1 <= L < 2**64 and B is not None and 1 <= B < 2**64
        and M in (0, 1, 2) and S is not None and 0 <= S < 2**64
    )
