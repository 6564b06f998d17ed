"""Mixing schedules: weights as (step, weights) points, held or interpolated. Every batch holds
exactly the apportionment of the weights at its step, a source may be silent for part of the
schedule, states record the schedule and resume exactly (also elastically, and with a new
schedule for the steps after the resume), packed sources mix by schedule too, and
``loaderx mix-preview`` prints the shares a schedule gives."""

import json
import subprocess
import sys

import numpy as np
import pytest

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import BadArgumentError
from loaderx.mix import preview

BASE = (0, 1000, 2000)
LENGTHS = (50, 31, 77)
SCHEDULE = [(0, [1.0, 1.0, 0.0]), (6, [1.0, 1.0, 1.0]), (14, [0.0, 1.0, 3.0])]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("sched")
    for j, (n, base) in enumerate(zip(LENGTHS, BASE)):
        from_numpy(root / f"s{j}", base + np.arange(n, dtype=np.int64), progress=False)
    return root


def loader(root, weights=SCHEDULE, interpolation="linear", **kw):
    kw = {"batch_size": 24, "seed": 3, "num_workers": 2, "mode": "cyclic", **kw}
    sources = [{"x": DenseDataset(root / f"s{j}")} for j in range(3)]
    return DataLoader.mix(sources, weights, interpolation=interpolation, **kw)


def shares(batch):
    return [int(((batch["x"] >= b) & (batch["x"] < b + 1000)).sum()) for b in BASE]


def apportion(weights, batch):
    """Largest remainder, ties to the lower index."""
    total = sum(weights)
    quotas = [w / total * batch for w in weights]
    counts = [int(np.floor(q)) for q in quotas]
    order = sorted(range(len(weights)), key=lambda j: -(quotas[j] - np.floor(quotas[j])))
    for j in order[: batch - sum(counts)]:
        counts[j] += 1
    return counts


def weights_at(points, step, linear):
    if step <= points[0][0]:
        return points[0][1]
    for (s0, w0), (s1, w1) in zip(points, points[1:]):
        if s0 <= step < s1:
            if not linear:
                return w0
            t = (step - s0) / (s1 - s0)
            return [a + (b - a) * t for a, b in zip(w0, w1)]
    return points[-1][1]


@pytest.mark.parametrize("interpolation", ["step", "linear"])
def test_every_batch_holds_the_weights_of_its_step(root, interpolation):
    dl = loader(root, interpolation=interpolation)
    for step in range(20):
        want = apportion(weights_at(SCHEDULE, step, interpolation == "linear"), 24)
        assert shares(next(dl)) == want, step
    dl.close()
    # The batches checked include silent sources: source 2 at step 0, source 0 from step 14.
    assert apportion(weights_at(SCHEDULE, 0, interpolation == "linear"), 24)[2] == 0
    assert apportion(weights_at(SCHEDULE, 15, interpolation == "linear"), 24)[0] == 0


def test_states_record_the_schedule_and_resume_elastically(root):
    whole = loader(root)
    want = [next(whole)["x"] for _ in range(20)]
    whole.close()
    got, state = [], None
    for count, steps in [(4, 5), (2, 4), (3, 6), (1, 5)]:
        ranks = [loader(root, shard_index=r, shard_count=count) for r in range(count)]
        if state is not None:
            for dl in ranks:
                dl.load_state_dict(json.loads(state))
        for _ in range(steps):
            got.append(np.concatenate([next(dl)["x"] for dl in ranks]))
        saved = ranks[-1].state_dict()
        assert saved["schedule"] == {"points": [[s, w] for s, w in SCHEDULE], "interpolation": "linear"}
        assert saved["weights"] == pytest.approx(weights_at(SCHEDULE, saved["step"], True))
        state = json.dumps(saved)
        for dl in ranks:
            dl.close()
    for k, (a, b) in enumerate(zip(want, got)):
        assert np.array_equal(a, b), k


def test_a_resume_may_bring_a_new_schedule_for_later_steps(root):
    first = loader(root)
    before = [next(first)["x"] for _ in range(8)]
    state = first.state_dict()
    first.close()
    new = [(8, [3.0, 0.0, 1.0]), (12, [1.0, 1.0, 1.0])]
    second = loader(root, weights=new, interpolation="step")
    second.load_state_dict(state)
    after = [next(second)["x"] for _ in range(8)]
    second.close()
    for k, batch in enumerate(after):
        assert shares({"x": batch}) == apportion(weights_at(new, 8 + k, False), 24)
    # Each source's stream goes on where it stood: no record of a CYCLIC epoch twice.
    for j, (n, base) in enumerate(zip(LENGTHS, BASE)):
        seen = [int(v) for b in before + after for v in b if base <= v < base + 1000]
        epoch = seen[:n]
        assert len(set(epoch)) == len(epoch), f"source {j} repeated a record within its first epoch"


def test_bad_schedules_are_clear_errors(root):
    with pytest.raises(BadArgumentError, match="not after step"):
        loader(root, weights=[(5, [1, 1, 1]), (5, [1, 2, 1])])
    with pytest.raises(BadArgumentError, match="has 2 weights"):
        loader(root, weights=[(0, [1, 1, 1]), (9, [1, 2])])
    with pytest.raises(BadArgumentError, match="point 1 is"):
        loader(root, weights=[(0, [1, 1, 1]), "soon"])
    with pytest.raises(BadArgumentError, match="interpolation must be one of"):
        loader(root, interpolation="cubic")
    with pytest.raises(BadArgumentError, match="would get no record"):
        loader(root, weights=[(0, [1, 1, 1e-9])])


def test_packed_sources_mix_by_schedule(tmp_path):
    rng = np.random.default_rng(2)
    docs = []
    for j in range(2):
        # Source j's tokens are j * 10000 + ..., so a row's source shows in its tokens.
        d = [(j * 10000 + rng.integers(1, 9000, int(n))).astype(np.int32) for n in rng.integers(1, 30, 60)]
        from_iterator(tmp_path / f"p{j}", iter(d), progress=False)
        docs.append(d)
    points = [(0, [1.0, 0.0]), (4, [1.0, 1.0])]
    kw = dict(batch_size=8, packing="concat", mode="cyclic", seed=1, weights=points, interpolation="linear", num_workers=2)
    sources = [RaggedDataset(tmp_path / f"p{j}") for j in range(2)]
    dl = DataLoader.packed(sources, 16, **kw)
    whole = [next(dl) for _ in range(8)]
    for step, b in enumerate(whole):
        rows_of = [int((b["tokens"][:, 0] >= 10000).sum()), 0]
        want = apportion(weights_at(points, step, True), 8)
        assert [8 - rows_of[0], rows_of[0]] == want, step
        assert b["source"].tolist() == (b["tokens"][:, 0] >= 10000).astype(int).tolist()
        for r in range(8):
            j = int(b["tokens"][r, 0] >= 10000)
            for c in range(16):
                d = b["doc_index"][r, c]
                assert b["tokens"][r, c] == docs[j][d][b["doc_offset"][r, c]]
    state = dl.state_dict()
    dl.close()
    # Resumed at step 4 on two ranks: the same rows.
    ranks = [DataLoader.packed([RaggedDataset(tmp_path / f"p{j}") for j in range(2)], 16, shard_index=r, shard_count=2, **kw) for r in range(2)]
    for r in ranks:
        r.seek(4)
    for step in range(4, 8):
        parts = [next(r) for r in ranks]
        assert np.array_equal(np.concatenate([p["tokens"] for p in parts]), whole[step]["tokens"])
    for r in ranks:
        r.close()
    assert state["positions"] and state["config"]["packed"]["packing"] == "concat"


def test_mix_preview_prints_each_sources_share(tmp_path):
    config = {"sources": ["web", "books", "code"], "weights": [[s, w] for s, w in SCHEDULE], "interpolation": "linear", "batch_size": 24}
    path = tmp_path / "mix.json"
    path.write_text(json.dumps(config))
    out = preview(config, range(0, 20, 2))
    for row in out["rows"]:
        assert row["counts"] == apportion(weights_at(SCHEDULE, row["step"], True), 24)
    cli = [sys.executable, "-m", "loaderx", "mix-preview", str(path), "--steps", "0:20:2"]
    p = subprocess.run(cli + ["--json"], capture_output=True, text=True, check=True)
    assert json.loads(p.stdout) == out
    table = subprocess.run(cli, capture_output=True, text=True, check=True).stdout.splitlines()
    assert table[0].split() == ["step", "web", "books", "code"]
    assert table[1].split() == ["0", "12", "50.00%", "12", "50.00%", "0", "0.00%"]
    bad = subprocess.run([sys.executable, "-m", "loaderx", "mix-preview", str(path), "--steps", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
    path.write_text(json.dumps({"weights": [1, 1]}))
    bad = subprocess.run([sys.executable, "-m", "loaderx", "mix-preview", str(path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "batch_size" in bad.stderr
