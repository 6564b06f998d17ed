"""Packed token batches (``DataLoader.packed``): the bookkeeping of every slot against a pure
Python packer, every token once per epoch, resume and elastic resume across process counts,
and the errors for what cannot be packed."""

import json
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loaderx import manifest
from loaderx.converter import from_iterator
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import BadArgumentError
from loaderx.sampler import Sampler

KEYS = ("tokens", "segment_ids", "positions", "doc_index", "doc_offset")


def write(path, lengths, dtype=np.int32, codec="zstd", seed=0):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 30000, n).astype(dtype) for n in lengths]
    from_iterator(path, iter(docs), codec=codec, progress=False)
    return docs


def order(n, mode, seed, epoch):
    """Epoch ``epoch``'s documents: the sampler's element stream (batch size 1)."""
    s = Sampler(n, 1, mode, seed)
    return [int(s.batch_at(epoch * n + i)[0]) for i in range(n)]


def concat_rows(lengths, seq_len, mode, seed, rows):
    """Pure-Python concat: each epoch's (doc, token) pairs in order, cut into rows."""
    stream, epoch = [], 0
    while len(stream) < rows * seq_len:
        for d in order(len(lengths), mode, seed, epoch):
            stream.extend((d, t) for t in range(lengths[d]))
        epoch += 1
    return [stream[r * seq_len : (r + 1) * seq_len] for r in range(rows)]


def best_fit_rows(lengths, seq_len, bins, mode, seed, epochs):
    """Pure-Python best fit: each epoch's documents into at most ``bins`` open rows; a document
    joins the row with the least room that fits it (among equals, the row that came to that
    room last), else opens one, closing the fullest open row first when all are open; whole
    ``seq_len`` pieces of a long document are rows of their own; open rows close at the
    epoch's end in the order they were opened."""
    out = []
    for epoch in range(epochs):
        open_rows = []  # [room, opened, came, items]
        clock = 0
        for n_opened, d in enumerate(order(len(lengths), mode, seed, epoch)):
            n = lengths[d]
            for p in range(n // seq_len):
                out.append([(d, p * seq_len, seq_len)])
            rest, at = n % seq_len, (n // seq_len) * seq_len
            if not rest:
                continue
            fits = [r for r in open_rows if r[0] >= rest]
            if fits:
                row = min(fits, key=lambda r: (r[0], -r[2]))
                row[0] -= rest
                row[3].append((d, at, rest))
                clock += 1
                row[2] = clock
                if row[0] == 0:
                    open_rows.remove(row)
                    out.append(row[3])
                continue
            if len(open_rows) == bins:
                fullest = min(open_rows, key=lambda r: (r[0], -r[2]))
                open_rows.remove(fullest)
                out.append(fullest[3])
            clock += 1
            open_rows.append([seq_len - rest, n_opened, clock, [(d, at, rest)]])
        for row in sorted(open_rows, key=lambda r: r[1]):
            out.append(row[3])
    return out


def slots_of(batch):
    """Each row's (doc, token) slots, padding left out."""
    return [
        [(int(d), int(o)) for d, o in zip(batch["doc_index"][r], batch["doc_offset"][r]) if d >= 0]
        for r in range(batch["tokens"].shape[0])
    ]


def check_batch(batch, docs, seq_len):
    """Every slot against the documents: the token, the segment ids, the positions."""
    rows = batch["tokens"].shape[0]
    for k in KEYS:
        assert batch[k].shape == (rows, seq_len), k
    for r in range(rows):
        seg, pos, di, do, tok = (batch[k][r] for k in ("segment_ids", "positions", "doc_index", "doc_offset", "tokens"))
        pad = di < 0
        assert (do[pad] == -1).all() and (seg[pad] == 0).all() and (tok[pad] == 0).all() and (pos[pad] == 0).all()
        # Padding only at the end of a row, and segments numbered 1, 2, ... from column 0.
        if pad.any():
            assert pad[int(np.argmax(pad)) :].all()
        live = ~pad
        starts = np.flatnonzero(live & np.r_[True, (seg[1:] != seg[:-1])])
        assert list(seg[starts]) == list(range(1, len(starts) + 1))
        for a, b in zip(starts, list(starts[1:]) + [int(live.sum())]):
            assert (di[a:b] == di[a]).all()
            assert list(pos[a:b]) == list(range(b - a))
            assert list(do[a:b]) == list(range(do[a], do[a] + b - a))
            assert (tok[a:b] == docs[di[a]][do[a] : do[a] + b - a]).all()


lengths_st = st.one_of(
    st.lists(st.integers(1, 40), min_size=1, max_size=40),
    st.lists(st.sampled_from([1, 1, 2, 3, 17, 60]), min_size=1, max_size=30),
    st.lists(st.integers(1, 200), min_size=1, max_size=1),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=lengths_st,
    seq_len=st.integers(1, 24),
    packing=st.sampled_from(["concat", "best_fit"]),
    mode=st.sampled_from(["sequential", "cyclic"]),
    bins=st.integers(1, 5),
    seed=st.integers(0, 2**32),
    batch_size=st.integers(1, 5),
)
# Ties between rows of equal room, in placing and in closing the fullest.
@example(lengths=[6, 5, 3, 4, 1], seq_len=10, packing="best_fit", mode="sequential", bins=2, seed=0, batch_size=1)
@example(lengths=[6, 6, 6, 6, 5, 9, 9], seq_len=10, packing="best_fit", mode="sequential", bins=3, seed=0, batch_size=2)
def test_every_slot_matches_a_pure_python_packer(tmp_path_factory, lengths, seq_len, packing, mode, bins, seed, batch_size):
    path = tmp_path_factory.mktemp("pk") / "docs"
    docs = write(path, lengths, seed=seed % 7)
    steps = 3
    rows = steps * batch_size
    if packing == "concat":
        want = concat_rows(lengths, seq_len, Sampler.Mode[mode.upper()], seed, rows)
    else:
        plan = best_fit_rows(lengths, seq_len, bins, Sampler.Mode[mode.upper()], seed, epochs=rows + 1)
        want = [[(d, a + t) for d, a, n in row for t in range(n)] for row in plan[:rows]]
    dl = DataLoader.packed(RaggedDataset(path), seq_len, batch_size, packing, mode, seed, bins=bins, num_workers=2)
    got = []
    for _ in range(steps):
        batch = next(dl)
        check_batch(batch, docs, seq_len)
        got += slots_of(batch)
    dl.close()
    assert got == want


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
@pytest.mark.parametrize("dtype", [np.uint16, np.int64])
def test_the_first_cyclic_epoch_holds_every_token_once(tmp_path, packing, dtype):
    rng = np.random.default_rng(3)
    lengths = [int(n) for n in rng.integers(1, 300, 250)] + [1, 1, 700, 64]
    docs = write(tmp_path / "d", lengths, dtype=dtype, codec="raw")
    seq_len, batch = 64, 4
    total = sum(lengths)
    dl = DataLoader.packed(RaggedDataset(tmp_path / "d"), seq_len, batch, packing, "cyclic", 5, bins=8)
    seen = []
    # Concat: the epoch is its first `total` slots. Best fit: its rows, which end where the
    # epoch's documents do (a later row starts the next epoch's first document at token 0).
    while len(seen) < total:
        b = next(dl)
        check_batch(b, docs, seq_len)
        assert b["tokens"].dtype == dtype
        for row in slots_of(b):
            seen += row
    dl.close()
    epoch = seen[:total]
    assert sorted(epoch) == sorted((d, t) for d, n in enumerate(lengths) for t in range(n))
    if packing == "concat":
        assert len(seen) - total < batch * seq_len


def run_phases(path, phases, packing, mode):
    """Global batches of a run in phases [(processes, steps)], each resuming from a state one
    rank saved in the previous phase (through JSON, as a checkpoint)."""
    batches, state = [], None
    for count, steps in phases:
        ranks = [
            DataLoader.packed(
                RaggedDataset(path), 16, 12, packing, mode, 9, bins=4, num_workers=2, shard_index=r, shard_count=count
            )
            for r in range(count)
        ]
        if state is not None:
            for dl in ranks:
                dl.load_state_dict(json.loads(state))
        for _ in range(steps):
            parts = [next(dl) for dl in ranks]
            batches.append({k: np.concatenate([p[k] for p in parts]) for k in KEYS})
        state = json.dumps(ranks[-1].state_dict())
        for dl in ranks:
            dl.close()
    return batches


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
@pytest.mark.parametrize("mode", ["cyclic", "iid", "sequential"])
def test_elastic_resume_4_2_3_1_reads_what_one_run_reads(tmp_path, packing, mode):
    rng = np.random.default_rng(1)
    lengths = [int(n) for n in rng.integers(1, 50, 90)]
    write(tmp_path / "d", lengths)
    phases = [(4, 5), (2, 4), (3, 6), (1, 5)]
    steps = sum(s for _, s in phases)
    whole = run_phases(tmp_path / "d", [(1, steps)], packing, mode)
    resumed = run_phases(tmp_path / "d", phases, packing, mode)
    for k, (a, b) in enumerate(zip(whole, resumed)):
        for key in KEYS:
            assert np.array_equal(a[key], b[key]), (k, key)


def test_a_manifest_packs_as_its_stores_in_order(tmp_path):
    a = write(tmp_path / "m" / "a", [5, 9, 3], seed=1)
    b = write(tmp_path / "m" / "b", [7, 2], seed=2)
    manifest.commit(tmp_path / "m", ["a", "b"])
    docs = a + b
    dl = DataLoader.packed(RaggedDataset(tmp_path / "m"), 8, 2, "concat", "sequential")
    batch = next(dl)
    check_batch(batch, docs, 8)
    assert slots_of(batch) == concat_rows([5, 9, 3, 7, 2], 8, Sampler.Mode.SEQUENTIAL, 0, 2)
    dl.close()


def test_states_pickles_and_worker_processes_keep_the_stream(tmp_path):
    docs = write(tmp_path / "d", [int(n) for n in np.random.default_rng(4).integers(1, 30, 40)])
    dl = DataLoader.packed(RaggedDataset(tmp_path / "d"), 12, 4, "best_fit", "cyclic", 3, bins=3)
    want = [next(dl) for _ in range(6)]
    state = dl.state_dict()
    assert state["config"]["packed"] == {"seq_len": 12, "packing": "best_fit", "bins": 3}
    dl.seek(2)
    copy = pickle.loads(pickle.dumps(dl))
    for k in range(2, 6):
        got = next(copy)
        check_batch(got, docs, 12)
        assert all(np.array_equal(got[key], want[k][key]) for key in KEYS)
    copy.close()
    # Another packing is another stream: its state is refused.
    other = DataLoader.packed(RaggedDataset(tmp_path / "d"), 12, 4, "concat", "cyclic", 3)
    with pytest.raises(BadArgumentError, match="packed"):
        other.load_state_dict(state)
    other.close()
    procs = DataLoader.packed(RaggedDataset(tmp_path / "d"), 12, 4, "best_fit", "cyclic", 3, bins=3, workers="processes", num_workers=2)
    for k in range(3):
        got = next(procs)
        assert all(np.array_equal(got[key], want[k][key]) for key in KEYS)
    procs.close()
    dl.close()


def test_what_cannot_be_packed_is_refused_clearly(tmp_path):
    write(tmp_path / "d", [3, 4])
    ds = RaggedDataset(tmp_path / "d")
    with pytest.raises(BadArgumentError, match="packing must be one of"):
        DataLoader.packed(ds, 8, packing="first_fit")
    for bad in (0, -1, 2.5, True):
        with pytest.raises(BadArgumentError, match="seq_len must be a positive integer"):
            DataLoader.packed(ds, bad)
    with pytest.raises(BadArgumentError, match="bins must be a positive integer"):
        DataLoader.packed(ds, 8, packing="best_fit", bins=0)
    from loaderx.converter import from_numpy

    from_numpy(tmp_path / "dense", np.zeros((4, 3), np.int32), progress=False)
    with pytest.raises(TypeError, match="RaggedDataset of tokens"):
        DataLoader.packed(DenseDataset(tmp_path / "dense"), 8)
    from_iterator(tmp_path / "f", iter([np.ones(3, np.float32)]), progress=False)
    with pytest.raises(TypeError, match="integer tokens"):
        DataLoader.packed(RaggedDataset(tmp_path / "f"), 8)
    with pytest.raises(BadArgumentError, match="not divisible by shard_count 3"):
        DataLoader.packed(ds, 8, batch_size=4, shard_count=3, shard_index=0)
