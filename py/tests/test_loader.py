"""DataLoader: batch k is a pure function of (config, k), and the pipeline is robust.

Pins: identical batches for 1, 2, 4 and 8 workers under a transform with random delays (and
equal to gathering the Sampler's indices by hand); state_dict / load_state_dict resume the
exact continuation and refuse a state from another config; seek(k) makes the next batch batch k;
shards of one step are the consecutive slices of the unsharded global batch (IID and CYCLIC) and
a batch_size not divisible by shard_count is a clear ValueError; an exception in the transform
(or in a read) is raised by next() at its own step, with the transform in the traceback, and the
loader continues; close() returns within JOIN_TIMEOUT + 1 s even when transforms are stuck, no
``loaderx-worker`` thread survives close() or garbage collection; a closed loader's next() is a
ValueError and len() a TypeError.
"""

import gc
import json
import random
import threading
import time
import traceback

import numpy as np
import pytest

import loaderx.dataloader as dataloader_mod
from _lxhelpers import worker_threads
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import ZrecordError
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

N = 997  # not a multiple of the batch sizes used, so CYCLIC drops a remainder
B = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("loader")
    i = np.arange(N, dtype=np.int64)
    x = np.stack([i, 2 * i, 3 * i, i % 7], axis=1)
    y = i.copy()
    from_numpy(root / "x", x, codec="zstd")
    from_numpy(root / "y", y, codec="raw")
    return root, x, y


def streams(data):
    root = data[0]
    return {"x": DenseDataset(root / "x"), "y": DenseDataset(root / "y")}


def expected_batches(data, steps, batch_size=B, mode=1, seed=7):
    _, x, y = data
    s = Sampler(N, batch_size, mode, seed)
    out = []
    for _ in range(steps):
        idx = s.next().astype(np.int64)
        out.append({"x": x[idx], "y": y[idx]})
    return out


def take(loader, n):
    return [next(loader) for _ in range(n)]


def assert_batches_equal(got, want):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert set(g) == set(w), k
        for name in w:
            np.testing.assert_array_equal(g[name], w[name], err_msg=f"step {k}, stream {name}")


def jitter(batch):
    time.sleep(random.random() * 0.003)
    return batch


@pytest.mark.parametrize("mode", [1, 2], ids=["IID", "CYCLIC"])
@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_same_batches_for_any_worker_count(data, mode, workers):
    want = expected_batches(data, 50, mode=mode)
    with DataLoader(streams(data), num_workers=workers, batch_size=B, mode=mode, seed=7, transform=jitter) as loader:
        got = take(loader, 50)
        assert loader.step == 50
    assert_batches_equal(got, want)
    for b in got:  # the two streams are gathered at the same indices
        np.testing.assert_array_equal(b["x"][:, 0], b["y"])


def test_state_dict_resumes_exact_continuation(data):
    cfg = dict(num_workers=3, batch_size=B, mode=1, seed=5, transform=jitter)
    with DataLoader(streams(data), **cfg) as a:
        take(a, 7)
        state = json.loads(json.dumps(a.state_dict()))  # survives a checkpoint file
        assert state["step"] == 7
        cont = take(a, 5)
    with DataLoader(streams(data), **cfg) as b:
        b.load_state_dict(state)
        assert b.step == 7
        assert_batches_equal(take(b, 5), cont)
    assert_batches_equal(cont, expected_batches(data, 12, seed=5)[7:])


def test_load_state_dict_rewinds_a_running_loader(data):
    with DataLoader(streams(data), num_workers=2, batch_size=B, seed=3) as loader:
        take(loader, 4)
        state = loader.state_dict()
        after = take(loader, 6)
        loader.load_state_dict(state)
        assert_batches_equal(take(loader, 6), after)


def test_transform_none_yields_the_batch_dict(data):
    """transform=None, the default, is no transform: the gathered batch dict, for a mix too."""
    with DataLoader(streams(data), num_workers=1, batch_size=B, seed=7, transform=None) as loader:
        assert "transform=" not in repr(loader)
        assert_batches_equal(take(loader, 3), expected_batches(data, 3))
    two = [streams(data), streams(data)]
    with DataLoader.mix(two, [1, 1], batch_size=B, num_workers=1, transform=None) as none, \
            DataLoader.mix(two, [1, 1], batch_size=B, num_workers=1) as omitted:
        assert_batches_equal(take(none, 3), take(omitted, 3))


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_seek_then_next_is_batch_k(data, mode):
    want = expected_batches(data, 40, mode=mode, seed=11)
    with DataLoader(streams(data), num_workers=2, batch_size=B, mode=mode, seed=11) as loader:
        for k in (0, 13, 39, 5, 5, 22):
            loader.seek(k)
            assert loader.step == k
            assert_batches_equal([next(loader)], [want[k]])
            if k + 1 < 40:
                assert_batches_equal([next(loader)], [want[k + 1]])
        with pytest.raises(ValueError):
            loader.seek(-1)


@pytest.mark.parametrize(
    "other",
    [dict(seed=6), dict(batch_size=32), dict(mode=2)],
    ids=["other-seed", "other-batch", "other-mode"],
)
def test_state_from_other_config_is_refused(data, other):
    base = dict(num_workers=1, batch_size=B, mode=1, seed=5)
    with DataLoader(streams(data), **base) as a:
        take(a, 2)
        state = a.state_dict()
    with DataLoader(streams(data), **{**base, **other}) as b:
        with pytest.raises(ValueError):
            b.load_state_dict(state)
        assert b.step == 0
        with pytest.raises(ValueError):
            b.load_state_dict({"step": 3})


@pytest.mark.parametrize("mode", [1, 2], ids=["IID", "CYCLIC"])
@pytest.mark.parametrize("count", [2, 4])
def test_shards_are_slices_of_the_global_batch(data, mode, count):
    steps = 10
    with DataLoader(streams(data), num_workers=2, batch_size=B, mode=mode, seed=9) as g:
        global_batches = take(g, steps)
    shards = []
    for index in range(count):
        with DataLoader(
            streams(data), num_workers=2, batch_size=B, mode=mode, seed=9, shard_index=index, shard_count=count
        ) as s:
            shards.append(take(s, steps))
    per = B // count
    for k in range(steps):
        parts = [shards[i][k] for i in range(count)]
        for p in parts:
            assert p["x"].shape == (per, 4) and p["y"].shape == (per,)
            np.testing.assert_array_equal(p["x"][:, 0], p["y"])
        np.testing.assert_array_equal(np.concatenate([p["y"] for p in parts]), global_batches[k]["y"])
        np.testing.assert_array_equal(np.concatenate([p["x"] for p in parts]), global_batches[k]["x"])
        if mode == 2:  # without replacement: the shards share no record
            ids = np.concatenate([p["y"] for p in parts])
            assert len(np.unique(ids)) == B


def test_batch_not_divisible_by_shard_count(data):
    with pytest.raises(ValueError) as e:
        DataLoader(streams(data), batch_size=10, shard_count=4)
    msg = str(e.value)
    assert "10" in msg and "4" in msg and "divisible" in msg
    with pytest.raises(ValueError):
        DataLoader(streams(data), batch_size=16, shard_count=4, shard_index=4)
    assert not worker_threads()


class Boom(Exception):
    pass


def test_transform_exception_is_raised_at_its_step(data):
    _, x, y = data

    def exploding_transform(batch):
        time.sleep(random.random() * 0.002)
        if batch["y"][0] == 3 * 8:
            raise Boom("step 3 exploded")
        return batch

    with DataLoader(streams(data), num_workers=4, batch_size=8, mode=0, transform=exploding_transform) as loader:
        for k in range(3):
            np.testing.assert_array_equal(next(loader)["y"], np.arange(8 * k, 8 * k + 8))
        with pytest.raises(Boom) as e:
            next(loader)
        text = "".join(traceback.format_exception(e.value))
        assert "exploding_transform" in text and "step 3 exploded" in text
        assert loader.step == 4
        for k in range(4, 8):  # and it carries on
            b = next(loader)
            np.testing.assert_array_equal(b["y"], np.arange(8 * k, 8 * k + 8))
            np.testing.assert_array_equal(b["x"], x[8 * k : 8 * k + 8])


def test_read_error_is_raised_at_its_step(tmp_path):
    rows = np.arange(40 * 4, dtype=np.uint8).reshape(40, 4)
    from_numpy(tmp_path / "s", rows, codec="raw")
    with Zrecord(tmp_path / "s") as z:  # a record of the wrong size at index 40
        z.append(np.zeros(6, dtype=np.uint8), np.array([0], dtype=np.uint64))
    ds = DenseDataset(tmp_path / "s")
    with DataLoader({"s": ds}, num_workers=2, batch_size=8, mode=0) as loader:
        for k in range(5):
            np.testing.assert_array_equal(next(loader)["s"], rows[8 * k : 8 * k + 8])
        with pytest.raises(ZrecordError):
            next(loader)  # step 5 holds record 40
        np.testing.assert_array_equal(next(loader)["s"][:7], rows[7:14])  # step 6: 47 % 41 = 6 .. 13


def expired_clock(budget):
    """A clock reading 0 once, then ``budget + 1`` on every later read: a deadline taken from its
    first read has passed at the next one, whatever the wall clock does."""
    reads = iter([0.0])
    return lambda: next(reads, budget + 1.0)


def test_close_returns_at_its_deadline_with_stuck_transforms(data):
    """close() stops waiting for stuck workers at its deadline (read on the pipeline's clock) and
    returns while their transforms are still blocked."""
    gate, stuck = threading.Event(), threading.Event()

    def slow(batch):
        if batch["y"][0] != 0:
            stuck.set()
            gate.wait(30)
        return batch

    loader = DataLoader(streams(data), num_workers=4, batch_size=8, mode=0, transform=slow)
    try:
        next(loader)  # step 0 is fast; the workers are now stuck in steps 1..4
        assert stuck.wait(30)
        loader._pipeline.clock = expired_clock(dataloader_mod.JOIN_TIMEOUT)
        loader.close()
        assert worker_threads(), "close() waited for the stuck transforms instead of its deadline"
        with pytest.raises(ValueError):
            next(loader)
    finally:
        gate.set()
    deadline = time.monotonic() + 5
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not worker_threads(), "workers did not end once their transform returned"


def test_close_with_slow_transform_joins_every_worker(data):
    def slow(batch):
        time.sleep(0.3)
        return batch

    loader = DataLoader(streams(data), num_workers=4, batch_size=8, mode=0, transform=slow)
    next(loader)
    loader._pipeline.clock = lambda: 0.0  # the deadline never passes: close() waits for each worker
    loader.close()
    assert not worker_threads()


def test_no_threads_after_close(data):
    loader = DataLoader(streams(data), num_workers=4, batch_size=8)
    take(loader, 3)
    assert len(worker_threads()) == 4
    loader.close()
    assert not worker_threads()
    loader.close()  # idempotent
    with pytest.raises(ValueError):
        next(loader)


def test_no_threads_after_garbage_collection(data):
    loader = DataLoader(streams(data), num_workers=4, batch_size=8, transform=jitter)
    take(loader, 3)
    assert worker_threads()
    del loader
    gc.collect()
    deadline = time.monotonic() + 2
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not worker_threads()


def test_len_is_a_type_error(data):
    with DataLoader(streams(data), num_workers=1, batch_size=8) as loader:
        with pytest.raises(TypeError):
            len(loader)
        next(loader)
        with pytest.raises(TypeError):
            len(loader)


def test_invalid_loader_arguments(data):
    with pytest.raises(ValueError):
        DataLoader({})
    with pytest.raises(ValueError):
        DataLoader(streams(data), num_workers=0)
    with pytest.raises(ValueError):
        DataLoader(streams(data), batch_size=0)
    with pytest.raises(ValueError):
        DataLoader(streams(data), mode=7)
    assert not worker_threads()


def test_a_batch_buffer_is_reused_after_many_other_sizes(tmp_path):
    """Gathered batches come back to a bounded pool when dropped. After more distinct sizes than
    the pool holds, a large batch must still get its own buffer back (the oldest sizes are
    evicted), not fault in fresh memory on every call. The NumPy array allocated in between
    takes the freed memory if the buffer was not kept, so the address would differ."""
    rec = (64, 1024)  # 64 KiB records
    from_numpy(tmp_path / "s", np.zeros((600, *rec), np.uint8), codec="raw", progress=False)
    ds = DenseDataset(tmp_path / "s")
    for n in range(1, 12):  # more sizes than the pool keeps
        ds[np.arange(n, dtype=np.uint64)]
    big = np.arange(500, dtype=np.uint64)
    first = ds[big]
    where = first.ctypes.data
    nbytes = first.nbytes
    del first
    gc.collect()
    squatter = np.ones(nbytes, np.uint8)  # noqa: F841  (holds whatever memory is free)
    again = ds[big]
    assert again.ctypes.data == where


def test_ragged_batches_of_varying_size_reuse_a_buffer_and_stay_intact(tmp_path):
    """A ragged batch's size varies from call to call, so its buffer is recycled when a free one
    has room (up to twice the size). Batches still held must never be overwritten by later ones,
    and a dropped batch's buffer must serve a slightly smaller next batch (same address, which a
    NumPy array allocated in between would take if the buffer was not kept)."""
    rng = np.random.default_rng(3)
    records = [rng.integers(0, 1 << 30, (int(n), 3), dtype=np.int32) for n in rng.integers(1, 400, 300)]
    from_iterator(tmp_path / "r", iter(records), codec="raw", progress=False)
    ds = RaggedDataset(tmp_path / "r")
    held = []
    for _ in range(20):
        idxs = rng.integers(0, len(records), int(rng.integers(1, 120))).astype(np.uint64)
        held.append((idxs, ds[idxs]))
        if len(held) > 3:
            held.pop(0)
        for old_idxs, got in held:  # every batch still held reads as it was gathered
            assert [g.shape for g in got] == [records[i].shape for i in old_idxs]
            assert all(np.array_equal(g, records[i]) for g, i in zip(got, old_idxs))
    held.clear()
    big = np.arange(200, dtype=np.uint64)
    first = ds[big]
    where, nbytes = first[0].ctypes.data, sum(a.nbytes for a in first)
    del first
    gc.collect()
    squatter = np.ones(nbytes, np.uint8)  # noqa: F841  (holds whatever memory is free)
    again = ds[big[:-5]]
    assert again[0].ctypes.data == where
    assert all(np.array_equal(g, records[i]) for g, i in zip(again, big[:-5]))
