"""Each rule lives once, in the engine, and the Python package only calls it: the schema (parse,
merge, compare, write), the error classification and its numeric codes, the record-fits-schema
check, index bounds, and the command-line tool."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import loaderx
from loaderx import _loaderx, errors
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord

REPO = Path(__file__).resolve().parents[2]
PKG = Path(loaderx.__file__).parent


def test_the_package_does_not_use_msgpack():
    code = "import sys, loaderx.zrecord, loaderx.dataset, loaderx.converter, loaderx.dataloader, loaderx.sampler, loaderx.__main__; print('msgpack' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    for source in PKG.glob("*.py"):
        assert "import msgpack" not in source.read_text(), source


def test_error_codes_come_from_one_table():
    assert errors.CODES == dict(_loaderx.ERROR_CODES)
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.ZrecordError) and c.kind]
    assert {c.kind for c in classes} == set(errors.CODES), "every kind has exactly one class"
    for cls in classes:
        assert cls.new("x").code == errors.CODES[cls.kind]
    # No numeric code is written out in the package's sources.
    for source in PKG.glob("*.py"):
        text = source.read_text()
        for code in set(errors.CODES.values()):
            assert f"({code}," not in text, f"{source.name} repeats code {code}"


def test_short_meta_is_corrupt_not_a_store(tmp_path):
    for n in range(16):
        d = tmp_path / f"s{n}"
        d.mkdir()
        (d / "meta.zr").write_bytes(b"ZREC\x03\x00"[:n] + bytes(max(0, n - 6)))
        with pytest.raises(errors.CorruptStoreError) as e:
            Zrecord(d)
        assert e.value.code == -7 and e.value.file and e.value.file.endswith("meta.zr"), (n, e.value)
        assert e.value.offset == n
    d = tmp_path / "magic"
    d.mkdir()
    (d / "meta.zr").write_bytes(b"NOPE" + bytes(12))
    with pytest.raises(errors.NotAStoreError):
        Zrecord(d)


def test_corrupt_errors_carry_file_and_offset(tmp_path):
    from_numpy(tmp_path / "s", np.arange(12, dtype=np.int32).reshape(4, 3), codec="raw")
    meta = tmp_path / "s" / "meta.zr"
    with open(meta, "r+b") as f:  # entry 2: a logical length that is not the raw stored length
        f.seek(16 + 16 * 2 + 8)
        f.write((999).to_bytes(4, "little"))
    with pytest.raises(errors.CorruptStoreError) as e:
        DenseDataset(tmp_path / "s")[[0, 2]]
    assert Path(e.value.file).name == "meta.zr" and e.value.offset == 16 + 16 * 2, e.value
    assert e.value.index == 2


def test_sampler_errors_are_classified_like_the_others():
    with pytest.raises(errors.BadArgumentError) as e:
        _loaderx.Sampler(0, 4, 0, 1)
    assert e.value.code == errors.CODES["argument"] and isinstance(e.value, ValueError)


def test_ragged_misfit_is_cores_rule(tmp_path):
    p = tmp_path / "r"
    from_iterator(p, [np.zeros((2, 3), np.float32), np.ones((1, 3), np.float32)])
    with Zrecord(p) as z:
        z.append(np.zeros(8, np.uint8), np.zeros(1, np.uint64))  # 8 bytes: not a whole 12-byte row
    ds = RaggedDataset(p)
    assert [r.shape for r in ds[[0, 1]]] == [(2, 3), (1, 3)]
    with pytest.raises(errors.CorruptStoreError, match="12-byte rows") as e:
        ds[[1, 2]]
    assert e.value.index == 2
    with pytest.raises(ValueError, match="12-byte rows"):
        from_iterator(p, b"12345678")  # one bytes object: no schema of its own, so the store's rules


def test_index_bounds_are_the_engines(tmp_path):
    from_numpy(tmp_path / "d", np.arange(5, dtype=np.int64))
    ds = DenseDataset(tmp_path / "d")
    assert ds[-1] == 4
    with pytest.raises(IndexError, match="index 5 out of range for a store of 5 records") as e:
        ds[[0, 5]]
    assert isinstance(e.value, errors.StoreIndexError) and e.value.code == errors.CODES["index"]
    with pytest.raises(IndexError, match="index -6"):
        ds[-6]


def test_schema_write_protocol_leaves_no_temporary_and_matches_the_reference_bytes(tmp_path):
    from_numpy(tmp_path / "s", np.zeros((3, 28, 28), np.uint8), codec="raw")
    names = sorted(os.listdir(tmp_path / "s"))
    assert "schema.msgpack" in names and not [n for n in names if n.endswith(".tmp")], names
    expected = b"\x86\xa4kind\xa5dense\xa5dtype\xa3|u1\xaaitem_shape\x92\x1c\x1c\xa6format\xafloaderx-zrecord\xa7version\x01\xa5codec\xa3raw"
    assert (tmp_path / "s" / "schema.msgpack").read_bytes() == expected


def test_a_caller_schema_that_msgpack_cannot_hold_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match="msgpack"):
        from_numpy(tmp_path / "s", np.zeros((2, 2), np.uint8), schema={"note": object()})
    assert not (tmp_path / "s").exists()


def test_appending_merges_the_schema_like_a_dict(tmp_path):
    """The conversion lays the caller's keys over the store's schema: existing keys keep their
    place and take new values, new keys go last; data of another shape is refused."""
    from_numpy(tmp_path / "s", np.zeros((2, 3), np.float32))
    from_numpy(tmp_path / "s", np.ones((1, 3), np.float32), schema={"note": "hi", "codec": "raw", "kind": "dense", "dtype": "<f4", "item_shape": [3]})
    merged = _loaderx.Schema.read(tmp_path / "s")
    assert merged is not None
    assert list(merged.to_dict()) == ["kind", "dtype", "item_shape", "format", "version", "codec", "note"]
    assert merged.to_dict()["codec"] == "raw" and merged.item_bytes == 12
    with pytest.raises(ValueError, match="holds a different store"):
        from_numpy(tmp_path / "s", np.ones((1, 4), np.float32))
    assert _loaderx.Schema.parse(merged.to_bytes()) == merged


def test_python_cli_is_the_native_cli(tmp_path):
    """Same output and exit code as the `loaderx` binary, when it is built."""
    binary = shutil.which("loaderx") or next((str(p) for p in [REPO / "target/release/loaderx", REPO / "target/debug/loaderx"] if p.is_file()), None)
    from_numpy(tmp_path / "s", np.arange(10, dtype=np.int16))
    cases = [["info", tmp_path / "s", "--json"], ["head", tmp_path / "s", "-n", "3"], ["verify", tmp_path / "missing"], ["nonsense"]]
    for case in cases:
        args = [str(a) for a in case]
        py = subprocess.run([sys.executable, "-m", "loaderx", *args], capture_output=True, text=True)
        assert py.returncode in (0, 1, 2)
        if binary is None:
            continue
        native = subprocess.run([binary, *args], capture_output=True, text=True)
        assert (py.returncode, py.stdout) == (native.returncode, native.stdout), args
    if binary is None:
        pytest.skip("no loaderx binary built to compare with (outputs were checked for exit codes only)")


def test_record_sizes_are_a_record_size_error_in_every_converter_and_leave_nothing(tmp_path):
    """The conversion session owns the record-size rule: empty, over 1 MiB, or not fitting the
    schema is RecordSizeError (never a bare ValueError), naming the record, and nothing stays."""
    pa = pytest.importorskip("pyarrow")
    from loaderx.converter import from_arrow

    cases = [
        ("empty record", lambda p: from_iterator(p, [b"ab", b"", b"c"]), 1),
        ("too big", lambda p: from_iterator(p, [b"a", bytes(_loaderx.MAX_RECORD_LEN + 1)]), 1),
        ("misfit", lambda p: from_iterator(p, [b"abcd", b"abc"], schema={"kind": "ragged", "dtype": "<i4", "item_shape": []}), 1),
        ("dense item", lambda p: from_numpy(p, np.zeros((2, _loaderx.MAX_RECORD_LEN + 1), np.uint8)), None),
        ("arrow empty", lambda p: from_arrow(p, pa.table({"b": pa.array([b"x", b""], pa.binary())})), 1),
    ]
    for k, (what, convert, index) in enumerate(cases):
        path = tmp_path / f"s{k}"
        with pytest.raises(errors.RecordSizeError) as caught:
            convert(path)
        assert index is None or caught.value.index == index, (what, caught.value.index)
        assert not path.exists(), what
    # Appending to a store: the records before the bad one are rolled back too.
    from_iterator(tmp_path / "kept", [b"one", b"two"])
    with pytest.raises(errors.RecordSizeError):
        from_iterator(tmp_path / "kept", [b"three", b""])
    assert len(Zrecord(tmp_path / "kept")) == 2
