"""Stores read by URL over plain HTTP with Range, from nginx (Debian's, started here on
127.0.0.1 with its own config): every reference fixture reads identically by URL."""

import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import FIXTURES, assert_reads_like_local, fixture_names, free_port
from loaderx import errors
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@pytest.fixture(scope="module")
def http(tmp_path_factory, golden_stores, spread_store):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    root = tmp_path_factory.mktemp("nginx")
    port = free_port()
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (root / sub).mkdir()
    # As root, nginx's workers would run as nobody and could not read pytest's private tmp dirs.
    user = "user root root;" if os.geteuid() == 0 else ""
    (root / "nginx.conf").write_text(
        f"""daemon off;
{user}
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
        location /golden/ {{
            alias {next(iter(golden_stores.values())).parent}/;
        }}
        location /spread/ {{
            alias {spread_store[0]}/;
        }}
        location /norange/ {{
            alias {FIXTURES}/;
            max_ranges 0;
        }}
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


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_reads_identically_over_http(http, name):
    local = Zrecord._existing(FIXTURES / name / "store")
    assert_reads_like_local(local, Zrecord(f"{http}/{name}/store"), seed=1)


def test_every_golden_store_reads_identically_over_http(http, golden_stores):
    for k, store in enumerate(golden_stores.values()):
        url = f"{http}/golden/{store.relative_to(store.parent)}"
        assert_reads_like_local(Zrecord._existing(store), Zrecord(url), seed=k)


def test_dense_dataset_over_http_and_a_missing_store(http):
    local, remote = DenseDataset(FIXTURES / "u8img_zstd" / "store"), DenseDataset(f"{http}/u8img_zstd/store")
    assert np.array_equal(remote[list(range(0, len(local), 3))], local[list(range(0, len(local), 3))])
    with pytest.raises(errors.StoreNotFoundError, match=f"{http}/nothing"):
        Zrecord(f"{http}/nothing")


def test_a_server_without_range_support_is_a_clear_error(http):
    """Range requests answered with the whole object (200, nginx's max_ranges 0) are refused
    with an error that says so, never read as the asked-for bytes."""
    url = f"{http}/norange/u8img_zstd/store"
    with pytest.raises(errors.StoreIOError, match="does not support HTTP Range") as e:
        z = Zrecord(url)
        z.gather([0], np.empty(int(z.lengths([0])[0]), np.uint8), [0])
    assert url in str(e.value)
