"""A URL's secrets (its userinfo and its query values, such as a presigned URL's signature) are
never shown: not in error messages, reprs or the CLI's output, whether the server refuses the
connection, answers 404 or serves the store. What is shown is `http://***@host/x?sig=***`, the
spelling of every front end, and a failed connection names its cause."""

import email.utils
import http.server
import re
import subprocess
import sys
import threading
import urllib.parse

import numpy as np
import pytest

from _lxhelpers import FIXTURES, free_port
from loaderx import _loaderx, errors
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

SECRETS = ("pa55word", "s3cret")


class _Files(http.server.BaseHTTPRequestHandler):
    """Serves the fixtures with HEAD and single-range GETs; anything else is a 404."""

    def _answer(self, body):
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
        f = (FIXTURES / path).resolve()
        if ".." in path or not f.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = f.read_bytes()
        start, end, status = 0, len(data), 200
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if wanted:
            start, status = int(wanted[1]), 206
            end = min(len(data), int(wanted[2]) + 1) if wanted[2] else len(data)
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.send_header("Content-Length", str(end - start))
        self.send_header("ETag", f'"{len(data)}"')
        self.send_header("Last-Modified", email.utils.formatdate(f.stat().st_mtime, usegmt=True))
        self.end_headers()
        if body:
            self.wfile.write(data[start:end])

    def do_HEAD(self):
        self._answer(False)

    def do_GET(self):
        self._answer(True)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "loaderx", *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def assert_hidden(text):
    for secret in SECRETS:
        assert secret not in text, text


def test_the_rule_is_the_one_of_every_front_end():
    assert _loaderx.redact_url("http://user:pa55word@h/x?sig=s3cret") == "http://***@h/x?sig=***"
    assert _loaderx.redact_url("see s3://k:s@b/p?v=1, then gs://b/q") == "see s3://***@b/p?v=***, then gs://b/q"
    assert _loaderx.redact_url("/local/path?x=1") == "/local/path?x=1"


def test_a_refused_connection_names_its_cause_and_hides_the_secrets():
    url = f"http://user:pa55word@127.0.0.1:{free_port()}/x?sig=s3cret"
    for open_it in (DenseDataset, Zrecord._existing):
        with pytest.raises(errors.StoreIOError) as e:
            open_it(url)
        message = str(e.value)
        assert_hidden(message + repr(e.value))
        assert "http://***@127.0.0.1:" in message and "/x?sig=***" in message, message
        assert "refused" in message.lower(), message
    code, out = cli("info", url)
    assert code == 2 and "refused" in out.lower(), out
    assert_hidden(out)


def test_a_404_hides_the_secrets(server):
    url = f"http://user:pa55word@{server}/nothing/here?sig=s3cret"
    with pytest.raises(errors.StoreNotFoundError) as e:
        DenseDataset(url)
    assert_hidden(str(e.value))
    assert f"http://***@{server}/nothing/here?sig=***" in str(e.value)
    code, out = cli("head", url)
    assert code == 2 and "***@" in out, out
    assert_hidden(out)


def test_a_store_read_through_a_url_with_secrets_never_shows_them(server):
    url = f"http://user:pa55word@{server}/be_i4_raw/store?sig=s3cret"
    expected = np.load(FIXTURES / "be_i4_raw/expected/values.npy")
    ds = DenseDataset(url)
    assert np.array_equal(ds[[2, 0]], expected[[2, 0]])
    assert_hidden(repr(ds) + repr(Zrecord._existing(url)))
    assert "http://***@" in repr(ds) and "sig=***" in repr(ds), repr(ds)
    with pytest.raises(IndexError) as e:
        ds[[0, len(ds)]]
    assert_hidden(str(e.value))
    ds.close()
    assert_hidden(repr(ds))
    for args in (["info", url], ["info", url, "--json"], ["head", url, "-n", "2"], ["verify", url, "--json"]):
        code, out = cli(*args)
        assert code == 0, out
        assert_hidden(out)


def test_manifest_messages_hide_the_secrets(tmp_path):
    from loaderx import manifest

    url = "http://user:pa55word@127.0.0.1:9/x?sig=s3cret"
    with pytest.raises(errors.StoreNotFoundError) as e:
        manifest.stores(url)
    assert_hidden(str(e.value))
    with pytest.raises(errors.BadArgumentError) as e:
        manifest.commit(tmp_path / "m.json", [url, url])
    assert "listed twice" in str(e.value) and "http://***@127.0.0.1:9/x?sig=***" in str(e.value)
    assert_hidden(str(e.value))
    with pytest.raises(errors.BadArgumentError) as e:
        manifest.commit(url, [tmp_path])
    assert_hidden(str(e.value))
