"""The ``loaderx`` read commands (info, stats, verify, head, cat, export) open a manifest (its
``.json`` file, or a directory holding ``manifest.json``) as they open a store, and read its
stores as one dataset: the records, lengths, bad-record indices and exported array are those of
one store holding the same records in the same order. A manifest whose store changed, and a
directory that is neither, are exit 2 with the engine's message."""

import json
import subprocess
import sys

import numpy as np
import pytest

from loaderx import manifest
from loaderx.converter import from_numpy

SIZES = [5, 0, 12, 7]


def run(*args):
    p = subprocess.run([sys.executable, "-m", "loaderx", *map(str, args)], capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode()


@pytest.fixture
def parts(tmp_path):
    rng = np.random.default_rng(24)
    data = rng.integers(-1000, 1000, (sum(SIZES), 2, 3)).astype("<i4")
    at = 0
    for k, n in enumerate(SIZES):
        from_numpy(tmp_path / f"p{k}", data[at : at + n], codec="raw" if k % 2 else "zstd", progress=False)
        at += n
    manifest.commit(tmp_path, [f"p{k}" for k in range(len(SIZES))])
    return tmp_path, data


def test_info_reads_a_manifest_by_its_directory_or_its_file(parts):
    root, data = parts
    for where in (root, root / "manifest.json"):
        code, out, err = run("info", where, "--json")
        assert code == 0, err
        info = json.loads(out)
        assert info["length"] == len(data)
        assert info["stores"] == [{"path": f"p{k}", "length": n} for k, n in enumerate(SIZES)]
        assert info["schema"]["dtype"] == "<i4" and info["schema"]["item_shape"] == [2, 3]
        assert sum(info["records_by_codec"].values()) == len(data)
    code, out, _ = run("info", root)
    assert code == 0 and f"({len(SIZES)} stores, read as one)" in out.decode()
    code, out, _ = run("info", root / "p0", "--json")
    assert code == 0 and json.loads(out)["stores"] is None, "a store inside stays a store"


def test_head_cat_and_export_read_across_stores(parts, tmp_path_factory):
    root, data = parts
    code, out, err = run("head", root, "-n", 100, "--json", "--values", 100)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["index"] for r in rows] == list(range(len(data)))
    assert [r["values"] for r in rows] == [d.reshape(-1).tolist() for d in data]
    picks = [23, 0, 4, 5, 16, 17, 5]  # the ends of every store, out of order, one twice
    code, out, err = run("cat", root / "manifest.json", *picks, "--raw")
    assert code == 0, err
    assert out == b"".join(data[i].tobytes() for i in picks)
    npy = tmp_path_factory.mktemp("npy") / "all.npy"
    code, _, err = run("export", root, npy)
    assert code == 0, err
    assert np.array_equal(np.load(npy), data)
    code, _, err = run("cat", root, len(data))
    assert code == 2 and f"index {len(data)} out of range" in err


def test_stats_adds_up_the_stores(parts):
    root, data = parts
    code, out, err = run("stats", root, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["records"] == len(data) and s["logical_bytes"] == data.nbytes
    assert {name.split("/")[0] for name in s["files"]} == {f"p{k}" for k in range(len(SIZES))}
    assert "p2/meta.zr" in s["files"]


def test_verify_names_bad_records_by_their_index_in_the_manifest(parts):
    root, data = parts
    assert run("verify", root)[0] == 0
    chunk = root / "p2" / "0.zr"
    chunk.write_bytes(chunk.read_bytes()[:10])  # p2's records are 5..16
    code, out, err = run("verify", root, "--json", "--show", 100)
    assert code == 1, err
    report = json.loads(out)
    assert report["checked"] == len(data)
    bad = [b["index"] for b in report["bad"]]
    assert bad and min(bad) >= 5 and max(bad) <= 16, bad


def test_a_store_that_changed_fails_naming_it(parts):
    root, data = parts
    from_numpy(root / "p3", data[:2], progress=False)  # appends: p3 now holds 9 records
    for cmd in ("info", "head", "verify", "stats", "export"):
        code, _, err = run(cmd, root, *(["x.npy"] if cmd == "export" else []))
        assert code == 2 and "p3 holds 9 records, but the manifest lists 7" in err, (cmd, err)


def test_what_is_neither_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run("info", tmp_path / "empty")
    assert code == 2 and "neither meta.zr (a store) nor manifest.json (a manifest)" in err, err
    (tmp_path / "notes.txt").write_text("x")
    code, _, err = run("head", tmp_path / "notes.txt")
    assert code == 2 and "notes.txt" in err and "manifest (.json)" in err, err
    (tmp_path / "bad.json").write_text("{}")
    code, _, err = run("info", tmp_path / "bad.json")
    assert code == 2 and "not a loaderx manifest" in err, err


def test_compact_refuses_a_manifest(parts):
    root, _ = parts
    code, _, err = run("compact", root)
    assert code == 2 and "is a manifest" in err and f"{len(SIZES)} stores" in err, err
