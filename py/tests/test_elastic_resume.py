"""Elastic resume: a loader state saved at step k by any rank of N processes loads on any rank
of M processes with the same global batch, and the whole run then sees exactly the samples of
an uninterrupted run, none repeated and none skipped, in the same order.

"Processes" are simulated by one DataLoader per rank (``shard_index`` r of ``shard_count`` N),
which is all a process contributes; the state crosses between them only as a JSON round trip,
as a checkpoint would. Repeated resumes 4 -> 2 -> 3 -> 1 (and others) at several steps, every
sampler mode, several epochs in CYCLIC and SEQUENTIAL."""

import hashlib
import json

import numpy as np
import pytest

from loaderx import manifest
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

N = 103  # not a multiple of the batch: epochs do not line up with steps
B = 12  # divisible by 1, 2, 3, 4 and 6


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("elastic") / "ids"
    from_numpy(root, np.arange(N, dtype=np.int64), codec="zstd", progress=False)
    return root


@pytest.fixture(scope="module")
def sets(tmp_path_factory, store):
    """The same ids as one store, and as three stores in a manifest; and two sources of other
    ids (1000.. and 2000..) for a 2:1 mix."""
    root = tmp_path_factory.mktemp("elastic-sets")
    for k, (a, b) in enumerate([(0, 40), (40, 41), (41, N)]):
        from_numpy(root / "parts" / f"p{k}", np.arange(a, b, dtype=np.int64), progress=False)
    manifest.commit(root / "parts", ["p0", "p1", "p2"])
    from_numpy(root / "web", 1000 + np.arange(61, dtype=np.int64), progress=False)
    from_numpy(root / "books", 2000 + np.arange(29, dtype=np.int64), progress=False)
    return {"store": store, "manifest": root / "parts", "mix": (root / "web", root / "books")}


def loader(store, mode, rank, count, batch_size=B):
    kw = dict(num_workers=2, batch_size=batch_size, mode=mode, seed=11, shard_index=rank, shard_count=count)
    if isinstance(store, tuple):
        return DataLoader.mix([{"id": DenseDataset(p)} for p in store], [2, 1], **kw)
    return DataLoader({"id": DenseDataset(store)}, **kw)


def run(store, mode, phases, saver="last"):
    """Steps taken in phases [(processes, steps), ...]; each phase resumes from the state one
    rank of the previous phase saved (the last rank, or rank 0). Returns the global batch of
    each step: the ranks' shards joined in rank order."""
    batches, state = [], None
    for count, steps in phases:
        ranks = [loader(store, mode, r, count) for r in range(count)]
        try:
            if state is not None:
                for lx in ranks:
                    lx.load_state_dict(json.loads(state))
            for _ in range(steps):
                batches.append(np.concatenate([next(lx)["id"] for lx in ranks]))
            saved = ranks[-1 if saver == "last" else 0].state_dict()
            assert all(lx.state_dict()["step"] == saved["step"] for lx in ranks)
            state = json.dumps(saved)
        finally:
            for lx in ranks:
                lx.close()
    return batches


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["SEQUENTIAL", "IID", "CYCLIC"])
@pytest.mark.parametrize(
    "phases",
    [
        [(4, 5), (2, 7), (3, 4), (1, 9)],
        [(1, 3), (6, 11), (4, 1), (2, 10)],
        [(3, 17), (3, 0), (1, 2), (4, 6)],
    ],
    ids=["4-2-3-1", "1-6-4-2", "3-3-1-4"],
)
@pytest.mark.parametrize("kind", ["store", "manifest", "mix"])
def test_resumes_across_process_counts_give_the_uninterrupted_run(sets, kind, mode, phases):
    store = sets[kind]
    total = sum(steps for _, steps in phases)
    assert total * B > 2 * N, "the run must cross epoch boundaries"
    want = run(store, mode, [(1, total)])
    for saver in ("last", "first"):
        got = run(store, mode, phases, saver)
        assert len(got) == len(want) == total
        for k, (g, w) in enumerate(zip(got, want)):
            assert np.array_equal(g, w), f"step {k} differs after resuming ({phases}, saved by the {saver} rank)"
    if kind == "mix":
        counts = [np.bincount(b // 1000, minlength=3)[1:] for b in want]
        assert all(list(c) == [8, 4] for c in counts), "every global batch is exactly 2:1"
    elif mode == 2:
        # Without replacement: every epoch's samples are each index once (the property the
        # uninterrupted run has, so the resumed one has it too).
        flat = np.concatenate(want)
        per_epoch = N - N % B if N >= B else N
        for e in range(len(flat) // per_epoch):
            assert len(set(flat[e * per_epoch : (e + 1) * per_epoch].tolist())) == per_epoch


def test_a_state_with_another_global_batch_is_refused(store):
    with loader(store, 2, 0, 2) as a:
        next(a)
        state = a.state_dict()
    with loader(store, 2, 0, 3, batch_size=B + 3) as b:
        with pytest.raises(ValueError, match="global batch_size must stay the same"):
            b.load_state_dict(state)
        assert b.step == 0


def test_a_state_written_before_elastic_resume_still_loads(store):
    with loader(store, 1, 1, 2) as a:
        for _ in range(3):
            next(a)
        state = a.state_dict()
        want = next(a)["id"]
    config = {**state["config"], "shard_index": 1, "shard_count": 2}
    # 0.10.0 states: the shard in the config, and the fingerprint over all of it.
    fingerprint = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    old = {"step": state["step"], "fingerprint": fingerprint, "config": config}
    with loader(store, 1, 1, 2) as b:
        b.load_state_dict(old)
        assert b.step == 3 and np.array_equal(next(b)["id"], want)
        with pytest.raises(ValueError):
            b.load_state_dict({**old, "fingerprint": "0" * 16})  # an edited state is refused
