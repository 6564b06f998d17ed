"""Stores read by URL over plain HTTP with Range, from nginx (Debian's, started here on
127.0.0.1 with its own config): every reference fixture reads identically by URL."""

import os
import subprocess
import sys

import numpy as np
import pytest

from _lxhelpers import FIXTURES, NGINX, assert_reads_like_local, fixture_names, nginx_serving, tls_certificates
from loaderx import errors
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord


@pytest.fixture(scope="module")
def http(tmp_path_factory, golden_stores, spread_store):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    server = f"""        root {FIXTURES};
        location /golden/ {{
            alias {next(iter(golden_stores.values())).parent}/;
        }}
        location /spread/ {{
            alias {spread_store[0]}/;
        }}
        location /norange/ {{
            alias {FIXTURES}/;
            max_ranges 0;
        }}"""
    with nginx_serving(tmp_path_factory.mktemp("nginx"), server, "/manifest.json") as base:
        yield base


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


# Prints every record of the store at argv[1] as hex, one per line.
READ_ALL = """
import sys
import numpy as np
from loaderx.zrecord import Zrecord
z = Zrecord(sys.argv[1])
idx = list(range(len(z)))
lens = z.lengths(idx).astype(np.int64)
offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
out = np.empty(int(lens.sum()), np.uint8)
z.gather(idx, out, offs)
for o, n in zip(offs, lens):
    print(out[o:o + n].tobytes().hex())
"""


def test_https_is_verified_with_the_system_trust_store(tmp_path):
    """HTTPS reads check the server's certificate against the system's trust store (rustls with
    ring, through rustls-platform-verifier; on Linux that honours SSL_CERT_FILE). With the test CA
    trusted, every record reads as the local store's; without it, opening fails with a typed error
    that names the URL and the certificate problem, and nothing is read."""
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    tls = tls_certificates(tmp_path / "tls")
    local = subprocess.run([sys.executable, "-c", READ_ALL, str(FIXTURES / "u8img_zstd" / "store")],
                           capture_output=True, text=True, check=True, timeout=120)
    expected = local.stdout.split()
    assert len(expected) > 1
    server = f"        root {FIXTURES};"
    (tmp_path / "nginx").mkdir()
    with nginx_serving(tmp_path / "nginx", server, "/u8img_zstd/store/meta.zr", tls=tls) as base:
        assert base.startswith("https://")
        url = f"{base}/u8img_zstd/store"
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        trusted = subprocess.run([sys.executable, "-c", READ_ALL, url], capture_output=True, text=True,
                                 env={**env, "SSL_CERT_FILE": str(tls["ca"])}, timeout=120)
        assert trusted.returncode == 0, trusted.stderr
        assert trusted.stdout.split() == expected
        untrusted = subprocess.run([sys.executable, "-c", READ_ALL, url], capture_output=True, text=True,
                                   env=env, timeout=120)
    assert untrusted.returncode != 0 and untrusted.stdout == ""
    assert "StoreIOError" in untrusted.stderr and url in untrusted.stderr, untrusted.stderr
    assert "certificate" in untrusted.stderr.lower(), untrusted.stderr
