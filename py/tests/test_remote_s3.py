"""Stores read by URL from an S3-compatible server (moto's server mode, started here on
127.0.0.1): every reference fixture reads identically by URL; remote stores are read-only;
a prefix that is not a store and a missing bucket are typed errors that name the URL."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import FIXTURES, assert_reads_like_local, fixture_names, free_port, moto_s3

boto3 = pytest.importorskip("boto3", reason="boto3 and moto[server] are installed by scripts/setup.sh")

from loaderx import errors  # noqa: E402
from loaderx.dataset import DenseDataset, RaggedDataset  # noqa: E402
from loaderx.zrecord import Zrecord  # noqa: E402

BUCKET = "stores"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with moto_s3((BUCKET,)) as (_, client):
        for entry in sorted(FIXTURES.iterdir()):
            store = entry / "store"
            if (store / "meta.zr").is_file():
                for f in store.iterdir():
                    client.upload_file(str(f), BUCKET, f"fixtures/{entry.name}/{f.name}")
        yield client


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_reads_identically_by_url(s3, name):
    local = Zrecord._existing(FIXTURES / name / "store")
    assert_reads_like_local(local, Zrecord(f"s3://{BUCKET}/fixtures/{name}"), seed=0)


def test_every_golden_store_reads_identically_by_url(s3, golden_stores):
    for name, store in golden_stores.items():
        for f in store.iterdir():
            s3.upload_file(str(f), BUCKET, f"golden/{name}/{f.name}")
    for k, (name, store) in enumerate(golden_stores.items()):
        assert_reads_like_local(Zrecord._existing(store), Zrecord(f"s3://{BUCKET}/golden/{name}"), seed=k)


def test_datasets_open_by_url(s3):
    for name, cls in [("u8img_zstd_dict", DenseDataset), ("tokens_i32_ragged_zstd", RaggedDataset)]:
        if not (FIXTURES / name).is_dir():
            continue
        local, remote = cls(FIXTURES / name / "store"), cls(f"s3://{BUCKET}/fixtures/{name}")
        assert remote.path == f"s3://{BUCKET}/fixtures/{name}" and len(remote) == len(local)
        idx = list(range(0, len(local), 7))
        got, want = remote[idx], local[idx]
        if cls is DenseDataset:
            assert np.array_equal(got, want)
        else:
            assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_remote_stores_are_read_only(s3):
    z = Zrecord(f"s3://{BUCKET}/fixtures/u8img_zstd")
    for call in (lambda: z.append(np.ones(4, np.uint8), [0]), lambda: z.delete([0]), z.compact):
        with pytest.raises(errors.BadArgumentError, match="read-only"):
            call()


def test_missing_bucket_key_and_non_store_are_told_apart_naming_the_url(s3):
    cases = [
        (f"s3://{BUCKET}/nothing-here", errors.StoreNotFoundError, "nothing under this prefix in bucket stores"),
        ("s3://no-such-bucket/x", errors.StoreNotFoundError, "no such bucket: no-such-bucket"),
        (f"s3://{BUCKET}/fixtures", errors.NotAStoreError, "holds objects but no meta.zr"),
    ]
    for url, cls, why in cases:
        with pytest.raises(cls) as e:
            Zrecord(url)
        assert url in str(e.value) and why in str(e.value), str(e.value)
    with pytest.raises(FileNotFoundError):
        Zrecord(f"s3://{BUCKET}/nothing-here")
    with pytest.raises(FileNotFoundError):
        DenseDataset(f"s3://{BUCKET}/nothing-here")


def test_missing_credentials_are_named_as_such(s3, monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    # Without keys object_store asks the instance metadata service; point it at a closed port
    # so the test does not depend on what 169.254.169.254 does on this machine.
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    url = f"s3://{BUCKET}/fixtures/u8img_raw"
    with pytest.raises(errors.StoreIOError, match="no credentials found") as e:
        Zrecord(url)
    assert url in str(e.value) and "AWS_ACCESS_KEY_ID" in str(e.value)
    assert isinstance(e.value, OSError)
    opts = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    assert len(Zrecord(url, storage_options=opts)) == len(Zrecord._existing(FIXTURES / "u8img_raw" / "store"))


def test_cli_reads_by_url(s3):
    name = "u8img_zstd"
    url = f"s3://{BUCKET}/fixtures/{name}"
    local = FIXTURES / name / "store"

    def run(*args):
        p = subprocess.run([sys.executable, "-m", "loaderx", *map(str, args)], capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    for cmd in (["info", "--json"], ["head", "-n", "3", "--json"], ["cat", "2", "0", "--json"], ["verify", "--json"]):
        code_url, out_url, err = run(cmd[0], url, *cmd[1:])
        code_local, out_local, _ = run(cmd[0], local, *cmd[1:])
        assert code_url == code_local == 0, err
        a, b = json.loads(out_url), json.loads(out_local)
        if cmd[0] == "info":
            a.pop("path"), b.pop("path")
        assert a == b, cmd
    code, _, err = run("compact", url)
    assert code == 2 and "read-only" in err


def test_cli_exports_by_url_the_local_array(s3, tmp_path):
    name = "u8img_zstd_dict"
    out_url, out_local = tmp_path / "url.npy", tmp_path / "local.npy"
    for src, out in ((f"s3://{BUCKET}/fixtures/{name}", out_url), (FIXTURES / name / "store", out_local)):
        p = subprocess.run([sys.executable, "-m", "loaderx", "export", str(src), str(out)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    a, b = np.load(out_url), np.load(out_local)
    assert a.dtype == b.dtype and a.shape == b.shape and a.shape[0] > 0 and np.array_equal(a, b)


def test_a_store_replaced_remotely_is_never_served_mixed(s3):
    name = "u8img_raw"
    store = FIXTURES / name / "store"
    for f in store.iterdir():
        s3.upload_file(str(f), BUCKET, f"replaced/{f.name}")
    z = Zrecord(f"s3://{BUCKET}/replaced")
    first = np.empty(int(z.lengths([0])[0]), np.uint8)
    z.gather([0], first, [0])
    chunk = (store / "0.zr").read_bytes()
    s3.put_object(Bucket=BUCKET, Key="replaced/0.zr", Body=bytes(255 - b for b in chunk))
    again = np.empty_like(first)
    with pytest.raises(errors.StoreIOError, match="s3://stores/replaced: 0.zr changed after the store was opened") as e:
        z.gather([1], again, [0])
    assert isinstance(e.value, OSError)
    fresh = Zrecord(f"s3://{BUCKET}/replaced")  # a new handle sees the new version
    fresh.gather([0], again, [0])
    assert np.array_equal(again, 255 - first)


def test_disk_cache_serves_warm_reads_and_keeps_its_bound(s3, tmp_path):
    name = "bigrec_1mib_zstd" if (FIXTURES / "bigrec_1mib_zstd").is_dir() else "u8img_zstd"
    store = FIXTURES / name / "store"
    for f in store.iterdir():
        s3.upload_file(str(f), BUCKET, f"cached/{f.name}")
    local = Zrecord._existing(store)
    n = len(local)
    lens = local.lengths(np.arange(n))
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    want = np.empty(int(lens.sum()), np.uint8)
    local.gather(np.arange(n), want, offs)
    cache = (tmp_path / "cache", 64 << 20)
    z = Zrecord(f"s3://{BUCKET}/cached", cache=cache)
    got = np.empty_like(want)
    z.gather(np.arange(n), got, offs)
    assert np.array_equal(got, want)
    held = sum(f.stat().st_size for f in (tmp_path / "cache").rglob("*") if f.is_file() and not f.name.startswith(".tmp-"))
    assert 0 < held <= cache[1]
    for f in store.iterdir():  # gone remotely: only the cache can answer now
        s3.delete_object(Bucket=BUCKET, Key=f"cached/{f.name}")
    again = np.zeros_like(want)
    z.gather(np.arange(n), again, offs)
    assert np.array_equal(again, want)
    # A bound smaller than the store is kept (least recently used blocks go).
    for f in store.iterdir():
        s3.upload_file(str(f), BUCKET, f"cached2/{f.name}")
    small = (tmp_path / "small", 5 << 20)
    z2 = Zrecord(f"s3://{BUCKET}/cached2", cache=small)
    z2.gather(np.arange(n), got, offs)
    assert np.array_equal(got, want)
    held = sum(f.stat().st_size for f in (tmp_path / "small").rglob("*") if f.is_file() and not f.name.startswith(".tmp-"))
    assert held <= small[1]


def test_dataloader_over_s3_gives_the_local_batches(s3, tmp_path):
    from loaderx.dataloader import DataLoader

    name = "u8img_zstd"
    local = DataLoader({"x": DenseDataset(FIXTURES / name / "store")}, num_workers=4, batch_size=32, prefetch_size=8, seed=5)
    remote = DataLoader(
        {"x": DenseDataset(f"s3://{BUCKET}/fixtures/{name}", cache=(tmp_path / "c", 32 << 20))},
        num_workers=4,
        batch_size=32,
        prefetch_size=8,
        seed=5,
    )
    try:
        for _ in range(12):
            a, b = next(local), next(remote)
            assert np.array_equal(a["x"], b["x"])
        state = remote.state_dict()
        resumed = DataLoader({"x": DenseDataset(f"s3://{BUCKET}/fixtures/{name}")}, num_workers=4, batch_size=32, seed=5)
        resumed.load_state_dict(state)
        assert np.array_equal(next(resumed)["x"], next(local)["x"])
        resumed.close()
    finally:
        local.close()
        remote.close()


_READER = """
import sys, hashlib, numpy as np
from loaderx.zrecord import Zrecord
url, cache, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
z = Zrecord(url, cache=(cache, 1 << 30))
n = len(z)
rng = np.random.default_rng(int(sys.argv[4]))
for _ in range(rounds):
    idxs = rng.permutation(n)[:64]
    lens = z.lengths(idxs)
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    buf = np.empty(int(lens.sum()), np.uint8)
    z.gather(idxs, buf, offs)
    print(hashlib.sha256(buf.tobytes()).hexdigest(), *idxs.tolist(), flush=True)
"""


def test_processes_share_the_cache_and_a_killed_one_leaves_nothing_corrupt(s3, tmp_path):
    import hashlib
    import signal

    name = "u8img_zstd"
    url = f"s3://{BUCKET}/fixtures/{name}"
    cache = tmp_path / "shared"
    local = Zrecord._existing(FIXTURES / name / "store")

    def check(lines):
        for line in lines:
            digest, *idxs = line.split()
            idxs = np.array([int(i) for i in idxs])
            lens = local.lengths(idxs)
            offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
            buf = np.empty(int(lens.sum()), np.uint8)
            local.gather(idxs, buf, offs)
            assert hashlib.sha256(buf.tobytes()).hexdigest() == digest

    victim = subprocess.Popen([sys.executable, "-c", _READER, url, str(cache), "1000", "1"], stdout=subprocess.PIPE, text=True)
    survivor = subprocess.Popen([sys.executable, "-c", _READER, url, str(cache), "30", "2"], stdout=subprocess.PIPE, text=True)
    # Killed once it reports its second batch read: mid-run (998 batches to go), beside the survivor.
    seen = [victim.stdout.readline() for _ in range(2)]
    assert all(line.count(" ") > 1 for line in seen), f"the victim stopped early: {seen}"
    victim.send_signal(signal.SIGKILL)
    out, _ = survivor.communicate(timeout=120)
    assert survivor.returncode == 0
    check(out.split("\n")[:-1])
    assert victim.wait() == -signal.SIGKILL, "the victim finished before the kill"
    # Only whole lines: the kill may cut the victim's last line short (a write to a full pipe
    # can be split), and a cut line names fewer records than its digest covers.
    check(seen + [line for line in victim.stdout.read().split("\n")[:-1] if line.count(" ") > 1])
    after = subprocess.run([sys.executable, "-c", _READER, url, str(cache), "10", "3"], capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    check(after.stdout.split("\n")[:-1])
    entries = [f for f in cache.rglob("*") if f.is_file() and not f.name.startswith(".tmp-")]
    assert entries, "the cache holds blocks"


def test_the_readme_s3_block_runs(s3, tmp_path):
    """The README's ```python s3 block, against this server with its two stores in place."""
    import re

    from loaderx.converter import from_numpy

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"^```python s3\n(.*?)^```", readme, re.S | re.M)
    assert len(blocks) == 2, "README.md has two ```python s3 blocks (reading, and writing)"
    s3.create_bucket(Bucket="my-bucket")
    rng = np.random.default_rng(0)
    from_numpy(tmp_path / "images", rng.integers(0, 255, (600, 8, 8), dtype=np.uint8))
    from_numpy(tmp_path / "labels", np.arange(600) % 10)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from store_files import trimmed_files

    for name in ("images", "labels"):
        for f, body in trimmed_files(tmp_path / name):
            s3.put_object(Bucket="my-bucket", Key=f"datasets/{name}/{f}", Body=body)
    code = blocks[0].replace("/tmp/loaderx-cache", str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", code + "\nassert batch['data'].shape == (256, 8, 8)\nloader.close()\n"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-c", blocks[1]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert len(DenseDataset("s3://my-bucket/datasets/labels-v2")) == 1000
    # The README's `loaderx cp` line, on a local store.
    p = subprocess.run([sys.executable, "-m", "loaderx", "cp", str(tmp_path / "images"), "s3://my-bucket/datasets/images-cp"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "copied" in p.stdout, p.stderr
    assert len(DenseDataset("s3://my-bucket/datasets/images-cp")) == 600


def test_a_manifest_lists_stores_by_url(s3, tmp_path):
    """A local manifest whose stores live in the bucket: one dataset over all of them, checked
    at open against the listed lengths."""
    from loaderx import manifest

    name = "u8img_zstd"
    for part in ("a", "b"):
        for f in (FIXTURES / name / "store").iterdir():
            s3.upload_file(str(f), BUCKET, f"parts/{part}/{f.name}")
    urls = [f"s3://{BUCKET}/parts/a", f"s3://{BUCKET}/parts/b"]
    manifest.commit(tmp_path, urls)
    local = DenseDataset(FIXTURES / name / "store")
    many = DenseDataset(tmp_path)
    n = len(local)
    assert len(many) == 2 * n and [u for u, _ in manifest.stores(tmp_path)] == urls
    idx = np.random.default_rng(1).integers(0, 2 * n, 64)
    assert np.array_equal(many[idx], local[idx % n])


def _read_all(z, idxs):
    idxs = np.asarray(idxs, np.int64)
    lens = z.lengths(idxs).astype(np.uint64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint64)
    buf = np.empty(int(lens.sum()), np.uint8)
    z.gather(idxs, buf, offs)
    return buf.tobytes()


def _fork_child_read(conn, url, idxs):
    try:
        z = Zrecord(url)  # a new handle in the child: its own runtime and connections
        conn.send(("ok", _read_all(z, idxs)))
    except BaseException as e:  # report, never hang the parent
        conn.send(("err", repr(e)))
    finally:
        conn.close()


def test_a_forked_child_reads_after_the_parent_did(s3):
    """The parent's runtime threads do not exist in a fork()ed child: the child must build its own
    runtime and connections rather than wait on the parent's forever."""
    import multiprocessing as mp

    name = "u8img_zstd"
    url = f"s3://{BUCKET}/fixtures/{name}"
    local = Zrecord._existing(FIXTURES / name / "store")
    idxs = list(range(len(local)))[::3]
    parent = Zrecord(url)
    want = _read_all(local, idxs)
    assert _read_all(parent, idxs) == want
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    p = ctx.Process(target=_fork_child_read, args=(there, url, idxs))
    p.start()
    there.close()
    if not here.poll(60):
        p.kill()
        pytest.fail("forked child hung reading by URL")
    status, value = here.recv()
    p.join(10)
    assert status == "ok", value
    assert value == want
    # The parent's handle still works after the fork.
    assert _read_all(parent, idxs[:4]) == _read_all(local, idxs[:4])
