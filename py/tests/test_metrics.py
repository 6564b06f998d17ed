"""Loader metrics and traces: what ``next()`` waited, how many batches were ready, each stage's
time on the workers (threads and processes), the bytes made, and a Chrome trace with a track
per worker and one for the consumer. Time checks here are lower bounds set by sleeps, never
speed targets."""

import json
import time

import numpy as np
import pytest

from _lxhelpers import NGINX, nginx_serving
from loaderx._metrics import Metrics
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
    assert m["stages"]["decode"]["count"] == transform["count"]
    assert m["bytes"] == transform["count"] * 16 * 8 * 4
    # A local store: the engine read the batches' stored bytes (zstd frames: not zero), nothing
    # came over a network, and no cache was asked.
    assert m["io"]["read_bytes"] > 0 and m["io"]["network_bytes"] == 0
    assert m["io"]["cache"] == {"hits": 0, "misses": 0, "hit_ratio": None}
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
    for stage in ("sample", "read", "decode", "transform"):
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


def test_wait_percentiles_are_within_nine_percent():
    rng = np.random.default_rng(0)
    values = np.exp(rng.normal(-7, 2, 20000))
    m = Metrics()
    for k, v in enumerate(values.tolist()):
        m.waited(1.0, 1.0 + v, 1, k)
    got = m.snapshot()["next"]
    assert got["count"] == len(values) and got["total"] == pytest.approx(values.sum(), rel=1e-6)
    assert got["max"] == pytest.approx(values.max(), rel=1e-9)
    for q, key in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        exact = np.quantile(values, q)
        if exact > 1e-6:
            assert exact * 0.999 <= got[key] <= exact * 1.0905, q


def test_the_engine_time_splits_into_read_and_decode(tmp_path):
    # Large zstd records: decoding them is most of the engine's share of a step.
    rng = np.random.default_rng(0)
    rows = np.repeat(rng.integers(0, 4, (64, 1)), 1 << 16, axis=1).astype(np.uint8)
    from_numpy(tmp_path / "z", rows, codec="zstd", progress=False)
    dl = DataLoader({"x": DenseDataset(tmp_path / "z")}, num_workers=1, batch_size=16)
    for _ in range(8):
        next(dl)
    m = dl.metrics()
    dl.close()
    decode, read = m["stages"]["decode"], m["stages"]["read"]
    assert decode["count"] == read["count"] >= 8 and decode["total"] > 0
    # The stored frames are far smaller than the rows they decode to.
    assert 0 < m["io"]["read_bytes"] < m["bytes"] // 20


def test_a_remote_store_reports_network_bytes_and_its_cache_hit_ratio(tmp_path):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    rows = np.arange(64 * 1024, dtype=np.uint8).reshape(64, 1024)
    from_numpy(tmp_path / "www" / "s", rows, codec="raw", progress=False)
    (tmp_path / "nginx").mkdir()
    with nginx_serving(tmp_path / "nginx", f"        root {tmp_path / 'www'};", "/s/meta.zr") as base:
        ds = DenseDataset(f"{base}/s", cache=(tmp_path / "cache", 1 << 26))
        dl = DataLoader({"x": ds}, num_workers=1, batch_size=16, mode="sequential")
        for _ in range(4):  # one pass: every block is fetched once
            next(dl)
        first = dl.metrics()["io"]
        dl.reset_metrics()
        for _ in range(4):  # the second pass: all in the cache
            next(dl)
        second = dl.metrics()["io"]
        dl.close()
    assert first["network_bytes"] >= rows.nbytes and first["read_bytes"] >= rows.nbytes
    assert first["cache"]["misses"] > 0 and first["cache"]["hit_ratio"] < 1
    assert second["network_bytes"] == 0 and second["cache"]["misses"] == 0
    assert second["cache"]["hits"] > 0 and second["cache"]["hit_ratio"] == 1.0


def test_a_snapshot_counts_every_step_and_splits_the_engine_time():
    m = Metrics()
    n = 5000
    for k in range(n):
        m.waited(float(k), k + 0.001, k % 3, k)
        m.step(k, (0.0, 0.001, 0.003, 0.004, 0.0005, 10, 0, 1, 1), 100, 1)
    snap = m.snapshot()
    assert snap["next"]["count"] == n and snap["ready"]["none"] == len(range(0, n, 3))
    assert snap["stages"]["decode"]["count"] == n
    assert snap["stages"]["decode"]["total"] == pytest.approx(0.0005 * n)
    assert snap["stages"]["read"]["total"] == pytest.approx(0.0015 * n)
    assert snap["bytes"] == 100 * n and snap["io"]["read_bytes"] == 10 * n
    assert snap["io"]["cache"]["hit_ratio"] == 0.5
    m.reset()
    assert m.snapshot()["next"]["count"] == 0
