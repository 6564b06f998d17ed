"""Loader metrics and traces: where a training step's time goes while it waits for data.

:class:`Metrics` is one loader's record in one process: how long each ``next()`` waited and how
many batches were ready when it was called, the time each step spent in each stage on the
workers (``sample``: the indices or rows of the step; ``read``: the engine's fetch and decode;
``transform``), and the bytes of the batches made. :meth:`Metrics.snapshot` returns it as a plain
dict (``DataLoader.metrics()``).

With a trace path, every stage and every wait is also an event of the Chrome trace format (the
JSON that Perfetto and ``chrome://tracing`` open): one track per worker and one for the
consumer, written when the loader closes (and at exit).

Invariants:
* Counts, totals and maxima are exact; percentiles come from a log-scale histogram of 8 buckets
  per doubling, so they are within 9 % of the exact value.
* Recording costs a few clock reads and one short lock per step, nothing per record.
* A trace keeps at most :data:`MAX_EVENTS` events; past that it stops recording and says so in
  its metadata, rather than grow without bound.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from typing import Any, Callable

__all__ = ["MAX_EVENTS", "Metrics", "STAGES", "clock", "produce_timed"]

#: The stages of a step on a worker.
STAGES = ("sample", "read", "transform")
#: Most events a trace keeps.
MAX_EVENTS = 2_000_000
#: Histogram buckets per doubling.
_PER_OCTAVE = 8
#: The smallest time the histogram tells apart (1 µs); shorter waits share its first bucket.
_FLOOR = 1e-6


class _Histogram:
    """Counts of durations in log-scale buckets, with exact count, total and max."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, seconds: float) -> None:
        k = 0 if seconds <= _FLOOR else int(math.log2(seconds / _FLOOR) * _PER_OCTAVE) + 1
        self.buckets[k] = self.buckets.get(k, 0) + 1
        self.count += 1
        self.total += seconds
        self.max = max(self.max, seconds)

    def quantile(self, q: float) -> float:
        """The upper edge of the bucket holding the ``q`` quantile (never above the max)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for k in sorted(self.buckets):
            seen += self.buckets[k]
            if seen >= rank:
                edge = _FLOOR if k == 0 else _FLOOR * 2 ** (k / _PER_OCTAVE)
                return min(edge, self.max)
        return self.max

    def summary(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "total": self.total,
            "p50": self.quantile(0.50),
            "p95": self.quantile(0.95),
            "p99": self.quantile(0.99),
            "max": self.max,
        }


class Metrics:
    """One loader's metrics in this process, and its trace when ``trace`` names a file."""

    def __init__(self, trace: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self.trace_path = os.fspath(trace) if trace is not None else None
        self._events: list[tuple[str, int, float, float, int]] = []  # (name, track, start, end, step)
        self._dropped = False
        self._tracks: dict[int, str] = {0: "consumer"}
        self.reset()

    def reset(self) -> None:
        """Start counting anew (the trace keeps its events)."""
        with self._lock:
            self.wait = _Histogram()
            self.ready_total = 0
            self.ready_min: int | None = None
            self.ready_max = 0
            self.ready_none = 0
            self.stages = {name: _Histogram() for name in STAGES}
            self.bytes = 0

    # --- recording -------------------------------------------------------------------------

    def waited(self, start: float, end: float, ready: int, step: int) -> None:
        """A ``next()`` that started at ``start`` with ``ready`` batches ready and returned at
        ``end`` (``time.perf_counter`` seconds) with step ``step``."""
        with self._lock:
            self.wait.add(end - start)
            self.ready_total += ready
            self.ready_min = ready if self.ready_min is None else min(self.ready_min, ready)
            self.ready_max = max(self.ready_max, ready)
            self.ready_none += ready == 0
            if self.trace_path is not None:
                self._event("wait", 0, start, end, step)

    def step(self, step: int, marks: tuple[float, float, float, float], nbytes: int, track: int) -> None:
        """A step made on a worker (``track`` >= 1): ``marks`` are the clock at its start, after
        sampling, after reading and after the transform."""
        t0, t1, t2, t3 = marks
        with self._lock:
            for name, a, b in (("sample", t0, t1), ("read", t1, t2), ("transform", t2, t3)):
                self.stages[name].add(b - a)
                if self.trace_path is not None:
                    self._event(name, track, a, b, step)
            self.bytes += nbytes

    def _event(self, name: str, track: int, start: float, end: float, step: int) -> None:
        if len(self._events) >= MAX_EVENTS:
            self._dropped = True
            return
        self._events.append((name, track, start, end, step))
        if track not in self._tracks:
            self._tracks[track] = f"worker {track - 1}"

    # --- reading ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The metrics as a dict of plain numbers (seconds, bytes, counts)."""
        with self._lock:
            calls = self.wait.count
            return {
                "next": self.wait.summary(),
                "ready": {
                    "mean": self.ready_total / calls if calls else 0.0,
                    "min": self.ready_min or 0,
                    "max": self.ready_max,
                    "none": self.ready_none,
                },
                "stages": {name: h.summary() for name, h in self.stages.items()},
                "bytes": self.bytes,
            }

    def write_trace(self) -> None:
        """Writes the trace file (Chrome trace format), if there is one."""
        if self.trace_path is None:
            return
        with self._lock:
            events, tracks, dropped = list(self._events), dict(self._tracks), self._dropped
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


def clock() -> float:
    """The clock every mark uses: ``time.perf_counter`` (CLOCK_MONOTONIC on Linux, so marks from
    worker processes line up with the consumer's)."""
    return time.perf_counter()


def produce_timed(source: Any, transform: Callable[[Any], Any], step: int) -> tuple[Any, tuple[float, float, float, float], int]:
    """``transform(source.batch(step))`` (``source.batch_timed`` gives the batch and the clock
    when sampling ended), with the clock at its start, after sampling, after
    reading and after the transform, and the bytes of the batch's arrays."""
    t0 = clock()
    batch, t1 = source.batch_timed(step)
    t2 = clock()
    out = transform(batch)
    t3 = clock()
    nbytes = sum(int(getattr(v, "nbytes", 0)) for v in batch.values()) if isinstance(batch, dict) else 0
    return out, (t0, t1, t2, t3), nbytes
