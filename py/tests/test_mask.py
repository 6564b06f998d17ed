"""Exclusion masks: built for a store's identity, saved and loaded, refused for other content,
and honoured by the DataLoader in every sampler mode, across resume, sharding, process workers
and receipts. The records hold their own index, so every batch shows which records it read."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from loaderx import manifest
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
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
        # A pickled copy goes on from here under the same mask, and its states say so.
        with pickle.loads(pickle.dumps(loader)) as copy:
            assert _ids(copy, 2) == [kept[sampler.batch_at(k)].tolist() for k in (5, 6)]
            assert copy.state_dict()["config"] == loader.state_dict()["config"]
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


def _packed_store(path, lengths, seed):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 30000, n).astype(np.int32) for n in lengths]
    from_iterator(path, iter(docs), codec="zstd", progress=False)
    return docs


def _rows(loader, steps):
    return [{k: v.copy() for k, v in next(loader).items()} for _ in range(steps)]


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_packed_streams_pack_the_kept_documents_only(tmp_path, packing):
    lengths = [int(n) for n in np.random.default_rng(1).integers(1, 40, 90)]
    docs = _packed_store(tmp_path / "docs", lengths, 3)
    excluded = list(range(0, 90, 7)) + [11, 12, 13]
    kept = [i for i in range(90) if i not in excluded]
    # The same documents with the excluded ones left out, as a store of its own.
    from_iterator(tmp_path / "kept", iter([docs[i] for i in kept]), codec="raw", progress=False)
    mask = Mask.build(tmp_path / "docs", excluded)
    args = dict(seq_len=16, batch_size=4, packing=packing, mode="cyclic", seed=5, bins=3, num_workers=2)
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), exclude=mask, **args) as loader:
        got = _rows(loader, 30)  # more than the kept documents' tokens (a cyclic epoch)
        state = loader.state_dict()
        copy = pickle.loads(pickle.dumps(loader))  # resumes where the loader stands
        after = _rows(loader, 3)
    with DataLoader.packed(RaggedDataset(tmp_path / "kept"), **args) as plain:
        want = _rows(plain, 30)
    for g, w in zip(got, want):
        # Rows are the kept-only store's, with doc_index naming records of the masked store.
        assert (g["tokens"] == w["tokens"]).all() and (g["segment_ids"] == w["segment_ids"]).all()
        mapped = np.where(w["doc_index"] >= 0, np.asarray(kept)[np.maximum(w["doc_index"], 0)], -1)
        assert (g["doc_index"] == mapped).all()
        assert not np.isin(g["doc_index"], excluded).any()
    if packing == "concat":
        # The first cyclic epoch holds each kept document's tokens exactly once.
        tokens = sum(lengths[i] for i in kept)
        seen = np.concatenate([b["doc_index"].ravel() for b in got])
        assert len(seen) > tokens
        seen = seen[:tokens]
        assert sorted(set(seen.tolist())) == kept
        assert np.bincount(seen, minlength=90)[kept].tolist() == [lengths[i] for i in kept]
    assert state["config"]["exclude"]["digest"] == mask.digest
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), exclude=mask, **args) as again:
        again.load_state_dict(state)
        assert all((a["doc_index"] == b["doc_index"]).all() for a, b in zip(_rows(again, 3), after))
    assert all((a["tokens"] == b["tokens"]).all() for a, b in zip(_rows(copy, 3), after))
    copy.close()
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), **args) as unmasked:
        with pytest.raises(BadArgumentError):
            unmasked.load_state_dict(state)
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), exclude=mask, workers="processes", **args) as procs:
        assert all((a["doc_index"] == b["doc_index"]).all() for a, b in zip(_rows(procs, 30), got))
    with pytest.raises(BadArgumentError, match="none of these streams"):
        DataLoader.packed(RaggedDataset(tmp_path / "kept"), exclude=mask, **args)


def test_mixed_packed_streams_take_one_mask_per_source(tmp_path):
    a_docs = _packed_store(tmp_path / "a", [5, 9, 3, 12, 7, 8, 4, 6], 1)
    _packed_store(tmp_path / "b", [10, 2, 6, 6, 9], 2)
    mask = Mask.build(tmp_path / "a", [1, 3])
    sources = [RaggedDataset(tmp_path / "a"), RaggedDataset(tmp_path / "b")]
    args = dict(seq_len=8, batch_size=6, packing="concat", mode="cyclic", seed=4, weights=[2.0, 1.0])
    with DataLoader.packed(sources, exclude=[mask, None], **args) as loader:
        batches = _rows(loader, 10)
        state = loader.state_dict()
    from_a = np.concatenate([b["doc_index"][b["source"] == 0].ravel() for b in batches])
    assert len(from_a) and not np.isin(from_a, [1, 3]).any()
    assert set(from_a.tolist()) == {0, 2, 4, 5, 6, 7}
    for b in batches:
        for row in np.flatnonzero(b["source"] == 0):
            d, o = b["doc_index"][row], b["doc_offset"][row]
            assert all(b["tokens"][row][k] == a_docs[d[k]][o[k]] for k in range(8))
    assert state["config"]["exclude"][0]["digest"] == mask.digest and state["config"]["exclude"][1] is None
    with DataLoader.packed(sources, **args) as unmasked, pytest.raises(BadArgumentError):
        unmasked.load_state_dict(state)
    with pytest.raises(ValueError, match="one mask"):
        DataLoader.packed(sources, exclude=[mask], **args)
    with pytest.raises(TypeError, match="not a list"):
        DataLoader.packed(sources[0], exclude=[mask], seq_len=8)


def _packed_replay(receipt, step, batch, **kw):
    """Checks a packed receipt's step against the batch the loader yielded (one rank)."""
    got = indices(receipt, step, **kw)
    (rows,) = got["rows"]
    assert len(rows) == batch["doc_index"].shape[0]
    for row, doc, off in zip(rows, batch["doc_index"], batch["doc_offset"]):
        want = []
        for d, o in zip(doc.tolist(), off.tolist()):
            if d < 0:
                continue
            if want and want[-1][0] == d and want[-1][1] + want[-1][2] == o:
                want[-1][2] += 1
            else:
                want.append([d, o, 1])
        assert row == want
    assert got["ranks"][0] == list(dict.fromkeys(int(d) for d in batch["doc_index"].ravel() if d >= 0))
    return got


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_receipts_replay_packed_runs(tmp_path, packing):
    _packed_store(tmp_path / "a", [int(n) for n in np.random.default_rng(2).integers(1, 30, 40)], 1)
    _packed_store(tmp_path / "b", [5, 9, 3, 12, 7, 8, 4, 6, 30], 2)
    a, b = RaggedDataset(tmp_path / "a"), RaggedDataset(tmp_path / "b")
    mask = Mask.build(a, [0, 5, 6, 30])
    args = dict(seq_len=12, batch_size=4, packing=packing, seed=3, bins=2)
    for kw, extra in (({}, {}), ({"exclude": mask}, {"mask": mask})):
        with DataLoader.packed(a, **kw, **args) as loader:
            batches = _rows(loader, 6)
            receipt = json.loads(json.dumps(loader.receipt()))
        for step, batch in enumerate(batches):
            _packed_replay(receipt, step, batch, sources=a, **extra)
    with DataLoader.packed([a, b], weights=[1.0, 1.0], exclude=[mask, None], **args) as mixed:
        batches = _rows(mixed, 6)
        receipt = mixed.receipt()
    for step, batch in enumerate(batches):
        # Joined indices: source 1's records follow source 0's 40.
        joined = {**batch, "doc_index": np.where(batch["doc_index"] >= 0, batch["doc_index"] + 40 * batch["source"][:, None], -1)}
        _packed_replay(receipt, step, joined, sources=[a, b], mask=[mask, None])
    (tmp_path / "r.json").write_text(json.dumps(receipt))
    mask.save(tmp_path / "m.lxmask")
    cli = [sys.executable, "-m", "loaderx", "receipt", "3", str(tmp_path / "r.json"), "--mask", str(tmp_path / "m.lxmask"), "--mask", "-"]
    out = subprocess.run(cli + ["--source", str(tmp_path / "a"), "--source", str(tmp_path / "b")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == indices(receipt, 3, mask=[mask, None], sources=[a, b])["rows"]
    with pytest.raises(BadArgumentError, match="give its sources"):
        indices(receipt, 0, mask=[mask, None])
    with pytest.raises(BadArgumentError, match="documents"):
        indices(receipt, 0, mask=[mask, None], sources=[b, a])
    with pytest.raises(BadArgumentError, match="source 0 of this run was masked"):
        indices(receipt, 0, mask=[None, None], sources=[a, b])
    # Two ranks: each rank's rows are its half of the global batch's.
    halves = []
    for r in range(2):
        with DataLoader.packed(a, shard_index=r, shard_count=2, **args) as rank:
            halves.append(_rows(rank, 2))
            receipt = rank.receipt()
    got = indices(receipt, 1, sources=a)
    for r in range(2):
        flat = [d for row in got["rows"][r] for d, _, n in row for _ in range(n)]
        assert flat == [int(d) for d in halves[r][1]["doc_index"].ravel() if d >= 0]


def test_receipts_replay_mixes_with_masks_per_source(store, tmp_path):
    other = tmp_path / "other"
    from_numpy(other, np.arange(5000, 5200, dtype=np.int64), codec="raw")
    masks = [Mask.build(store, EXCLUDED), None, Mask.build(other, range(0, 200, 3))]
    sources = [{"x": DenseDataset(store)}, {"x": DenseDataset(other)}, {"x": DenseDataset(other)}]
    with DataLoader.mix(sources, [1.0, 1.0, 2.0], batch_size=16, mode="cyclic", seed=4, exclude=masks, shard_count=2, shard_index=1) as loader:
        seen = _ids(loader, 5)
        receipt = loader.receipt()
    masks[2].save(tmp_path / "m2.lxmask")
    for step, ids in enumerate(seen):
        got = indices(receipt, step, mask=[masks[0], None, tmp_path / "m2.lxmask"])
        # Joined indices read through the joined stores: records of `other` read its values.
        joined = np.concatenate([np.arange(N), np.arange(5000, 5200), np.arange(5000, 5200)])
        assert joined[got["ranks"][1]].tolist() == ids
    with pytest.raises(BadArgumentError, match="a list of 3"):
        indices(receipt, 0, mask=masks[0])
    (tmp_path / "r.json").write_text(json.dumps(receipt))
    masks[0].save(tmp_path / "m0.lxmask")
    cli = [sys.executable, "-m", "loaderx", "receipt", "2", str(tmp_path / "r.json")]
    masked = ["--mask", str(tmp_path / "m0.lxmask"), "--mask", "-", "--mask", str(tmp_path / "m2.lxmask")]
    out = subprocess.run(cli + masked, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ranks"] == indices(receipt, 2, mask=[masks[0], None, masks[2]])["ranks"]
    out = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "exclusion masks" in out.stderr
