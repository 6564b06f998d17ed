"""Content digests in loader states and receipts (loaderx.receipt): a state records each
stream's digest and refuses to resume over changed content, and a receipt lists, from itself
alone, the record indices every rank read at any step, across resumes and world sizes."""

import json
import subprocess
import sys

import numpy as np
import pytest

from loaderx import errors
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.receipt import indices
from loaderx.zrecord import Zrecord

N = 300


@pytest.fixture()
def store(tmp_path):
    """Row i holds i: a batch's values are its record indices."""
    from_numpy(tmp_path / "s", np.arange(N, dtype=np.int64).reshape(N, 1), codec="zstd")
    return tmp_path / "s"


def loaders(store, count, **kw):
    return [
        DataLoader({"x": DenseDataset(store)}, batch_size=8, mode="cyclic", seed=3, num_workers=1,
                   shard_index=k, shard_count=count, **kw)
        for k in range(count)
    ]


def take(ls, steps):
    """{step: [indices of rank 0, rank 1, ...]} for the next ``steps`` steps of every loader."""
    out = {}
    for _ in range(steps):
        step = ls[0].step
        out[step] = [next(loader)["x"][:, 0].tolist() for loader in ls]
    return out


@pytest.mark.parametrize("count", [1, 2, 4])
def test_a_receipt_lists_what_every_rank_read(store, count):
    ls = loaders(store, count)
    seen = take(ls, 12)
    receipt = json.loads(json.dumps(ls[0].receipt()))  # it is plain JSON
    assert receipt["digests"]["x"].startswith("sha256:")
    assert receipt["segments"] == [{"start": 0, "end": 12, "shard_count": count}]
    for step, ranks in seen.items():
        assert indices(receipt, step) == {"step": step, "shard_count": count, "ranks": ranks}
    with pytest.raises(errors.BadArgumentError, match="step 12 was not consumed"):
        indices(receipt, 12)
    for loader in ls:
        loader.close()


def test_a_receipt_spans_resumes_and_changes_of_world_size(store, tmp_path):
    first = loaders(store, 2)
    seen = take(first, 5)
    state = first[0].state_dict()
    for loader in first:
        loader.close()
    second = loaders(store, 4)
    for loader in second:
        loader.load_state_dict(state)
    seen.update(take(second, 7))
    receipt = second[0].receipt()
    assert [(s["start"], s["end"], s["shard_count"]) for s in receipt["segments"]] == [(0, 5, 2), (5, 12, 4)]
    for step, ranks in seen.items():
        assert indices(receipt, step)["ranks"] == ranks, step
    # From the document alone, on the command line.
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    run = subprocess.run([sys.executable, "-m", "loaderx", "receipt", "7", path], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["ranks"] == seen[7]
    run = subprocess.run([sys.executable, "-m", "loaderx", "receipt", "99", path], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "not consumed" in run.stderr
    for loader in second:
        loader.close()


def test_a_mix_receipt_follows_new_weights_after_a_resume(tmp_path):
    # Source j's row e holds its index in the joined space, so values are joined indices.
    from_numpy(tmp_path / "a", np.arange(100, dtype=np.int64).reshape(100, 1), codec="raw")
    from_numpy(tmp_path / "b", np.arange(100, 160, dtype=np.int64).reshape(60, 1), codec="raw")

    def mixed(weights):
        sources = [{"x": DenseDataset(tmp_path / "a")}, {"x": DenseDataset(tmp_path / "b")}]
        return DataLoader.mix(sources, weights, batch_size=10, mode="cyclic", seed=5, num_workers=1)

    loader = mixed([0.5, 0.5])
    seen = {}
    for _ in range(4):
        step = loader.step
        seen[step] = [next(loader)["x"][:, 0].tolist()]
    state = loader.state_dict()
    loader.close()
    loader = mixed([0.9, 0.1])
    loader.load_state_dict(state)
    for _ in range(4):
        step = loader.step
        seen[step] = [next(loader)["x"][:, 0].tolist()]
    receipt = loader.receipt()
    assert [s["weights"] for s in receipt["segments"]] == [[0.5, 0.5], [0.9, 0.1]]
    for step, ranks in seen.items():
        assert indices(receipt, step)["ranks"] == ranks, step
    loader.close()


def test_resuming_over_changed_content_of_the_same_length_is_refused(store):
    loader = loaders(store, 1)[0]
    take([loader], 3)
    state = loader.state_dict()
    loader.close()
    assert state["digests"]["x"].startswith("sha256:")
    # Same length, other content: the last record replaced.
    with Zrecord(store) as z:
        z.delete([N - 1])
        z.append(np.array([12345], np.int64).view(np.uint8), [0], codec="zstd")
        assert len(z) == N
    again = loaders(store, 1)[0]
    with pytest.raises(errors.BadArgumentError, match=r"stream 'x' \(.*s\) changed since the state was saved"):
        again.load_state_dict(state)
    # The same content (a state saved now) resumes.
    again.load_state_dict(again.state_dict())
    again.close()


def test_a_state_from_a_store_without_checksums_still_resumes(store):
    loader = loaders(store, 1)[0]
    state = loader.state_dict()
    loader.close()
    state["digests"] = {"x": None}
    again = loaders(store, 1)[0]
    again.load_state_dict(state)
    again.close()
