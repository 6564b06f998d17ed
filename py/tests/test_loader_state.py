"""Loader states are versioned: every state an earlier loaderx saved still loads and resumes at the
batch the saving loader would have returned next; a state from a newer loaderx, a damaged one and
one from another config are each a BadArgumentError, never a KeyError.

The fixtures (py/tests/fixtures/loader_states) are states loaderx 0.10.0 saved, written by
py/tests/fixtures_gen/loader_states.py together with the batches the loader returned right after
saving. Each is loaded by today's code and checked against those batches and against an
uninterrupted run, on the saver's shard and on other shard counts. The torch and jax fixtures
are checked in py/tests_ml/test_loader_state_ml.py."""

import copy
import importlib.util
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from loaderx._state import CURRENT_VERSION, MIGRATIONS, LoaderState, Shard, fingerprint
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.errors import BadArgumentError

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "loader_states"
_spec = importlib.util.spec_from_file_location("loader_states_gen", TESTS / "fixtures_gen" / "loader_states.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

LOADER_CASES = [name for name, (kind, _, _) in gen.CASES.items() if kind in ("loader", "mix")]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return gen.build_data(tmp_path_factory.mktemp("loader-states"))


def fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


def global_batches(doc, data, steps):
    """Global batches 0..steps-1 of an uninterrupted run of the case's loader (one shard)."""
    with gen.make(doc["kind"], doc["setup"], data, shard_index=0, shard_count=1) as lx:
        return [gen.ids_of(next(lx)) for _ in range(steps)]


def test_every_loader_case_has_a_committed_0_10_0_fixture():
    for name in gen.CASES:
        doc = fixture(name)
        assert doc["loaderx"] == "0.10.0"
        assert "version" not in doc["state"], "0.10.0 wrote unversioned states"
        assert len(doc["next"]) == gen.TAKE_AFTER


@pytest.mark.parametrize("name", LOADER_CASES)
def test_a_0_10_0_state_resumes_where_the_saving_loader_stood(data, name):
    doc = fixture(name)
    step = doc["state"]["step"]
    with gen.make(doc["kind"], doc["setup"], data) as lx:  # the saver's shard
        lx.load_state_dict(copy.deepcopy(doc["state"]))
        assert lx.step == step
        got = [gen.ids_of(next(lx)) for _ in range(gen.TAKE_AFTER)]
    assert got == doc["next"], "the batches 0.10.0 returned after saving"
    want = global_batches(doc, data, step + gen.TAKE_AFTER)[step:]
    shard = Shard(doc["setup"].get("shard_index", 0), doc["setup"].get("shard_count", 1))
    assert got == [list(shard.take(b)) for b in want], "the uninterrupted run's batches"


@pytest.mark.parametrize("count", [1, 2, 3, 4])
@pytest.mark.parametrize("name", LOADER_CASES)
def test_a_0_10_0_state_resumes_on_any_shard_count(data, name, count):
    doc = fixture(name)
    step = doc["state"]["step"]
    ranks = [gen.make(doc["kind"], doc["setup"], data, shard_index=r, shard_count=count) for r in range(count)]
    try:
        for lx in ranks:
            lx.load_state_dict(json.loads(json.dumps(doc["state"])))
        got = [sum((gen.ids_of(next(lx)) for lx in ranks), []) for _ in range(gen.TAKE_AFTER)]
    finally:
        for lx in ranks:
            lx.close()
    assert got == global_batches(doc, data, step + gen.TAKE_AFTER)[step:]


@pytest.mark.parametrize("name", LOADER_CASES)
def test_a_migrated_state_saves_as_the_current_version(data, name):
    doc = fixture(name)
    with gen.make(doc["kind"], doc["setup"], data) as lx:
        lx.load_state_dict(doc["state"])
        saved = lx.state_dict()
        want = [gen.ids_of(next(lx)) for _ in range(2)]
    assert saved["version"] == CURRENT_VERSION
    # What the state held, plus what a loader adds now: its streams' content digests, and the
    # steps consumed (none since the load; an old state has no history).
    added = ("digests", "history")
    assert {k: v for k, v in saved.items() if k not in added} == LoaderState.from_dict(doc["state"]).to_dict()
    assert saved["history"] == [] and set(saved["digests"]) == set(doc["state"]["config"].get("streams", saved["digests"]))
    with gen.make(doc["kind"], doc["setup"], data) as again:
        again.load_state_dict(pickle.loads(pickle.dumps(saved)))
        assert [gen.ids_of(next(again)) for _ in range(2)] == want


def test_the_state_before_elastic_resume_migrates_without_its_shard():
    # The older 0.10.0 form: the shard in the config, the fingerprint over all of it.
    new = fixture("sharded_rank1_of_2")["state"]
    config = {**new["config"], "shard_index": 1, "shard_count": 2}
    old = {"step": new["step"], "fingerprint": fingerprint(config), "config": config}
    state = LoaderState.from_dict(old)
    assert state.config == new["config"] and state.step == new["step"]
    with pytest.raises(BadArgumentError, match="fingerprint"):
        LoaderState.from_dict({**old, "fingerprint": new["fingerprint"]})


def test_every_version_below_the_current_one_has_a_migration():
    assert sorted(MIGRATIONS) == list(range(1, CURRENT_VERSION))


def damaged_states():
    good = LoaderState(7, {"length": 103, "batch_size": 12, "mode": 2, "seed": 11, "streams": ["id"]}, 1).to_dict()
    mix = fixture("mix_2_1")["state"]
    no = object()

    def edit(state, **changes):
        out = dict(state)
        for key, value in changes.items():
            if value is no:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    return {
        "empty": {},
        "step only": {"step": 3},
        "no step": edit(good, step=no),
        "no config": edit(good, config=no),
        "config not a dict": edit(good, config=[1, 2]),
        "no fingerprint": edit(good, fingerprint=no),
        "edited config": edit(good, config={**good["config"], "seed": 12}),
        "negative step": edit(good, step=-1),
        "step a string": edit(good, step="7"),
        "step a float": edit(good, step=7.5),
        "step a bool": edit(good, step=True),
        "version 0": edit(good, version=0),
        "version a string": edit(good, version="2"),
        "shard_count 0": edit(good, shard_count=0),
        "v1 edited": edit(mix, step=no),
        "v1 no positions": edit(mix, positions=no),
        "v1 positions not a list": edit(mix, positions=5),
        "v1 positions negative": edit(mix, positions=[-1, 3]),
        "v1 weights not numbers": edit(mix, weights=["a", 1]),
    }


@pytest.mark.parametrize("case", list(damaged_states()))
def test_a_damaged_state_is_a_bad_argument_error(case):
    state = damaged_states()[case]
    with pytest.raises(BadArgumentError, match="damaged"):
        LoaderState.from_dict(state)


def test_a_state_from_a_newer_loaderx_is_refused_by_every_loader(data):
    doc = fixture("plain_cyclic")
    newer = {**LoaderState.from_dict(doc["state"]).to_dict(), "version": CURRENT_VERSION + 1, "new": [1]}
    with gen.make(doc["kind"], doc["setup"], data) as lx:
        with pytest.raises(BadArgumentError, match=f"version {CURRENT_VERSION + 1}, written by a newer loaderx"):
            lx.load_state_dict(newer)
        assert lx.step == 0


@pytest.mark.parametrize("case", ["empty", "no step", "no config", "step a string", "v1 no positions"])
def test_the_loader_raises_the_typed_error_not_a_key_error(data, case):
    doc = fixture("mix_2_1")
    with gen.make(doc["kind"], doc["setup"], data) as lx:
        with pytest.raises(BadArgumentError):
            lx.load_state_dict(damaged_states()[case])
        with pytest.raises(TypeError):
            lx.load_state_dict([0])
        assert lx.step == 0


def test_a_state_from_another_set_of_stores_is_refused(data):
    plain, manifest = fixture("plain_cyclic"), fixture("manifest")
    with DataLoader({"id": DenseDataset(data["ids"]["id"])}, batch_size=gen.B, mode=2, seed=3) as lx:
        # The same length, batch, mode and seed; only the manifest's store listing differs.
        with pytest.raises(BadArgumentError, match="stores"):
            lx.load_state_dict(manifest["state"])
        with pytest.raises(BadArgumentError, match="seed"):
            lx.load_state_dict(plain["state"])


@pytest.mark.parametrize("count", [1, 2, 3, 4, 6])
def test_the_shards_of_a_batch_joined_in_order_are_the_batch(count):
    batch = list(range(100, 100 + gen.B))
    parts = [list(Shard(i, count).take(batch)) for i in range(count)]
    assert sum(parts, []) == batch
    assert {len(p) for p in parts} == {gen.B // count}


def test_a_shard_refuses_a_bad_place_and_an_uneven_batch():
    for index, count in ((0, 0), (2, 2), (-1, 2)):
        with pytest.raises(BadArgumentError, match="shard_"):
            Shard(index, count)
    with pytest.raises(TypeError):
        Shard(0.5, 2)
    with pytest.raises(BadArgumentError, match="not divisible by shard_count 5"):
        Shard(1, 5).rows(12)
    assert Shard.of(None, 3) == Shard(0, 3) and Shard.of(2, None, lambda: Shard(1, 4)) == Shard(2, 4)


def test_the_readme_shows_the_state_the_loader_saves(tmp_path):
    text = (TESTS.parents[1] / "README.md").read_text()
    shown = json.loads(text.split("Rank 0's state above is:\n\n```json\n", 1)[1].split("```", 1)[0])
    from loaderx.converter import from_numpy

    from_numpy(tmp_path / "ids", np.arange(1000), progress=False)
    four = [
        DataLoader({"id": DenseDataset(tmp_path / "ids")}, batch_size=12, seed=3, shard_index=r, shard_count=4)
        for r in range(4)
    ]
    try:
        for _ in range(5):
            for lx in four:
                next(lx)
        assert four[0].state_dict() == shown
    finally:
        for lx in four:
            lx.close()
