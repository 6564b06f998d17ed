"""Remote reads through a fault-injecting HTTP proxy (a small server in this file, in front of
nginx serving the fixtures): 500 and 503 answers, dropped connections, short bodies and added
delay. A read either retries and returns the right bytes, or fails with a typed error (an
OSError naming the URL) within its deadline. Never a wrong byte, never a hang."""

import http.client as httpclient
import http.server as httpserver
import socketserver
import threading
import time

import numpy as np
import pytest

from _lxhelpers import FIXTURES
from test_remote_http import http  # noqa: F401  (the nginx fixture)

from loaderx import errors
from loaderx.zrecord import Zrecord

NAME = "u8img_zstd"


class _Faults:
    """What the next requests meet: a list of actions, consumed one per request."""

    def __init__(self):
        self.lock = threading.Lock()
        self.plan = []
        self.seen = 0

    def next(self):
        with self.lock:
            self.seen += 1
            return self.plan.pop(0) if self.plan else "pass"


@pytest.fixture(scope="module")
def proxy(http):  # noqa: F811
    upstream = http.removeprefix("http://")
    faults = _Faults()

    class Handler(httpserver.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _forward(self, head_only):
            action = faults.next()
            if action == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if action in ("500", "503"):
                body = b"injected"
                self.send_response(int(action))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if action.startswith("delay:"):
                time.sleep(float(action.split(":")[1]))
            conn = httpclient.HTTPConnection(upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("range", "if-match", "if-none-match")}
            conn.request(self.command, self.path, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "server", "date"):
                    self.send_header(k, v)
            self.end_headers()
            if head_only:
                return
            if action == "short" and len(body) > 1:
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
                self.connection.close()
                return
            self.wfile.write(body)

        def do_GET(self):
            self._forward(False)

        def do_HEAD(self):
            self._forward(True)

    class Server(socketserver.ThreadingMixIn, httpserver.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", faults
    server.shutdown()


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
        assert isinstance(e, OSError) or isinstance(e, errors.CorruptStoreError), e
        assert base in str(e), e
    else:
        assert np.array_equal(got, want), "a retried read must give exactly the stored bytes"
    assert faults.plan == [], f"the injected {action}s were not all met"
    faults.plan = []


def test_a_slow_server_is_an_error_within_the_deadline(proxy):
    base, faults = proxy
    from loaderx import _loaderx

    handle = _loaderx.Store(f"{base}/{NAME}/store", False, None, 1.0)
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
