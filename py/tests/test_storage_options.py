"""A ``storage_options`` key the URL's service does not take is a BadArgumentError that names it
and lists the keys it takes, before any request is sent (object_store alone would ignore it, so a
misspelt credential would go unnoticed)."""

import http.server
import threading

import pytest

from _lxhelpers import free_port
from loaderx import errors
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord


@pytest.mark.parametrize(
    "url, key, listed",
    [
        ("s3://bucket/store", "aws_acess_key_id", "aws_access_key_id"),
        ("gs://bucket/store", "google_service_acount", "google_service_account"),
        ("az://container/store", "azure_storage_acount_name", "azure_storage_account_name"),
        ("http://127.0.0.1:{port}/store", "aws_region", "allow_http"),
    ],
)
def test_an_unknown_key_is_refused_naming_it_and_the_known_ones(url, key, listed):
    url = url.format(port=free_port())
    for open_it in (DenseDataset, Zrecord):
        with pytest.raises(errors.BadArgumentError) as e:
            open_it(url, storage_options={key: "x", "timeout": "5s"})
        message = str(e.value)
        assert f'"{key}"' in message and listed in message and "timeout" in message, message
        assert '"timeout"' not in message, "a known key was called unknown"


class _NotFound(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = _answer

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def not_found():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_known_keys_in_any_case_and_without_prefix_are_taken(not_found):
    # Taken: the open goes on to the server, which has no store, rather than failing on the keys.
    with pytest.raises(errors.StoreNotFoundError):
        Zrecord._existing(f"{not_found}/store", storage_options={"TIMEOUT": "5s", "connect_timeout": "5s"})
    opts = {"access_key_id": "a", "AWS_SECRET_ACCESS_KEY": "b", "aws_endpoint": not_found, "allow_http": "true",
            "region": "us-east-1"}
    with pytest.raises(errors.StoreNotFoundError):
        Zrecord._existing("s3://bucket/store", storage_options=opts)
