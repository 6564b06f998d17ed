"""``python -m loaderx`` prints what the store holds, signals problems through its exit code
(0 clean, 1 bad records, 2 bad usage or no store) and never creates a store when it inspects."""

import json
import subprocess
import sys

import numpy as np
import pytest

from _lxhelpers import FIXTURES, copy_fixture


def run(*args):
    p = subprocess.run([sys.executable, "-m", "loaderx", *map(str, args)], capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()


@pytest.mark.parametrize("name", ["be_i4_raw", "f16_zstd", "u8img_zstd_dict", "bool_zstd"])
def test_head_json_values_are_the_expected_values(name):
    expected = np.load(FIXTURES / name / "expected/values.npy")
    code, out, err = run("head", FIXTURES / name / "store", "-n", 3, "--json", "--values", 10**6)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["index"] for r in rows] == [0, 1, 2]
    for r, want in zip(rows, expected[:3]):
        assert r["shape"] == list(want.shape)
        assert np.array_equal(np.asarray(r["values"], dtype=np.float64), want.astype(np.float64).reshape(-1))


def test_cat_raw_writes_the_record_bytes():
    expected = np.load(FIXTURES / "be_i4_raw/expected/values.npy")
    code, out, _ = run("cat", FIXTURES / "be_i4_raw/store", 1, 0, "--raw")
    assert code == 0
    assert out == expected[1].tobytes() + expected[0].tobytes()


def test_export_then_convert_round_trips(tmp_path):
    npy = tmp_path / "labels.npy"
    assert run("export", FIXTURES / "labels_i64_zstd/store", npy)[0] == 0
    assert np.array_equal(np.load(npy), np.load(FIXTURES / "labels_i64_zstd/expected/values.npy"))
    assert run("convert", npy, tmp_path / "s", "--codec", "raw")[0] == 0
    code, out, _ = run("info", tmp_path / "s", "--json")
    info = json.loads(out)
    assert code == 0 and info["length"] == len(np.load(npy)) and info["schema"]["codec"] == "raw"
    code, _, err = run("convert", npy, tmp_path / "s")
    assert code == 2 and "already holds a store" in err


def test_verify_and_compact(tmp_path):
    store = copy_fixture("deleted_uncompacted", tmp_path / "s")
    code, out, _ = run("compact", store, "--json")
    assert code == 0 and json.loads(out)["freed"] > 0
    assert run("verify", store)[0] == 0
    (store / "0.zr").write_bytes((store / "0.zr").read_bytes()[:10])
    code, out, _ = run("verify", store, "--json")
    assert code == 1 and json.loads(out)["bad"]


def test_missing_store_is_exit_2_and_not_created(tmp_path):
    for cmd in ("info", "stats", "verify", "compact", "head"):
        code, _, err = run(cmd, tmp_path / "nothing")
        assert code == 2 and "no store at" in err and "does not exist" in err, cmd
    assert not (tmp_path / "nothing").exists()
    assert run("frobnicate")[0] == 2
