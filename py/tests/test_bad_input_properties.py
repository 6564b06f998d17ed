"""Property tests: whatever is thrown at the public Python API, the answer is a result or a Python
exception, never a crash, and a failed call loses nothing.

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
found (all fixed) have regression tests at the end of this module. The generic properties above leave those
cases to them, each with a pointer.
"""

import contextlib
import operator
import os
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _lxhelpers import OUR_PYTHON, run_python, snapshot, worker_threads
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset, pad
from loaderx.errors import BadArgumentError, ZrecordError
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
#: Largest Sampler / DataLoader batch the tests draw in-process (bigger ones crash, see the end).
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


def read_records(z):
    """Every record of an open Zrecord, as bytes, read one gather for all."""
    n = len(z)
    if n == 0:
        return []
    lens = z.lengths(np.arange(n, dtype=np.uint64)).astype(np.int64)
    offs = np.zeros(n, dtype=np.uint64)
    offs[1:] = np.cumsum(lens[:-1])
    buf = np.empty(int(lens.sum()), dtype=np.uint8)
    z.gather(np.arange(n, dtype=np.uint64), buf, offs)
    return [buf[int(o) : int(o) + int(k)].tobytes() for o, k in zip(offs, lens)]


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
    TypeError instead of treating them as integers (see test_out_of_range_integer_indices...)."""
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


@pytest.fixture(scope="module")
def stores():
    """Read-only stores shared by the read tests: a bare Zrecord with all three codecs, a dense
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


# --- Zrecord: reads -------------------------------------------------------------------------

@budget(300)
@given(idx=index_like(len(BARE_SIZES)))
@example(idx=[-1, 0, -12])
@example(idx=[12])
@example(idx=np.array([-13], np.int64))
@example(idx=2**63)
@example(idx=[2**64 - 1])
def test_lengths_and_gather_with_any_indices(stores, idx):
    z, recs = stores.z, stores.records
    want = want_indices(idx, len(recs))

    outcome, value = attempt(lambda: z.lengths(idx))
    tally(f"lengths ({want.kind})", outcome, value)
    if check_index_outcome(outcome, value, want):
        assert value.tolist() == [len(recs[i]) for i in want.norm]

    # gather into one SLOT per index; a failed gather must not have written anything
    try:
        count = len(want.norm) if want.kind == "valid" else int(np.asarray(idx).size)
    except Exception:
        count = 1
    count = count if count <= 64 else 1
    dst = np.full(count * SLOT + 3, 0xAB, np.uint8)
    outcome, value = attempt(lambda: z.gather(idx, dst, np.arange(count, dtype=np.uint64) * SLOT))
    if outcome == "error":
        assert (dst == 0xAB).all(), "a failed gather wrote into dst"
    if check_index_outcome(outcome, value, want):
        for k, i in enumerate(want.norm):
            slot = dst[k * SLOT : (k + 1) * SLOT]
            assert slot[: len(recs[i])].tobytes() == recs[i]
            assert (slot[len(recs[i]) :] == 0xAB).all()
    assert_read_only_stores_intact(stores)


@budget(250)
@given(data=st.data())
def test_gather_with_any_buffer_and_offsets(stores, data):
    z, recs = stores.z, stores.records
    idxs = data.draw(st.lists(st.integers(0, len(recs) - 1), max_size=4), label="idxs")
    dst = data.draw(dst_like(), label="dst")
    cap = writable_nbytes(dst)
    span = cap if cap is not None else 64
    offsets = data.draw(st.one_of(
        st.lists(st.integers(0, span + 2), min_size=len(idxs), max_size=len(idxs)),
        st.lists(st.integers(0, span + len(idxs)), min_size=len(idxs), max_size=len(idxs), unique=True).map(sorted).map(
            lambda o: np.array(o, np.uint64)),
        offsets_for(span),
    ), label="offsets")

    # Documented: success iff dst is a writable C-contiguous buffer and every record fits at
    # its offset without overlapping another; otherwise an exception, and dst is untouched.
    offs = as_int_list(offsets)
    ranges = None
    if cap is not None and offs is not None and len(offs) == len(idxs) and numpy_keeps_integers(offsets):
        ranges = sorted((o, o + len(recs[i])) for o, i in zip(offs, idxs))
        fits = all(0 <= a and b <= cap for a, b in ranges)
        apart = all(b1 <= a2 for (_, b1), (a2, _) in zip(ranges, ranges[1:]))
        ranges = ranges if fits and apart else None
    before = dst_bytes(dst)
    outcome, value = attempt(lambda: z.gather(idxs, dst, offsets))
    tally("gather", outcome, value)
    if ranges is not None:
        assert outcome == "ok", f"a valid gather raised {type(value).__name__}: {value}"
        after = np.frombuffer(dst_bytes(dst), np.uint8)
        expect = np.frombuffer(before, np.uint8).copy()
        for o, i in zip(offs, idxs):
            expect[o : o + len(recs[i])] = np.frombuffer(recs[i], np.uint8)
        assert after.tobytes() == expect.tobytes(), "gather wrote the wrong bytes or outside the records"
    elif offs is not None and cap is not None and len(offs) == len(idxs) and numpy_keeps_integers(offsets):
        assert outcome == "error", "records that do not fit dst, or overlap, were accepted"
    if outcome == "error" and before is not None:
        assert dst_bytes(dst) == before, "a failed gather wrote into dst"
    assert_read_only_stores_intact(stores)


# --- Zrecord: writes ------------------------------------------------------------------------

RAISE, ANY = "raise", "any"


def model_append(src, offsets, codec, default="zstd", has_dict=False):
    """The records an append must add (a list), RAISE, or ANY (not documented)."""
    # Only None means the handle's default; any other codec must be a known name.
    effective = default if codec is None else codec
    if not codec_valid(effective):
        return RAISE
    buf = bytes_of(src)
    if buf is None:
        return RAISE
    offs = as_int_list(offsets)
    if offs is None:
        return ANY
    if not numpy_keeps_integers(offsets) or any(o < 0 for o in offs):
        return RAISE
    if effective == "zstd_dict" and not has_dict:
        return ANY if not offs else RAISE
    ends = offs[1:] + [len(buf)]
    for o, e in zip(offs, ends):
        if o > len(buf) or not 1 <= e - o <= MAX_RECORD_LEN:
            return RAISE
    return [buf[o:e] for o, e in zip(offs, ends)]


@budget(150)
@given(data=st.data())
def test_append_with_any_source_offsets_and_codec(data):
    src = data.draw(src_like(), label="src")
    buf = bytes_of(src)
    offsets = data.draw(offsets_for(len(buf) if buf is not None else 16), label="offsets")
    codec = data.draw(st.one_of(st.sampled_from(["raw", "zstd", None]), codec_like), label="codec")
    want = model_append(src, offsets, codec)
    with scratch() as d:
        path = fresh_store(d / "s")
        before = snapshot(path)
        with Zrecord(path, codec="zstd") as z:
            outcome, value = attempt(lambda: z.append(src, offsets, codec=codec))
            tally("append", outcome, value)
            if isinstance(want, list):
                assert outcome == "ok", f"a valid append raised {type(value).__name__}: {value}"
                assert value == len(BASE), "append must return the index of its first record"
            elif want == RAISE:
                assert outcome == "error", "an invalid append was accepted"
            if outcome == "error":
                assert snapshot(path) == before, f"a failed append ({type(value).__name__}) changed the files"
                assert len(z) == len(BASE)
        got = records_at(path)
        assert got[: len(BASE)] == BASE, "an append changed records that were already there"
        if isinstance(want, list):
            assert got[len(BASE) :] == want
        elif outcome == "error":
            assert got == BASE


def model_delete(records, norm):
    """docs/format.md "Delete and compact": duplicates dropped, largest index first, each hole filled by the last record."""
    records = list(records)
    for i in sorted(set(norm), reverse=True):
        records[i] = records[-1]
        records.pop()
    return records


@budget(150)
@given(idx=index_like(8))
@example(idx=[1, 3, 3, 1])
@example(idx=[-1, 0])
@example(idx=[8])
@example(idx=[0, 2**63])
def test_delete_with_any_indices(idx):
    records = [record_bytes(i, 5 + 9 * i) for i in range(8)]
    want = want_indices(idx, len(records))
    with scratch() as d:
        path = fresh_store(d / "s", records, codec="raw")
        before = snapshot(path)
        with Zrecord(path) as z:
            outcome, value = attempt(lambda: z.delete(idx))
        tally(f"delete ({want.kind})", outcome, value)
        if outcome == "error":
            assert snapshot(path) == before, "a failed delete changed the files"
            assert_records(path, records)
        if check_index_outcome(outcome, value, want):
            assert_records(path, model_delete(records, want.norm))
        elif outcome == "ok":
            got = records_at(path)
            assert len(got) <= len(records) and all(r in records for r in got), "delete corrupted records"


@st.composite
def training_args(draw):
    """(samples, sizes, target): mostly a consistent set (sizes add up to the sample bytes, of
    any dtype), sometimes with one argument replaced by anything."""
    sizes = draw(st.lists(st.integers(8, 200), min_size=1, max_size=24))
    dtype = np.dtype(draw(st.sampled_from(["u1", "<u2", ">i4", "f8"])))
    pattern = draw(st.binary(min_size=1, max_size=64))
    raw = (pattern * (sum(sizes) // len(pattern) + 1))[: sum(sizes) // dtype.itemsize * dtype.itemsize]
    samples = np.frombuffer(raw, dtype).copy()
    sizes[-1] -= sum(sizes) - samples.nbytes  # the byte sizes add up to the samples' bytes
    target = draw(st.integers(256, 1 << 14))
    which = draw(st.sampled_from([None, "samples", "sizes", "target"]))
    if which == "samples":
        samples = draw(src_like())
    elif which == "sizes":
        sizes = draw(st.one_of(
            st.lists(st.integers(0, 300), max_size=8),
            st.lists(any_int, max_size=4),
            np_arrays(INT_DTYPES + ["f4", "O", "?"], max_dims=2, near=(-2, 200)),
            st.sampled_from([None, 5, "x", [1.5], [[10, 10]]]),
        ))
    elif which == "target":
        target = draw(st.one_of(
            st.integers(-3, 1 << 16),  # a target between 64 KiB and 2**62 could really be allocated
            st.sampled_from([2**62, 2**64 - 1, 2**64, -(2**63), 1.5, float("nan"), float("inf"), "100", "x", None]),
        ))
    return samples, sizes, target


@budget(40)
@given(args=training_args())
@example(args=(np.zeros(100, np.uint8), [1000, 1000], 1024))  # sizes past the samples
@example(args=(np.arange(3000, dtype=np.uint16), [600] * 10, 2048))  # a multi-byte dtype
def test_train_dict_with_any_arguments(args):
    samples, sizes, target = args
    with scratch() as d:
        path = fresh_store(d / "s")
        with Zrecord(path) as z:
            # train_dict reads a non-contiguous memoryview with np.frombuffer, which raises
            # BufferError (append says ValueError for the same source): an Exception, tolerated.
            outcome, value = attempt(lambda: z.train_dict(samples, sizes, target), allowed=API_ERRORS + (BufferError,))
            tally("train_dict", outcome, value)
            if outcome == "ok":
                assert z.has_dict() and (path / "dict.zr").is_file()
                assert 0 < value <= int(target), f"a dictionary of {value} bytes for a target of {target}"
                assert z.append(b"dictionary record " * 8, [0], codec="zstd_dict") == len(BASE)
        assert_records(path, BASE + ([b"dictionary record " * 8] if outcome == "ok" else []))


PATH_KINDS = ["new", "nested", "existing", "empty_dir", "file", "under_file", "none", "int", "bytes"]


@budget(120)
@given(codec=codec_like, where=st.sampled_from(PATH_KINDS), after_close=st.sampled_from(
    ["len", "lengths", "gather", "append", "delete", "stats", "verify", "sync", "has_dict", "compact"]))
def test_zrecord_constructor_with_any_codec_and_path(codec, where, after_close):
    with scratch() as d:
        fresh_store(d / "existing")
        (d / "empty_dir").mkdir()
        (d / "file").write_bytes(b"not a store")
        before = snapshot(d / "existing")
        path = {"new": d / "new", "nested": d / "a" / "b" / "new", "existing": d / "existing",
                "empty_dir": d / "empty_dir", "file": d / "file", "under_file": d / "file" / "x",
                "none": None, "int": 5, "bytes": os.fsencode(d / "new")}[where]
        outcome, value = attempt(lambda: Zrecord(path, codec=codec))
        tally("Zrecord()", outcome, value)
        if not codec_valid(codec):
            assert outcome == "error" and isinstance(value, ValueError), f"codec {codec!r} was accepted"
            assert not (d / "new").exists() and not (d / "a").exists(), "a refused codec created the store"
        elif where in ("new", "nested", "existing", "empty_dir"):
            assert outcome == "ok", f"{where}: {type(value).__name__}: {value}"
        elif where == "bytes":
            pass  # a bytes path is not documented (str | Path): either is fine
        else:
            assert outcome == "error"
            if where in ("file", "under_file"):
                assert isinstance(value, OSError), f"a path under a regular file gave {type(value).__name__}"
        if outcome == "ok":
            z = value
            assert z.codec == codec
            z.close()
            z.close()  # idempotent
            call = {
                "len": lambda: len(z), "lengths": lambda: z.lengths([0]), "stats": z.stats, "verify": z.verify,
                "gather": lambda: z.gather([0], np.zeros(64, np.uint8), [0]), "sync": z.sync,
                "append": lambda: z.append(b"x", [0]), "delete": lambda: z.delete([0]),
                "has_dict": z.has_dict, "compact": z.compact,
            }[after_close]
            outcome, value = attempt(call)
            assert outcome == "error" and isinstance(value, ValueError), f"{after_close} on a closed handle: {outcome}"
        assert (d / "file").read_bytes() == b"not a store"
        assert snapshot(d / "existing") == before
        assert_records(d / "existing", BASE)


# --- Sampler --------------------------------------------------------------------------------

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


SAMPLER_GOOD = {
    "length": st.one_of(st.integers(1, 70), st.sampled_from([2**32, 2**63, 2**64 - 1]),
                        st.builds(np.int64, st.integers(1, 9))),
    "batch": st.one_of(st.integers(1, 70), st.just(SAFE_BATCH), st.builds(np.uint8, st.integers(1, 9))),
    "mode": st.one_of(st.integers(0, 2), st.sampled_from(list(Sampler.Mode))),
    "seed": st.one_of(st.integers(0, 2**64 - 1), st.just(42)),
    "step": st.one_of(st.integers(0, 50), st.sampled_from([2**40, 2**64 - 1])),
}
SAMPLER_BAD = {"length": uint_arg, "batch": uint_arg, "mode": mode_arg, "seed": uint_arg,
               "step": st.sampled_from([2**64, -1, 1.5, "3", None])}


@budget(300)
@given(args=one_bad(SAMPLER_GOOD, SAMPLER_BAD))
@example(args=dict(length=0, batch=4, mode=0, seed=42, step=0))
@example(args=dict(length=10, batch=0, mode=2, seed=42, step=0))
@example(args=dict(length=10, batch=4, mode=3, seed=42, step=0))
@example(args=dict(length=2**64 - 1, batch=4, mode=2, seed=1, step=2**64 - 1))
def test_sampler_with_any_arguments(args):
    length, batch, mode, seed, step = (args[k] for k in ("length", "batch", "mode", "seed", "step"))
    valid = sampler_args_valid(length, batch, mode, seed)
    outcome, s = attempt(lambda: Sampler(length, batch, mode, seed), allowed=(ValueError, TypeError))
    tally("Sampler()", outcome, s)
    assert (outcome == "ok") == valid, f"Sampler({length!r}, {batch!r}, {mode!r}, {seed!r}): {outcome} {s!r}"
    if outcome != "ok":
        return
    L, B, M = as_index(length), as_index(batch), mode_value(mode)
    batch_len = min(L, B) if M == 2 else B
    assert s._s.batch_len == batch_len
    if batch_len > SAFE_BATCH:
        return  # asking for such a batch crashes: see test_sampler_with_a_huge_batch_...
    first = s.next()
    assert first.dtype == np.uint64 and len(first) == batch_len and all(int(v) < L for v in first)
    if M == 0:
        assert first.tolist() == [j % L for j in range(B)]
    if M == 2:
        assert len(set(first.tolist())) == batch_len, "a CYCLIC batch repeats an index"
    k = as_index(step)
    outcome, got = attempt(lambda: s.batch_at(step), allowed=(ValueError, TypeError))
    assert (outcome == "ok") == (k is not None and 0 <= k < 2**64), f"batch_at({step!r}): {outcome}"
    if outcome == "ok":
        s.seek(step)
        assert s.step == k
        assert s.next().tolist() == got.tolist(), "seek(k) then next() differs from batch_at(k)"


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


# --- datasets and pad -----------------------------------------------------------------------

@budget(300)
@given(idx=index_like(12, slices=True))
@example(idx=slice(None, None, -3))
@example(idx=np.ones(12, bool))
@example(idx=[True] * 13)
@example(idx=-13)
@example(idx=2**63)
def test_dense_dataset_with_any_index(stores, idx):
    ds, rows = stores.dense, stores.rows
    want = slice_want(idx, len(rows)) if isinstance(idx, slice) else want_indices(idx, len(rows), masks=True)
    outcome, value = attempt(lambda: ds[idx])
    tally(f"dense ({want.kind})", outcome, value)
    if check_index_outcome(outcome, value, want):
        expect = rows[want.norm[0]] if want.scalar else rows[list(want.norm)].reshape(-1, *rows.shape[1:])
        assert value.shape == expect.shape and value.dtype == rows.dtype and (value == expect).all()
    assert_read_only_stores_intact(stores)


@budget(200)
@given(idx=index_like(9, slices=True))
@example(idx=[-1, 0])
@example(idx=9)
def test_ragged_dataset_with_any_index(stores, idx):
    rs, seqs = stores.ragged, stores.seqs
    want = slice_want(idx, len(seqs)) if isinstance(idx, slice) else want_indices(idx, len(seqs), masks=True)
    outcome, value = attempt(lambda: rs[idx])
    tally(f"ragged ({want.kind})", outcome, value)
    if check_index_outcome(outcome, value, want):
        if want.scalar:
            assert value.tolist() == seqs[want.norm[0]].tolist()
        else:
            assert [v.tolist() for v in value] == [seqs[i].tolist() for i in want.norm]
    assert_read_only_stores_intact(stores)


def slice_want(sl, n):
    try:
        return Want("valid", tuple(range(*sl.indices(n))))
    except (TypeError, ValueError):
        return Want("must_raise")


pad_record = st.one_of(
    np_arrays(["<i4", "f8", "u1", "?"], max_dims=3, max_side=3),
    st.lists(st.integers(-5, 5), max_size=4),
    st.sampled_from([None, 3, "ab", [[1], [1, 2]], b"xy"]),
)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy casting NaN to an int pad
@budget(200)
@given(records=st.one_of(st.lists(pad_record, max_size=4), st.sampled_from([None, 5, "abc", ()])),
       max_len=st.one_of(st.none(), st.integers(-2, 8), st.sampled_from([2**62, 2**100, "4", "x", 2.5, float("nan")])),
       pad_value=st.one_of(st.integers(-3, 3), st.sampled_from([2**70, -1.5, float("nan"), "x", None, b"\x00", 1j])))
@example(records=[np.arange(3), np.arange(1)], max_len=None, pad_value=-1)
def test_pad_with_any_arguments(records, max_len, pad_value):
    outcome, value = attempt(lambda: pad(records, max_len=max_len, pad_value=pad_value), allowed=API_ERRORS + (MemoryError,))
    tally("pad", outcome, value)
    if outcome != "ok":
        return
    padded, lengths = value
    arrays = [np.asarray(r) for r in records]
    assert lengths.tolist() == [len(a) for a in arrays]
    assert padded.shape[:2] == (len(arrays), int(max_len) if max_len is not None else max(len(a) for a in arrays))
    for row, a in zip(padded, arrays):
        if a.dtype == padded.dtype and a.shape[1:] == padded.shape[2:]:
            assert np.array_equal(row[: len(a)], a, equal_nan=a.dtype.kind in "fc"), "pad changed a record"


# --- DataLoader -----------------------------------------------------------------------------

def _boom(batch):
    raise ZeroDivisionError("transform failed")


TRANSFORMS = {"identity": lambda b: b, "raises": _boom, "not_callable": 5, "none": lambda b: None}


DATALOADER_GOOD = {
    "streams": st.sampled_from(["dense", "dense", "dense+labels", "ragged"]),
    "num_workers": st.integers(1, 3),
    "batch_size": st.integers(1, 24),
    "prefetch_size": st.integers(1, 4),
    "mode": st.integers(0, 2),
    "seed": st.integers(0, 2**64 - 1),
    "shard": st.one_of(st.just((0, 1)), st.sampled_from([(1, 2), (0, 4), (3, 4)])),
    "transform": st.sampled_from(["identity", "identity", "identity", "raises", "not_callable", "none"]),
    "seek": st.one_of(st.none(), st.integers(0, 5), st.just(2**40)),
}
DATALOADER_BAD = {
    "streams": st.sampled_from(["dense+ragged", "empty", "list", "none", "not_a_dataset"]),
    "num_workers": st.one_of(st.integers(-2, 0), st.sampled_from([2**70, "2", "x", None, 1.5])),
    "batch_size": st.one_of(st.integers(-2, 0), st.sampled_from([2**61, 2**64, "4", None, 4.0])),
    "prefetch_size": st.one_of(st.integers(-2, 0), st.sampled_from([2**70, "x", None])),
    "mode": mode_arg,
    "seed": uint_arg,
    "shard": st.tuples(st.integers(-1, 3), st.integers(-1, 3)),
    "seek": st.sampled_from([-1, 2**64, "x", 1.5]),
}


@budget(120)
@given(args=one_bad(DATALOADER_GOOD, DATALOADER_BAD))
def test_dataloader_with_any_arguments(stores, args):
    streams, num_workers, batch_size, prefetch_size, mode, seed, shard, transform, seek = (args[k] for k in (
        "streams", "num_workers", "batch_size", "prefetch_size", "mode", "seed", "shard", "transform", "seek"))
    chosen = {
        "dense": {"x": stores.dense}, "dense+labels": {"x": stores.dense, "y": stores.labels},
        "dense+ragged": {"x": stores.dense, "r": stores.ragged}, "ragged": {"r": stores.ragged},
        "empty": {}, "list": [stores.dense], "none": None, "not_a_dataset": {"x": 5},
    }[streams]
    outcome, loader = attempt(lambda: DataLoader(
        chosen, num_workers=num_workers, batch_size=batch_size, prefetch_size=prefetch_size, mode=mode, seed=seed,
        transform=TRANSFORMS[transform], shard_index=shard[0], shard_count=shard[1]))
    tally("DataLoader()", outcome, loader)
    if outcome != "ok":
        assert not worker_threads()
        return
    try:
        if seek is not None:
            outcome, value = attempt(lambda: loader.seek(seek))
            if outcome == "ok":
                assert loader.step == int(seek)
        runnable = int(num_workers) <= 4 and loader.sampler._s.batch_len <= SAFE_BATCH  # see the huge-batch test
        if runnable and loader.step >= 2**64:  # a step the sampler cannot take: next() says so
            outcome, value = attempt(lambda: next(loader))
            assert outcome == "error" and isinstance(value, ValueError)
        elif runnable:
            step = loader.step
            for k in range(2):
                outcome, batch = attempt(lambda: next(loader), allowed=API_ERRORS + (ZeroDivisionError,))
                if transform == "raises":
                    assert outcome == "error" and isinstance(batch, ZeroDivisionError)
                elif transform == "not_callable":
                    assert outcome == "error" and isinstance(batch, TypeError)
                elif transform == "none":
                    assert outcome == "ok" and batch is None
                else:
                    assert outcome == "ok", f"a valid loader raised {type(batch).__name__}: {batch}"
                    idxs = loader.sampler.batch_at(step + k)
                    if loader.shard_count > 1:
                        per = loader.batch_size // loader.shard_count
                        idxs = idxs[loader.shard_index * per : (loader.shard_index + 1) * per]
                    for name, ds in loader.streams.items():
                        want = ds[idxs]
                        if isinstance(want, list):
                            assert [w.tolist() for w in batch[name]] == [w.tolist() for w in want]
                        else:
                            assert np.array_equal(batch[name], want)
            state = loader.state_dict()
            for bad in ({}, {"fingerprint": "0" * 16, "step": 0}, dict(state, fingerprint="x")):
                outcome, value = attempt(lambda bad=bad: loader.load_state_dict(bad))
                assert outcome == "error" and isinstance(value, ValueError)
            loader.load_state_dict(state)
    finally:
        loader.close()
        loader.close()
    wait_no_worker_threads()
    outcome, value = attempt(lambda: next(loader))
    assert outcome == "error" and isinstance(value, ValueError), "next() on a closed loader"


# --- regressions: defects the properties above found (all fixed now); each docstring says what
# --- the defect was, and the test checks the fixed behaviour with its reproducer.

@budget(200)
@given(idx=st.lists(st.integers(), min_size=1, max_size=3))
@example(idx=[2**64])
@example(idx=[0, 2**63])
@example(idx=[-(2**63) - 1])
def test_out_of_range_integer_indices_raise_index_error(stores, idx):
    """errors.py and the dataset docs: "an index out of range is an IndexError". A list of Python
    ints is indices whatever their size. But NumPy turns ``[0, 2**63]`` into float64 and
    ``[2**64]`` into objects, and loaderx then raises TypeError ("indices must be integers")."""
    for name, n, call in (
        ("Zrecord.lengths", len(stores.records), stores.z.lengths),
        ("DenseDataset", len(stores.rows), stores.dense.__getitem__),
        ("RaggedDataset", len(stores.seqs), stores.ragged.__getitem__),
    ):
        valid = all(-n <= i < n for i in idx)
        outcome, value = attempt(lambda call=call: call(idx))
        if valid:
            assert outcome == "ok", f"{name}{idx}: {value!r}"
        else:
            assert outcome == "error" and isinstance(value, IndexError), (
                f"{name}({idx}) on {n} records: {type(value).__name__}: {value}"
            )


@pytest.mark.parametrize("where", ["gather", "append"])
def test_negative_offsets_are_bad_argument_errors(where):
    """errors.py: BadArgumentError (a ValueError, code -6) is "a buffer is too small, destination
    ranges overlap, or offsets are wrong". A negative offset is a wrong offset, but it raises
    StoreIndexError (an IndexError, code -3) with "index -1 out of range for a store of None records"."""
    with scratch() as d:
        path = fresh_store(d / "s")
        before = snapshot(path)
        with Zrecord(path) as z:
            if where == "gather":
                call = lambda: z.gather([0], np.zeros(64, np.uint8), [-1])  # noqa: E731
            else:
                call = lambda: z.append(b"abcdef", [-1])  # noqa: E731
            outcome, value = attempt(call)
        assert snapshot(path) == before
        assert outcome == "error"
        assert isinstance(value, BadArgumentError), f"{type(value).__name__}(code {getattr(value, 'code', None)}): {value}"


@pytest.mark.parametrize("batch, mode", [(2**61, 0), (2**64 - 1, 1)])
def test_sampler_with_an_impossible_batch_raises_an_exception(batch, mode):
    """A batch whose size in bytes overflows is an ordinary exception (MemoryError), never
    pyo3's PanicException (a BaseException that ``except Exception`` would not catch)."""
    s = Sampler(10, batch, mode)
    try:
        s.next()
    except Exception:
        return
    except BaseException as e:  # noqa: B036
        pytest.fail(f"{type(e).__module__}.{type(e).__qualname__} (not an Exception subclass): {e}")
    pytest.fail("a batch of 2**61+ indices was returned")


_HUGE_BATCH = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # never let an attempt really allocate
from loaderx.sampler import Sampler
try:
    Sampler(10, 2**40, int(sys.argv[1])).next()
except Exception as e:
    print("raised", type(e).__name__)
"""


@pytest.mark.parametrize("mode", [0, 1])
def test_sampler_with_a_huge_batch_is_an_error_not_a_crash(tmp_path, mode):
    script = tmp_path / "huge_batch.py"
    script.write_text(_HUGE_BATCH)
    proc = run_python(OUR_PYTHON, [script, mode], check=False, timeout=60)
    assert proc.returncode == 0, f"the interpreter died with exit {proc.returncode}: {proc.stderr[-600:]}"


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
