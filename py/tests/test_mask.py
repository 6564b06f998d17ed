"""Exclusion masks: built for a store's identity, saved and loaded, refused for other content,
and honoured by the DataLoader in every sampler mode, across resume, sharding, process workers
and receipts. The records hold their own index, so every batch shows which records it read."""

import json
import subprocess
import sys

import numpy as np
import pytest

from loaderx import manifest
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.errors import BadArgumentError, CorruptStoreError, StoreIndexError
from loaderx.mask import Mask, identity
from loaderx.receipt import indices

N = 1000
EXCLUDED = np.array([0, 3, 4, 5, 64, 127, 128, 500, 998, 999])


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "ids"
    from_numpy(path, np.arange(N, dtype=np.int64), codec="zstd")
    return path


def _ids(loader, steps):
    return [np.asarray(next(loader)["x"]).tolist() for _ in range(steps)]


def test_a_mask_round_trips_and_names_its_store(store, tmp_path):
    mask = Mask.build(store, EXCLUDED[::-1].tolist() + [3])
    assert (mask.length, mask.excluded, mask.kept) == (N, len(EXCLUDED), N - len(EXCLUDED))
    assert mask.identity == identity(store) == identity(DenseDataset(store))
    mask.save(tmp_path / "m.lxmask")
    again = Mask.load(tmp_path / "m.lxmask")
    assert again.digest == mask.digest
    assert again.excluded_indices().tolist() == EXCLUDED.tolist()
    kept = np.setdiff1d(np.arange(N), EXCLUDED)
    assert again.select(np.arange(len(kept))).tolist() == kept.tolist()
    with pytest.raises(BadArgumentError):
        again.select([len(kept)])


def test_damaged_masks_and_bad_indices_are_refused(store, tmp_path):
    data = bytearray(Mask.build(store, [1]).to_bytes())
    data[60] ^= 1
    (tmp_path / "bad.lxmask").write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError):
        Mask.load(tmp_path / "bad.lxmask")
    with pytest.raises(StoreIndexError):
        Mask.build(store, [N])
    with pytest.raises(ValueError):
        Mask.build(store, [-1])
    with pytest.raises(BadArgumentError, match="every record"):
        Mask.build(store, range(N))


@pytest.mark.parametrize("mode", ["sequential", "iid", "cyclic"])
def test_the_loader_never_reads_an_excluded_record(store, mode):
    mask = Mask.build(store, EXCLUDED)
    with DataLoader({"x": DenseDataset(store)}, batch_size=64, mode=mode, seed=3, exclude=mask, num_workers=2) as loader:
        seen = np.concatenate(_ids(loader, 40))
    assert not np.isin(seen, EXCLUDED).any()
    if mode != "iid":
        # 40 steps of 64 cover the 990 kept records twice over, each of them.
        assert set(seen.tolist()) == set(np.setdiff1d(np.arange(N), EXCLUDED).tolist())


def test_batches_are_the_unmasked_samplers_over_the_kept_records(store):
    mask = Mask.build(store, EXCLUDED)
    kept = np.setdiff1d(np.arange(N), EXCLUDED)
    from loaderx.sampler import Sampler

    sampler = Sampler(len(kept), 32, 2, 9)
    with DataLoader({"x": DenseDataset(store)}, batch_size=32, mode="cyclic", seed=9, exclude=mask) as loader:
        got = _ids(loader, 5)
    assert got == [kept[sampler.batch_at(k)].tolist() for k in range(5)]


def test_resume_sharding_and_processes_stay_exact(store, tmp_path):
    mask = Mask.build(store, EXCLUDED)
    mask.save(tmp_path / "m.lxmask")
    ds = DenseDataset(store)
    with DataLoader({"x": ds}, batch_size=64, mode="cyclic", seed=1, exclude=tmp_path / "m.lxmask") as a:
        first = _ids(a, 6)
        state = a.state_dict()
        rest = _ids(a, 4)
        receipt = a.receipt()
    assert state["config"]["exclude"]["digest"] == mask.digest
    with DataLoader({"x": ds}, batch_size=64, mode="cyclic", seed=1, exclude=mask) as b:
        b.load_state_dict(state)
        assert _ids(b, 4) == rest
    # Two shards of the same global batches, from a state saved by one process.
    halves = []
    for rank in range(2):
        with DataLoader({"x": ds}, batch_size=64, mode="cyclic", seed=1, exclude=mask, shard_index=rank, shard_count=2) as s:
            s.load_state_dict(state)
            halves.append(_ids(s, 4))
    assert [h0 + h1 for h0, h1 in zip(*halves)] == rest
    with DataLoader({"x": ds}, batch_size=64, mode="cyclic", seed=1, exclude=mask, workers="processes", num_workers=2) as p:
        assert _ids(p, 6) == first
    # Another mask is another run: its state does not load.
    other = Mask.build(store, [7])
    with DataLoader({"x": ds}, batch_size=64, mode="cyclic", seed=1, exclude=other) as c:
        with pytest.raises(BadArgumentError):
            c.load_state_dict(state)
    # The receipt gives the records read, with the mask (and only with it).
    assert indices(receipt, 7, tmp_path / "m.lxmask")["ranks"] == [rest[1]]
    with pytest.raises(BadArgumentError, match="mask"):
        indices(receipt, 7)
    with pytest.raises(BadArgumentError, match="not"):
        indices(receipt, 7, other)
    (tmp_path / "r.json").write_text(json.dumps(receipt))
    cli = subprocess.run([sys.executable, "-m", "loaderx", "receipt", "7", str(tmp_path / "r.json"), str(tmp_path / "m.lxmask")],
                         capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["ranks"] == [rest[1]]


def test_a_mask_for_other_content_is_refused(store, tmp_path):
    mask = Mask.build(store, EXCLUDED)
    other = tmp_path / "other"
    from_numpy(other, np.arange(N, dtype=np.int64) + 1, codec="zstd")
    with pytest.raises(BadArgumentError, match="none of these streams"):
        DataLoader({"x": DenseDataset(other)}, exclude=mask)
    # The same store after an append is other content.
    from_numpy(store, np.arange(3, dtype=np.int64), codec="zstd")
    with pytest.raises(BadArgumentError):
        mask.check(store)
    with pytest.raises(BadArgumentError):
        DataLoader({"x": DenseDataset(store)}, exclude=mask)


def test_aligned_streams_and_manifests(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    from_numpy(a, np.arange(300, dtype=np.int64), codec="raw")
    from_numpy(b, np.arange(300, 600, dtype=np.int64), codec="zstd")
    manifest.commit(tmp_path / "m", ["../a", "../b"])
    data = DenseDataset(tmp_path / "m")
    labels = tmp_path / "labels"
    from_numpy(labels, np.arange(600, dtype=np.int64) * 10, codec="raw")
    mask = Mask.build(tmp_path / "m", [1, 299, 300, 599])
    assert mask.identity == identity(data)
    # The mask is the manifest's; the labels stream is aligned to it and read through it.
    with DataLoader({"x": data, "y": DenseDataset(labels)}, batch_size=50, mode="sequential", exclude=mask) as loader:
        batches = [next(loader) for _ in range(12)]
    xs = np.concatenate([np.asarray(b["x"]) for b in batches])
    ys = np.concatenate([np.asarray(b["y"]) for b in batches])
    assert xs.tolist() == [i for i in range(600) if i not in (1, 299, 300, 599)] + xs[596:].tolist()
    assert (ys == xs * 10).all()


def test_a_mix_takes_one_mask_per_source(store, tmp_path):
    other = tmp_path / "other"
    from_numpy(other, np.arange(5000, 5200, dtype=np.int64), codec="raw")
    a, b = DenseDataset(store), DenseDataset(other)
    mask = Mask.build(store, EXCLUDED)
    masked_b = Mask.build(other, range(0, 200, 2))  # the odd ones of other stay
    args = dict(batch_size=30, mode="cyclic", seed=2, num_workers=2)
    with DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[mask, masked_b], **args) as loader:
        batches = _ids(loader, 12)
        state = loader.state_dict()
        after = _ids(loader, 3)
    seen = np.concatenate(batches)
    assert not np.isin(seen, EXCLUDED).any()
    assert not np.isin(seen, np.arange(5000, 5200, 2)).any()
    # Every batch holds the weights' shares: 20 from the first source, 10 from the second.
    assert all(sum(v >= 5000 for v in b) == 10 for b in batches)
    # The second source's 100 kept records, each once in the first pass of its cyclic stream
    # (10 per batch: the first 10 batches).
    assert sorted(v for b in batches[:10] for v in b if v >= 5000) == list(range(5001, 5200, 2))
    with DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[mask, masked_b], **args) as again:
        again.load_state_dict(state)
        assert _ids(again, 3) == after
    with DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[mask, None], **args) as other_masks:
        with pytest.raises(BadArgumentError):
            other_masks.load_state_dict(state)
    with DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[mask, masked_b], workers="processes", **args) as procs:
        assert _ids(procs, 12) == batches
    with pytest.raises(BadArgumentError, match="none of these streams"):
        DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[masked_b, None], **args)
    with pytest.raises(ValueError, match="one mask"):
        DataLoader.mix([{"x": a}, {"x": b}], [2.0, 1.0], exclude=[mask], **args)
