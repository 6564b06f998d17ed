"""Loader metrics and traces: where a training step's time goes while it waits for data.

:class:`Metrics` is one loader's record in one process: how long each ``next()`` waited and how
many batches were ready when it was called, the time each step spent in each stage on the
workers (``sample``: the indices or rows of the step; ``read``: the engine planning and fetching
bytes; ``decode``: the engine decoding and checking them; ``transform``), the bytes of the
batches made, the bytes the engine read (and of those, the bytes that came over the network),
and a remote store's cache hits and misses. :meth:`Metrics.snapshot` returns it as a plain dict
(``DataLoader.metrics()``).

With a trace path, every stage and every wait is also an event of the Chrome trace format (the
JSON that Perfetto and ``chrome://tracing`` open): one track per worker and one for the
consumer, written when the loader closes (and at exit).

Invariants:
* The counting is native (``_loaderx.Recorder``, ``loaderx_core::metrics``): recording a step is
  one call under a short lock, with no Python arithmetic, so it costs about a microsecond.
* Counts, totals and maxima are exact; percentiles come from a log-scale histogram of 8 buckets
  per doubling, so they are within 9 % of the exact value.
* The engine's share of a step (``read``, ``decode``, bytes, cache) comes from the worker
  thread's own read meter (``_loaderx.thread_meter``), read before and after the step's reads,
  so other threads' reads never count in it.
* A trace keeps at most :data:`MAX_EVENTS` events; past that it stops recording and says so in
  its metadata, rather than grow without bound.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from ._loaderx import Recorder, meter_since, thread_meter

__all__ = ["MAX_EVENTS", "Metrics", "STAGES", "clock", "produce_timed"]

#: The stages of a step on a worker, in the order they run.
STAGES = ("sample", "read", "decode", "transform")
#: Most events a trace keeps.
MAX_EVENTS = 2_000_000

#: The clock every mark uses: ``time.perf_counter`` (CLOCK_MONOTONIC on Linux, so marks from
#: worker processes line up with the consumer's).
clock = time.perf_counter


class Metrics:
    """One loader's metrics in this process, and its trace when ``trace`` names a file."""

    def __init__(self, trace: str | os.PathLike[str] | None = None) -> None:
        self.trace_path = os.fspath(trace) if trace is not None else None
        self._recorder = Recorder(self.trace_path is not None, MAX_EVENTS)
        # Bound once: recording is on every step's path.
        self.waited = self._recorder.waited
        self.step = self._recorder.step

    def reset(self) -> None:
        """Start counting anew (the trace keeps its events)."""
        self._recorder.reset()

    # --- recording: ``waited(start, end, ready, step)`` for a ``next()`` that started at
    # ``start`` with ``ready`` batches ready and returned at ``end`` with step ``step``;
    # ``step(step, marks, nbytes, track)`` for a step made on worker ``track`` (>= 1), with
    # ``marks`` as :func:`produce_timed` makes them. Both are the recorder's own methods.

    # --- reading ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The metrics as a dict of plain numbers (seconds, bytes, counts)."""
        out: dict[str, Any] = self._recorder.snapshot()
        return out

    def write_trace(self) -> None:
        """Writes the trace file (Chrome trace format), if there is one."""
        if self.trace_path is None:
            return
        events, dropped = self._recorder.events(), self._recorder.dropped
        tracks = {0: "consumer"} | {t: f"worker {t - 1}" for t in sorted({e[1] for e in events}) if t}
        pid = os.getpid()
        out: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "loaderx"}},
        ]
        for tid, name in sorted(tracks.items()):
            out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
            out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        for name, tid, start, end, step in events:
            out.append(
                {
                    "name": name,
                    "cat": "loaderx",
                    "ph": "X",
                    "pid": pid,
                    "tid": tid,
                    "ts": start * 1e6,
                    "dur": max(0.0, end - start) * 1e6,
                    "args": {"step": step},
                }
            )
        doc = {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"events_dropped": dropped}}
        tmp = f"{self.trace_path}.tmp-{pid}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, self.trace_path)


def produce_timed(source: Any, transform: Callable[[Any], Any], step: int) -> tuple[Any, tuple[float, ...], int]:
    """``transform(source.batch(step))`` (``source.batch_timed`` gives the batch and the clock
    when sampling ended), with its marks for :meth:`Metrics.step` (the clock at its start,
    after sampling, after reading and after the transform, then the engine's seconds decoding,
    bytes read, bytes over the network, cache hits and misses during the step's reads) and the
    bytes of the batch's arrays."""
    t0 = clock()
    before = thread_meter()
    batch, t1 = source.batch_timed(step)
    engine = meter_since(before)
    t2 = clock()
    out = transform(batch)
    marks = (t0, t1, t2, clock(), *engine)
    nbytes = 0
    if isinstance(batch, dict):
        for v in batch.values():
            nbytes += getattr(v, "nbytes", 0)
    return out, marks, nbytes
