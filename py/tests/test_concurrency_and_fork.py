"""Concurrent readers, fork and pickling never see a wrong byte and never hang.

Pins: 8 threads gathering random batches (4 through Zrecord.gather on the appender's own handle,
4 through a DenseDataset) while another thread appends 200 times see only whole, correct records
(checked byte for byte against a deterministic generator); a DataLoader and a dataset used in a
forked child (after the parent ran worker threads) read correctly and the loader continues with
exactly the batches the parent would produce; pickled DenseDataset / RaggedDataset / Zrecord /
Sampler work in a spawned process; and, when torch is installed, a DenseDataset works inside a
torch DataLoader with worker processes.
"""

import multiprocessing as mp
import pickle
import threading

import numpy as np
import pytest

from _lxhelpers import record, records, spawn_read
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

SIZE = 96  # bytes per record


def check_rows(idx, rows):
    """Each gathered row is exactly record(idx) of the generator."""
    for i, row in zip(idx, rows):
        want = record(int(i), SIZE)
        if row.tobytes() != want.tobytes():
            return f"record {int(i)}: got {row[:8].tolist()}..., want {want[:8].tolist()}..."
    return None


def test_readers_during_appends(tmp_path):
    initial, appends, per_append = 500, 200, 10
    from_numpy(tmp_path / "s", records(0, initial, SIZE), codec="zstd")
    writer = Zrecord(tmp_path / "s", codec="zstd")
    ds = DenseDataset(tmp_path / "s")
    done = threading.Event()
    errors, reads = [], [0] * 8
    barrier = threading.Barrier(9)

    def append_loop():
        barrier.wait()
        try:
            for a in range(appends):
                start = initial + a * per_append
                block = records(start, per_append, SIZE)
                codec = "raw" if a % 3 == 0 else "zstd"
                first = writer.append(block.reshape(-1), np.arange(per_append, dtype=np.uint64) * SIZE, codec)
                if first != start:
                    errors.append(f"append {a} landed at {first}, expected {start}")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(f"append: {e!r}")
        finally:
            done.set()

    def read_loop(k):
        rng = np.random.default_rng(k)
        barrier.wait()
        try:
            while True:
                finished = done.is_set()
                if k < 4:
                    n = len(writer)
                    idx = rng.integers(0, n, 32).astype(np.uint64)
                    dst = np.zeros((32, SIZE), dtype=np.uint8)
                    writer.gather(idx, dst, np.arange(32, dtype=np.uint64) * SIZE)
                else:
                    n = len(ds)
                    idx = rng.integers(0, n, 32)
                    dst = ds[idx]
                problem = check_rows(idx, dst)
                if problem:
                    errors.append(f"reader {k}: {problem}")
                    return
                reads[k] += 1
                if finished and reads[k] >= 5:
                    return
        except Exception as e:
            errors.append(f"reader {k}: {e!r}")

    threads = [threading.Thread(target=append_loop)] + [threading.Thread(target=read_loop, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[:5]
    total = initial + appends * per_append
    assert len(writer) == total and len(ds) == total
    everything = ds[:]
    assert check_rows(range(total), everything) is None
    assert all(r >= 5 for r in reads)
    writer.close()
    ds.close()


def _fork_child(conn, ds, rs, loader, sampler, z):
    try:
        out = {
            "ds": ds[[0, 7, len(ds) - 1]],
            "rs": [r.tolist() for r in rs[[1, 2]]],
            "batches": [next(loader) for _ in range(3)],
            "sampler": [sampler.next() for _ in range(2)],
            "z": z.lengths([0, 1]).tolist(),
        }
        loader.close()
        conn.send(out)
    except BaseException as e:
        conn.send({"error": repr(e)})
    finally:
        conn.close()


def test_fork_child_reads_and_continues_the_loader(tmp_path):
    rows = records(0, 300, SIZE)
    from_numpy(tmp_path / "d", rows, codec="zstd")
    seqs = [np.arange(i % 5 + 1, dtype=np.int32) * i for i in range(20)]
    from_iterator(tmp_path / "r", seqs)
    ds, rs = DenseDataset(tmp_path / "d"), RaggedDataset(tmp_path / "r")
    z = Zrecord(tmp_path / "d")
    loader = DataLoader({"d": ds}, num_workers=3, batch_size=8, mode=1, seed=4)
    sampler = Sampler(300, 8, 2, seed=1)
    try:
        parent_first = [next(loader)["d"] for _ in range(3)]
        sampler.next()
        ds[[1, 2]]
        ctx = mp.get_context("fork")
        here, there = ctx.Pipe()
        p = ctx.Process(target=_fork_child, args=(there, ds, rs, loader, sampler, z))
        p.start()
        there.close()
        got = here.recv() if here.poll(30) else {"error": "child sent nothing within 30 s (hang?)"}
        p.join(10)
        if p.is_alive():
            p.kill()
            pytest.fail("forked child hung")
        assert "error" not in got, got["error"]
        assert p.exitcode == 0
        # what the parent produces at those same steps
        parent_next = [next(loader)["d"] for _ in range(3)]
        sampler_next = [sampler.next() for _ in range(2)]
    finally:
        loader.close()
    expected_steps = Sampler(300, 8, 1, 4)
    for k in range(3):
        np.testing.assert_array_equal(parent_first[k], rows[expected_steps.next().astype(np.int64)])
    for k in range(3):
        np.testing.assert_array_equal(got["batches"][k]["d"], parent_next[k])
    for k in range(2):
        np.testing.assert_array_equal(got["sampler"][k], sampler_next[k])
    np.testing.assert_array_equal(got["ds"], rows[[0, 7, 299]])
    assert got["rs"] == [seqs[1].tolist(), seqs[2].tolist()]
    assert got["z"] == [SIZE, SIZE]


def test_pickled_objects_work_in_a_spawned_process(tmp_path):
    rows = records(0, 50, SIZE)
    from_numpy(tmp_path / "d", rows, codec="zstd")
    seqs = [np.arange(i % 4 + 1, dtype=np.int16) + i for i in range(12)]
    from_iterator(tmp_path / "r", seqs, codec="raw")
    sampler = Sampler(50, 4, 2, seed=3)
    for _ in range(5):
        sampler.next()
    objs = {
        "ds": DenseDataset(tmp_path / "d"),
        "rs": RaggedDataset(tmp_path / "r"),
        "z": Zrecord(tmp_path / "d"),
        "sampler": sampler,
    }
    blob = pickle.dumps(objs)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(spawn_read, (blob,)).get(timeout=60)
    np.testing.assert_array_equal(got["ds"], rows[[3, 49, 0]])
    assert got["ds_len"] == 50 and got["ds_dtype"] == "uint8"
    assert got["rs"] == [seqs[0].tolist(), seqs[11].tolist()]
    assert got["rs_dtype"] == "int16"
    assert got["z"] == rows[10].tobytes()
    assert [b.tolist() for b in got["sampler"]] == [sampler.next().tolist() for _ in range(3)]


def test_torch_dataloader_workers(tmp_path):
    torch = pytest.importorskip("torch", reason="torch lives in the ML venv, where py/tests_ml/test_torch.py runs")
    rows = records(0, 64, SIZE)
    from_numpy(tmp_path / "d", rows, codec="zstd")
    ds = DenseDataset(tmp_path / "d")
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, shuffle=False)
    got = np.concatenate([b.numpy() for b in loader])
    np.testing.assert_array_equal(got, rows)
