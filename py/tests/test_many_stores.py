"""Many stores as one (loaderx.manifest): datasets over a manifest read exactly what one store
of the same records in the same order holds, dense and ragged; the DataLoader over it gives the
same batches (sharded and resumed too); a commit is all or nothing, even when killed; a store
of another layout, a missing store and a store that changed are errors naming the store."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from loaderx import errors, manifest
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset

SIZES = [37, 1, 120, 64, 3, 90, 15, 70]  # 8 stores, 400 records


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    root = tmp_path_factory.mktemp("many_dense")
    rng = np.random.default_rng(4)
    data = rng.standard_normal((sum(SIZES), 3, 2)).astype(np.float32)
    from_numpy(root / "whole", data, codec="zstd", progress=False)
    at = 0
    for k, n in enumerate(SIZES):
        from_numpy(root / f"part-{k}", data[at : at + n], codec="raw" if k % 2 else "zstd", progress=False)
        at += n
    manifest.commit(root, [f"part-{k}" for k in range(4)])
    manifest.commit(root / "manifest.json", [f"part-{k}" for k in range(4, 8)])
    return root, data


def test_a_manifest_reads_like_one_store_of_the_same_records(dense):
    root, data = dense
    many, whole = DenseDataset(root), DenseDataset(root / "whole")
    assert len(many) == len(whole) == len(data) and many.item_shape == (3, 2) and many.dtype == np.float32
    assert [n for _, n in manifest.stores(root)] == SIZES
    rng = np.random.default_rng(0)
    for _ in range(30):
        idx = rng.integers(0, len(data), rng.integers(1, 300))
        assert np.array_equal(many[idx], data[idx])
    assert np.array_equal(many[::7], data[::7]) and np.array_equal(many[-1], data[-1])
    with pytest.raises(IndexError):
        many[[len(data)]]


def test_the_loader_over_a_manifest_gives_the_one_store_batches(dense):
    root, _ = dense
    for mode in (1, 2):
        for count in (1, 2):
            for rank in range(count):
                kw = dict(num_workers=2, batch_size=16, mode=mode, seed=3, shard_index=rank, shard_count=count)
                with DataLoader({"x": DenseDataset(root)}, **kw) as a, DataLoader({"x": DenseDataset(root / "whole")}, **kw) as b:
                    for _ in range(30):
                        assert np.array_equal(next(a)["x"], next(b)["x"])
                    state = a.state_dict()
                with DataLoader({"x": DenseDataset(root)}, **kw) as c, DataLoader({"x": DenseDataset(root / "whole")}, **kw) as b:
                    c.load_state_dict(state)
                    b.seek(state["step"])
                    assert np.array_equal(next(c)["x"], next(b)["x"])


def test_ragged_stores_read_as_one(tmp_path):
    rng = np.random.default_rng(9)
    records = [rng.integers(0, 1000, (int(rng.integers(1, 9)), 2), dtype=np.int32) for _ in range(90)]
    for k, (a, b) in enumerate([(0, 30), (30, 31), (31, 90)]):
        from_iterator(tmp_path / f"r{k}", records[a:b], progress=False)
    manifest.commit(tmp_path / "m.json", ["r0", "r1", "r2"])
    ds = RaggedDataset(tmp_path / "m.json")
    assert len(ds) == 90
    idx = rng.permutation(90)[:50]
    for got, i in zip(ds[idx], idx):
        assert np.array_equal(got, records[i])


def test_a_store_of_another_layout_is_refused_naming_it(dense, tmp_path):
    root, data = dense
    from_numpy(tmp_path / "f64", data[:5].astype(np.float64), progress=False)
    from_numpy(tmp_path / "ok", data[:5], progress=False)
    manifest.commit(tmp_path, ["ok"])
    before = (tmp_path / "manifest.json").read_bytes()
    with pytest.raises(errors.BadArgumentError, match="f64") as e:
        manifest.commit(tmp_path, [os.fspath(root / "part-0"), "f64"])
    assert "<f8" in str(e.value) and "<f4" in str(e.value)
    assert (tmp_path / "manifest.json").read_bytes() == before, "a refused commit changes nothing"
    with pytest.raises(FileNotFoundError):
        manifest.commit(tmp_path, ["not-there"])
    assert (tmp_path / "manifest.json").read_bytes() == before


def test_a_changed_or_missing_store_fails_the_open_naming_it(tmp_path):
    data = np.arange(40, dtype=np.int64).reshape(20, 2)
    for k in range(2):
        from_numpy(tmp_path / f"s{k}", data[k * 10 : (k + 1) * 10], progress=False)
    manifest.commit(tmp_path, ["s0", "s1"])
    from_numpy(tmp_path / "s1", data[:3], progress=False)  # appends: s1 now holds 13 records
    with pytest.raises(errors.CorruptStoreError, match="s1") as e:
        DenseDataset(tmp_path)
    assert "13" in str(e.value) and "10" in str(e.value)
    import shutil

    shutil.rmtree(tmp_path / "s1")
    with pytest.raises(FileNotFoundError, match="s1"):
        DenseDataset(tmp_path)


_WRITER = r"""
import sys, numpy as np
from loaderx import manifest
from loaderx.converter import from_numpy
root = sys.argv[1]
k = 0
while True:
    print("writing", k, flush=True)
    from_numpy(f"{root}/w{k}", np.full((50, 4), k, np.int16), progress=False)
    print("committing", k, flush=True)
    manifest.commit(root, [f"w{k}"])
    print("committed", k, flush=True)
    k += 1
"""


def test_a_killed_committer_never_leaves_a_half_listed_store(tmp_path):
    """Writers build stores and commit them one by one, saying what they do; killed as they report
    writing, committing or having committed store k, the manifest always parses, lists every store
    reported committed, and every store it lists opens whole with its listed length. At least one
    kill lands mid-operation: a store on disk that the manifest does not list."""
    rng = np.random.default_rng(2)
    mid_operation = 0
    for round in range(6):
        root = tmp_path / f"run{round}"
        root.mkdir()
        child = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)], stdout=subprocess.PIPE, text=True)
        when = f"{['writing', 'committing', 'committed'][round % 3]} {int(rng.integers(0, 3))}"
        said = []
        while not said or said[-1] != when:
            said.append(child.stdout.readline().strip())
            assert said[-1], f"the writer exited before {when!r}: {said}"
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        path = root / "manifest.json"
        listed = json.loads(path.read_text())["stores"] if path.exists() else []
        names = [entry["path"] for entry in listed]
        committed = [f"w{k}" for k in range(int(when.split()[1]) + (when.startswith("committed ")))]
        assert names[: len(committed)] == committed, f"killed at {when!r}, the manifest lists {names}"
        mid_operation += bool({p.name for p in root.glob("w*")} - set(names))
        if listed:
            ds = DenseDataset(root)
            assert len(ds) == 50 * len(listed)
            assert np.array_equal(np.unique(ds[:][:, 0]), np.arange(len(listed)))
        # A temporary manifest a kill left behind is never read, and the next commit replaces it.
        from_numpy(root / "after", np.full((50, 4), len(listed), np.int16), progress=False)
        manifest.commit(root, ["after"])
        assert len(DenseDataset(root)) == 50 * (len(listed) + 1) and not list(root.glob("*.tmp"))
    assert mid_operation, "no kill landed while a store was being written or committed"


def test_a_state_from_another_set_of_stores_is_refused(tmp_path):
    for k, n in enumerate([30, 30, 40]):
        from_numpy(tmp_path / f"s{k}", np.full((n, 2), k, np.int64), progress=False)
    manifest.commit(tmp_path / "a.json", ["s0", "s2"])
    manifest.commit(tmp_path / "b.json", ["s1", "s2"])  # the same length (70), other stores

    def loader(m):
        return DataLoader({"x": DenseDataset(tmp_path / m)}, batch_size=10, seed=1, num_workers=1)

    with loader("a.json") as a:
        next(a)
        state = json.loads(json.dumps(a.state_dict()))
    with loader("b.json") as b, pytest.raises(ValueError, match="stores"):
        b.load_state_dict(state)
    with loader("a.json") as again:  # the same stores: resumes
        again.load_state_dict(state)
        assert again.step == 1
