"""Ray Data over loaderx, on a local Ray instance (2 CPUs): a Ray read of a store, a manifest or
several columns equals a direct read, in Arrow and NumPy blocks; a Ray conversion with a task
that fails once and is retried lists every record exactly once in the manifest, leaves no
store of the failed attempt behind, and the DataLoader trains from the result."""

import json
import os

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from loaderx import manifest  # noqa: E402
from loaderx.converter import from_iterator, from_numpy  # noqa: E402
from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.dataset import DenseDataset  # noqa: E402
from loaderx.ray import LoaderxDatasink, LoaderxDatasource  # noqa: E402

N = 3000


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's workers import this module for the functions the pipelines run.
    here = os.path.dirname(os.path.abspath(__file__))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": here}})
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    rng = np.random.default_rng(2)
    x = rng.random((N, 2, 3)).astype(np.float32)
    from_numpy(root / "x", x, progress=False)
    from_numpy(root / "id", np.arange(N), progress=False)
    rows = [np.full((k % 4 + 1, 2), k, np.int32) for k in range(N)]
    from_iterator(root / "rag", rows, progress=False)
    return root, x, rows


def by_id(batches):
    """Concatenated NumPy batches, ordered by their `id` column (Ray may reorder blocks)."""
    joined = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    order = np.argsort(joined["id"])
    return {k: v[order] for k, v in joined.items()}


@pytest.mark.parametrize("block_format", ["arrow", "numpy"])
def test_a_ray_read_equals_a_direct_read(stores, block_format):
    root, x, _ = stores
    source = LoaderxDatasource({"x": root / "x", "id": root / "id"}, block_format=block_format, batch_bytes=16 << 10)
    assert source.estimate_inmemory_data_size() == N * (24 + 8)
    tasks = source.get_read_tasks(4)
    assert [t.metadata.num_rows for t in tasks] == [750] * 4
    ds = ray.data.read_datasource(source, override_num_blocks=4)
    got = by_id(list(ds.iter_batches(batch_size=500, batch_format="numpy")))
    assert np.array_equal(got["id"], np.arange(N)) and got["x"].dtype == np.float32
    assert np.array_equal(got["x"], DenseDataset(root / "x")[:]) and np.array_equal(got["x"], x)


def test_a_ray_read_of_ragged_records_and_of_a_manifest(stores, tmp_path):
    root, _, rows = stores
    ds = ray.data.read_datasource(LoaderxDatasource({"r": root / "rag", "id": root / "id"}), override_num_blocks=3)
    got = {int(r["id"]): np.asarray(r["r"]) for r in ds.iter_rows()}
    assert len(got) == N and all(np.array_equal(got[k].reshape(-1, 2), rows[k]) for k in (0, 1, 777, N - 1))
    for k, (a, b) in enumerate([(0, 1000), (1000, N)]):
        from_numpy(tmp_path / f"p{k}", np.arange(a, b), progress=False)
    manifest.commit(tmp_path, ["p0", "p1"])
    ids = ray.data.read_datasource(LoaderxDatasource(tmp_path, column="id"), override_num_blocks=3)
    assert sorted(ids.to_pandas()["id"].tolist()) == list(range(N))


_calls = {}


def flaky_double(batch, marker):
    """Doubles `id`. The first task to reach its second batch fails there, once: after the sink
    has written the task's first batch."""
    task = ray.get_runtime_context().get_task_id()
    _calls[task] = _calls.get(task, 0) + 1
    if _calls[task] == 2 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("injected failure, once")
    return {"v": batch["id"] * 2}


def test_a_ray_conversion_with_a_retried_task_lists_each_record_once(tmp_path):
    marker = str(tmp_path / "failed-once")
    out = tmp_path / "converted"
    ctx = ray.data.DataContext.get_current()
    block_size, ctx.target_max_block_size = ctx.target_max_block_size, 1 << 10  # a block per batch
    retry = {"max_retries": 2, "retry_exceptions": True}  # Ray retries a failed task (the same on
    # both operators, so Ray fuses the map into the write: the failure comes after a write began)
    pipeline = ray.data.range(N, override_num_blocks=3).map_batches(
        flaky_double, fn_kwargs={"marker": marker}, batch_size=250, **retry)
    sink = LoaderxDatasink(out, column="v")
    try:
        pipeline.write_datasink(sink, ray_remote_args=retry)
    finally:
        ctx.target_max_block_size = block_size
    assert os.path.exists(marker), "the injected failure did not happen"
    assert len(sink.removed) == 1, "the failed attempt's store (begun before the failure) was not removed"
    listed = manifest.stores(out)
    assert sum(n for _, n in listed) == N and len(listed) >= 3  # a store per write task
    assert sorted(p.name for p in (out / "parts").iterdir()) == sorted(s.split("/")[1] for s, _ in listed)
    ds = DenseDataset(out, verify="always")
    assert np.array_equal(np.sort(ds[:]), np.arange(N) * 2)
    # Every store the sink wrote has checksums for every record (checksums.lx): a digest exists.
    assert all((p / "checksums.lx").is_file() for p in (out / "parts").iterdir())
    assert ds.digest is not None and ds.digest.startswith("sha256:")
    # Train from it: the loader over the manifest sees every record once per CYCLIC epoch.
    with DataLoader({"v": ds}, batch_size=100, mode=2, seed=1, num_workers=2) as loader:
        seen = np.concatenate([next(loader)["v"] for _ in range(N // 100)])
    assert np.array_equal(np.sort(seen), np.arange(N) * 2)
    json.loads((out / "manifest.json").read_text())  # one well-formed manifest


def always_fails(batch):
    raise RuntimeError("injected failure, always")


def test_a_failed_conversion_lists_nothing_and_leaves_no_store(tmp_path):
    out = tmp_path / "failed"
    with pytest.raises(Exception, match="injected failure"):
        ray.data.range(100).map_batches(always_fails).write_datasink(LoaderxDatasink(out, column="id"))
    assert not (out / "manifest.json").exists() and list((out / "parts").iterdir()) == []


def test_the_sink_refuses_an_ambiguous_column_and_takes_ray_tensors(tmp_path):
    with pytest.raises(Exception, match="pass column="):
        ray.data.from_items([{"a": 1, "b": 2}]).write_datasink(LoaderxDatasink(tmp_path / "amb"))
    ray.data.range_tensor(40, shape=(3, 2), override_num_blocks=2).write_datasink(LoaderxDatasink(tmp_path / "t"))
    t = DenseDataset(tmp_path / "t")
    assert t.item_shape == (3, 2) and sorted(int(v[0, 0]) for v in t[:]) == list(range(40))


def test_several_columns_go_to_manifests_that_line_up(tmp_path):
    items = [{"x": np.full(3, k, np.float32), "y": k} for k in range(500)]
    ray.data.from_items(items, override_num_blocks=4).write_datasink(LoaderxDatasink(tmp_path / "d", column=["x", "y"]))
    x, y = DenseDataset(tmp_path / "d" / "x"), DenseDataset(tmp_path / "d" / "y")
    assert len(x) == len(y) == 500 and np.array_equal(x[:][:, 0], y[:].astype(np.float32))
    with DataLoader({"x": x, "y": y}, batch_size=50, seed=0, num_workers=1) as loader:
        b = next(loader)
        assert np.array_equal(b["x"][:, 2], b["y"].astype(np.float32))
