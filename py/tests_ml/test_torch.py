"""loaderx.torch inside torch's DataLoader and torchdata's StatefulDataLoader: the batches equal
loaderx's own, in step order, for any worker count, under fork and spawn, with pin_memory; the
loader's position is part of the checkpoint and resumes exactly; ranks split each global batch."""

import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import loaderx.torch as lt
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.sampler import Sampler

N, B = 301, 16


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch")
    x = (np.arange(N * 6, dtype=np.float32) / 7).reshape(N, 6)
    from_numpy(root / "x", x, codec="zstd", progress=False)
    from_numpy(root / "y", np.arange(N, dtype=np.int64) * 3, codec="raw", progress=False)
    return {"x": root / "x", "y": root / "y", "x_array": x}


def streams(stores):
    return {"x": DenseDataset(stores["x"]), "y": DenseDataset(stores["y"])}


def loader(stores, **kw):
    kw.setdefault("batch_size", B)
    kw.setdefault("seed", 5)
    return DataLoader(streams(stores), num_workers=2, **kw)


def expected(stores, steps, start=0, **kw):
    """loaderx's own batches for steps start..start+steps-1, as numpy."""
    with loader(stores, **kw) as ref:
        ref.seek(start)
        return [next(ref) for _ in range(steps)]


def same(batch, want):
    assert set(batch) == set(want)
    for name in want:
        assert isinstance(batch[name], torch.Tensor), name
        np.testing.assert_array_equal(batch[name].numpy(), want[name])


def take(it, n):
    return [b for _, b in zip(range(n), it)]


@pytest.mark.parametrize("workers,context", [(0, None), (1, "fork"), (3, "fork"), (2, "spawn")])
def test_iterable_batches_are_the_loaders_in_step_order(stores, workers, context):
    ds = lt.IterableDataset(loader(stores, mode=Sampler.Mode.CYCLIC))
    tl = TorchLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=context)
    got = take(iter(tl), 25)  # CYCLIC: 25 steps of 16 cross the end of 301 records
    for batch, want in zip(got, expected(stores, 25, mode=Sampler.Mode.CYCLIC), strict=True):
        same(batch, want)


def test_iterable_with_pin_memory_and_a_transform(stores):
    def double(batch):
        return {"x": batch["x"] * 2, "y": batch["y"]}

    ds = lt.IterableDataset(loader(stores, transform=double))
    tl = TorchLoader(ds, batch_size=None, num_workers=2, pin_memory=True)
    for batch, want in zip(take(iter(tl), 6), expected(stores, 6), strict=True):
        same(batch, {"x": want["x"] * 2, "y": want["y"]})


def test_a_counted_step_resumes_under_another_worker_count_and_rank_count(stores):
    full = expected(stores, 20)
    ds = lt.IterableDataset(loader(stores))
    first = take(iter(TorchLoader(ds, batch_size=None, num_workers=3)), 7)
    state = ds.state_dict(step=7)  # the training loop took 7 batches
    # 2 ranks with 2 workers each resume: rank r's batches are its slice of the global ones.
    ranks = []
    for r in range(2):
        d = lt.IterableDataset(loader(stores, shard_index=r, shard_count=2))
        d.load_state_dict(pickle.loads(pickle.dumps(state)))
        ranks.append(take(iter(TorchLoader(d, batch_size=None, num_workers=2)), 13))
    for k, want in enumerate(full):
        if k < 7:
            same(first[k], want)
        else:
            joined = {n: torch.cat([ranks[0][k - 7][n], ranks[1][k - 7][n]]) for n in want}
            same(joined, want)


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_checkpoints_include_the_loader(stores, workers):
    full = expected(stores, 24)
    ds = lt.IterableDataset(loader(stores))
    sdl = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
    it = iter(sdl)
    got = take(it, 9)
    state = sdl.state_dict()
    del it, sdl
    ds2 = lt.IterableDataset(loader(stores))
    sdl2 = StatefulDataLoader(ds2, batch_size=None, num_workers=workers)
    sdl2.load_state_dict(state)
    got += take(iter(sdl2), 15)
    for batch, want in zip(got, full, strict=True):
        same(batch, want)


def test_stateful_dataloader_resumes_a_mix_exactly(stores, tmp_path):
    from_numpy(tmp_path / "x2", -np.ones((50, 6), np.float32), progress=False)
    from_numpy(tmp_path / "y2", -np.arange(50, dtype=np.int64), progress=False)
    other = {"x": DenseDataset(tmp_path / "x2"), "y": DenseDataset(tmp_path / "y2")}

    def mixed():
        return DataLoader.mix([streams(stores), other], [0.75, 0.25], batch_size=B, seed=3, num_workers=1)

    with mixed() as ref:
        full = [next(ref) for _ in range(12)]
    for batch in full:
        assert (batch["y"] < 0).sum() == 4  # exactly a quarter of every batch is the second source
    sdl = StatefulDataLoader(lt.IterableDataset(mixed()), batch_size=None, num_workers=2)
    it = iter(sdl)
    got = take(it, 5)
    state = sdl.state_dict()
    del it, sdl
    sdl2 = StatefulDataLoader(lt.IterableDataset(mixed()), batch_size=None, num_workers=2)
    sdl2.load_state_dict(state)
    got += take(iter(sdl2), 7)
    for batch, want in zip(got, full, strict=True):
        same(batch, want)


def test_a_state_from_another_config_is_refused(stores):
    state = lt.IterableDataset(loader(stores, seed=1)).state_dict(step=3)
    with pytest.raises(ValueError, match="seed"):
        lt.IterableDataset(loader(stores, seed=2)).load_state_dict(state)
    with pytest.raises(ValueError, match="batch_size must stay the same"):
        lt.IterableDataset(loader(stores, seed=1, batch_size=2 * B)).load_state_dict(state)
    with pytest.raises(TypeError, match="DataLoader"):
        lt.IterableDataset(streams(stores))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_map_style_with_torch_samplers_and_default_collation(stores, context):
    ds = lt.Dataset(streams(stores))
    assert len(ds) == N
    sample = ds[4]
    np.testing.assert_array_equal(sample["x"], stores["x_array"][4])
    assert sample["y"] == 12
    g = torch.Generator().manual_seed(0)
    tl = TorchLoader(ds, batch_size=10, shuffle=True, generator=g, num_workers=2, multiprocessing_context=context,
                     pin_memory=True)
    order = torch.randperm(N, generator=torch.Generator().manual_seed(0))  # what shuffle draws first
    seen = []
    for batch in tl:
        assert batch["x"].shape[1:] == (6,) and batch["x"].dtype == torch.float32
        np.testing.assert_array_equal(batch["x"].numpy(), stores["x_array"][batch["y"].numpy() // 3])
        seen += (batch["y"] // 3).tolist()
    assert sorted(seen) == list(range(N))  # every record exactly once per epoch
    assert len(seen) == N and seen != list(range(N)) and order.numel() == N


def test_collate_is_zero_copy_and_keeps_ragged_streams(stores, tmp_path):
    from loaderx.converter import from_iterator

    from_iterator(tmp_path / "rag", (np.full((i % 4 + 1, 2), i, np.int32) for i in range(N)), progress=False)
    ds = lt.Dataset({"x": DenseDataset(stores["x"]), "r": RaggedDataset(tmp_path / "rag")})
    rows = ds.__getitems__([3, 7, 1])
    batch = lt.collate(rows)
    np.testing.assert_array_equal(batch["x"].numpy(), stores["x_array"][[3, 7, 1]])
    assert batch["x"].numpy().base is rows.arrays["x"].base or np.shares_memory(batch["x"].numpy(), rows.arrays["x"])
    assert [t.shape[0] for t in batch["r"]] == [4, 4, 2] and int(batch["r"][2][0, 0]) == 1
    plain = lt.collate([{"a": np.ones(2)}, {"a": np.zeros(2)}])  # not ours: torch's default_collate
    assert plain["a"].shape == (2, 2)


def test_batch_sampler_splits_each_global_batch_across_ranks(stores):
    s = Sampler(N, B, Sampler.Mode.IID, 9)
    per_rank = [list(lt.BatchSampler(N, B, 1, 9, shard_index=r, shard_count=4, steps=5)) for r in range(4)]
    for k in range(5):
        joined = sum((per_rank[r][k] for r in range(4)), [])
        assert joined == s.batch_at(k).tolist()
    ds = lt.Dataset(streams(stores))
    bs = lt.BatchSampler(N, B, 1, 9, shard_index=1, shard_count=2, steps=3)
    batches = list(TorchLoader(ds, batch_sampler=bs, collate_fn=lt.collate, num_workers=2))
    assert len(batches) == 3 == len(bs)
    for k, batch in enumerate(batches):
        want = s.batch_at(k)[B // 2 :]
        np.testing.assert_array_equal(batch["y"].numpy(), want * 3)
    # The next iteration (a torch "epoch") continues the stream.
    nxt = next(iter(TorchLoader(ds, batch_sampler=bs, collate_fn=lt.collate)))
    np.testing.assert_array_equal(nxt["y"].numpy(), s.batch_at(3)[B // 2 :] * 3)


def test_batch_sampler_state_in_a_stateful_dataloader(stores):
    s = Sampler(N, B, Sampler.Mode.SEQUENTIAL, 2)
    ds = lt.Dataset(streams(stores))

    def make():
        bs = lt.BatchSampler(N, B, Sampler.Mode.SEQUENTIAL, 2, shard_index=0, shard_count=1)
        return StatefulDataLoader(ds, batch_sampler=bs, collate_fn=lt.collate, num_workers=2)

    sdl = make()
    it = iter(sdl)
    got = take(it, 4)
    state = sdl.state_dict()
    del it, sdl
    sdl2 = make()
    sdl2.load_state_dict(state)
    got += take(iter(sdl2), 3)
    for k, batch in enumerate(got):
        np.testing.assert_array_equal(batch["y"].numpy(), s.batch_at(k) * 3)


def test_batch_sampler_refuses_bad_shards():
    with pytest.raises(ValueError, match="not divisible"):
        lt.BatchSampler(N, 10, shard_index=0, shard_count=3)
    with pytest.raises(ValueError, match="shard_index"):
        lt.BatchSampler(N, 12, shard_index=3, shard_count=3)
    with pytest.raises(TypeError, match="no length"):
        len(lt.BatchSampler(N, 12, shard_index=0, shard_count=1))
    a = lt.BatchSampler(N, 12, seed=1, shard_index=0, shard_count=1)
    with pytest.raises(ValueError, match="seed"):
        a.load_state_dict(lt.BatchSampler(N, 12, seed=2, shard_index=0, shard_count=1).state_dict())


@pytest.mark.parametrize("workers", [0, 2])
def test_packed_loaders_run_in_torchs_loader(tmp_path, workers):
    from loaderx.converter import from_iterator

    rng = np.random.default_rng(4)
    docs = [rng.integers(1, 30000, int(n)).astype(np.uint16) for n in rng.integers(1, 70, 150)]
    from_iterator(tmp_path / "docs", iter(docs), progress=False)
    kw = dict(seq_len=32, batch_size=4, packing="concat", mode="cyclic", seed=2, num_workers=1)
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), **kw) as base:
        want = [next(base) for _ in range(6)]
    ds = lt.IterableDataset(DataLoader.packed(RaggedDataset(tmp_path / "docs"), **kw))
    it = iter(TorchLoader(ds, batch_size=None, num_workers=workers))
    for w in want:
        got = next(it)
        for key in ("tokens", "segment_ids", "positions", "doc_index", "doc_offset"):
            assert torch.equal(got[key], torch.from_numpy(w[key].copy())), key
    # The attention mask a model builds from segment ids: a slot sees the earlier slots of its
    # own segment, padding sees nothing.
    seg = got["segment_ids"]
    mask = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] > 0) & torch.tril(torch.ones(32, 32, dtype=torch.bool))
    assert mask.shape == (4, 32, 32) and mask.diagonal(dim1=1, dim2=2).eq(seg > 0).all()
    if workers == 0:
        assert ds.metrics()["stages"]["read"]["count"] >= 6
