"""``python -m loaderx`` (and the ``loaderx`` command ``pip install`` puts beside the
interpreter) prints what the store holds, signals problems through its exit code (0 clean, 1
bad records, 2 bad usage or no store), never creates a store when it inspects, never writes at
a URL, and keeps its reports bounded however damaged the store."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import FIXTURES, copy_fixture


def run(*args, cwd=None):
    p = subprocess.run([sys.executable, "-m", "loaderx", *map(str, args)], capture_output=True, cwd=cwd, timeout=600)
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


def test_the_loaderx_command_is_installed_beside_the_interpreter():
    script = Path(sys.executable).parent / ("loaderx.exe" if os.name == "nt" else "loaderx")
    assert script.is_file(), f"no console script at {script}"
    p = subprocess.run([str(script), "--help"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    help_text = p.stdout.decode()
    assert "Usage: loaderx" in help_text and "convert" in help_text and "verify" in help_text


@pytest.mark.parametrize("target", ["s3://b/y", "gs://b/y", "http://user:pa55word@127.0.0.1:9/y?sig=s3cret"])
def test_writes_at_a_url_are_refused_and_leave_nothing(tmp_path, target):
    """compact and export never write at a URL, nor convert at an HTTP one (read-only). convert
    to s3:// or gs:// checks the destination first (there: no credentials), so a refusal costs
    no conversion and leaves nothing (test_remote_write.py converts to a real S3 server)."""
    np.save(tmp_path / "x.npy", np.arange(5000, dtype=np.int32))
    for args in (["convert", "x.npy", target], ["compact", target], ["export", tmp_path / "nothing", target + ".npy"]):
        code, out, err = run(*args, cwd=tmp_path)
        assert code == 2, (args, err)
        assert "wrote" not in err, err
        if not (args[0] == "convert" and not target.startswith("http")):
            assert "read-only" in err, err
        shown = target.replace("user:pa55word@", "***@").replace("sig=s3cret", "sig=***")
        assert shown in err, err
        assert "pa55word" not in err + out.decode() and "s3cret" not in err + out.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"], "a local folder was made"


def _damage_length(store, length):
    with open(store / "meta.zr", "r+b") as f:
        f.seek(12)  # magic (4), version (2), tail chunk (2), tail offset (4), length (4)
        f.write(struct.pack("<I", length))


@pytest.mark.parametrize("length", [4000, 1 << 24])
def test_verify_of_a_damaged_header_length_is_one_bounded_report(tmp_path, length):
    np.save(tmp_path / "x.npy", np.arange(5000, dtype=np.int64).reshape(1000, 5))
    assert run("convert", tmp_path / "x.npy", tmp_path / "s")[0] == 0
    _damage_length(tmp_path / "s", length)  # 1000 records were written, the rest never were
    code, out, _ = run("verify", tmp_path / "s")
    lines = out.decode().splitlines()
    assert code == 1 and len(lines) <= 23, lines[:30]
    assert lines[0].startswith("bad record 1000:") and "record count is damaged" in lines[0], lines[0]
    assert lines[-1] == f"{length} records checked, {length - 1000} bad"
    code, out, _ = run("verify", tmp_path / "s", "--json")
    report = json.loads(out)
    assert code == 1 and report["bad_count"] == length - 1000 and report["checked"] == length
    assert 1 <= len(report["bad"]) <= 20 and report["bad"][0]["index"] == 1000


def test_verify_lists_twenty_bad_records_then_counts_the_rest(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(2000, dtype=np.int64).reshape(100, 20))
    assert run("convert", tmp_path / "x.npy", tmp_path / "s", "--codec", "raw")[0] == 0
    chunk = tmp_path / "s" / "0.zr"
    chunk.write_bytes(chunk.read_bytes()[:160 * 10])  # records 10..99 now lie past the file's end
    code, out, _ = run("verify", tmp_path / "s")
    lines = out.decode().splitlines()
    assert code == 1 and len(lines) == 23 and lines[0].startswith("bad record 10:"), lines
    assert lines[20] == "… and 70 more bad records (--show N lists more)"
    assert lines[21].startswith("checksums: 10 verified, 0 mismatched"), lines[21]
    assert lines[22] == "100 records checked, 90 bad"
    report = json.loads(run("verify", tmp_path / "s", "--json", "--show", 100)[1])
    assert report["bad_count"] == 90 and [b["index"] for b in report["bad"]] == list(range(10, 100))


@pytest.mark.parametrize("spelling", ["zstd_dict", "zstd-dict"])
def test_the_dictionary_codec_has_both_spellings(tmp_path, spelling):
    rows = np.random.default_rng(0).integers(0, 4, (3000, 64), dtype=np.uint8)
    np.save(tmp_path / "x.npy", rows)
    code, _, err = run("convert", tmp_path / "x.npy", tmp_path / "s", "--codec", spelling)
    assert code == 0, err
    info = json.loads(run("info", tmp_path / "s", "--json")[1])
    assert info["schema"]["codec"] == "zstd_dict" and info["dict_bytes"]


def test_info_says_when_records_are_stored_raw_under_a_zstd_schema(tmp_path):
    np.save(tmp_path / "labels.npy", np.arange(500) % 10)  # 8-byte records: never compressed
    assert run("convert", tmp_path / "labels.npy", tmp_path / "s")[0] == 0
    code, out, _ = run("info", tmp_path / "s")
    schema_line = next(line for line in out.decode().splitlines() if line.startswith("schema"))
    assert code == 0 and "codec zstd (all 500 records stored raw" in schema_line, schema_line
    np.save(tmp_path / "img.npy", np.zeros((20, 64), np.uint8))
    assert run("convert", tmp_path / "img.npy", tmp_path / "z")[0] == 0
    schema_line = next(line for line in run("info", tmp_path / "z")[1].decode().splitlines() if line.startswith("schema"))
    assert schema_line.endswith("codec zstd"), schema_line
