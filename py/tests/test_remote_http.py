"""Stores read by URL over plain HTTP with Range, from nginx (Debian's, started here on
127.0.0.1 with its own config): every reference fixture reads identically by URL."""

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import FIXTURES

from loaderx import errors
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    root = tmp_path_factory.mktemp("nginx")
    port = _free_port()
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / sub).mkdir()
    (root / "nginx.conf").write_text(
        f"""daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {FIXTURES};
    }}
}}
"""
    )
    proc = subprocess.Popen([NGINX, "-p", str(root), "-e", str(root / "error.log"), "-c", str(root / "nginx.conf")])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/manifest.json", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _fixtures():
    return sorted(e.name for e in FIXTURES.iterdir() if (e / "store" / "meta.zr").is_file())


@pytest.mark.parametrize("name", _fixtures())
def test_every_fixture_reads_identically_over_http(http, name):
    local = Zrecord._existing(FIXTURES / name / "store")
    remote = Zrecord(f"{http}/{name}/store")
    assert remote._s.remote and len(remote) == len(local)
    n = len(local)
    if n == 0:
        return
    idxs = np.random.default_rng(1).permutation(n)[: min(n, 300)]
    lens = local.lengths(idxs)
    assert remote.lengths(idxs).tolist() == lens.tolist()
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    a, b = np.empty(int(lens.sum()), np.uint8), np.full(int(lens.sum()), 0xAB, np.uint8)
    local.gather(idxs, a, offs)
    remote.gather(idxs, b, offs)
    assert np.array_equal(a, b)
    assert remote.stats() == local.stats()


def test_dense_dataset_over_http_and_a_missing_store(http):
    local, remote = DenseDataset(FIXTURES / "u8img_zstd" / "store"), DenseDataset(f"{http}/u8img_zstd/store")
    assert np.array_equal(remote[list(range(0, len(local), 3))], local[list(range(0, len(local), 3))])
    with pytest.raises(errors.StoreNotFoundError, match=f"{http}/nothing"):
        Zrecord(f"{http}/nothing")
