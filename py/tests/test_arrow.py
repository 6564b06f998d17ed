"""Arrow in and out: every kind of store round-trips through Arrow with its dtype and shape;
pyarrow, Polars and DuckDB read stores through ``__arrow_c_stream__``; ``from_arrow`` takes
Tables, readers, Polars and DuckDB results, Parquet files and HF datasets; bad columns are
errors naming them, and a failure part-way leaves nothing behind."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaderx import manifest
from loaderx.arrow import reader
from loaderx.converter import from_arrow, from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord

RNG = np.random.default_rng(4)


def records(ds):
    return list(ds[:]) if isinstance(ds, RaggedDataset) else ds[:]


def same(a, b):
    if isinstance(a, list):
        return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


DENSE = {
    "scalars": (RNG.integers(-9, 9, 50).astype(np.int64), pa.int64()),
    "bools": (RNG.random(50) < 0.5, pa.bool_()),
    "vectors": (RNG.random((50, 6)).astype(np.float16), pa.list_(pa.float16(), 6)),
    "images": (RNG.integers(0, 255, (50, 4, 5, 3), dtype=np.uint8), pa.fixed_shape_tensor(pa.uint8(), [4, 5, 3])),
}


@pytest.mark.parametrize("name", sorted(DENSE))
def test_dense_stores_round_trip_with_their_dtype_and_shape(tmp_path, name):
    data, arrow_type = DENSE[name]
    from_numpy(tmp_path / "a", data, progress=False)
    table = pa.table(DenseDataset(tmp_path / "a"))
    assert table.num_rows == len(data) and table.schema.field("data").type == arrow_type
    from_arrow(tmp_path / "b", table, progress=False)
    assert same(DenseDataset(tmp_path / "b")[:], data)


def test_ragged_and_bytes_stores_round_trip(tmp_path):
    rows = [RNG.integers(0, 100, (int(RNG.integers(1, 5)), 2), dtype=np.int32) for _ in range(40)]
    from_iterator(tmp_path / "r", rows, progress=False)
    blobs = [bytes(RNG.integers(0, 255, int(RNG.integers(1, 30)), dtype=np.uint8)) for _ in range(40)]
    from_iterator(tmp_path / "b", blobs, progress=False)
    t = pa.table(RaggedDataset(tmp_path / "r"))
    assert t.schema.field("data").type == pa.large_list(pa.list_(pa.int32(), 2))
    from_arrow(tmp_path / "r2", t, progress=False)
    assert same(records(RaggedDataset(tmp_path / "r2")), rows)
    for opened in (RaggedDataset(tmp_path / "b"), Zrecord(tmp_path / "b")):
        t = pa.table(opened)
        assert t.schema.field("data").type == pa.large_binary() and t.column("data").to_pylist() == blobs
    from_arrow(tmp_path / "b2", pa.table({"s": pa.array([b.hex() for b in blobs])}), progress=False)  # strings
    assert [bytes(r) for r in RaggedDataset(tmp_path / "b2")[:]] == [b.hex().encode() for b in blobs]


def test_export_streams_in_bounded_batches_and_joins_named_columns(tmp_path):
    images = RNG.integers(0, 255, (300, 32, 32), dtype=np.uint8)  # 1 KiB records
    from_numpy(tmp_path / "x", images, progress=False)
    from_numpy(tmp_path / "y", np.arange(300), progress=False)
    r = reader({"x": DenseDataset(tmp_path / "x"), "y": DenseDataset(tmp_path / "y")}, batch_bytes=64 << 10)
    batches = list(r)
    assert len(batches) == 5 and all(b.num_rows <= 63 for b in batches)  # 64 KiB / (1024 + 8) bytes
    table = pa.Table.from_batches(batches)
    assert table.column_names == ["x", "y"] and table.column("y").to_pylist() == list(range(300))
    x = np.stack(table.column("x").combine_chunks().to_numpy_ndarray())
    assert np.array_equal(x, images)
    with pytest.raises(ValueError, match="same length"):
        reader({"x": DenseDataset(tmp_path / "x"), "y": DenseDataset(tmp_path / "x")[:3]})


def test_a_manifest_exports_its_stores_in_order(tmp_path):
    for k in range(3):
        from_numpy(tmp_path / f"p{k}", np.full((10 + k, 2), k, np.int32), progress=False)
    manifest.commit(tmp_path, ["p0", "p1", "p2"])
    t = pa.table(DenseDataset(tmp_path))
    assert t.num_rows == 33 and [v[0] for v in t.column("data").to_pylist()] == [0] * 10 + [1] * 11 + [2] * 12


def test_polars_and_duckdb_read_stores_directly(tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    labels = RNG.integers(0, 10, 200)
    from_numpy(tmp_path / "y", labels, progress=False)
    ds = DenseDataset(tmp_path / "y")
    assert pl.DataFrame(ds)["data"].to_list() == labels.tolist()
    assert duckdb.sql("select sum(data) as s, count(*) as n from ds").fetchall() == [(int(labels.sum()), 200)]


def test_from_arrow_takes_readers_polars_duckdb_parquet_and_hf(tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    datasets = pytest.importorskip("datasets")
    vec = RNG.random((64, 3)).astype(np.float32)
    table = pa.table({"id": np.arange(64), "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), 3)})
    sources = {
        "reader": lambda: pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=10)),
        "polars": lambda: pl.from_arrow(table),
        "duckdb": lambda: duckdb.from_arrow(table).order("id"),
        "parquet": lambda: pq.write_table(table, tmp_path / "t.parquet", row_group_size=16) or tmp_path / "t.parquet",
        "hf": lambda: datasets.Dataset.from_dict({"id": list(range(64)), "vec": vec.tolist()}),
    }
    for name, make in sources.items():
        from_arrow(tmp_path / name / "ids", make(), column="id", progress=False)
        assert same(DenseDataset(tmp_path / name / "ids")[:], np.arange(64)), name
        from_arrow(tmp_path / name / "vec", make(), column="vec", progress=False)
        if name == "hf":  # HF stores a list of floats as a list<double> column: a ragged store
            continue
        got = DenseDataset(tmp_path / name / "vec")[:]
        assert got.shape == (64, 3) and np.allclose(got, vec), name
    hf = RaggedDataset(tmp_path / "hf" / "vec")[:]
    assert len(hf) == 64 and hf[0].dtype == np.float64 and np.allclose(np.stack(hf), vec)


def test_bad_columns_are_errors_that_name_them_and_write_nothing(tmp_path):
    cases = [
        (pa.table({"t": pa.array([1, 2], pa.timestamp("s"))}), TypeError, "column 't' has Arrow type timestamp"),
        (pa.table({"d": pa.array(["a", "b"]).dictionary_encode()}), TypeError, "column 'd'"),
        (pa.table({"n": pa.array([1, None, 3])}), ValueError, "column 'n' has a null at row 1"),
        (pa.table({"v": pa.array([[1, 2], [3, None]], pa.list_(pa.int64(), 2))}), ValueError, "null inside"),
        (pa.table({"e": pa.array([[1], []], pa.list_(pa.int64()))}), ValueError, "empty record at row 1"),
        (pa.table({"a": [1], "b": [2]}), ValueError, "pass column="),
    ]
    for k, (table, error, match) in enumerate(cases):
        with pytest.raises(error, match=match):
            from_arrow(tmp_path / f"s{k}", table, progress=False)
        assert not (tmp_path / f"s{k}").exists(), f"case {k} left a store behind"
    with pytest.raises(KeyError, match="no column 'z'"):
        from_arrow(tmp_path / "z", pa.table({"a": [1]}), column="z")
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        from_arrow(tmp_path / "z", [1, 2, 3])


def test_a_failure_part_way_rolls_back_an_existing_store(tmp_path):
    from_numpy(tmp_path / "s", np.arange(5), progress=False)
    good = pa.record_batch({"x": pa.array(np.arange(100))})
    bad = pa.record_batch({"x": pa.array([1, None])})
    with pytest.raises(ValueError, match="null at row 101"):
        from_arrow(tmp_path / "s", pa.RecordBatchReader.from_batches(good.schema, [good, bad]), progress=False)
    assert DenseDataset(tmp_path / "s")[:].tolist() == list(range(5))
    with pytest.raises(ValueError, match="holds a different store"):
        from_arrow(tmp_path / "s", pa.table({"x": pa.array([1.5])}), progress=False)
    assert len(DenseDataset(tmp_path / "s")) == 5
    from_arrow(tmp_path / "s", pa.table({"x": pa.array([7, 8])}), progress=False)  # same schema: appends
    assert DenseDataset(tmp_path / "s")[:].tolist() == [0, 1, 2, 3, 4, 7, 8]


def test_from_arrow_appends_in_blocks_of_chunk_bytes(tmp_path, monkeypatch):
    from loaderx import converter

    blocks, update = [], converter._Progress.update

    def spy(self, n):
        blocks.append(n)
        return update(self, n)

    # One progress step per block appended, of that block's records.
    monkeypatch.setattr(converter._Progress, "update", spy)
    rows = pa.table({"x": pa.array(np.arange(1000, dtype=np.int64))})
    assert from_arrow(tmp_path / "s", rows, chunk_bytes=800, progress=False) == 1000
    assert sum(blocks) == 1000 and max(blocks) <= 100 and len(blocks) == 10
    assert DenseDataset(tmp_path / "s")[:].tolist() == list(range(1000))


def test_from_arrow_shows_progress_on_stderr_only_when_asked(tmp_path, capfd):
    table = pa.table({"x": pa.array(np.arange(5000, dtype=np.int64))})
    from_arrow(tmp_path / "quiet", table, progress=False)
    assert capfd.readouterr() == ("", "")
    from_arrow(tmp_path / "bar", table, progress=True, chunk_bytes=4096)
    out, err = capfd.readouterr()
    assert out == "" and "converting bar" in err and "100%" in err


def test_an_hf_dataset_with_an_indices_mapping_is_refused_not_misread(tmp_path):
    datasets = pytest.importorskip("datasets")
    shuffled = datasets.Dataset.from_dict({"id": list(range(50))}).shuffle(seed=0)
    with pytest.raises(ValueError, match="flatten_indices"):
        from_arrow(tmp_path / "s", shuffled, progress=False)
    assert not (tmp_path / "s").exists()
    from_arrow(tmp_path / "s", shuffled.flatten_indices(), progress=False)
    assert DenseDataset(tmp_path / "s")[:].tolist() == shuffled["id"]
