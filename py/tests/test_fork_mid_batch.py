"""One fork in the middle of batches: with a DataLoader on worker threads reading a store over
HTTP (nginx), a remote store with a gather in flight, local gathers fanned out over the rayon
pool, and a DataLoader on worker processes all alive and busy, a forked child reads the same
records through each of them (and writes a store of its own), and the parent goes on with
exactly the batches it would have produced.

The in-flight remote gathers come from an nginx location throttled to 2 KiB/s, so each takes
a second or two on the remote runtime's threads; the test asserts that a remote gather and a
local fanned-out gather each began before the fork and ended after it. A child that reused the
parent's runtime or rayon pool (whose threads it lacks) would wait forever: it has a deadline,
and a child that misses it fails the test.
"""

import functools
import itertools
import os
import pickle
import select
import signal
import threading
import traceback

import numpy as np
import pytest

from _lxhelpers import NGINX, nginx_serving
from loaderx import _process
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fork is POSIX only")

N, SIZE, B = 512, 4096, 16
#: Seconds a child gets to answer; one that has not by then hung.
CHILD_DEADLINE = 120
#: Forks tried until one lands in the middle of both kinds of background gather.
ROUNDS = 8


def rows():
    return np.random.default_rng(5).integers(0, 256, (N, SIZE), dtype=np.uint8)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    root = tmp_path_factory.mktemp("forked")
    from_numpy(root / "d", rows(), codec="raw", progress=False)
    server = f"""        location /d/ {{
            alias {root}/d/;
        }}
        location /slow/ {{
            alias {root}/d/;
            limit_rate 2k;
        }}"""
    with nginx_serving(tmp_path_factory.mktemp("nginx"), server, "/d/meta.zr") as base:
        yield root, base


class Background:
    """A thread that runs `gather` over and over, numbering when each gather began and ended on
    one shared counter, and keeping the first wrong answer or error. `gather(k)` returns a
    function that checks what the gather read (a string naming the problem, or None)."""

    def __init__(self, name, gather, ticks):
        self.name, self._gather, self._ticks = name, gather, ticks
        self.spans: list[tuple[int, int]] = []
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"fork-test-{name}", daemon=True)
        self._thread.start()

    def _loop(self):
        k = 0
        while not self._stop.is_set():
            began = next(self._ticks)
            try:
                check = self._gather(k)
                self.spans.append((began, next(self._ticks)))
                problem = check()
            except Exception as e:
                problem = f"{type(e).__name__}: {e}"
            if problem is not None and self.problem is None:
                self.problem = problem
            k += 1

    def across(self, before, after):
        """Whether a call began before tick `before` and ended after tick `after`."""
        return any(b < before and e > after for b, e in list(self.spans))

    def finished_after(self, tick):
        return sum(1 for b, _ in list(self.spans) if b > tick)

    def stop(self):
        self._stop.set()
        self._thread.join(CHILD_DEADLINE)
        assert not self._thread.is_alive(), f"the {self.name} gathers hung"


def loaders(local, remote):
    kw = dict(batch_size=B, seed=3, mode=1)
    return (
        DataLoader({"d": DenseDataset(remote)}, num_workers=2, **kw),
        DataLoader({"d": DenseDataset(local)}, num_workers=1, workers="processes", **kw),
    )


def child_reads(want_t, want_p, threaded, processes, slow, local, scratch):
    """In the forked child: everything the parent had open, read again, and a store written."""
    data = rows()
    got = {
        "threads": [next(threaded)["d"] for _ in range(3)],
        "processes": [next(processes)["d"] for _ in range(2)],
    }
    threaded.close()
    processes.close()
    idx = [3, 400, 77, 511]
    lens = slow.lengths(idx)
    out = np.empty(int(lens.sum()), np.uint8)
    slow.gather(idx, out, np.arange(len(idx), dtype=np.uint64) * SIZE)
    wide = np.random.default_rng(9).integers(0, N, 4096)
    # Appends run parallel iterators on this process's pool.
    from_numpy(scratch, data[:64], codec="zstd", progress=False)
    return {
        "threads": all(np.array_equal(g, w) for g, w in zip(got["threads"], want_t[2:5], strict=True)),
        "processes": all(np.array_equal(g, w) for g, w in zip(got["processes"], want_p[2:4], strict=True)),
        "remote": out.tobytes() == data[idx].tobytes(),
        "local": np.array_equal(local[wide], data[wide]),
        "written": np.array_equal(DenseDataset(scratch)[:], data[:64]),
    }


def in_child(work, ticks):
    """Forks; the child runs `work` and sends back its result (or its traceback). Returns what
    the child sent and the ticks taken right before and right after the fork, failing the test
    if the child does not answer within the deadline."""
    read, write = os.pipe()
    before = next(ticks)
    pid = os.fork()
    after = next(ticks) if pid else 0
    if pid == 0:
        code = 1
        try:
            os.close(read)
            try:
                answer = ("ok", work())
            except BaseException:
                answer = ("error", traceback.format_exc())
            with os.fdopen(write, "wb") as f:
                pickle.dump(answer, f)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    try:
        with os.fdopen(read, "rb") as f:
            while select.select([f], [], [], CHILD_DEADLINE)[0]:
                chunk = os.read(f.fileno(), 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            else:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the forked child sent nothing for {CHILD_DEADLINE} s: it hung")
    finally:
        _, code = os.waitpid(pid, 0)
    if not chunks:
        pytest.fail(f"the forked child died without an answer ({os.waitstatus_to_exitcode(code)})")
    status, answer = pickle.loads(b"".join(chunks))
    assert status == "ok", answer
    return answer, before, after


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_fork_mid_batch_reads_the_same_records_in_the_child_and_leaves_the_parent_alone(served, tmp_path):
    root, base = served
    local, remote = root / "d", f"{base}/d"
    data = rows()
    reference = DataLoader({"d": DenseDataset(local)}, batch_size=B, seed=3, mode=1)
    want = [next(reference)["d"] for _ in range(5 * ROUNDS)]
    reference.close()

    ticks = itertools.count()
    slow = Zrecord._existing(f"{base}/slow")
    local_ds = DenseDataset(local)

    def slow_gather(k):
        idx = [(7 * k + 128 * j) % N for j in range(4)]  # too far apart to merge: 4 requests
        out = np.empty(4 * SIZE, np.uint8)
        slow.gather(idx, out, np.arange(4, dtype=np.uint64) * SIZE)
        return lambda: None if out.tobytes() == data[idx].tobytes() else f"remote gather {k} read wrong bytes"

    def wide_gather(k):
        rng = np.random.default_rng(k)
        idx = rng.integers(0, N, 4096)
        got = local_ds[idx]
        # A sample of the rows, so that the thread spends its time in gathers.
        some = rng.integers(0, len(idx), 64)
        return lambda: None if np.array_equal(got[some], data[idx[some]]) else f"local gather {k} read wrong bytes"

    threaded, processes = loaders(local, remote)
    background = [Background("remote", slow_gather, ticks), Background("local", wide_gather, ticks)]
    taken_t = taken_p = 0
    try:
        for round_ in range(ROUNDS):
            want_t, want_p = want[taken_t : taken_t + 5], want[taken_p : taken_p + 4]
            assert all(np.array_equal(next(threaded)["d"], w) for w in want_t[:2])
            assert all(np.array_equal(next(processes)["d"], w) for w in want_p[:2])
            scratch = tmp_path / f"child{round_}"
            work = functools.partial(child_reads, want_t, want_p, threaded, processes, slow, local_ds, scratch)
            answer, before, after = in_child(work, ticks)
            failed = [what for what in ("threads", "processes", "remote", "local", "written") if not answer[what]]
            assert not failed, f"the child read wrong records through: {failed}"
            # The parent goes on at the same steps, as if nothing had happened.
            parent_t = [next(threaded)["d"] for _ in range(3)]
            parent_p = [next(processes)["d"] for _ in range(2)]
            assert all(np.array_equal(g, w) for g, w in zip(parent_t, want_t[2:5], strict=True))
            assert all(np.array_equal(g, w) for g, w in zip(parent_p, want_p[2:4], strict=True))
            taken_t, taken_p = taken_t + 5, taken_p + 4
            if all(b.across(before, after) for b in background):
                break
        else:
            pytest.fail(f"in {ROUNDS} forks, none came while both a remote and a local gather ran")
        # The parent's own gathers go on after the fork: each starts and ends another call.
        for _ in range(CHILD_DEADLINE * 20):
            if all(b.finished_after(after) for b in background):
                break
            threading.Event().wait(0.05)
    finally:
        for b in background:
            b.stop()
        threaded.close()
        processes.close()
    for b in background:
        assert b.problem is None, f"{b.name}: {b.problem}"
        assert b.finished_after(after), f"the parent's {b.name} gathers stopped at the fork"


def test_the_process_helper_answers_as_the_system_does_in_parent_and_child():
    """`loaderx._process` (native's kept id) says which process this is in the parent and in a
    forked child, and runs the at-fork hooks in the child only."""
    me = _process.current()
    assert me == os.getpid() and not _process.forked_since(me)
    ran: list[int] = []

    def hook():
        ran.append(os.getpid())

    _process.in_child(hook)
    try:
        (current, pid, forked, hooked), _, _ = in_child(
            lambda: (_process.current(), os.getpid(), _process.forked_since(me), list(ran)), itertools.count()
        )
    finally:
        _process._hooks.remove(hook)
    assert current == pid != me and forked and hooked == [pid]
    assert ran == [] and not _process.forked_since(me)
