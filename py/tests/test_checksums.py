"""Verified bytes (docs/format.md, "checksums.lx"): every write path writes per-record checksums,
``verify="always"`` catches every flipped stored byte, ``"fetched"`` checks what comes over the
network (a corrupted transfer is fetched once more, then a ChecksumError), the reference 0.9.11
keeps working on such a store and its changes never raise a checksum error, and ``loaderx
checksum add`` covers what it wrote."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import NGINX, OUR_PYTHON, SCRIPTS, nginx_serving, run_json
from loaderx import errors
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from http_proxy import Proxy  # noqa: E402
from store_files import trimmed_files  # noqa: E402


def entries(store):
    """(offset, phys, logic, chunk, codec, mark) of every live record."""
    meta = (Path(store) / "meta.zr").read_bytes()
    (length,) = struct.unpack_from("<I", meta, 12)
    return [struct.unpack_from("<IIIHBB", meta, 16 + 16 * i) for i in range(length)]


def stored_len(e):
    offset, phys, logic, _chunk, codec, _mark = e
    return logic if codec == 0 else phys


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))


def cli(*args):
    p = subprocess.run([OUR_PYTHON, "-m", "loaderx", *map(os.fspath, args)], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_dict"])
def test_always_catches_every_flipped_stored_byte(tmp_path, codec):
    n = 128 if codec == "zstd_dict" else 24  # enough samples to train a dictionary on
    rows = ((np.arange(n * 16, dtype=np.int32).reshape(n, 16) * 7) % 23).astype(np.int32)
    store = tmp_path / "s"
    from_numpy(store, rows, codec=codec)
    assert (store / "checksums.lx").is_file()
    table = entries(store)
    tag = dict(raw=0, zstd=1, zstd_dict=2)[codec]
    assert tag in {e[4] for e in table} <= {0, tag}, table  # some rows may stay raw (no gain)
    assert all(e[5] == 1 for e in table), "loaderx marks the entries it wrote checksums for"
    caught = flips = 0
    # One handle throughout: its maps see each flip as it is written.
    with DenseDataset(store, verify="always") as ds:
        for index, e in enumerate(table):
            chunk = store / f"{e[3]}.zr"
            for k in range(stored_len(e)):
                flip(chunk, e[0] + k)
                flips += 1
                with pytest.raises(errors.ChecksumError) as info:
                    ds[index]
                err = info.value
                assert isinstance(err, errors.CorruptStoreError) and err.kind == "corrupt"
                assert (err.index, err.offset, Path(err.file)) == (index, e[0], chunk)
                caught += 1
                flip(chunk, e[0] + k)
        assert caught == flips > 0
        assert np.array_equal(ds[:], rows)


def test_fetched_is_the_default_and_local_reads_are_then_unchecked(tmp_path):
    store = tmp_path / "s"
    from_numpy(store, np.arange(40, dtype=np.uint8).reshape(4, 10), codec="raw")
    flip(store / "0.zr", 13)
    with DenseDataset(store) as ds:
        assert ds.verify_mode == "fetched"
        assert ds[1][3] == 13 ^ 0x5A, "a local read is not checked by default"
    with DenseDataset(store, verify="always") as ds, pytest.raises(errors.ChecksumError):
        ds[1]
    with pytest.raises(errors.BadArgumentError, match="'off', 'fetched' or 'always'"):
        DenseDataset(store, verify="yes")


def test_the_dataloader_checks_every_stream_and_raises_at_the_step(tmp_path):
    store = tmp_path / "s"
    from_numpy(store, np.arange(400, dtype=np.int32).reshape(100, 4), codec="zstd")
    offset = entries(store)[50][0]
    flip(store / "0.zr", offset + 2)
    ds = DenseDataset(store)
    with DataLoader({"x": ds}, batch_size=100, mode="sequential", num_workers=1, verify="always") as loader:
        with pytest.raises(errors.ChecksumError) as info:
            next(iter(loader))
    assert info.value.index == 50
    assert ds.verify_mode == "always"
    with DataLoader({"x": DenseDataset(store)}, batch_size=100, mode="sequential", num_workers=1, verify="off") as loader:
        assert next(iter(loader))["x"].shape == (100, 4)


def test_every_write_path_writes_checksums_that_verify(tmp_path):
    from_numpy(tmp_path / "a", np.arange(50, dtype=np.float32).reshape(10, 5), codec="zstd")
    from_iterator(tmp_path / "b", [np.arange(n, dtype=np.int64) for n in range(1, 30)], codec="raw")
    np.save(tmp_path / "c.npy", np.arange(60, dtype=np.int16).reshape(20, 3))
    assert cli("convert", tmp_path / "c.npy", tmp_path / "c")[0] == 0
    z = Zrecord(tmp_path / "d", codec="zstd")
    z.append(np.arange(3000, dtype=np.uint8), np.array([0, 1000, 2000], np.uint64))
    z.delete([0])
    z.compact()
    z.close()
    for name in "abcd":
        with Zrecord(tmp_path / name) as z:
            report = z.verify_report()
            assert report["verified"] == len(z) and report["bad"] == [], (name, report)
            assert z.digest is not None and z.digest.startswith("sha256:")


def test_the_digest_pins_content_not_layout(tmp_path):
    rows = np.arange(300, dtype=np.int32).reshape(30, 10)
    from_numpy(tmp_path / "a", rows, codec="raw")
    from_numpy(tmp_path / "b", rows, codec="raw")
    a, b = DenseDataset(tmp_path / "a"), DenseDataset(tmp_path / "b")
    assert a.digest == b.digest
    with Zrecord(tmp_path / "b") as z:
        z.delete([29])
        z.append(rows[29].tobytes(), [0], codec="raw")
        z.compact()
    assert DenseDataset(tmp_path / "b").digest == a.digest, "same records, same order: same digest"
    with Zrecord(tmp_path / "b") as z:
        z.delete([3])
    assert DenseDataset(tmp_path / "b").digest != a.digest


def ref_ops(ref, tmp_path, ops, tag):
    """Runs ``ops`` with the reference (one OpenMP thread, see ``clean_env``)."""
    spec = tmp_path / f"ops-{tag}.json"
    spec.write_text(json.dumps(ops))
    return run_json(ref, [SCRIPTS / "store_ops.py", spec])


def test_the_reference_works_on_a_checksummed_store_and_never_causes_a_checksum_error(ref_python, tmp_path):
    ref = ref_python
    rows = (np.arange(12 * 10, dtype=np.int32).reshape(12, 10) * 7) % 1000
    # Same-sized records, so the reference's compaction can put other bytes under an entry
    # equal to one loaderx wrote a checksum for.
    np.savez(tmp_path / "one.npz", (np.arange(10, dtype=np.int32) + 5000).view(np.uint8))
    np.savez(tmp_path / "two.npz", *[(np.arange(10, dtype=np.int32) + 6000 + k).view(np.uint8) for k in range(2)])
    cases = {
        "delete second-to-last, compact, append one": [
            {"op": "delete", "idx": [10], "compact": True},
            {"op": "append", "npz": "one.npz", "codec": "raw"},
        ],
        "delete the last, compact, append one": [
            {"op": "delete", "idx": [11], "compact": True},
            {"op": "append", "npz": "one.npz", "codec": "raw"},
        ],
        "append two, delete two originals, compact": [
            {"op": "append", "npz": "two.npz", "codec": "raw"},
            {"op": "delete", "idx": [3, 11], "compact": True},
        ],
    }
    for k, (name, ops) in enumerate(cases.items()):
        store = tmp_path / f"s{k}"
        from_numpy(store, rows, codec="raw")
        steps = [{**op, "path": os.fspath(store)} for op in ops]
        for op in steps:
            if "npz" in op:
                op["npz"] = os.fspath(tmp_path / op["npz"])
        # The reference opens, reads, appends, deletes and compacts the store...
        out = ref_ops(ref, tmp_path, steps + [{"op": "dump", "path": os.fspath(store), "kind": "dense", "out": os.fspath(tmp_path / f"d{k}")}], k)
        theirs = np.load(tmp_path / f"d{k}" / "values.npy")
        assert len(theirs) == 12 and out, name
        # ... and loaderx reads it back identically, checked, without a checksum error.
        with DenseDataset(store, verify="always") as ds:
            assert np.array_equal(ds[:], theirs), name
            assert ds.digest is None, f"{name}: the table changed, so there is no digest"
        with Zrecord(store) as z:
            report = z.verify_report()
            assert report["bad"] == [] and report["mismatched"] == 0, (name, report)
            assert report["uncovered"] + report["unverified"] > 0, (name, report)
        code, text, err = cli("verify", store)
        assert code == 0 and "records checked, 0 bad" in text, (name, text, err)
        # checksum add covers what the reference wrote, and seals the store again.
        code, text, err = cli("checksum", "add", store, "--json")
        assert code == 0, (name, text, err)
        filled = json.loads(text)
        assert filled["mismatched"] == [] and filled["digest"].startswith("sha256:"), filled
        with Zrecord(store) as z:
            assert z.verify_report()["verified"] == len(z)
        # And the reference still reads the backfilled store.
        ref_ops(ref, tmp_path, [{"op": "dump", "path": os.fspath(store), "kind": "dense", "out": os.fspath(tmp_path / f"e{k}")}], f"e{k}")
        assert np.array_equal(np.load(tmp_path / f"e{k}" / "values.npy"), theirs), name


@pytest.fixture()
def served(tmp_path):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    local = tmp_path / "local"
    rows = (np.arange(200 * 256, dtype=np.int64).reshape(200, 256) * 31) % 977
    from_numpy(local, rows, codec="zstd")
    root = tmp_path / "www" / "s"
    root.mkdir(parents=True)
    for name, body in trimmed_files(local):
        (root / name).write_bytes(body)
    (tmp_path / "nginx").mkdir()
    with nginx_serving(tmp_path / "nginx", f"        root {tmp_path / 'www'};", "/s/meta.zr") as base:
        proxy = Proxy(base)
        try:
            yield f"{proxy.url}/s", proxy, rows
        finally:
            proxy.close()


def test_a_corrupted_transfer_is_fetched_again_then_a_checksum_error(served, tmp_path):
    url, proxy, rows = served
    with DenseDataset(url) as ds:
        assert ds.verify_mode == "fetched"
        proxy.plan = ["flip"]
        assert np.array_equal(ds[:64], rows[:64]), "the damaged range was fetched again"
        assert proxy.plan == [], "the flip was met"
        proxy.plan = ["flip", "flip"]
        with pytest.raises(errors.ChecksumError) as info:
            ds[64:128]
        assert "127.0.0.1" in str(info.value) and 64 <= info.value.index < 128
    proxy.plan = ["flip"]
    with DenseDataset(url, verify="off") as ds:
        # Unchecked, the damage goes through: as other bytes, or as whatever zstd makes of it.
        try:
            assert not np.array_equal(ds[:64], rows[:64])
        except errors.CorruptStoreError as e:
            assert not isinstance(e, errors.ChecksumError), e
    proxy.plan = []


def test_damaged_bytes_never_enter_the_cache(served, tmp_path):
    url, proxy, rows = served
    cache = (os.fspath(tmp_path / "cache"), 1 << 30)
    with DenseDataset(url, cache=cache) as ds:
        proxy.plan = ["flip", "flip"]
        with pytest.raises(errors.ChecksumError):
            ds[:]
        assert proxy.plan == []
        blocks = [p for p in Path(cache[0]).rglob("*") if p.is_file() and not p.name.startswith(".")]
        assert blocks == [], "the failed call's blocks were not stored"
        assert np.array_equal(ds[:], rows), "fetched again, whole"
        assert any(p.is_file() for p in Path(cache[0]).rglob("*")), "good blocks are stored"
    proxy.reset_counts()
    # Served from the cache now (no chunk requests), and unchecked it is still right.
    with DenseDataset(url, cache=cache, verify="off") as ds:
        assert np.array_equal(ds[:], rows)


def test_the_viewer_side_counts_come_from_the_cli(tmp_path):
    """``loaderx verify --json`` reports how many records checksums cover and verify."""
    store = tmp_path / "s"
    from_numpy(store, np.arange(100, dtype=np.uint8).reshape(10, 10), codec="raw")
    code, text, _ = cli("verify", store, "--json")
    report = json.loads(text)
    assert code == 0 and report["checksums"] == {"verified": 10, "mismatched": 0, "uncovered": 0, "unverified": 0}
    flip(store / "0.zr", 55)
    code, text, _ = cli("verify", store, "--deep", "--json")
    report = json.loads(text)
    assert code == 1 and report["deep"] is True and report["checksums"]["mismatched"] == 1
    assert report["bad"][0]["index"] == 5 and "checksum mismatch" in report["bad"][0]["error"]
    code, text, _ = cli("info", store)
    assert code == 0 and "digest       sha256:" in text
