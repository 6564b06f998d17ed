"""Stores are interchangeable with the reference 0.9.11 in both directions.

Pins: a store ours writes (from_numpy, from_iterator, every codec incl. zstd_dict on float32,
delete + compact, a second converter call) reads identically through the reference's
DenseDataset / RaggedDataset / Zrecord; a store the reference writes (its from_numpy and
from_iterator with raw / zstd / zstd_dict, its delete + compact) reads identically in ours; the
reference can append to a store ours wrote (reusing its dictionary) and ours reads the result,
then ours appends and the reference reads that; and a truncated fixture store written by the
reference, once ours has appended to it, can be appended to by the reference again.
"""

import json
import os

import numpy as np
import pytest

from _lxhelpers import OUR_PYTHON, SCRIPTS, copy_fixture, expected_path, run_json, swap_last_delete, table_codecs
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord


def smooth_f32(n=300):
    i = np.arange(n)[:, None, None]
    j = np.arange(28)[None, :, None]
    k = np.arange(28)[None, None, :]
    return (np.round(np.sin((j * 28 + k + i * 3) / 50.0) * 8) / 8).astype(np.float32)


def smooth_u8(n=200):
    i = np.arange(n)[:, None, None]
    j = np.arange(28)[None, :, None]
    k = np.arange(28)[None, None, :]
    return ((i % 9) * 20 + (j // 4) * 5 + (k // 7) * 3).astype(np.uint8)


def int_seqs(n=150):
    return [((np.arange(3 + (i * 5) % 40) * (i % 7 + 1)) % 31).astype(np.int32) for i in range(n)]


def f32_rows(n=40):
    return [(np.arange(3 * (1 + i % 6), dtype=np.float32).reshape(-1, 3) / (i + 1)) for i in range(n)]


def store_ops(python, ops, tmp_path, tag):
    spec = tmp_path / f"ops-{tag}.json"
    spec.write_text(json.dumps([{k: os.fspath(v) if hasattr(v, "__fspath__") else v for k, v in op.items()} for op in ops]))
    out = run_json(python, [SCRIPTS / "store_ops.py", spec])
    return out["results"]


def our_facts(path):
    with Zrecord(path) as z:
        n = len(z)
        return {
            "len": n,
            "lengths": [int(x) for x in z.lengths(np.arange(n, dtype=np.uint64))] if n else [],
            "stats": {k: int(v) for k, v in z.stats().items()},
            "has_dict": bool(z.has_dict()),
        }


def assert_dense_dump(out_dir, want):
    got = np.load(out_dir / "values.npy")
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    idx = np.load(out_dir / "subset_idx.npy")
    assert np.load(out_dir / "subset.npy").tobytes() == want[idx].tobytes()


def assert_ragged_dump(out_dir, want_records):
    values, splits = np.load(out_dir / "values.npy"), np.load(out_dir / "row_splits.npy")
    assert len(splits) == len(want_records) + 1
    for k, rec in enumerate(want_records):
        got = values[splits[k] : splits[k + 1]]
        assert got.dtype == rec.dtype and got.shape == rec.shape, k
        assert got.tobytes() == rec.tobytes(), k


# --- ours writes, the reference reads ---------------------------------------------------------

DENSE_CASES = {
    "f32_raw": (smooth_f32, "raw"),
    "f32_zstd": (smooth_f32, "zstd"),
    "f32_zstd_dict": (smooth_f32, "zstd_dict"),
    "u8_raw": (smooth_u8, "raw"),
    "u8_zstd": (smooth_u8, "zstd"),
    "u8_zstd_dict": (smooth_u8, "zstd_dict"),
    "i64_labels": (lambda: (np.arange(500, dtype=np.int64) * 7) % 10, "zstd"),
}
RAGGED_CASES = {
    "i32_raw": (int_seqs, "raw"),
    "i32_zstd": (int_seqs, "zstd"),
    "i32_zstd_dict": (lambda: int_seqs() * 4, "zstd_dict"),
    "f32x3_zstd": (f32_rows, "zstd"),
}
DELETE_IDX = [1, 3, 10, 59, 59, 0]


@pytest.fixture(scope="module")
def ours_written(ref_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("ours-written")
    want, ops = {}, []
    for name, (make, codec) in DENSE_CASES.items():
        data = make()
        from_numpy(root / name, data, codec=codec)
        want[name] = ("dense", data)
    for name, (make, codec) in RAGGED_CASES.items():
        data = make()
        from_iterator(root / name, data, codec=codec)
        want[name] = ("ragged", data)
    rows = smooth_u8(60)
    for name, compact in (("deleted_compacted", True), ("deleted_uncompacted", False)):
        from_numpy(root / name, rows, codec="zstd")
        with Zrecord(root / name) as z:
            z.delete(np.array(DELETE_IDX, dtype=np.uint64))
            if compact:
                z.compact()
        want[name] = ("dense", np.stack(swap_last_delete(rows, DELETE_IDX)))
    x = smooth_u8(60)
    from_numpy(root / "appended_twice", x[:30], codec="zstd")
    from_numpy(root / "appended_twice", x[30:], codec="raw")
    want["appended_twice"] = ("dense", x)
    for name, (kind, _) in want.items():
        ops.append({"op": "dump", "path": root / name, "kind": kind, "out": root / "dump" / name})
    results = store_ops(ref_python, ops, root, "ref-read")
    return root, want, dict(zip(want, results))


@pytest.mark.parametrize(
    "name", [*DENSE_CASES, *RAGGED_CASES, "deleted_compacted", "deleted_uncompacted", "appended_twice"]
)
def test_reference_reads_our_store(ours_written, name):
    root, want, ref_facts = ours_written
    kind, data = want[name]
    if kind == "dense":
        assert_dense_dump(root / "dump" / name, data)
    else:
        assert_ragged_dump(root / "dump" / name, data)
    assert ref_facts[name] == our_facts(root / name)


def test_our_zstd_dict_float32_store_really_uses_the_dictionary(ours_written):
    root, _, ref_facts = ours_written
    tags = table_codecs(root / "f32_zstd_dict")
    assert ref_facts["f32_zstd_dict"]["has_dict"] is True
    assert (tags == 2).sum() > len(tags) // 2  # most records are dictionary-compressed
    assert set(np.unique(tags)) <= {0, 2}


def test_deleted_uncompacted_keeps_garbage_until_compact(ours_written):
    _, _, ref_facts = ours_written
    assert ref_facts["deleted_uncompacted"]["stats"]["reclaimable"] > 0
    assert ref_facts["deleted_compacted"]["stats"]["reclaimable"] == 0


# --- the reference writes, ours reads ---------------------------------------------------------

@pytest.fixture(scope="module")
def ref_written(ref_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("ref-written")
    src = root / "src"
    src.mkdir()
    want, ops = {}, []
    dense = {
        "u8_raw": (smooth_u8(), "raw"),
        "u8_zstd": (smooth_u8(), "zstd"),
        "u8_zstd_dict": (smooth_u8(), "zstd_dict"),
        "f32_raw": (smooth_f32(100), "raw"),
        "f32_zstd": (smooth_f32(100), "zstd"),
        "be_i4_raw": (np.arange(300, dtype=">i4").reshape(50, 2, 3) * 1000, "raw"),
    }
    for name, (data, codec) in dense.items():
        np.save(src / f"{name}.npy", data)
        ops.append({"op": "from_numpy", "path": root / name, "npy": src / f"{name}.npy", "codec": codec})
        want[name] = ("dense", data)
    ragged = {
        "i32_raw": (int_seqs(), "raw"),
        "i32_zstd": (int_seqs(), "zstd"),
        "i32_zstd_dict": (int_seqs() * 4, "zstd_dict"),
        "f32x3_zstd": (f32_rows(), "zstd"),
    }
    for name, (data, codec) in ragged.items():
        np.savez(src / f"{name}.npz", *data)
        ops.append({"op": "from_iterator", "path": root / name, "npz": src / f"{name}.npz", "codec": codec})
        want[name] = ("ragged", data)
    rows = smooth_u8(60)
    np.save(src / "rows.npy", rows)
    for name, compact in (("deleted_compacted", True), ("deleted_uncompacted", False)):
        ops.append({"op": "from_numpy", "path": root / name, "npy": src / "rows.npy", "codec": "zstd"})
        ops.append({"op": "delete", "path": root / name, "idx": DELETE_IDX, "compact": compact})
        want[name] = ("dense", np.stack(swap_last_delete(rows, DELETE_IDX)))
    names = list(want)
    for name in names:
        ops.append({"op": "dump", "path": root / name, "kind": want[name][0], "out": root / "dump" / name})
    results = store_ops(ref_python, ops, root, "ref-write")
    return root, want, dict(zip(names, results[-len(names) :]))


@pytest.mark.parametrize(
    "name",
    ["u8_raw", "u8_zstd", "u8_zstd_dict", "f32_raw", "f32_zstd", "be_i4_raw", "i32_raw", "i32_zstd", "i32_zstd_dict",
     "f32x3_zstd", "deleted_compacted", "deleted_uncompacted"],
)
def test_we_read_reference_store(ref_written, name):
    root, want, ref_facts = ref_written
    kind, data = want[name]
    if kind == "dense":
        with DenseDataset(root / name) as ds:
            got = ds[:]
            assert got.dtype == data.dtype and got.shape == data.shape
            assert got.tobytes() == data.tobytes()
            idx = np.random.default_rng(1).integers(0, len(data), 64)
            assert ds[idx].tobytes() == data[idx].tobytes()
    else:
        with RaggedDataset(root / name) as rs:
            got = rs[:]
            assert len(got) == len(data)
            for g, w in zip(got, data):
                assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
    assert our_facts(root / name) == ref_facts[name]
    with Zrecord(root / name) as z:
        assert z.verify() == (len(data), [])


# --- appending across implementations -------------------------------------------------------

def test_reference_appends_to_our_store_and_back(ref_python, tmp_path):
    rows = smooth_u8(250)
    store = tmp_path / "shared"
    from_numpy(store, rows[:100], codec="zstd_dict")
    np.save(tmp_path / "b.npy", rows[100:150])
    np.save(tmp_path / "c.npy", rows[150:200])
    res = store_ops(
        ref_python,
        [
            {"op": "from_numpy", "path": store, "npy": tmp_path / "b.npy", "codec": "zstd_dict"},
            {"op": "from_numpy", "path": store, "npy": tmp_path / "c.npy", "codec": "raw"},
        ],
        tmp_path,
        "append1",
    )
    assert [r["returned"] for r in res] == [50, 50]
    with DenseDataset(store) as ds:
        assert len(ds) == 200
        assert ds[:].tobytes() == rows[:200].tobytes()
        assert ds.schema["codec"] == "raw"  # the latest converter call's codec (docs/format.md "schema.msgpack")
    tags = table_codecs(store)
    assert set(np.unique(tags[100:150])) <= {0, 2} and (tags[100:150] == 2).any()  # reused our dictionary
    assert (tags[150:200] == 0).all()
    with Zrecord(store) as z:
        assert z.verify() == (200, [])
    from_numpy(store, rows[200:], codec="zstd")
    res = store_ops(ref_python, [{"op": "dump", "path": store, "kind": "dense", "out": tmp_path / "dump"}], tmp_path, "d")
    assert_dense_dump(tmp_path / "dump", rows)
    assert res[0] == our_facts(store)


def test_reference_appends_records_to_our_ragged_store(ref_python, tmp_path):
    seqs = int_seqs(120)
    store = tmp_path / "tokens"
    from_iterator(store, seqs[:60], codec="zstd_dict")
    np.savez(tmp_path / "more.npz", *seqs[60:90])
    np.savez(tmp_path / "raw.npz", *seqs[90:])
    store_ops(
        ref_python,
        [
            {"op": "from_iterator", "path": store, "npz": tmp_path / "more.npz", "codec": "zstd"},
            {"op": "append", "path": store, "npz": tmp_path / "raw.npz", "codec": "zstd_dict"},
        ],
        tmp_path,
        "rag",
    )
    with RaggedDataset(store) as rs:
        got = rs[:]
    assert len(got) == 120
    for g, w in zip(got, seqs):
        assert g.tobytes() == w.tobytes() and g.dtype == w.dtype


def test_truncated_reference_store_after_our_append_takes_reference_appends(ref_python, tmp_path):
    store = copy_fixture("u8img_zstd", tmp_path / "fx")
    base = np.load(expected_path("u8img_zstd", "values"))
    ours_rows, ref_rows = smooth_u8(10), 255 - smooth_u8(10)
    from_numpy(store, ours_rows, codec="zstd")
    # our first write restored the full sparse sizes the reference relies on
    assert os.path.getsize(store / "meta.zr") == 16 + (1 << 24) * 16
    assert os.path.getsize(store / "0.zr") == 1 << 32
    np.save(tmp_path / "r.npy", ref_rows)
    store_ops(ref_python, [{"op": "from_numpy", "path": store, "npy": tmp_path / "r.npy", "codec": "raw"}], tmp_path, "t")
    with DenseDataset(store) as ds:
        assert ds[:].tobytes() == np.concatenate([base, ours_rows, ref_rows]).tobytes()
    with Zrecord(store) as z:
        assert z.verify() == (220, [])


def test_same_script_under_ours_matches(tmp_path):
    """store_ops.py itself runs under ours, so the ops used above mean the same on both sides."""
    np.save(tmp_path / "a.npy", smooth_u8(20))
    res = store_ops(
        OUR_PYTHON,
        [
            {"op": "from_numpy", "path": tmp_path / "s", "npy": tmp_path / "a.npy", "codec": "zstd"},
            {"op": "dump", "path": tmp_path / "s", "kind": "dense", "out": tmp_path / "d"},
        ],
        tmp_path,
        "ours",
    )
    assert res[0] == {"returned": 20}
    assert_dense_dump(tmp_path / "d", smooth_u8(20))
