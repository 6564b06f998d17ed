"""Remote reads through a fault-injecting HTTP proxy (a small server in this file, in front of
nginx serving the fixtures): 500 and 503 answers, dropped connections, short bodies and added
delay. A read either retries and returns the right bytes, or fails with a typed error (an
OSError naming the URL) within its deadline. Never a wrong byte, never a hang."""

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_remote_http import http  # noqa: F401  (the nginx fixture)

from _lxhelpers import FIXTURES
from loaderx import errors

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from http_proxy import Proxy  # noqa: E402

from loaderx.zrecord import Zrecord

NAME = "u8img_zstd"


@pytest.fixture(scope="module")
def proxy(http):  # noqa: F811
    p = Proxy(http)
    yield p.url, p
    p.close()


def _expected(n):
    local = Zrecord._existing(FIXTURES / NAME / "store")
    idxs = np.arange(n)
    lens = local.lengths(idxs)
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    want = np.empty(int(lens.sum()), np.uint8)
    local.gather(idxs, want, offs)
    return idxs, offs, want


@pytest.mark.parametrize("action", ["500", "503", "drop", "short"])
def test_a_failed_request_is_retried_or_a_typed_error(proxy, action):
    base, faults = proxy
    z = Zrecord(f"{base}/{NAME}/store")
    idxs, offs, want = _expected(min(len(z), 64))
    faults.plan = [action, action]
    got = np.full_like(want, 0xAB)
    try:
        z.gather(idxs, got, offs)
    except errors.ZrecordError as e:
        assert isinstance(e, OSError), e
        assert base in str(e), e
    else:
        assert np.array_equal(got, want), "a retried read must give exactly the stored bytes"
    assert faults.plan == [], f"the injected {action}s were not all met"
    faults.plan = []


def test_a_slow_server_is_an_error_within_the_deadline(proxy):
    base, faults = proxy
    from loaderx import _loaderx

    handle = _loaderx.Handle(f"{base}/{NAME}/store", deadline=1.0)
    idxs = np.arange(8, dtype=np.uint64)
    lens = handle.lengths(idxs)
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    faults.plan = ["delay:5"] * 20
    start = time.monotonic()
    with pytest.raises(errors.StoreIOError, match="deadline") as e:
        handle.gather(idxs, np.empty(int(lens.sum()), np.uint8), offs)
    assert time.monotonic() - start < 4, "the deadline was not kept"
    assert base in str(e.value)
    faults.plan = []


def test_a_batch_is_one_round_of_concurrent_requests_with_the_gil_released(proxy, spread_store):
    """256 random records far apart: their ranges are all in flight at once (the proxy's peak
    concurrency), not one after another, and Python threads run while the call waits."""
    import threading

    base, faults = proxy
    local = Zrecord._existing(spread_store[0] / spread_store[1])
    z = Zrecord(f"{base}/spread/{spread_store[1]}")
    rng = np.random.default_rng(3)
    warm = np.arange(len(local))
    z.lengths(warm)  # the whole table, so the gather below fetches only records
    idxs = rng.choice(len(local), 256, replace=False)
    lens = local.lengths(idxs)
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    want, got = np.empty(int(lens.sum()), np.uint8), np.full(int(lens.sum()), 0xAB, np.uint8)
    local.gather(idxs, want, offs)
    ticks, stop = [0], threading.Event()

    def count():  # sleeps between ticks, so it does not starve the proxy's threads of the GIL
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    faults.reset_counts()
    faults.delay = 1.0
    ticker = threading.Thread(target=count)
    ticker.start()
    try:
        z.gather(idxs, got, offs)
    finally:
        stop.set()
        ticker.join()
        faults.delay = 0.0
    assert np.array_equal(got, want)
    assert faults.requests >= 50, f"only {faults.requests} requests: the records were not spread out"
    assert faults.peak >= faults.requests // 2, f"{faults.requests} requests but at most {faults.peak} at once"
    assert ticks[0] > 100, "the calling thread held the GIL while it waited"
