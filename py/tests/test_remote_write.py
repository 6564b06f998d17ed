"""Stores copied to object storage (moto's S3 server on 127.0.0.1): only live bytes go up,
meta.zr last; the copy reads back equal to the local store; an interrupted copy resumes and is
never opened as a store; a URL holding a store is refused; a missing bucket and a denied write
are typed errors naming the URL."""

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import moto_s3

pytest.importorskip("boto3", reason="boto3 and moto[server] are installed by scripts/setup.sh")

from loaderx import errors, remote  # noqa: E402
from loaderx.converter import from_iterator, from_numpy  # noqa: E402
from loaderx.dataset import DenseDataset, RaggedDataset  # noqa: E402

BUCKET = "out"


@pytest.fixture(scope="module")
def s3():
    with moto_s3((BUCKET,)) as (endpoint, client):
        yield endpoint, client


def _objects(client, prefix):
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    return {o["Key"].split("/")[-1]: o["Size"] for o in listed}


def test_a_copy_sends_live_bytes_and_reads_back_equal(s3, tmp_path):
    _, client = s3
    rng = np.random.default_rng(0)
    data = rng.integers(0, 255, (3000, 16, 16, 3), dtype=np.uint8)
    from_numpy(tmp_path / "imgs", data, codec="zstd", progress=False)
    report = remote.copy(tmp_path / "imgs", f"s3://{BUCKET}/imgs")
    objects = _objects(client, "imgs")
    # Each object holds its live bytes only: the apparent size is gigabytes (sparse chunk and table).
    assert sum(objects.values()) == report["sent_bytes"] == report["live_bytes"]
    assert report["apparent_bytes"] > 4 * 2**30 > 100 * report["live_bytes"]
    assert ".loaderx-upload" not in objects and "meta.zr" in objects
    local, copy = DenseDataset(tmp_path / "imgs"), DenseDataset(f"s3://{BUCKET}/imgs")
    idx = rng.integers(0, 3000, 500)
    assert np.array_equal(copy[idx], local[idx]) and np.array_equal(copy[idx], data[idx])
    assert report["digest"] is not None and report["digest"] == local.digest
    # A URL holding a store is refused, not overwritten.
    with pytest.raises(errors.StoreLockedError, match="already there"):
        remote.copy(tmp_path / "imgs", f"s3://{BUCKET}/imgs")


def test_ragged_stores_and_reference_stores_without_checksums(s3, tmp_path):
    docs = [np.arange(n, dtype=np.int32) for n in range(1, 400)]
    from_iterator(tmp_path / "docs", iter(docs), progress=False)
    remote.copy(tmp_path / "docs", f"s3://{BUCKET}/docs")
    copy = RaggedDataset(f"s3://{BUCKET}/docs")
    assert all(np.array_equal(copy[i], docs[i]) for i in (0, 17, 398))
    # A fixture the reference wrote (no checksums.lx): the length is what reads back.
    from _lxhelpers import FIXTURES

    ref = FIXTURES / "u8img_zstd" / "store"
    report = remote.copy(ref, f"s3://{BUCKET}/ref")
    assert report["digest"] is None
    local, got = DenseDataset(ref), DenseDataset(f"s3://{BUCKET}/ref")
    assert len(got) == len(local) and np.array_equal(got[[0, 3, len(local) - 1]], local[[0, 3, len(local) - 1]])


def test_an_interrupted_copy_is_no_store_and_resumes(s3, tmp_path):
    endpoint, client = s3
    data = np.random.default_rng(1).integers(0, 255, (40_000, 1024), dtype=np.uint8)  # 40 MB raw: a multipart chunk
    from_numpy(tmp_path / "big", data, codec="raw", progress=False)
    url = f"s3://{BUCKET}/big"
    # A copy killed midway (its process gone): objects and the marker stay, meta.zr never went up.
    code = "import sys; from loaderx import remote; remote.copy(sys.argv[1], sys.argv[2])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "big"), url], env=os.environ.copy())
    for _ in range(600):
        if ".loaderx-upload" in _objects(client, "big"):
            break
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    left = _objects(client, "big")
    if "meta.zr" not in left:
        with pytest.raises(errors.NotAStoreError, match="no meta.zr"):
            DenseDataset(url)
    else:  # the copy finished before the kill: nothing to resume
        pytest.skip("the copy finished before it was killed")
    report = remote.copy(tmp_path / "big", url)
    assert report["skipped"] >= 1 and report["sent_bytes"] < report["live_bytes"]
    assert np.array_equal(DenseDataset(url)[[0, 39_999]], data[[0, 39_999]])
    # Removing a partial copy never removes a published store.
    with pytest.raises(errors.StoreLockedError):
        remote.remove_partial(url)


def test_what_cannot_be_written_is_a_typed_error_naming_the_url(s3, tmp_path):
    from_numpy(tmp_path / "s", np.arange(10, dtype=np.int64), progress=False)
    with pytest.raises(errors.StoreNotFoundError, match="no-such-bucket"):
        remote.copy(tmp_path / "s", "s3://no-such-bucket/s")
    with pytest.raises(errors.StoreNotFoundError):
        remote.copy(tmp_path / "nothing", f"s3://{BUCKET}/x")
    # The CLI: live bytes up, JSON out; a local destination is a usage error.
    out = subprocess.run([sys.executable, "-m", "loaderx", "cp", str(tmp_path / "s"), f"s3://{BUCKET}/cli", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["objects"] >= 2
    # A local destination that holds anything is a usage error, and is left as it was.
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    out = subprocess.run([sys.executable, "-m", "loaderx", "cp", str(tmp_path / "s"), str(tmp_path / "full")], capture_output=True, text=True)
    assert out.returncode == 2 and "cp makes a new store" in out.stderr, out.stderr
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]


def test_a_local_copy_is_sparse_and_reads_back_equal(tmp_path):
    """``cp`` to a new local directory writes only the live bytes into files of the source's
    apparent sizes (the rest stays a hole), renames the copy into place, and reads it back: the
    same records and content digest, and the copy stays appendable."""
    data = np.random.default_rng(3).integers(0, 255, (2000, 64, 3), dtype=np.uint8)
    from_numpy(tmp_path / "src", data, codec="zstd", progress=False)
    report = remote.copy(tmp_path / "src", str(tmp_path / "nested" / "dst"))
    src, dst = tmp_path / "src", tmp_path / "nested" / "dst"
    assert sorted(p.name for p in dst.iterdir()) == sorted(p.name for p in src.iterdir())
    for f in src.iterdir():
        assert (dst / f.name).stat().st_size == f.stat().st_size, f.name
    on_disk = sum((dst / f.name).stat().st_blocks * 512 for f in src.iterdir())
    assert on_disk < report["live_bytes"] + 64 * 4096 < report["apparent_bytes"] // 100
    assert report["digest"] == DenseDataset(src).digest is not None
    assert np.array_equal(DenseDataset(dst)[np.arange(2000)], data)
    assert not list((tmp_path / "nested").glob(".dst.loaderx-cp-*")), "the staging directory is gone"
    # Appendable: a local copy is a store like any other.
    from_numpy(dst, data[:10], progress=False, mode="append")
    assert len(DenseDataset(dst)) == 2010
    # The CLI, into an empty directory.
    (tmp_path / "empty").mkdir()
    out = subprocess.run([sys.executable, "-m", "loaderx", "cp", str(src), str(tmp_path / "empty"), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["digest"] == report["digest"]
    with pytest.raises(errors.BadArgumentError):
        remote.copy(src, str(dst))


def test_converters_write_straight_to_a_url(s3, tmp_path, monkeypatch):
    _, client = s3
    monkeypatch.setenv("LOADERX_STAGING_DIR", str(tmp_path / "staging"))
    (tmp_path / "staging").mkdir()
    data = np.random.default_rng(2).standard_normal((500, 4, 4)).astype(np.float32)
    assert from_numpy(f"s3://{BUCKET}/conv/dense", data, progress=False) == 500
    assert np.array_equal(DenseDataset(f"s3://{BUCKET}/conv/dense")[np.arange(500)], data)
    docs = [np.arange(n, dtype=np.int64) for n in range(1, 60)]
    assert from_iterator(f"s3://{BUCKET}/conv/docs", iter(docs), progress=False) == 59
    assert np.array_equal(RaggedDataset(f"s3://{BUCKET}/conv/docs")[41], docs[41])
    # The staging directory is left empty; the bucket holds only live bytes.
    assert list((tmp_path / "staging").iterdir()) == []
    assert sum(_objects(client, "conv/dense").values()) < 500 * 64 + 2**20
    # A URL holding a store is refused in every mode, and nothing changes there.
    for mode in ("append", "overwrite", "error"):
        with pytest.raises(errors.StoreLockedError, match="written once"):
            from_numpy(f"s3://{BUCKET}/conv/dense", data[:3], progress=False, mode=mode)
    assert len(DenseDataset(f"s3://{BUCKET}/conv/dense")) == 500
    with pytest.raises(errors.BadArgumentError, match="read-only"):
        from_numpy("http://127.0.0.1:9/x", data, progress=False)


def test_concurrent_committers_to_a_manifest_url_lose_no_entry(s3, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from loaderx import manifest
    from loaderx.dataloader import DataLoader

    parts = 12
    for k in range(parts):
        from_numpy(f"s3://{BUCKET}/parts/p{k}", np.full((10 + k, 3), k, np.int32), progress=False)
    url = f"s3://{BUCKET}/parts/manifest.json"
    # Twelve committers at once, each adding its store (relative to the manifest's prefix).
    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(lambda k: manifest.commit(url, [f"p{k}"]), range(parts)))
    listed = manifest.stores(url)
    assert sorted(name for name, _ in listed) == sorted(f"p{k}" for k in range(parts))
    ds = DenseDataset(url)
    assert len(ds) == sum(10 + k for k in range(parts))
    with DataLoader({"x": ds}, batch_size=16, mode="sequential", num_workers=1) as loader:
        first = next(loader)["x"]
    assert first.shape == (16, 3)
    # Separate processes too, and a store of another layout is refused without a write.
    code = "import sys; from loaderx import manifest; manifest.commit(sys.argv[1], [sys.argv[2]])"
    from_numpy(f"s3://{BUCKET}/parts/q0", np.zeros((5, 3), np.int32), progress=False)
    from_numpy(f"s3://{BUCKET}/parts/q1", np.zeros((5, 3), np.int32), progress=False)
    procs = [subprocess.Popen([sys.executable, "-c", code, url, f"q{k}"]) for k in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(manifest.stores(url)) == parts + 2
    from_numpy(f"s3://{BUCKET}/parts/odd", np.zeros((5, 4), np.int32), progress=False)
    with pytest.raises(errors.BadArgumentError):
        manifest.commit(url, ["odd"])
    assert len(manifest.stores(url)) == parts + 2


def test_the_cli_converts_straight_to_a_url(s3, tmp_path):
    data = np.arange(600, dtype=np.int32).reshape(200, 3)
    np.save(tmp_path / "a.npy", data)
    env = {**os.environ, "LOADERX_STAGING_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "loaderx", "convert", str(tmp_path / "a.npy"), f"s3://{BUCKET}/cliconv"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert np.array_equal(DenseDataset(f"s3://{BUCKET}/cliconv")[np.arange(200)], data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"], "the staging directory is removed"
    again = subprocess.run([sys.executable, "-m", "loaderx", "convert", str(tmp_path / "a.npy"), f"s3://{BUCKET}/cliconv"], capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "already there" in again.stderr


def test_interrupted_uploads_are_retried_and_a_lasting_fault_publishes_nothing(s3, tmp_path):
    """Faults injected by a proxy between the writer and the S3 server (scripts/http_proxy.py):
    dropped connections and 503s, on single puts and on a multipart upload's requests, are
    retried, and so is the publishing put of meta.zr whose answer was lost after it landed (the
    object found there is compared with the local bytes); the copy reads back equal. A fault that outlasts the retries, on the
    publishing put of meta.zr, is a typed error naming the URL, leaves no store that readers
    would open, and a later copy resumes from what went up."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from http_proxy import Proxy

    endpoint, client = s3
    data = np.random.default_rng(5).integers(0, 255, (24_000, 1024), dtype=np.uint8)  # a multipart chunk
    from_numpy(tmp_path / "s", data, codec="raw", progress=False)
    proxy = Proxy(endpoint)
    opts = {"aws_endpoint": proxy.url}
    try:
        proxy.plan = ["POST drop", "PUT drop", "PUT 503", "PUT meta.zr lose"]
        report = remote.copy(tmp_path / "s", f"s3://{BUCKET}/flaky", opts)
        assert proxy.plan == [], "the injected faults were not all met"
        assert report["sent_bytes"] == report["live_bytes"]
        assert np.array_equal(DenseDataset(f"s3://{BUCKET}/flaky")[[0, 23_999]], data[[0, 23_999]])

        url = f"s3://{BUCKET}/down"
        proxy.plan = ["PUT meta.zr drop"] * 40
        with pytest.raises(errors.StoreIOError, match="meta.zr") as e:
            remote.copy(tmp_path / "s", url, opts)
        assert url in str(e.value)
        assert len(proxy.plan) == 40 - 4, "the publishing put is tried 4 times in all"
        left = _objects(client, "down")
        assert "meta.zr" not in left and ".loaderx-upload" in left
        with pytest.raises(errors.NotAStoreError, match="no meta.zr"):
            DenseDataset(url)
    finally:
        proxy.plan = []
        proxy.close()
    report = remote.copy(tmp_path / "s", url)
    assert report["skipped"] == report["objects"] - 1 and report["sent_bytes"] < 2**20
    assert np.array_equal(DenseDataset(url)[[5, 23_000]], data[[5, 23_000]])


@contextlib.contextmanager
def _tmpfs(mnt, size):
    """A tmpfs of ``size`` mounted at ``mnt`` while the block runs (needs root, as CI runs)."""
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 40 MiB staging disk, smaller than the stores written through it."""
    with _tmpfs(tmp_path / "small", "40m") as mnt:
        yield mnt


def test_a_store_four_times_the_staging_disk_streams_up(s3, small_disk, monkeypatch):
    """A conversion to a URL stages the table and a few parts, not the store: 164 MB of
    incompressible records convert through a 40 MiB staging disk, read back equal, and the
    staging disk is left empty."""
    _, client = s3
    monkeypatch.setenv("LOADERX_STAGING_DIR", str(small_disk))
    data = np.random.default_rng(7).integers(0, 255, (40_000, 4096), dtype=np.uint8)
    url = f"s3://{BUCKET}/streamed"
    assert from_numpy(url, data, codec="raw", progress=False) == 40_000
    assert list(small_disk.iterdir()) == []
    assert sum(_objects(client, "streamed").values()) >= data.nbytes
    idx = np.random.default_rng(8).integers(0, 40_000, 300)
    assert np.array_equal(DenseDataset(url)[idx], data[idx])
    # The CLI streams too.
    np.save(small_disk.parent / "rows.npy", data[:20_000])
    out = subprocess.run([sys.executable, "-m", "loaderx", "convert", str(small_disk.parent / "rows.npy"),
                          f"s3://{BUCKET}/streamed-cli", "--codec", "raw"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert np.array_equal(DenseDataset(f"s3://{BUCKET}/streamed-cli")[[0, 19_999]], data[[0, 19_999]])


def test_running_out_of_staging_space_is_a_typed_error_that_leaves_nothing(s3, tmp_path, monkeypatch):
    """A staging disk smaller than one upload part (8 MiB against 16) runs out: StoreFullError
    naming the URL and LOADERX_STAGING_DIR; the staging directory is removed and nothing stays
    under the URL."""
    _, client = s3
    data = np.random.default_rng(9).integers(0, 255, (30_000, 4096), dtype=np.uint8)
    url = f"s3://{BUCKET}/toobig"
    with _tmpfs(tmp_path / "tiny", "8m") as tiny:
        monkeypatch.setenv("LOADERX_STAGING_DIR", str(tiny))
        with pytest.raises(errors.StoreFullError, match="LOADERX_STAGING_DIR") as e:
            from_numpy(url, data, codec="raw", progress=False)
        assert url in str(e.value)
        assert list(tiny.iterdir()) == []
    assert _objects(client, "toobig") == {}
