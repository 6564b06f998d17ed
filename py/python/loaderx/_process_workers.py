"""Transform workers in processes, behind ``DataLoader(..., workers="processes")``.

Under the GIL, a Python-bound transform on worker threads runs one batch at a time. Here each
of ``num_workers`` processes computes whole steps and hands the results over through shared
memory.

Design:

* **The worker computes the whole step.** The parent sends only ``(task, step)``. The worker
  draws the step's indices from its own copy of the sampler (a pure function of the step),
  gathers with the native reader (GIL released, straight into the reader's buffer pool), runs the
  transform and pickles the result with protocol 5. Gathering in the parent instead would put
  that work on the consumer's core and add a second handover per batch (the batch in, the result
  out), while the worker has the store open anyway.
* **Results travel in a slot, not through a pipe.** Each large out-of-band buffer of the result
  (every contiguous NumPy array of at least ``INBAND_MAX`` bytes) and the pickle stream itself
  are copied once into a *slot*. Only a short message (slot id and offsets) crosses the socket.
  The parent maps the slot and unpickles with the slot's memory as those buffers, so the arrays
  ``next()`` returns are views of shared memory: the parent copies nothing. Small arrays and other
  picklable objects stay in the pickle stream.
* **A slot has no name.** It is a ``memfd_create`` file (or, without memfd, a file in /dev/shm or
  the temp dir that is unlinked as soon as it is created) made by the worker. The worker sends its
  descriptor to the parent once (SCM_RIGHTS). Nothing can leak into /dev/shm: the kernel frees a
  slot when its last descriptor and mapping close, also after SIGKILL or a crash of either side.
* **Slots are pooled and bounded.** Both sides map a slot once and keep the mapping. For each batch
  the parent wraps the slot in a fresh NumPy array (the *lease*) that every array of the batch
  refers to. When the consumer drops the batch's last array, the lease is collected and a
  finalizer puts the slot on its worker's free list. The next task for that worker carries the
  list, and only then may the worker write to the slot again. A worker grows a slot in place
  (``ftruncate``; the parent follows with ``mremap``) when a result does not fit, and makes a new
  one only when none is free. A freed slot beyond ``pool`` per worker is closed on both sides. So
  memory, and descriptors (one per slot on each side), are the pool plus one slot per batch the
  consumer still holds.
* **Spawn, not fork.** Workers are fresh interpreters started with ``subprocess`` (safe when the
  parent runs threads). They get ``multiprocessing``'s preparation data, so, as under the
  'spawn' start method, a function defined in a guarded main script is found there (the
  script is imported as ``__mp_main__``). The transform and the streams are pickled, functions
  by reference, except those of a ``__main__`` a worker cannot import (``python -c``, a
  notebook, a script that builds the loader outside its ``if __name__ == "__main__"`` guard) and
  lambdas or nested functions: those go by value (cloudpickle), and the worker does not run an
  unguarded script (see :func:`payload_dumps`).
  ``RAYON_NUM_THREADS`` defaults to 1 in a worker: the processes are the parallelism.
* **No threads in the parent.** ``next()`` does all the IPC: it keeps ``window`` steps queued
  on the workers (each new one to the worker with the fewest), reads the answers that are there
  and waits (``poll``) only for the step it returns.
* **Lifetime.** A worker waits on its socket between tasks and exits at end of file, so it ends
  when the loader closes or the parent dies, crash included (a worker busy in a transform
  notices when its answer cannot be sent). A process forked from the parent closes its copies of
  the sockets at once (an at-fork hook, :func:`loaderx._process.in_child`), so it cannot keep
  the workers alive.
  :meth:`ProcessPipeline.stop` shuts the sockets down, waits up to ``GRACE`` seconds and kills
  and reaps what is left. It runs on ``close()``, on garbage collection and at interpreter exit,
  and never waits longer than a few seconds.
* **Errors.** An exception in a worker (in the gather or the transform) is sent back pickled with
  its traceback text and raised by ``next()`` at that step, chained from a
  :class:`RemoteTraceback`. A worker that dies is a :class:`~loaderx.errors.WorkerError` at the
  first step it owed, naming the worker, its pid and its exit status. A new worker takes its
  other steps, and the loader goes on (a worker that owed no step is replaced without an
  error). A worker that cannot start (for example, the transform
  does not unpickle there) makes every ``next()`` raise ``WorkerError`` with the worker's traceback.

Limits: POSIX only (descriptor passing). A worker costs a fresh interpreter, about a second to
first batch on two cores, and ``seek()`` keeps the workers for that reason. Each batch the
consumer holds keeps one descriptor open (the mapping's), so holding thousands of batches at
once needs a higher ``ulimit -n``. Only buffers that pickle out of band (NumPy arrays, bytearray,
PickleBuffer) skip the copy; anything else, such as a torch tensor, is pickled into the slot.

Invariants: ``next()`` returns steps in order and each step is exactly the threads' result. At
most ``window`` steps are queued, computing or ready. One lock guards the parent's state. The one
exception is the per-worker free lists, which are deques that finalizers append to without a lock
(a finalizer can run inside the lock). The parent forgets its workers in a forked child and never
touches them from there.
"""

from __future__ import annotations

import ast
import collections
import itertools
import mmap
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import traceback
import types
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, cast

import numpy as np

from . import _process
from .errors import WorkerError

if TYPE_CHECKING:
    from ._metrics import Metrics

#: Arrays smaller than this travel inside the pickle stream instead of as separate buffers.
INBAND_MAX = 4096
#: How long ``stop()`` lets workers exit on their own before killing them.
GRACE = 0.5
#: Longest traceback text a worker sends back.
TB_MAX = 32 << 10

_HEADER = struct.Struct("<Q")
_CLOEXEC = getattr(socket, "MSG_CMSG_CLOEXEC", 0)  # received descriptors never leak into exec
_live: weakref.WeakSet[ProcessPipeline] = weakref.WeakSet()  # pipelines of this process, forgotten in a forked child


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (the ``__cause__`` of the
    exception that ``next()`` raises)."""

    def __str__(self) -> str:
        return "\n\n" + cast(str, self.args[0])


# --- messages: an 8-byte length, a pickle, and optionally file descriptors -----------------


def _send(sock: socket.socket, msg: tuple[Any, ...], fds: Iterable[int] = ()) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    data = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else 0
    if sent < len(data):
        sock.sendall(memoryview(data)[sent:])


def _recv(sock: socket.socket) -> tuple[Any, list[int]]:
    """One message and the descriptors that came with it, or ``(None, [])`` at end of file."""
    fds: list[int]
    head, fds = b"", []
    while len(head) < _HEADER.size:
        part, got, _, _ = socket.recv_fds(sock, _HEADER.size - len(head), 4, _CLOEXEC)
        fds += got
        if not part:
            for fd in fds:
                os.close(fd)
            return None, []
        head += part
    (n,) = _HEADER.unpack(head)
    body = bytearray(n)
    view, filled = memoryview(body), 0
    while filled < n:
        k = sock.recv_into(view[filled:])
        if not k:
            for fd in fds:
                os.close(fd)
            return None, []
        filled += k
    return pickle.loads(body), fds


def anon_file(size: int = 0, label: str = "loaderx-slot") -> int:
    """A descriptor of a new shared file of ``size`` bytes that has no name in any directory
    (``label`` only shows in /proc/PID/fd and /proc/PID/maps)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(label, os.MFD_CLOEXEC)
    else:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="loaderx-", dir=folder)
        os.unlink(path)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _exit_status(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


# --- the parent's side ----------------------------------------------------------------------


class _Worker:
    """One worker process, the parent's end of its socket and the parent's slot descriptors."""

    def __init__(self, index: int, spec: bytes) -> None:
        self.index = index
        self.slots: dict[int, mmap.mmap] = {}  # slot id -> the parent's mapping of it
        self.freed: collections.deque[int] = collections.deque()  # slot ids released by finalizers (any thread)
        self.tasks: dict[int, int] = {}  # task id -> step: sent, not yet answered
        self.fatal: str | None = None  # traceback text of a failed start
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spec_fd = anon_file(0, "loaderx-spec")
        try:
            _write_all(spec_fd, spec)
            os.lseek(spec_fd, 0, os.SEEK_SET)
            package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            code = (
                f"import sys; sys.path.insert(0, {package_root!r}); "
                f"from loaderx._process_workers import _child_main; _child_main({theirs.fileno()}, {spec_fd})"
            )
            env = dict(os.environ)
            env.setdefault("RAYON_NUM_THREADS", "1")
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code],
                pass_fds=(theirs.fileno(), spec_fd),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            os.close(spec_fd)
        self.sock = ours

    @property
    def name(self) -> str:
        return f"worker {self.index} (pid {self.proc.pid})"

    def drain_freed(self, pool: int) -> tuple[list[int], list[int]]:
        """Slot ids to hand back to the worker as free, and ids to close beyond ``pool``."""
        freed: list[int]
        dropped: list[int]
        freed, dropped = [], []
        while True:
            try:
                sid = self.freed.popleft()
            except IndexError:
                return freed, dropped
            if sid not in self.slots:
                continue
            if len(self.slots) > pool:
                _unmap(self.slots.pop(sid))
                dropped.append(sid)
            else:
                freed.append(sid)

    def reap(self, deadline: float, clock: Callable[[], float] = time.monotonic) -> int | None:
        """Wait for the process until ``deadline`` on ``clock``, then kill it. Returns its exit code."""
        try:
            return self.proc.wait(max(0.0, deadline - clock()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
        try:
            return self.proc.wait(5.0)
        except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): leave it
            return None

    def close_fds(self) -> None:
        """Close the socket and every slot no batch still uses (the others close with their
        last array)."""
        self.sock.close()
        for mm in self.slots.values():
            _unmap(mm)
        self.slots.clear()


def _unmap(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:  # a batch the consumer holds still uses it
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ProcessPipeline:
    """``num_workers`` processes computing consecutive steps from ``start``, handed out in
    order. ``spec`` is the pickled ``(preparation data, pickled (source, transform))``.

    Holds no reference to the DataLoader. All IPC happens in the consumer's ``get()``: it keeps
    ``window`` steps queued on the workers (each to the least busy one), reads their answers and
    maps the slots. Deadlines are read on ``clock`` (seconds, monotonic), which a test may replace."""

    def __init__(self, spec: bytes, start: int, num_workers: int, window: int, metrics: Metrics | None = None) -> None:
        self.clock: Callable[[], float] = time.monotonic
        self._metrics = metrics  # the workers' stage marks go there
        self.pid = _process.current()
        self._spec = spec
        self._lock = threading.Lock()
        self._window = window
        self._pool = window // num_workers + 2  # slots a worker keeps; more only while batches hold them
        self._ids = itertools.count()
        self._next = self._claim = start
        self._steps: dict[int, int] = {}  # task id -> step, for tasks of the current seek
        self._ready: dict[int, tuple[Any, ...]] = {}  # step -> ("ok", lease, buffers, stream) | ("err", blob, text) | ("dead", message)
        self._redo: list[int] = []  # steps of a dead worker to send again
        self._stopped = False
        self._fatal: str | None = None
        self._workers: list[_Worker | None] = [None] * num_workers
        _live.add(self)
        try:
            for i in range(num_workers):
                self._workers[i] = _Worker(i, spec)
        except BaseException:
            self.stop()
            raise

    @property
    def next_step(self) -> int:
        return self._next

    def seek(self, step: int) -> None:
        """Make ``step`` the next step. Tasks already sent become stale and are dropped when
        they come back. The workers keep running."""
        with self._lock:
            self._steps.clear()
            self._ready.clear()
            self._redo.clear()
            self._next = self._claim = step

    def ready_count(self) -> int:
        """Batches made and not yet taken."""
        return len(self._ready)

    def get(self) -> Any:
        with self._lock:
            while True:
                if self._stopped:
                    raise ValueError("the DataLoader is closed")
                if self._fatal is not None:
                    raise WorkerError(self._fatal)
                self._fill()
                if self._next in self._ready:
                    break
                self._wait()
            step = self._next
            entry = self._ready.pop(step)
            self._next += 1
            self._fill()  # the workers go on while the consumer uses this batch
        return _deliver(step, entry)

    def _fill(self) -> None:
        while self._fatal is None:
            if self._redo:
                step = self._redo.pop(0)
            elif self._claim - self._next < self._window:
                step, self._claim = self._claim, self._claim + 1
            else:
                return
            self._dispatch(step)

    def _dispatch(self, step: int) -> None:
        while True:
            if self._stopped:
                raise ValueError("the DataLoader is closed")
            for i, w in enumerate(self._workers):
                if w is None:
                    self._workers[i] = _Worker(i, self._spec)
            w = min(cast("list[_Worker]", self._workers), key=lambda w: len(w.tasks))  # every slot filled above
            task = next(self._ids)
            freed, dropped = w.drain_freed(self._pool)
            try:
                _send(w.sock, ("run", task, step, freed, dropped))
            except OSError:
                self._died(w)
                if self._fatal is not None:
                    return
                continue
            w.tasks[task] = step
            self._steps[task] = step
            return

    def _wait(self) -> None:
        """Block until a busy worker answers or ends; read every message that is there."""
        busy = {w.sock.fileno(): w for w in self._workers if w is not None and w.tasks}
        poller = select.poll()
        for fd in busy:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(1000):
            w = busy[fd]
            while self._workers[w.index] is w and _readable(w.sock):
                try:
                    msg, fds = _recv(w.sock)
                except OSError:  # reset: the worker died with our messages unread
                    msg, fds = None, []
                except BaseException:  # KeyboardInterrupt mid-message: this stream is lost
                    w.proc.kill()  # so the worker's steps end as a WorkerError
                    raise
                if msg is None:
                    self._died(w)
                else:
                    self._answer(w, msg, fds)

    def _answer(self, w: _Worker, msg: tuple[Any, ...], fds: list[int]) -> None:
        if msg[0] == "fatal":
            w.fatal = msg[1]
            return
        task = msg[1]
        w.tasks.pop(task, None)
        step = self._steps.pop(task, None)  # None: stale (the loader was seeked meanwhile)
        if msg[0] == "ok":
            _, _, sid, size, buffers, stream, marks, nbytes = msg
            if step is not None and self._metrics is not None:
                self._metrics.step(step, marks, nbytes, w.index + 1)
            try:
                if fds:
                    w.slots[sid] = mmap.mmap(fds[0], size)
                elif len(w.slots[sid]) < size:
                    # The worker grew the slot for this result, so no lease holds it (it was
                    # free) and the file is exactly `size` bytes now (the worker cannot touch it
                    # again before we free it): resize's ftruncate leaves it as it is.
                    w.slots[sid].resize(size)
            except OSError as e:  # out of memory or address space: this step fails, not the loader
                if step is not None:
                    self._ready[step] = ("dead", f"could not map the result of step {step} from {w.name}: {e}")
                return
            finally:
                for fd in fds:
                    os.close(fd)
            if step is None:
                w.freed.append(sid)
                return
            lease = np.frombuffer(w.slots[sid], np.uint8, count=stream[0] + stream[1])
            weakref.finalize(lease, w.freed.append, sid).atexit = False
            self._ready[step] = ("ok", lease, buffers, stream)
        elif step is not None:
            self._ready[step] = ("err", msg[2], msg[3])

    def _died(self, w: _Worker) -> None:
        """``w`` ended: report it at the first step it owed and send its other steps again."""
        self._workers[w.index] = None
        code = w.reap(self.clock() + 5.0, self.clock)
        w.close_fds()
        steps = sorted(s for s in (self._steps.pop(t, None) for t in w.tasks) if s is not None)
        w.tasks.clear()
        if w.fatal is not None:
            self._fatal = f"DataLoader {w.name} could not start ({_exit_status(code)}):\n{w.fatal}"
        elif steps:
            self._ready[steps[0]] = (
                "dead",
                f"DataLoader {w.name} died with {_exit_status(code)} while computing step {steps[0]}; "
                "a new worker takes its place",
            )
            self._redo = sorted(self._redo + steps[1:])

    def stop(self) -> None:
        """Stop the workers and drop what is ready. Idempotent; returns within a few seconds."""
        if _process.forked_since(self.pid) or self._stopped:
            return
        self._stopped = True
        workers = [w for w in self._workers if w is not None]
        self._end(workers, self.clock() + GRACE, self.clock)
        # A consumer blocked in get() wakes up on the shut sockets and releases the lock.
        if self._lock.acquire(timeout=5.0):
            try:
                late = [w for w in self._workers if w is not None and w not in workers]
                self._end(late, self.clock(), self.clock)  # spawned by a get() that raced with stop()
                for w in workers + late:
                    w.close_fds()
                self._workers = [None] * len(self._workers)
                self._ready.clear()
            finally:
                self._lock.release()

    @staticmethod
    def _end(workers: Sequence[_Worker], deadline: float, clock: Callable[[], float]) -> None:
        for w in workers:
            try:
                w.sock.shutdown(socket.SHUT_RDWR)  # the worker reads end of file and exits
            except OSError:
                pass
        for w in workers:
            w.reap(deadline, clock)

    def _forget(self) -> None:
        """In a forked child: close this process's copies of the descriptors, touch nothing else."""
        self._stopped = True
        for w in self._workers:
            if w is not None:
                try:
                    w.close_fds()
                except OSError:
                    pass


def _readable(sock: socket.socket) -> bool:
    p = select.poll()
    p.register(sock.fileno(), select.POLLIN)
    return bool(p.poll(0))


def _deliver(step: int, entry: tuple[Any, ...]) -> Any:
    kind = entry[0]
    if kind == "ok":
        _, lease, buffers, (offset, length) = entry
        view = memoryview(lease)  # every array of the batch refers to the lease through it
        return pickle.loads(view[offset : offset + length], buffers=[view[o : o + n] for o, n in buffers])
    if kind == "dead":
        raise WorkerError(entry[1])
    _, blob, text = entry
    try:
        exc = pickle.loads(blob) if blob is not None else None
    except Exception:
        exc = None
    if not isinstance(exc, BaseException):
        raise WorkerError(f"step {step} raised in a DataLoader worker process:\n{text}")
    raise exc from RemoteTraceback(text)


def _after_fork_in_child() -> None:
    for p in list(_live):
        p._forget()
    _live.clear()


_process.in_child(_after_fork_in_child)


# --- the worker's side ----------------------------------------------------------------------


def _tb_text() -> str:
    text = traceback.format_exc()
    return text if len(text) <= TB_MAX else "...\n" + text[-TB_MAX:]


def _layout(result: object) -> tuple[bytes, list[memoryview], list[tuple[int, int]], int]:
    """``(stream, buffers, offsets, used)``: the result pickled with its large buffers out of
    band, and where each buffer and then the stream go in a slot."""
    buffers: list[memoryview] = []

    def out_of_band(pb: pickle.PickleBuffer) -> bool:
        raw = pb.raw()
        if raw.nbytes < INBAND_MAX:
            return True  # keep it in the stream
        buffers.append(raw)
        return False

    stream = pickle.dumps(result, protocol=5, buffer_callback=out_of_band)
    offsets: list[tuple[int, int]]
    offsets, used = [], 0
    for raw in buffers:
        align = 4096 if raw.nbytes >= 65536 else 64  # page-aligned copies take the fast path
        used = -(-used // align) * align
        offsets.append((used, raw.nbytes))
        used += raw.nbytes
    return stream, buffers, offsets, used


class _Slots:
    """The worker's slots: id -> [fd, mmap, size]."""

    def __init__(self) -> None:
        self.slots: dict[int, list[Any]]
        self.free: list[int]
        self.slots, self.free, self._ids = {}, [], itertools.count()

    def take(self, need: int) -> tuple[int, mmap.mmap, bool]:
        """A free slot of at least ``need`` bytes: ``(id, mapping, new)``."""
        fit = [s for s in self.free if self.slots[s][2] >= need]
        if fit:
            sid = fit[0]
        elif self.free:
            sid = self.free[0]
            fd, old, _ = self.slots[sid]
            size = _round_up(need)
            os.ftruncate(fd, size)  # the parent's descriptor sees the same, larger file
            self.slots[sid] = [fd, mmap.mmap(fd, size), size]
            old.close()
        else:
            sid, size = next(self._ids), _round_up(need)
            fd = anon_file(size)
            self.slots[sid] = [fd, mmap.mmap(fd, size), size]
            return sid, self.slots[sid][1], True
        self.free.remove(sid)
        return sid, self.slots[sid][1], False

    def drop(self, sid: int) -> None:
        fd, mm, _ = self.slots.pop(sid)
        mm.close()
        os.close(fd)


def _round_up(n: int) -> int:
    return max(1 << 20, -(-n // (1 << 20)) * (1 << 20))


def _child_main(sock_fd: int, spec_fd: int) -> None:
    """A worker: read the spec, then answer ``run`` messages until end of file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    os.set_inheritable(sock_fd, False)
    sock = socket.socket(fileno=sock_fd)
    with os.fdopen(spec_fd, "rb") as f:
        spec = f.read()
    try:
        import multiprocessing.spawn

        prep, payload = pickle.loads(spec)
        multiprocessing.spawn.prepare(prep)
        source, transform = pickle.loads(payload)
        from ._metrics import produce_timed
    except BaseException:
        try:
            _send(sock, ("fatal", _tb_text()))
        except OSError:
            pass
        sys.exit(1)
    del spec, payload
    slots = _Slots()
    while True:
        try:
            msg, _ = _recv(sock)
        except OSError:
            msg = None
        if msg is None:
            return
        _, task, step, freed, dropped = msg
        for sid in dropped:
            slots.drop(sid)
        slots.free += freed
        sid = None
        try:
            result, marks, nbytes = produce_timed(source, transform, step)
            stream, buffers, offsets, used = _layout(result)
            del result
            sid, mm, new = slots.take(used + len(stream))  # OSError: no memory for the slot
            for raw, (offset, n) in zip(buffers, offsets):
                mm[offset : offset + n] = raw
            mm[used : used + len(stream)] = stream
            del buffers
            reply = ("ok", task, sid, slots.slots[sid][2], offsets, (used, len(stream)), marks, nbytes)
            fds = (slots.slots[sid][0],) if new else ()
        except BaseException as e:  # raised by next() at this step
            if sid is not None and new:  # the parent never heard of it
                slots.drop(sid)
            elif sid is not None:  # still free as far as the parent knows
                slots.free.append(sid)
            try:
                blob = pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                blob = None
            reply, fds = ("err", task, blob, _tb_text()), ()
        try:
            _send(sock, reply, fds)
        except OSError:  # the parent is gone
            return


# --- what a worker can load: the main module -----------------------------------------------


def payload_dumps(prep: dict[str, Any]) -> Callable[[object], bytes]:
    """The pickling function for what a worker loads (the streams and the transform), given
    ``multiprocessing``'s preparation data ``prep``, which it may change.

    A worker is a fresh interpreter. What it can import travels by reference; the rest
    (lambdas, nested functions, anything defined in ``__main__``) travels by value, by
    cloudpickle. A worker imports the main script, as under multiprocessing's spawn, only when
    the script builds the loader under ``if __name__ == "__main__":``. It never does for a
    ``__main__`` that has no file (``python -c``, an interactive session, a notebook cell) nor
    for a script that builds the loader at import time (each worker would run the script
    again)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) if main is not None else None
    if not (main is not None and path and _unguarded_line(main, path) is None):
        prep.pop("init_main_from_path", None)
        prep.pop("init_main_from_name", None)
    import cloudpickle

    return lambda obj: cast(bytes, cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _unguarded_line(main: types.ModuleType, path: str) -> int | None:
    """The line of the main script whose top-level code is running now (building the loader),
    when it is outside every ``if __name__ == "__main__":`` block; else None."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        with tokenize.open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None  # not a source file we can read: leave it to the worker
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test) and node.body[0].lineno <= line <= node.body[-1].end_lineno:  # type: ignore[operator]
            return None
    return line


def _is_main_test(test: ast.expr) -> bool:
    """Whether ``test`` is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]
