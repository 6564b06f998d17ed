"""Loader metrics and traces: what ``next()`` waited, how many batches were ready, each stage's
time on the workers (threads and processes), the bytes made, and a Chrome trace with a track
per worker and one for the consumer. Time checks here are lower bounds set by sleeps, never
speed targets."""

import json
import time

import numpy as np
import pytest

from loaderx._metrics import _Histogram
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics") / "x"
    from_numpy(root, np.arange(400 * 8, dtype=np.float32).reshape(400, 8), progress=False)
    return root


def slow(batch):
    time.sleep(0.02)
    return batch


def test_a_slow_transform_shows_as_stalls_and_transform_time(store):
    dl = DataLoader({"x": DenseDataset(store)}, num_workers=1, batch_size=16, prefetch_size=1, transform=slow)
    steps = 12
    for _ in range(steps):
        next(dl)
    m = dl.metrics()
    dl.close()
    assert m["next"]["count"] == steps
    assert m["next"]["p50"] <= m["next"]["p95"] <= m["next"]["p99"] <= m["next"]["max"]
    # One worker and a 20 ms transform: the consumer, which does nothing, waits for nearly every
    # batch, and the waits add up to most of the transform time.
    assert m["ready"]["none"] >= steps // 2
    assert m["next"]["total"] >= 0.02 * (steps - 3)
    transform = m["stages"]["transform"]
    assert transform["count"] >= steps and transform["p50"] >= 0.02 * 0.91
    assert m["stages"]["read"]["count"] == transform["count"] == m["stages"]["sample"]["count"]
    assert m["bytes"] == transform["count"] * 16 * 8 * 4
    assert m["workers"] == {"kind": "threads", "count": 1, "prefetch": 1}


def test_a_fast_loader_has_batches_ready(store):
    dl = DataLoader({"x": DenseDataset(store)}, num_workers=2, batch_size=16, prefetch_size=4)
    next(dl)
    time.sleep(0.3)  # the workers fill the prefetch window meanwhile
    dl.reset_metrics()
    next(dl)
    m = dl.metrics()
    dl.close()
    assert m["next"]["count"] == 1 and m["ready"]["min"] >= 1 and m["ready"]["none"] == 0


def test_worker_processes_report_their_stages(store):
    dl = DataLoader({"x": DenseDataset(store)}, num_workers=2, batch_size=16, workers="processes", transform=slow)
    for _ in range(6):
        next(dl)
    m = dl.metrics()
    dl.close()
    assert m["stages"]["transform"]["count"] >= 6
    assert m["stages"]["transform"]["p50"] >= 0.02 * 0.91
    assert m["bytes"] >= 6 * 16 * 8 * 4


def test_the_trace_has_a_track_per_worker_and_one_for_the_consumer(store, tmp_path):
    path = tmp_path / "trace.json"
    dl = DataLoader({"x": DenseDataset(store)}, num_workers=2, batch_size=16, trace=path)
    for _ in range(10):
        next(dl)
    dl.close()
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert "consumer" in names and len(names) >= 2 and names <= {"consumer", "worker 0", "worker 1"}
    spans = [e for e in events if e["ph"] == "X"]
    waits = [e for e in spans if e["name"] == "wait"]
    assert [e["args"]["step"] for e in waits] == list(range(10))
    assert all(e["tid"] == 0 for e in waits)
    for stage in ("sample", "read", "transform"):
        steps = {e["args"]["step"] for e in spans if e["name"] == stage}
        assert set(range(10)) <= steps, stage
    assert all(e["dur"] >= 0 and e["tid"] >= 1 for e in spans if e["name"] != "wait")
    assert doc["otherData"]["events_dropped"] is False


def test_packed_loaders_have_metrics_too(tmp_path):
    from_iterator(tmp_path / "d", iter([np.arange(n, dtype=np.int32) for n in range(1, 60)]), progress=False)
    dl = DataLoader.packed(RaggedDataset(tmp_path / "d"), 32, 4)
    for _ in range(3):
        next(dl)
    m = dl.metrics()
    dl.close()
    # tokens (int32) + segment_ids + positions (int32) + doc_index + doc_offset (int64), 4 x 32
    assert m["next"]["count"] == 3 and m["bytes"] >= 3 * 4 * 32 * (4 + 4 + 4 + 8 + 8)


def test_histogram_percentiles_are_within_nine_percent():
    rng = np.random.default_rng(0)
    values = np.exp(rng.normal(-7, 2, 20000))
    h = _Histogram()
    for v in values:
        h.add(float(v))
    assert h.count == len(values) and h.total == pytest.approx(values.sum()) and h.max == values.max()
    for q in (0.5, 0.95, 0.99):
        exact = np.quantile(values, q)
        if exact > 1e-6:
            assert exact <= h.quantile(q) <= exact * 1.0905, q
