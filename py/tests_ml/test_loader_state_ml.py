"""The torch and jax loader states loaderx 0.10.0 saved (py/tests/fixtures/loader_states) still load
into loaderx.torch's IterableDataset and BatchSampler and loaderx.jax's DataLoader, which then return
the batches the saving object returned next; the three share one state type, so a state saved
by one front end resumes the others, and a state from a newer loaderx is refused by each."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from loaderx._state import CURRENT_VERSION, LoaderState, Shard
from loaderx.errors import BadArgumentError

TESTS = Path(__file__).resolve().parents[1] / "tests"
FIXTURES = TESTS / "fixtures" / "loader_states"
_spec = importlib.util.spec_from_file_location("loader_states_gen", TESTS / "fixtures_gen" / "loader_states.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return gen.build_data(tmp_path_factory.mktemp("loader-states-ml"))


def fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def newer(state):
    return {**LoaderState.from_dict(state).to_dict(), "version": CURRENT_VERSION + 1}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_0_10_0_torch_iterable_state_resumes_in_torchs_loader(data, workers):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TorchLoader

    doc = fixture("torch_iterable")
    ds = gen.make(doc["kind"], doc["setup"], data)
    ds.load_state_dict(json.loads(json.dumps(doc["state"])))
    it = iter(TorchLoader(ds, batch_size=None, num_workers=workers))
    got = [gen.ids_of({"id": next(it)["id"].numpy()}) for _ in range(gen.TAKE_AFTER)]
    del it
    ds.loader.close()
    assert got == doc["next"]
    assert ds.state_dict(step=doc["state"]["step"])["version"] == CURRENT_VERSION


def test_a_0_10_0_batch_sampler_state_resumes_on_any_shard_count(data):
    pytest.importorskip("torch")
    doc = fixture("torch_batch_sampler")
    saver = gen.make(doc["kind"], doc["setup"], data)
    saver.load_state_dict(doc["state"])
    it = iter(saver)
    assert [next(it) for _ in range(gen.TAKE_AFTER)] == doc["next"]
    step = doc["state"]["step"]
    plain = gen.make(doc["kind"], doc["setup"], data, shard_index=0, shard_count=1)
    want = [b for _, b in zip(range(step + gen.TAKE_AFTER), iter(plain))][step:]
    shard = Shard(doc["setup"]["shard_index"], doc["setup"]["shard_count"])
    assert doc["next"] == [list(shard.take(b)) for b in want], "the saver's slices of the uninterrupted run"
    for count in (1, 3, 4):
        ranks = [gen.make(doc["kind"], doc["setup"], data, shard_index=r, shard_count=count) for r in range(count)]
        for r in ranks:
            r.load_state_dict(doc["state"])
        its = [iter(r) for r in ranks]
        assert [sum((next(i) for i in its), []) for _ in range(gen.TAKE_AFTER)] == want


def test_a_0_10_0_jax_state_resumes(data):
    pytest.importorskip("jax")
    doc = fixture("jax")
    with gen.make(doc["kind"], doc["setup"], data) as lx:
        lx.load_state_dict(doc["state"])
        got = [gen.ids_of({"id": np.asarray(next(lx)["id"])}) for _ in range(gen.TAKE_AFTER)]
    assert got == doc["next"]


def test_one_state_type_crosses_the_front_ends(data):
    """A state from the torch dataset resumes the jax loader and the base loader, and back."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    doc = fixture("torch_iterable")
    step = doc["state"]["step"]
    with gen.make("loader", doc["setup"], data) as base:
        base.seek(step)
        want = [gen.ids_of(next(base)) for _ in range(2)]
    with gen.make("jax", doc["setup"], data) as lj:
        lj.load_state_dict(doc["state"])
        assert [gen.ids_of({"id": np.asarray(next(lj)["id"])}) for _ in range(2)] == want
        saved = lj.state_dict()
    ds = gen.make("torch_iterable", doc["setup"], data)
    ds.load_state_dict(saved)
    it = iter(ds)
    assert [gen.ids_of({"id": next(it)["id"].numpy()}) for _ in range(2)] == [
        gen.ids_of(b) for b in _base_from(doc, data, step + 2, 2)
    ]
    del it
    ds.loader.close()


def _base_from(doc, data, start, n):
    with gen.make("loader", doc["setup"], data) as base:
        base.seek(start)
        return [next(base) for _ in range(n)]


def test_a_newer_state_is_refused_by_every_front_end(data):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    doc = fixture("torch_iterable")
    ds = gen.make("torch_iterable", doc["setup"], data)
    with pytest.raises(BadArgumentError, match="newer loaderx"):
        ds.load_state_dict(newer(doc["state"]))
    ds.loader.close()
    with gen.make("jax", doc["setup"], data) as lj, pytest.raises(BadArgumentError, match="newer loaderx"):
        lj.load_state_dict(newer(doc["state"]))
    bs = fixture("torch_batch_sampler")
    sampler = gen.make(bs["kind"], bs["setup"], data)
    with pytest.raises(BadArgumentError, match="newer loaderx"):
        sampler.load_state_dict(newer(bs["state"]))
    with pytest.raises(BadArgumentError, match="damaged"):
        sampler.load_state_dict({k: v for k, v in bs["state"].items() if k != "step"})
