"""Weighted mixing (DataLoader.mix): every batch holds exactly the largest-remainder share of
each source, deterministic in (seed, step) whatever the worker count; shards split the mixed
global batch; resume is exact, also on another process count; new weights at a checkpoint
continue each source's stream where it stood; bad weights and a state from another mix are
clear errors."""

import json

import numpy as np
import pytest

from loaderx import errors, manifest
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

LENGTHS = (90, 23, 41)
BASE = (0, 1000, 2000)  # record e of source j holds BASE[j] + e


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    for j, (n, base) in enumerate(zip(LENGTHS, BASE)):
        from_numpy(root / f"s{j}", (base + np.arange(n, dtype=np.int64))[:, None].repeat(2, 1), progress=False)
    # Source 2 as many stores in a manifest: mixing works over them alike.
    return root


def streams(root):
    return [{"x": DenseDataset(root / "s0")}, {"x": DenseDataset(root / "s1")}, {"x": DenseDataset(root / "s2")}]


def mixed(root, weights, **kw):
    kw = {"batch_size": 20, "seed": 5, "num_workers": 2, **kw}
    return DataLoader.mix(streams(root), weights, **kw)


def source_of(v):
    return np.searchsorted(np.array(BASE), v, side="right") - 1


def take(loader, n):
    return [next(loader)["x"][:, 0].copy() for _ in range(n)]


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["SEQUENTIAL", "IID", "CYCLIC"])
def test_every_batch_holds_exact_shares_whatever_the_workers(sources, mode):
    with mixed(sources, [0.5, 0.2, 0.3], mode=mode, num_workers=1) as a, mixed(sources, [0.5, 0.2, 0.3], mode=mode, num_workers=4) as b:
        ours, theirs = take(a, 25), take(b, 25)
    for x, y in zip(ours, theirs):
        assert np.array_equal(x, y)
        assert np.bincount(source_of(x), minlength=3).tolist() == [10, 4, 6]
        for j in range(3):
            local = x[source_of(x) == j] - BASE[j]
            assert local.min() >= 0 and local.max() < LENGTHS[j]
    if mode == 2:  # without replacement: each source's records, epoch by epoch, each once
        flat = np.concatenate(ours)
        for j in range(3):
            seen = flat[source_of(flat) == j] - BASE[j]
            for e in range(len(seen) // LENGTHS[j]):
                assert sorted(seen[e * LENGTHS[j] : (e + 1) * LENGTHS[j]]) == list(range(LENGTHS[j]))


def test_shards_split_the_mixed_global_batch_and_resume_elastically(sources):
    with mixed(sources, [0.5, 0.2, 0.3], mode=2) as whole:
        want = take(whole, 24)
    got, state = [], None
    for count, steps in [(4, 6), (2, 5), (1, 7), (5, 6)]:
        ranks = [mixed(sources, [0.5, 0.2, 0.3], mode=2, shard_index=r, shard_count=count) for r in range(count)]
        for lx in ranks:
            if state:
                lx.load_state_dict(json.loads(state))
        for _ in range(steps):
            got.append(np.concatenate([next(lx)["x"][:, 0] for lx in ranks]))
        state = json.dumps(ranks[-1].state_dict())
        for lx in ranks:
            lx.close()
    assert all(np.array_equal(g, w) for g, w in zip(got, want)) and len(got) == len(want)
    # Every shard of 4 holds 5 records, each source within 2 of its share.
    for b in want:
        for part in b.reshape(4, 5):
            counts = np.bincount(source_of(part), minlength=3)
            assert all(abs(c - s) <= 2 for c, s in zip(counts, [2.5, 1.0, 1.5]))


@pytest.mark.parametrize("mode", [1, 2], ids=["IID", "CYCLIC"])
def test_new_weights_at_a_checkpoint_continue_each_stream(sources, mode):
    with mixed(sources, [0.5, 0.2, 0.3], mode=mode) as a:
        before = take(a, 9)
        state = a.state_dict()
    with mixed(sources, [0.1, 0.6, 0.3], mode=mode) as b:
        b.load_state_dict(state)
        after = take(b, 12)
        assert np.bincount(source_of(after[0]), minlength=3).tolist() == [2, 12, 6]
    with mixed(sources, [0.5, 0.2, 0.3], mode=mode) as c:
        uninterrupted = take(c, 40)
    for j in range(3):
        def stream(batches, j=j):
            flat = np.concatenate(batches)
            return flat[source_of(flat) == j]
        joined, whole = stream(before + after), stream(uninterrupted)
        n = min(len(joined), len(whole))
        assert n > 30 and np.array_equal(joined[:n], whole[:n]), f"source {j} did not continue where it stood"


def test_bad_weights_and_a_state_from_another_mix_are_refused(sources):
    for weights, match in [([1, -1, 1], "not negative"), ([0, 0, 0], "all weights are zero"),
                           ([1, float("nan"), 1], "finite"), ([1, 1e-9, 1], "no record in a batch"),
                           ([1, 1], "one weight per dataset")]:
        with pytest.raises(ValueError, match=match):
            mixed(sources, weights)
    with pytest.raises(errors.BadArgumentError):
        mixed(sources, [1, float("inf"), 1])
    with mixed(sources, [0.5, 0.2, 0.3]) as a:
        next(a)
        state = a.state_dict()
    two = DataLoader.mix(streams(sources)[:2], [0.5, 0.5], batch_size=20, seed=5)
    with two, pytest.raises(ValueError, match="different DataLoader config"):
        two.load_state_dict(state)
    plain = DataLoader({"x": DenseDataset(sources / "s0")}, batch_size=20, seed=5)
    with plain, pytest.raises(ValueError):
        plain.load_state_dict(state)


def test_a_manifest_of_stores_is_a_source_like_any(sources, tmp_path):
    from_numpy(tmp_path / "p0", (2000 + np.arange(20, dtype=np.int64))[:, None].repeat(2, 1), progress=False)
    from_numpy(tmp_path / "p1", (2020 + np.arange(21, dtype=np.int64))[:, None].repeat(2, 1), progress=False)
    manifest.commit(tmp_path, ["p0", "p1"])
    srcs = streams(sources)
    srcs[2] = {"x": DenseDataset(tmp_path)}
    with DataLoader.mix(srcs, [0.5, 0.2, 0.3], batch_size=20, seed=5, num_workers=2) as a, mixed(sources, [0.5, 0.2, 0.3]) as b:
        for _ in range(10):
            assert np.array_equal(next(a)["x"], next(b)["x"])


@pytest.mark.parametrize("manifested", [False, True])
def test_a_mix_gathers_each_source_into_its_rows_and_checks_them(sources, tmp_path, manifested):
    if manifested:
        manifest.commit(tmp_path, [str(sources / "s0")])
    ds = DenseDataset(tmp_path if manifested else sources / "s0")
    read, row = ds.engine.gather_rows, ds._row_bytes
    dst = np.zeros(4 * row, np.uint8)
    read(np.array([2, 0], np.uint64), dst, np.array([3, 1], np.uint64), row)
    rows = dst.view(ds.dtype).reshape(4, *ds.item_shape)
    assert np.array_equal(rows[[3, 1]], ds[[2, 0]]) and not rows[[0, 2]].any()
    for idxs, positions, stride, match in [
        ([0, 1], [1, 1], row, "named twice"),
        ([0], [4], row, "past the 4 rows"),
        ([0, 1], [0], row, "2 indices but 1 row positions"),
        ([0], [0], row + 3, "whole number"),
        ([0], [0], row // 2, "does not fit|bytes"),  # a record longer than its row is refused
    ]:
        before = dst.copy()
        with pytest.raises((errors.BadArgumentError, errors.CorruptStoreError), match=match):
            read(np.array(idxs, np.uint64), dst, np.array(positions, np.uint64), stride)
        assert np.array_equal(dst, before), "a refused gather writes nothing"


def test_the_joined_sources_read_each_record_where_its_source_has_it(sources, tmp_path):
    """The engine's join (what a mix reads): record e of source j at sum(lengths[:j]) + e, dense
    and ragged, over a store and a manifest alike, pickled as its parts."""
    import pickle

    from loaderx.converter import from_iterator
    from loaderx.dataset import RaggedDataset
    from loaderx.mix import _joined

    manifest.commit(tmp_path / "m", [str(sources / "s1"), str(sources / "s2")])
    parts = [DenseDataset(sources / "s0"), DenseDataset(tmp_path / "m")]
    joined = _joined(parts)
    want = np.concatenate([p[:] for p in parts])
    idxs = np.array([153, 0, 89, 90, 113, 7], np.uint64)
    assert len(joined) == sum(LENGTHS) and np.array_equal(joined[idxs], want[idxs])
    assert np.array_equal(pickle.loads(pickle.dumps(joined))[idxs], want[idxs])
    assert joined._listing() == [None, [[str(sources / "s1"), LENGTHS[1]], [str(sources / "s2"), LENGTHS[2]]]]
    with pytest.raises(IndexError):
        joined[[len(joined)]]

    from_iterator(tmp_path / "r0", [np.arange(k + 1, dtype=np.int32) for k in range(3)], progress=False)
    from_iterator(tmp_path / "r1", [np.full(5, 9, np.int32)], progress=False)
    ragged = _joined([RaggedDataset(tmp_path / "r0"), RaggedDataset(tmp_path / "r1")])
    assert [r.tolist() for r in ragged[[3, 0, 2]]] == [[9] * 5, [0], [0, 1, 2]]


def test_sources_that_are_not_loaderx_datasets_of_one_kind_are_refused(sources):
    class Mine:
        def __len__(self):
            return 4

        def __getitems__(self, idxs):
            return np.zeros((len(idxs), 2), np.int64)

    with pytest.raises(TypeError, match="DenseDataset, Mine"):
        DataLoader.mix([{"x": DenseDataset(sources / "s0")}, {"x": Mine()}], [1, 1], batch_size=4)
