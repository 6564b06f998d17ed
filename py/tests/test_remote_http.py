"""Stores read by URL over plain HTTP with Range, from nginx (Debian's, started here on
127.0.0.1 with its own config): every reference fixture reads identically by URL."""

import numpy as np
import pytest

from _lxhelpers import FIXTURES, NGINX, assert_reads_like_local, fixture_names, nginx_serving
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
