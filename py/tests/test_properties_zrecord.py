"""Zrecord under any argument (constructor, lengths, gather, append, delete, train_dict): a result
or a Python exception, never a crash; a failed call leaves the store's files unchanged.

The shared properties, profile and strategies are in _strategies.py.
"""

import os

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from _lxhelpers import snapshot, swap_last_delete
from _strategies import (
    API_ERRORS,
    BARE_SIZES,
    BASE,
    INT_DTYPES,
    SLOT,
    any_int,
    as_int_list,
    assert_read_only_stores_intact,
    assert_records,
    attempt,
    budget,
    bytes_of,
    check_index_outcome,
    codec_like,
    codec_valid,
    dst_bytes,
    dst_like,
    fresh_store,
    index_like,
    np_arrays,
    numpy_keeps_integers,
    offsets_for,
    record_bytes,
    records_at,
    scratch,
    src_like,
    tally,
    want_indices,
    writable_nbytes,
)
from loaderx.errors import BadArgumentError
from loaderx.zrecord import MAX_RECORD_LEN, Zrecord

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
            assert_records(path, swap_last_delete(records, want.norm))
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
