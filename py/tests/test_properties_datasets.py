"""DenseDataset, RaggedDataset and pad under any index or argument: NumPy's indexing answer for
valid indices, IndexError for out-of-range integers, a Python exception otherwise, never a crash.

The shared properties, profile and strategies are in _strategies.py.
"""


import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from _strategies import (
    API_ERRORS,
    Want,
    assert_read_only_stores_intact,
    attempt,
    budget,
    check_index_outcome,
    index_like,
    np_arrays,
    tally,
    want_indices,
)
from loaderx.dataset import pad

# --- datasets and pad -----------------------------------------------------------------------

@budget(300)
@given(idx=index_like(12, slices=True))
@example(idx=slice(None, None, -3))
@example(idx=np.ones(12, bool))
@example(idx=[True] * 13)
@example(idx=-13)
@example(idx=2**63)
def test_dense_dataset_with_any_index(stores, idx):
    rows = stores.rows
    want, value, compare = index_once("dense", stores.dense, len(rows), idx)
    if compare:
        expect = rows[want.norm[0]] if want.scalar else rows[list(want.norm)].reshape(-1, *rows.shape[1:])
        assert value.shape == expect.shape and value.dtype == rows.dtype and (value == expect).all()
    assert_read_only_stores_intact(stores)


@budget(200)
@given(idx=index_like(9, slices=True))
@example(idx=[-1, 0])
@example(idx=9)
def test_ragged_dataset_with_any_index(stores, idx):
    seqs = stores.seqs
    want, value, compare = index_once("ragged", stores.ragged, len(seqs), idx)
    if compare:
        if want.scalar:
            assert value.tolist() == seqs[want.norm[0]].tolist()
        else:
            assert [v.tolist() for v in value] == [seqs[i].tolist() for i in want.norm]
    assert_read_only_stores_intact(stores)


def index_once(kind, ds, n, idx):
    """``ds[idx]`` on a dataset of ``n`` records, its outcome checked against NumPy's answer for
    ``idx`` (check_index_outcome): ``(want, value, compare)``, where ``compare`` is True when the
    caller should compare ``value``, what the dataset returned, against the model."""
    want = slice_want(idx, n) if isinstance(idx, slice) else want_indices(idx, n, masks=True)
    outcome, value = attempt(lambda: ds[idx])
    tally(f"{kind} ({want.kind})", outcome, value)
    return want, value, check_index_outcome(outcome, value, want)


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
