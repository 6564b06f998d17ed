"""DataLoader(workers="processes") gives the thread workers' batches, and leaks nothing.

Pins: the batches, bit for bit, equal those of thread workers (large arrays, small arrays and
plain objects in the result), and large arrays arrive as views of the shared slots (no copy in
the parent); state_dict / load_state_dict and seek resume exactly; shards are slices of the
global batch; an exception in a worker's transform is raised by next() at its step with the
worker's traceback, and the loader goes on; a worker killed with SIGKILL is a WorkerError naming
it and the signal, and the loader goes on with correct batches; two threads sharing one loader
get every step once; the slot pool is bounded once held batches are dropped; an unpicklable
transform is a TypeError naming the fix, and one that fails to load in the worker a
WorkerError; after close(), garbage collection, an exception or a kill, no worker process is
left, no slot descriptor or mapping is left in this process and /dev/shm holds nothing new; and
a loader used in a forked child starts its own workers there and leaves the parent's alone;
and workers exit when their parent is SIGKILLed.
"""

import gc
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy as np
import pytest

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.errors import WorkerError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="worker processes are POSIX only")

N = 997
B = 64
SLOT = "memfd:loaderx-slot"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("procs")
    i = np.arange(N, dtype=np.int64)
    from_numpy(root / "x", np.stack([i, 2 * i, 3 * i, i % 7], axis=1), codec="zstd", progress=False)
    from_numpy(root / "y", i.copy(), codec="raw", progress=False)
    return root


def streams(root):
    return {"x": DenseDataset(root / "x"), "y": DenseDataset(root / "y")}


# Transforms live at module level: worker processes import them by name.


def widen(batch):
    """A large new array (out of band), a small one (in band) and a plain object."""
    x = batch["x"].astype(np.float64)
    return {"wide": np.repeat(x, 16, axis=1) / 3.0, "y": batch["y"], "sum": int(batch["y"].sum()), "tag": ("b", 1)}


def slow_widen(batch):
    time.sleep(0.03)
    return widen(batch)


def stall_from_step_2(batch):
    """Steps 0 and 1 (mode 0) at once; every later one takes a minute."""
    if batch["y"][0] >= 2 * B:
        time.sleep(60)
    return batch


class Boom(Exception):
    pass


def explode_at_step_3(batch):
    if batch["y"][0] == 3 * B:  # SEQUENTIAL: step k starts at record k * B
        raise Boom("step 3 exploded")
    return batch


def _cannot_load():
    raise RuntimeError("this transform does not load in a worker")


class LoadsNowhere:
    """Pickles in the parent, fails to unpickle in a worker."""

    def __call__(self, batch):
        return batch

    def __reduce__(self):
        return (_cannot_load, ())


# Helpers: what this process owns.


def children():
    """Pids of this process's live (not zombie) children."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


def slot_fds():
    out = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            out += SLOT in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out


def slot_maps():
    with open("/proc/self/maps") as f:
        return [line for line in f if SLOT in line]


def shm_entries():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def wait_until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


@pytest.fixture
def no_leaks():
    """Snapshot before; after the test, no new child, slot descriptor, slot mapping or /dev/shm entry."""
    kids, shm = children(), shm_entries()
    yield
    gc.collect()
    assert wait_until(lambda: children() <= kids), f"worker processes left: {children() - kids}"
    assert slot_fds() == 0, "slot descriptors left open"
    assert slot_maps() == [], "slot mappings left"
    assert shm_entries() <= shm, f"new /dev/shm entries: {shm_entries() - shm}"


def take(loader, n):
    return [next(loader) for _ in range(n)]


def assert_same(got, want):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.keys() == w.keys(), k
        for name in w:
            if isinstance(w[name], np.ndarray):
                assert g[name].dtype == w[name].dtype and g[name].tobytes() == w[name].tobytes(), (k, name)
            else:
                assert g[name] == w[name], (k, name)


def in_slot(arr):
    addr = arr.__array_interface__["data"][0]
    for line in slot_maps():
        lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
        if lo <= addr < hi:
            return True
    return False


# Tests.


@pytest.mark.parametrize("mode", [1, 2], ids=["IID", "CYCLIC"])
def test_same_batches_as_threads(data, no_leaks, mode):
    cfg = dict(batch_size=B, mode=mode, seed=7, transform=widen)
    with DataLoader(streams(data), num_workers=2, **cfg) as t:
        want = take(t, 12)
    with DataLoader(streams(data), num_workers=3, workers="processes", **cfg) as p:
        got = take(p, 12)
        assert p.step == 12
        assert all(in_slot(b["wide"]) for b in got), "large arrays must be views of a slot"
        assert got[0]["wide"].flags.writeable
    assert_same(got, want)
    del got


def test_resume_and_seek(data, no_leaks):
    cfg = dict(num_workers=2, batch_size=B, mode=1, seed=5, transform=widen, workers="processes")
    with DataLoader(streams(data), **{**cfg, "workers": "threads"}) as t:
        want = take(t, 14)
    with DataLoader(streams(data), **cfg) as a:
        take(a, 6)
        state = pickle.loads(pickle.dumps(a.state_dict()))
        assert_same(take(a, 3), want[6:9])
        a.seek(2)  # back, with steps 9.. already in flight
        assert a.step == 2
        assert_same(take(a, 2), want[2:4])
        a.seek(11)
        assert_same(take(a, 3), want[11:14])
    with DataLoader(streams(data), **cfg) as b:
        b.load_state_dict(state)
        assert b.step == 6
        assert_same(take(b, 4), want[6:10])


def test_shards_are_slices_of_the_global_batch(data, no_leaks):
    with DataLoader(streams(data), num_workers=2, batch_size=B, seed=9) as g:
        whole = take(g, 4)
    parts = []
    for index in range(2):
        with DataLoader(
            streams(data), num_workers=2, batch_size=B, seed=9, shard_index=index, shard_count=2, workers="processes"
        ) as s:
            parts.append(take(s, 4))
    for k in range(4):
        np.testing.assert_array_equal(np.concatenate([parts[0][k]["y"], parts[1][k]["y"]]), whole[k]["y"])
        np.testing.assert_array_equal(np.concatenate([parts[0][k]["x"], parts[1][k]["x"]]), whole[k]["x"])


def test_exception_is_raised_at_its_step_with_the_worker_traceback(data, no_leaks):
    with DataLoader(
        streams(data), num_workers=2, batch_size=B, mode=0, transform=explode_at_step_3, workers="processes"
    ) as loader:
        for k in range(3):
            np.testing.assert_array_equal(next(loader)["y"], np.arange(B * k, B * k + B))
        with pytest.raises(Boom, match="step 3 exploded") as e:
            next(loader)
        text = "".join(traceback.format_exception(type(e.value), e.value, e.value.__traceback__))
        assert "explode_at_step_3" in text and 'raise Boom("step 3 exploded")' in text, text
        np.testing.assert_array_equal(next(loader)["y"], np.arange(4 * B, 5 * B))  # it goes on


def test_killed_worker_is_a_clear_error_and_the_loader_goes_on(data, no_leaks):
    with DataLoader(streams(data), num_workers=2, batch_size=B, mode=0, transform=widen) as t:
        want = take(t, 16)
    with DataLoader(
        streams(data), num_workers=2, batch_size=B, mode=0, transform=slow_widen, workers="processes"
    ) as loader:
        assert_same(take(loader, 2), want[:2])
        victim = loader._pipeline._workers[0].proc.pid
        os.kill(victim, signal.SIGKILL)
        got, failed = {}, []
        for _ in range(10):
            step = loader.step
            try:
                got[step] = next(loader)
            except WorkerError as e:
                failed.append((step, str(e)))
        assert len(failed) == 1, failed
        step, msg = failed[0]
        assert f"pid {victim}" in msg and "worker 0" in msg and "SIGKILL" in msg and f"step {step}" in msg, msg
        for k, batch in got.items():
            assert_same([batch], [want[k]])
        assert victim not in children()
        assert_same(take(loader, 2), want[12:14])


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # the reader's pool
def test_loader_in_a_forked_child(data, no_leaks):
    with DataLoader(streams(data), num_workers=2, batch_size=B, seed=7, transform=widen) as t:
        want = take(t, 6)
    with DataLoader(streams(data), num_workers=2, batch_size=B, seed=7, transform=widen, workers="processes") as loader:
        assert_same(take(loader, 3), want[:3])
        pid = os.fork()
        if pid == 0:  # the child starts workers of its own and leaves the parent's alone
            code = 1
            try:
                assert_same(take(loader, 2), want[3:5])
                loader.close()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert_same(take(loader, 3), want[3:6])


def test_lambdas_and_nested_transforms_run_in_workers_and_unpicklable_ones_are_a_clear_type_error(data, no_leaks):
    offset = 1000

    def nested(batch):
        return {"x": batch["x"].astype(np.int64) + offset}

    want = [batch["x"].astype(np.int64) + 1000 for batch in take(DataLoader(streams(data), batch_size=B), 2)]
    for fn in (nested, lambda batch: {"x": batch["x"].astype(np.int64) + offset}):
        with DataLoader(streams(data), num_workers=1, batch_size=B, transform=fn, workers="processes") as loader:
            got = [batch["x"] for batch in take(loader, 2)]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))

    lock = threading.Lock()

    def holds_a_lock(batch):
        with lock:
            return batch

    with pytest.raises(TypeError, match="cannot be pickled") as e:
        DataLoader(streams(data), num_workers=1, batch_size=B, transform=holds_a_lock, workers="processes")
    assert "workers='threads'" in str(e.value) and "lock" in str(e.value)
    with pytest.raises(ValueError, match="threads"):
        DataLoader(streams(data), batch_size=B, workers="fork")


def test_transform_that_fails_to_load_in_a_worker(data, no_leaks):
    with DataLoader(
        streams(data), num_workers=1, batch_size=B, transform=LoadsNowhere(), workers="processes"
    ) as loader:
        for _ in range(2):  # the loader stays failed; it neither hangs nor respawns in a loop
            with pytest.raises(WorkerError, match="could not start") as e:
                next(loader)
            assert "this transform does not load in a worker" in str(e.value)


def test_two_threads_share_one_loader(data, no_leaks):
    seen, errors = [], []
    with DataLoader(streams(data), num_workers=2, batch_size=B, mode=0, workers="processes") as loader:

        def consume():
            try:
                for _ in range(10):
                    batch = next(loader)
                    seen.append(int(batch["y"][0]))
                    np.testing.assert_array_equal(batch["y"], (np.arange(B) + batch["y"][0]) % N)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=consume) for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
    assert not errors, errors
    assert sorted(seen) == sorted((k * B) % N for k in range(20))


def test_slot_pool_is_bounded(data, no_leaks):
    with DataLoader(streams(data), num_workers=2, batch_size=B, transform=widen, workers="processes") as loader:
        held = take(loader, 30)  # every held batch keeps its slot
        assert slot_fds() >= 30
        del held
        gc.collect()
        for _ in range(30):  # one batch held at a time
            next(loader)
        pool = loader._pipeline._pool
        assert sum(len(w.slots) for w in loader._pipeline._workers) <= 2 * pool
        assert slot_fds() <= 2 * pool, (slot_fds(), pool)


def test_nothing_left_after_close_gc_or_an_exception(data, no_leaks):
    loader = DataLoader(streams(data), num_workers=2, batch_size=B, mode=0, transform=stall_from_step_2,
                        workers="processes")
    take(loader, 2)
    procs = [w.proc for w in loader._pipeline._workers]
    # Both workers are busy with prefetched steps; the grace period is over at once on this clock:
    # close() kills them rather than waiting for their steps.
    reads = iter([0.0])
    loader._pipeline.clock = lambda: next(reads, 1e9)
    loader.close()
    assert [p.returncode for p in procs] == [-signal.SIGKILL] * 2, "close() waited for the busy workers"
    assert not ({p.pid for p in procs} & children()), "close() returned with a worker still alive"
    loader = DataLoader(streams(data), num_workers=2, batch_size=B, transform=widen, workers="processes")
    kept = take(loader, 3)
    pids = {w.proc.pid for w in loader._pipeline._workers}
    del loader  # garbage collection stops the workers; the batches stay valid
    gc.collect()
    assert wait_until(lambda: not (pids & children()))
    with DataLoader(streams(data), num_workers=2, batch_size=B, transform=widen) as t:
        assert_same(kept, take(t, 3))
    assert in_slot(kept[2]["wide"])
    del kept
    cfg = dict(num_workers=2, batch_size=B, mode=0, transform=explode_at_step_3, workers="processes")
    with pytest.raises(Boom):
        with DataLoader(streams(data), **cfg) as loader:
            take(loader, 5)


def test_workers_exit_when_the_parent_is_killed(data, tmp_path):
    """Even while a forked child of the parent lives on: it must not hold the workers' sockets."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            sys.path.insert(0, {os.path.dirname(__file__)!r})
            from test_process_workers import streams, slow_widen
            from loaderx.dataloader import DataLoader
            from pathlib import Path

            if __name__ == "__main__":
                loader = DataLoader(streams(Path({str(data)!r})), num_workers=2, batch_size=64,
                                    transform=slow_widen, workers="processes")
                next(loader)
                if os.fork() == 0:  # a forked child, as torch's workers are, that outlives us
                    time.sleep(60)
                    os._exit(0)
                print(*[w.proc.pid for w in loader._pipeline._workers], flush=True)
                time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        parent.kill()
        parent.wait(10)

        def gone():
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            return False
                except OSError:
                    pass
            return True

        assert wait_until(gone, 10.0), f"workers {pids} outlived their parent"
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the forked sleeper too
        parent.wait(10)
