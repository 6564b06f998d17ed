"""Bad input gives a clear, typed Python exception and writes nothing.

Pins, for each bad call: the exception class (a builtin such as ValueError / IndexError /
OSError / FileNotFoundError, and a ZrecordError with the reference's code where the store
reports it), and that nothing changed: same length, same schema, same file set and bytes (a
sparse-aware snapshot), and no directory left behind when the path did not exist. Covers schema
mismatches on a second converter call, over-long and empty records, out-of-range and negative
indices, misaligned index arrays, paths that are not stores, damaged meta.zr / chunk files
(never a crash), non-contiguous buffers, zstd_dict on multi-byte dtypes (the reference
segfaults; ours must round-trip), unknown codecs, bad Sampler arguments, a bad record in the
middle of from_iterator, and the one-writer lock between two handles and two processes.
"""

import json
import os

import msgpack
import numpy as np
import pytest

from _lxhelpers import OUR_PYTHON, run_code, run_python, snapshot, table_codecs
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import (
    CorruptStoreError,
    NotAStoreError,
    RecordSizeError,
    StoreIndexError,
    StoreLockedError,
    ZrecordError,
)
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

MIB = 1 << 20


def u64(*v):
    return np.array(v, dtype=np.uint64)


@pytest.fixture
def dense(tmp_path):
    rows = (np.arange(10 * 4) * 3 % 256).astype(np.uint8).reshape(10, 4)
    from_numpy(tmp_path / "dense", rows, codec="zstd")
    return tmp_path / "dense", rows


@pytest.fixture
def ragged(tmp_path):
    seqs = [np.arange(1 + i % 4, dtype=np.int32) * (i + 1) for i in range(8)]
    from_iterator(tmp_path / "ragged", seqs, codec="zstd")
    return tmp_path / "ragged", seqs


class Unchanged:
    """Snapshot a store; ``check()`` asserts files, length and schema are exactly as before."""

    def __init__(self, path):
        self.path = path
        self.snap = snapshot(path)
        with Zrecord(path) as z:
            self.len = len(z)

    def check(self):
        assert snapshot(self.path) == self.snap, "store files changed"
        with Zrecord(self.path) as z:
            assert len(z) == self.len


# --- converters onto an existing store ------------------------------------------------------

@pytest.mark.parametrize(
    "bad",
    [np.zeros((2, 4), np.int16), np.zeros((2, 5), np.uint8), np.zeros((2, 4, 1), np.uint8), np.zeros(3, np.uint8)],
    ids=["dtype", "shape", "rank", "scalar"],
)
def test_from_numpy_with_other_dtype_or_shape_changes_nothing(dense, bad):
    path, rows = dense
    guard = Unchanged(path)
    with pytest.raises(ValueError, match="different"):
        from_numpy(path, bad)
    guard.check()
    np.testing.assert_array_equal(DenseDataset(path)[:], rows)


def test_converters_refuse_the_other_kind(dense, ragged):
    dpath, _ = dense
    rpath, _ = ragged
    g1, g2 = Unchanged(dpath), Unchanged(rpath)
    with pytest.raises(ValueError):
        from_iterator(dpath, [np.zeros(4, np.uint8)])
    with pytest.raises(ValueError):
        from_numpy(rpath, np.zeros((3, 2), np.int32))
    with pytest.raises(ValueError):
        from_iterator(rpath, [np.zeros(3, np.int64)])  # other dtype
    g1.check()
    g2.check()
    with pytest.raises(ValueError):
        DenseDataset(rpath)
    with pytest.raises(ValueError):
        RaggedDataset(dpath)


# --- record size ----------------------------------------------------------------------------

def test_record_over_1mib_through_converters(tmp_path, dense):
    with pytest.raises(ValueError, match="1048576"):
        from_numpy(tmp_path / "new", np.zeros((2, MIB + 1), np.uint8))
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError):
        from_iterator(tmp_path / "new2", [np.zeros(10, np.uint8), np.zeros(MIB + 1, np.uint8)])
    assert not (tmp_path / "new2").exists()
    path, _ = dense
    guard = Unchanged(path)
    with pytest.raises(ValueError):
        from_numpy(path, np.zeros((1, MIB + 1), np.uint8))
    guard.check()
    # exactly 1 MiB is fine
    big = (np.arange(2 * MIB) % 253).astype(np.uint8).reshape(2, MIB)
    assert from_numpy(tmp_path / "mib", big) == 2
    assert DenseDataset(tmp_path / "mib")[1].tobytes() == big[1].tobytes()


def test_record_over_1mib_through_zrecord_append(dense):
    path, _ = dense
    guard = Unchanged(path)
    with Zrecord(path) as z:
        with pytest.raises(RecordSizeError) as e:
            z.append(np.zeros(MIB + 1, np.uint8), u64(0))
        assert isinstance(e.value, ValueError) and isinstance(e.value, ZrecordError) and e.value.code == -4
        with pytest.raises(RecordSizeError):  # all or nothing: the good first record is not kept
            z.append(np.zeros(100 + MIB + 1, np.uint8), u64(0, 100))
        assert len(z) == 10
    guard.check()


def test_zero_byte_items(tmp_path, dense):
    with pytest.raises(ValueError):
        from_numpy(tmp_path / "z", np.zeros((3, 0), np.uint8))
    assert not (tmp_path / "z").exists()
    with pytest.raises(ValueError):
        from_iterator(tmp_path / "z2", [np.zeros(0, np.int32)])
    assert not (tmp_path / "z2").exists()
    path, _ = dense
    guard = Unchanged(path)
    with Zrecord(path) as z:
        with pytest.raises(ValueError) as e:
            z.append(np.zeros(8, np.uint8), u64(0, 4, 4))
        assert isinstance(e.value, ZrecordError) and e.value.code == -4
        with pytest.raises(ValueError):
            z.append(np.zeros(0, np.uint8), u64(0))
        with pytest.raises(ValueError):
            z.append(np.zeros(8, np.uint8), u64(0, 9))  # offset past the source
    guard.check()


# --- indices --------------------------------------------------------------------------------

def test_index_out_of_range(dense, ragged):
    path, rows = dense
    n = len(rows)
    ds, rs = DenseDataset(path), RaggedDataset(ragged[0])
    for bad in (lambda: ds[n], lambda: ds[[0, n]], lambda: ds[2**40], lambda: ds[-n - 1], lambda: ds[[-n - 1]],
                lambda: ds[np.array([n], dtype=np.uint64)], lambda: rs[len(rs)], lambda: rs[[0, -len(rs) - 1]]):
        with pytest.raises(IndexError) as e:
            bad()
        assert isinstance(e.value, ZrecordError)
    with pytest.raises(IndexError):
        ds[np.ones(n + 1, dtype=bool)]  # mask of the wrong length
    guard = Unchanged(path)
    with Zrecord(path) as z:
        dst = np.full(8, 0xAB, np.uint8)
        with pytest.raises(StoreIndexError) as e:
            z.gather(u64(0, n), dst, u64(0, 4))
        assert isinstance(e.value, IndexError) and e.value.code == -3
        assert (dst == 0xAB).all(), "a failed gather must not write any record"
        with pytest.raises(IndexError):
            z.lengths(u64(n))
        with pytest.raises(IndexError):
            z.delete(u64(1, n))
        assert len(z) == n
    guard.check()


def test_negative_indices_count_from_the_end(dense, ragged):
    path, rows = dense
    ds = DenseDataset(path)
    n = len(rows)
    np.testing.assert_array_equal(ds[-1], rows[-1])
    np.testing.assert_array_equal(ds[-n], rows[0])
    np.testing.assert_array_equal(ds[np.int64(-2)], rows[-2])
    np.testing.assert_array_equal(ds[[-1, -2, 0]], rows[[-1, -2, 0]])
    np.testing.assert_array_equal(ds[np.array([-3, 4])], rows[[-3, 4]])
    for sl in (slice(-3, None), slice(None, -7), slice(-100, 100), slice(-1, -5, -1), slice(None, None, -3),
               slice(8, -12, -2), slice(5, 2)):
        np.testing.assert_array_equal(ds[sl], rows[sl], err_msg=str(sl))
    rpath, seqs = ragged
    rs = RaggedDataset(rpath)
    np.testing.assert_array_equal(rs[-1], seqs[-1])
    assert [r.tolist() for r in rs[[-2, 1]]] == [seqs[-2].tolist(), seqs[1].tolist()]
    with Zrecord(path) as z:
        assert z.lengths([-1]).tolist() == z.lengths([n - 1]).tolist()
        dst = np.zeros(4, np.uint8)
        z.gather([-1], dst, [0])
        np.testing.assert_array_equal(dst, rows[-1])
    with pytest.raises((TypeError, IndexError)):
        ds[1.5]


def odd_u64(values, step=1):
    """uint64 indices at an odd byte offset (misaligned), every ``step``-th of a longer array."""
    raw = np.zeros(8 * len(values) * step + 1, np.uint8)
    out = raw[1:].view(np.uint64)[::step]
    out[:] = values
    return out


def test_misaligned_and_strided_index_arrays_read_like_a_list(dense, ragged):
    """uint64 index and offset arrays that are views at an odd byte offset, or strided, are
    copied into place rather than refused or misread."""
    path, rows = dense
    rpath, seqs = ragged
    ds, rs = DenseDataset(path), RaggedDataset(rpath)
    picks, rpicks = [7, 0, 3, 3, 9], [5, 0, 2, 2, 7]
    for step in (1, 2):
        assert not odd_u64(picks, step).flags.aligned
        np.testing.assert_array_equal(ds[odd_u64(picks, step)], rows[picks])
        assert [r.tolist() for r in rs[odd_u64(rpicks, step)]] == [seqs[i].tolist() for i in rpicks]
        with Zrecord(path) as z:
            assert z.lengths(odd_u64(picks, step)).tolist() == [4] * len(picks)
            dst = np.zeros(4 * len(picks), np.uint8)
            z.gather(odd_u64(picks, step), dst, odd_u64([4 * k for k in range(len(picks))], step))
            np.testing.assert_array_equal(dst.reshape(-1, 4), rows[picks])


# --- paths that are not stores --------------------------------------------------------------

def test_dataset_on_a_path_that_is_not_a_store(tmp_path):
    with pytest.raises(FileNotFoundError):
        DenseDataset(tmp_path / "missing")
    assert not (tmp_path / "missing").exists(), "opening a dataset must not create a store"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        RaggedDataset(tmp_path / "empty")
    assert os.listdir(tmp_path / "empty") == []
    with Zrecord(tmp_path / "bare") as z:  # a store, but no schema
        z.append(np.ones(4, np.uint8), u64(0))
    with pytest.raises(FileNotFoundError):
        DenseDataset(tmp_path / "bare")
    (tmp_path / "file").write_bytes(b"hello")
    with pytest.raises(FileNotFoundError):
        DenseDataset(tmp_path / "file")


def test_zrecord_on_a_regular_file(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"not a store")
    with pytest.raises(ZrecordError) as e:
        Zrecord(f)
    assert isinstance(e.value, OSError)
    assert f.read_bytes() == b"not a store"


@pytest.mark.parametrize(
    "meta",
    [b"GARBAGE!" * 4, b"\x00" * 64, b"ZREC" + (2).to_bytes(2, "little") + bytes(10), b"ZREC" + (4).to_bytes(2, "little") + bytes(10)],
    ids=["garbage", "zeros", "version2", "version4"],
)
def test_garbage_meta_is_a_zrecord_error(tmp_path, meta):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "meta.zr").write_bytes(meta)
    with pytest.raises(ZrecordError) as e:
        Zrecord(tmp_path / "s")
    assert isinstance(e.value, NotAStoreError) and e.value.code == -8
    assert (tmp_path / "s" / "meta.zr").read_bytes() == meta
    assert os.listdir(tmp_path / "s") == ["meta.zr"]


def test_chunks_without_meta_are_not_overwritten(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "0.zr").write_bytes(b"old data")
    with pytest.raises(ZrecordError):
        Zrecord(tmp_path / "s")
    assert sorted(os.listdir(tmp_path / "s")) == ["0.zr"]
    assert (tmp_path / "s" / "0.zr").read_bytes() == b"old data"


# Damaged stores that crash the reference (SIGBUS): run in a child so a crash fails one test.
_DAMAGE = r"""
import json, os, sys
import numpy as np
from loaderx.zrecord import Zrecord
from loaderx.errors import ZrecordError
path, case = sys.argv[1], sys.argv[2]
out = {}
def raw_store(n, size=100):
    with Zrecord(path, codec="raw") as z:
        z.append(np.arange(n * size, dtype=np.uint64).astype(np.uint8), np.arange(n, dtype=np.uint64) * size)
if case == "empty_meta":
    os.mkdir(path); open(os.path.join(path, "meta.zr"), "wb").close()
elif case == "two_byte_meta":
    os.mkdir(path); open(os.path.join(path, "meta.zr"), "wb").write(b"ZR")
elif case == "header_only_with_length":
    raw_store(400)
    os.truncate(os.path.join(path, "meta.zr"), 16)
elif case == "length_over_max":
    raw_store(3)
    with open(os.path.join(path, "meta.zr"), "r+b") as f:
        f.seek(12); f.write(((1 << 24) + 1).to_bytes(4, "little"))
elif case == "short_chunk":
    raw_store(5)
    os.truncate(os.path.join(path, "0.zr"), 250)
elif case == "missing_chunk":
    raw_store(5)
    os.remove(os.path.join(path, "0.zr"))
try:
    z = Zrecord(path)
    n = len(z)
    dst = np.full(100 * 5, 0xAB, np.uint8)
    z.gather(np.arange(min(n, 5), dtype=np.uint64) + (300 if case == "header_only_with_length" else 0),
             dst, np.arange(min(n, 5), dtype=np.uint64) * 100)
    out["result"] = "read"
    out["untouched"] = bool((dst == 0xAB).all())
except ZrecordError as e:
    out["result"] = type(e).__name__
    out["code"] = e.code
    out["message"] = str(e)
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "case", ["empty_meta", "two_byte_meta", "header_only_with_length", "length_over_max", "short_chunk", "missing_chunk"]
)
def test_damaged_store_is_an_error_not_a_crash(tmp_path, case):
    script = tmp_path / "damage.py"
    script.write_text(_DAMAGE)
    proc = run_python(OUR_PYTHON, [script, tmp_path / "s", case], check=False, timeout=60)
    assert proc.returncode == 0, f"crashed with exit {proc.returncode}: {proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["result"] != "read", f"a damaged store read without error: {out}"
    assert out["code"] in (-7, -8), out
    assert "meta.zr" in out["message"] or "0.zr" in out["message"], "the error must name the damaged file"


# --- buffers --------------------------------------------------------------------------------

def test_non_contiguous_buffers(dense):
    path, rows = dense
    guard = Unchanged(path)
    with Zrecord(path) as z:
        with pytest.raises(ValueError):
            z.gather(u64(0), np.zeros(16, np.uint8)[::2], u64(0))
        with pytest.raises(ValueError):
            z.gather(u64(0, 1), np.zeros((4, 2), np.uint8, order="F"), u64(0, 4))
        with pytest.raises(ValueError):
            z.append(np.zeros(16, np.uint8)[::2], u64(0))
        with pytest.raises(ValueError):
            z.append(np.zeros((4, 4), np.uint8).T, u64(0, 4))
    guard.check()
    # a non-contiguous source array is fine for the converter (it copies blocks)
    src = np.zeros((10, 8), np.uint8)
    src[:] = rows.repeat(2, axis=1)
    from_numpy(path, src[:, ::2])
    np.testing.assert_array_equal(DenseDataset(path)[10:], src[:, ::2])


# --- zstd_dict on multi-byte dtypes ---------------------------------------------------------

@pytest.mark.parametrize(
    "make",
    [
        lambda: (np.round(np.sin(np.arange(300 * 28 * 28).reshape(300, 28, 28) / 50.0) * 8) / 8).astype(np.float32),
        lambda: ((np.arange(133 * 3000).reshape(133, 3000) // 7) % 97).astype(np.int16),
        lambda: ((np.arange(300 * 28 * 28).reshape(300, 28, 28) // 5) % 113).astype(np.int16),
    ],
    ids=["float32-300x28x28", "int16-133x3000", "int16-300x28x28"],
)
def test_zstd_dict_on_multibyte_dtypes(tmp_path, make):
    data = make()
    assert from_numpy(tmp_path / "s", data, codec="zstd_dict") == len(data)
    with DenseDataset(tmp_path / "s") as ds:
        got = ds[:]
        assert got.dtype == data.dtype and got.tobytes() == data.tobytes()
        assert ds.schema["codec"] == "zstd_dict"
    with Zrecord(tmp_path / "s") as z:
        assert z.has_dict()
        assert z.verify() == (len(data), [])
    tags = table_codecs(tmp_path / "s")
    assert (tags == 2).any(), "no record was stored with the dictionary"
    assert (tmp_path / "s" / "dict.zr").read_bytes()[:4] == bytes.fromhex("37a430ec")


def test_retraining_a_dictionary_in_use_is_refused(tmp_path):
    data = ((np.arange(200 * 256).reshape(200, 256) // 3) % 50).astype(np.uint8)
    from_numpy(tmp_path / "s", data, codec="zstd_dict")
    guard = Unchanged(tmp_path / "s")
    with Zrecord(tmp_path / "s") as z:
        with pytest.raises(ZrecordError):
            z.train_dict(data.reshape(-1), np.full(200, 256), 8192)
    guard.check()
    np.testing.assert_array_equal(DenseDataset(tmp_path / "s")[:], data)


# --- codecs, sampler ------------------------------------------------------------------------

def test_unknown_codec(tmp_path, dense):
    for call in (
        lambda: from_numpy(tmp_path / "c1", np.zeros((2, 2)), codec="lz4"),
        lambda: from_iterator(tmp_path / "c2", [np.zeros(2)], codec="gzip"),
        lambda: Zrecord(tmp_path / "c3", codec="LZ4"),
        lambda: from_numpy(tmp_path / "c4", np.zeros((2, 2)), codec=None),
    ):
        with pytest.raises(ValueError, match="codec"):
            call()
    for name in ("c1", "c2", "c3", "c4"):
        assert not (tmp_path / name).exists()
    path, _ = dense
    guard = Unchanged(path)
    with Zrecord(path) as z:
        with pytest.raises(ValueError, match="codec"):
            z.append(np.ones(4, np.uint8), u64(0), codec="brotli")
    guard.check()


@pytest.mark.parametrize(
    "args",
    [(0, 4, 0), (0, 4, 1), (0, 4, 2), (10, 0, 0), (10, 0, 1), (10, 0, 2), (10, 4, 3), (10, 4, 7), (10, 4, 255),
     (10, 4, -1), (-5, 4, 0), (10, 4, 0, -1)],
)
def test_bad_sampler_arguments(args):
    with pytest.raises(ValueError):
        Sampler(*args)


def test_sampler_bad_seek_and_empty_loader(tmp_path):
    s = Sampler(10, 4, 1)
    with pytest.raises((ValueError, OverflowError)):
        s.seek(-1)
    from_numpy(tmp_path / "empty", np.zeros((0, 4), np.uint8))
    with pytest.raises(ValueError):
        DataLoader({"e": DenseDataset(tmp_path / "empty")}, num_workers=2)


# --- a bad record in the middle of from_iterator ----------------------------------------------

def _with_bad(seqs, bad, at=3):
    return seqs[:at] + [bad] + seqs[at:]


def _gen_raising(seqs):
    for k, s in enumerate(seqs):
        if k == 4:
            raise RuntimeError("the source broke")
        yield s


BAD_RECORDS = {
    "float32_in_int32": lambda seqs: _with_bad(seqs, np.arange(4, dtype=np.float32)),
    "zero_bytes": lambda seqs: _with_bad(seqs, np.zeros(0, np.int32)),
    "over_1mib": lambda seqs: _with_bad(seqs, np.zeros(MIB // 4 + 1, np.int32)),
    "2d_in_1d": lambda seqs: _with_bad(seqs, np.zeros((2, 2), np.int32)),
    "source_raises": lambda seqs: _gen_raising(seqs),
}


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 64], ids=["one-append", "flushes-first"])
@pytest.mark.parametrize("bad", list(BAD_RECORDS))
def test_from_iterator_bad_record_leaves_existing_store(ragged, bad, chunk_bytes):
    path, seqs = ragged
    schema = (path / "schema.msgpack").read_bytes()
    guard = Unchanged(path)
    more = [np.arange(5, dtype=np.int32) + 100 * k for k in range(10)]
    with pytest.raises((ValueError, RuntimeError)):
        from_iterator(path, BAD_RECORDS[bad](more), chunk_bytes=chunk_bytes)
    assert (path / "schema.msgpack").read_bytes() == schema
    if chunk_bytes > 1 << 20:
        guard.check()  # nothing was appended: byte for byte as before
    else:
        # earlier flushes were rolled back: every visible record is as before
        with Zrecord(path) as z:
            assert len(z) == len(seqs)
    got = RaggedDataset(path)[:]
    assert [g.tolist() for g in got] == [s.tolist() for s in seqs]


@pytest.mark.parametrize("chunk_bytes", [64 << 20, 64], ids=["one-append", "flushes-first"])
@pytest.mark.parametrize("bad", list(BAD_RECORDS))
def test_from_iterator_bad_record_leaves_no_new_store(tmp_path, bad, chunk_bytes):
    more = [np.arange(5, dtype=np.int32) + 100 * k for k in range(10)]
    with pytest.raises((ValueError, RuntimeError)):
        from_iterator(tmp_path / "new", BAD_RECORDS[bad](more), chunk_bytes=chunk_bytes)
    assert not (tmp_path / "new").exists()
    with pytest.raises((ValueError, RuntimeError)):
        from_iterator(tmp_path / "a" / "b" / "new", BAD_RECORDS[bad](more), chunk_bytes=chunk_bytes)
    assert not (tmp_path / "a").exists(), "parent directories created by the failed call were left behind"


# --- the writer lock ------------------------------------------------------------------------

def test_second_handle_cannot_append_while_first_writes(dense):
    path, rows = dense
    a, b = Zrecord(path), Zrecord(path)
    try:
        assert a.append(np.full(4, 7, np.uint8), u64(0)) == 10
        snap = snapshot(path)
        with pytest.raises(StoreLockedError) as e:
            b.append(np.full(4, 9, np.uint8), u64(0))
        assert isinstance(e.value, ZrecordError) and e.value.code == -10
        assert snapshot(path) == snap and len(a) == 11
        dst = np.zeros(8, np.uint8)  # readers never lock
        b.gather(u64(0, 10), dst, u64(0, 4))
        np.testing.assert_array_equal(dst, np.concatenate([rows[0], np.full(4, 7, np.uint8)]))
        with pytest.raises(StoreLockedError):
            b.delete(u64(0))
        with pytest.raises(StoreLockedError):
            from_numpy(path, rows[:2])  # a converter is a writer too
        assert len(a) == 11 and snapshot(path) == snap
        a.close()
        assert b.append(np.full(4, 9, np.uint8), u64(0)) == 11  # the lock went with the handle
    finally:
        a.close()
        b.close()


def test_other_process_cannot_append_while_we_write(dense):
    path, rows = dense
    with Zrecord(path) as z:
        z.append(np.full(4, 7, np.uint8), u64(0))
        code = (
            "import numpy as np, json\n"
            "from loaderx.zrecord import Zrecord\n"
            "from loaderx.errors import StoreLockedError\n"
            f"z = Zrecord({str(path)!r})\n"
            "dst = np.zeros(4, np.uint8); z.gather([10], dst, [0])\n"
            "try:\n"
            "    z.append(np.ones(4, np.uint8), np.zeros(1, np.uint64)); r = 'appended'\n"
            "except StoreLockedError as e:\n"
            "    r = 'locked'\n"
            "print(json.dumps([r, dst.tolist(), len(z)]))\n"
        )
        out = json.loads(run_code(OUR_PYTHON, code).stdout.strip().splitlines()[-1])
        assert out == ["locked", [7, 7, 7, 7], 11]
        assert len(z) == 11


def test_dense_record_of_wrong_size_is_an_error(dense):
    path, rows = dense
    with Zrecord(path) as z:
        z.append(np.ones(6, np.uint8), u64(0))
    ds = DenseDataset(path)
    np.testing.assert_array_equal(ds[:10], rows)
    with pytest.raises(ZrecordError) as e:
        ds[[0, 10]]
    assert isinstance(e.value, CorruptStoreError)
    schema = msgpack.unpackb((path / "schema.msgpack").read_bytes())
    assert schema["item_shape"] == [4]
