"""Stores read by az:// URL from Azurite (Microsoft's Azure Storage emulator, from npm, started
here on 127.0.0.1): every reference fixture reads identically; a missing container, a missing
prefix and a prefix that is not a store are told apart; missing credentials are named."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from _lxhelpers import FIXTURES, assert_reads_like_local, fixture_names, free_port

blob = pytest.importorskip("azure.storage.blob", reason="azure-storage-blob is installed by scripts/setup.sh")

from loaderx import errors  # noqa: E402
from loaderx.zrecord import Zrecord  # noqa: E402

AZURITE = Path.home() / ".cache" / "loaderx-tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's documented development account (the same for every installation).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
EMULATOR = {"azure_storage_use_emulator": "true"}


@pytest.fixture(scope="module")
def azure(tmp_path_factory, monkeypatch_module):
    if not AZURITE.exists():
        pytest.skip("Azurite is not installed (scripts/setup.sh installs it)")
    port = free_port()
    data = tmp_path_factory.mktemp("azurite")
    cmd = [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(data), "--silent",
           "--skipApiVersionCheck"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    # object_store's emulator mode reads the endpoint from here.
    monkeypatch_module.setenv("AZURITE_BLOB_STORAGE_URL", endpoint)
    try:
        conn = f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};BlobEndpoint={endpoint}/{ACCOUNT};"
        service = blob.BlobServiceClient.from_connection_string(conn)
        for _ in range(200):
            try:
                container = service.create_container("stores")
                break
            except Exception:
                time.sleep(0.1)
        for name in fixture_names():
            for f in (FIXTURES / name / "store").iterdir():
                container.upload_blob(f"fixtures/{name}/{f.name}", f.read_bytes())
        yield container
    finally:
        proc.terminate()  # Azurite waits for open keep-alive connections: kill after a while
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_every_fixture_reads_identically_by_az_url(azure):
    for k, name in enumerate(fixture_names()):
        local = Zrecord._existing(FIXTURES / name / "store")
        assert_reads_like_local(local, Zrecord(f"az://stores/fixtures/{name}", storage_options=EMULATOR), seed=k)


def test_missing_container_prefix_and_non_store_are_told_apart(azure):
    cases = [
        ("az://stores/nothing-here", errors.StoreNotFoundError, "nothing under this prefix in container stores"),
        ("az://no-such-container/x", errors.StoreNotFoundError, "no such container: no-such-container"),
        ("az://stores/fixtures", errors.NotAStoreError, "holds objects but no meta.zr"),
    ]
    for url, cls, why in cases:
        with pytest.raises(cls) as e:
            Zrecord(url, storage_options=EMULATOR)
        assert url in str(e.value) and why in str(e.value), str(e.value)


def test_missing_credentials_are_named_with_a_hint(azure, monkeypatch):
    for key in [k for k in os.environ if k.startswith("AZURE_")]:
        monkeypatch.delenv(key)
    url = "az://stores/fixtures/u8img_raw"
    # An account but no key: object_store would ask the instance metadata service (pointed at
    # a closed port here) for a token.
    opts = {"azure_storage_account_name": ACCOUNT, "azure_msi_endpoint": f"http://127.0.0.1:{free_port()}/token",
            "azure_storage_endpoint": os.environ.get("AZURITE_BLOB_STORAGE_URL", "") + f"/{ACCOUNT}",
            "azure_allow_http": "true"}
    with pytest.raises(errors.StoreIOError, match="no credentials found") as e:
        Zrecord(url, storage_options=opts)
    assert url in str(e.value) and "AZURE_STORAGE_ACCOUNT_KEY" in str(e.value)


def test_stores_and_manifests_are_written_to_az_urls(azure, tmp_path):
    """Writing through Azurite: a copy (live bytes, meta.zr last), a converter, and concurrent
    manifest commits (conditional writes by ETag) that lose no entry."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from loaderx import manifest, remote
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    data = np.random.default_rng(3).integers(0, 255, (2000, 32), dtype=np.uint8)
    from_numpy(tmp_path / "s", data, progress=False)
    report = remote.copy(tmp_path / "s", "az://stores/written/s", storage_options=EMULATOR)
    assert report["digest"] is not None and report["sent_bytes"] == report["live_bytes"]
    assert np.array_equal(DenseDataset("az://stores/written/s", storage_options=EMULATOR)[np.arange(2000)], data)
    with pytest.raises(errors.StoreLockedError):
        remote.copy(tmp_path / "s", "az://stores/written/s", storage_options=EMULATOR)
    for k in range(6):
        from_numpy(f"az://stores/written/p{k}", data[: 10 + k], progress=False, storage_options=EMULATOR)
    url = "az://stores/written/manifest.json"
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda k: manifest.commit(url, [f"p{k}"], EMULATOR), range(6)))
    ds = DenseDataset(url, storage_options=EMULATOR)
    assert len(ds) == sum(10 + k for k in range(6))
