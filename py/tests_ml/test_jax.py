"""loaderx.jax: each batch is one global jax.Array of shape (batch_size, ...), equal to the base
DataLoader's batch for the same (seed, step), sharded over the devices; across 2 real JAX
processes (jax.distributed on CPU) each process gathers only its rows and both see the same
global batch; resume, mixing and the construction checks work as documented.

In this process JAX has 4 CPU devices (XLA_FLAGS is set before jax is imported). The
multi-process test runs this file as a script: ``python test_jax.py worker ID PORT STORE``.
"""

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import hashlib  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import loaderx.jax as lxj  # noqa: E402
from loaderx.converter import from_numpy  # noqa: E402
from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.dataset import DenseDataset  # noqa: E402

N, B, SEED = 1000, 32, 7


def write_store(root, n=N, offset=0):
    """x: 8 small integers per record (float32, so sums are exact), y: int32 labels."""
    x = ((offset + np.arange(n * 8)) % 251).astype(np.float32).reshape(n, 8)
    from_numpy(root / "x", x, progress=False)
    from_numpy(root / "y", (offset + np.arange(n, dtype=np.int32)) % 10, progress=False)
    return root


def streams(root):
    return {"x": DenseDataset(root / "x"), "y": DenseDataset(root / "y")}


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("jax"))


@pytest.fixture(scope="module", autouse=True)
def four_devices():
    devices = jax.devices()
    assert len(devices) == 4 and all(d.platform == "cpu" for d in devices), (
        f"these tests need 4 CPU devices (XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}), got {devices}; "
        "was jax initialised before this module set XLA_FLAGS?"
    )


def base_batches(root, steps, **kw):
    with DataLoader(streams(root), num_workers=2, batch_size=B, seed=SEED, **kw) as lx:
        return [next(lx) for _ in range(steps)]


def test_sharding_splits_the_batch_axis_over_all_devices():
    s = lxj.sharding()
    assert isinstance(s, NamedSharding) and s.spec == PartitionSpec("data")
    assert list(s.mesh.devices) == jax.devices() and s.mesh.axis_names == ("data",)
    two = lxj.sharding("batch", jax.devices()[:2])
    assert two.spec == PartitionSpec("batch") and list(two.mesh.devices) == jax.devices()[:2]


def test_global_arrays_equal_the_base_batches_and_are_sharded_over_4_devices(store):
    want = base_batches(store, 5)
    seen = []

    def record(batch):  # runs on the workers: still NumPy there
        seen.append({name: type(v) for name, v in batch.items()})
        return batch

    with lxj.DataLoader(streams(store), num_workers=2, batch_size=B, seed=SEED, transform=record) as lx:
        assert (lx.shard_index, lx.shard_count) == (0, 1)  # jax_shard() of the single process
        for k, w in enumerate(want):
            got = next(lx)
            assert sorted(got) == ["x", "y"]
            for name, item_shape in (("x", (8,)), ("y", ())):
                arr = got[name]
                assert isinstance(arr, jax.Array) and arr.shape == (B, *item_shape), (k, name)
                assert arr.dtype == w[name].dtype
                assert arr.sharding == lx.sharding
                assert np.array_equal(np.asarray(arr), w[name]), f"step {k} {name} differs from the base loader"
                shards = arr.addressable_shards
                assert len(shards) == 4 and {s.device for s in shards} == set(jax.devices())
                starts = sorted(s.index[0].start for s in shards)
                assert starts == [0, 8, 16, 24]
                for s in shards:
                    assert s.data.shape == (B // 4, *item_shape)
                    assert np.array_equal(np.asarray(s.data), w[name][s.index[0]])
    assert seen and all(t == {"x": np.ndarray, "y": np.ndarray} for t in seen)


def test_a_2d_mesh_needs_only_the_batch_axis_to_divide(store):
    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))
    spec = NamedSharding(mesh, PartitionSpec("data"))
    with lxj.DataLoader(streams(store), num_workers=1, batch_size=34, seed=SEED, sharding=spec) as lx:
        got = next(lx)["x"]
    with DataLoader(streams(store), num_workers=1, batch_size=34, seed=SEED) as base:
        want = next(base)["x"]
    assert got.shape == (34, 8) and np.array_equal(np.asarray(got), want)
    assert sorted(s.data.shape for s in got.addressable_shards) == [(17, 8)] * 4  # replicated over "model"


def test_resume_from_a_state_gives_the_same_batches(store):
    with lxj.DataLoader(streams(store), num_workers=2, batch_size=B, seed=SEED) as a:
        for _ in range(3):
            next(a)
        state = json.loads(json.dumps(a.state_dict()))
        assert state["step"] == 3
        want = [np.asarray(next(a)["x"]) for _ in range(4)]
    with lxj.DataLoader(streams(store), num_workers=2, batch_size=B, seed=SEED) as b:
        b.load_state_dict(state)
        got = [np.asarray(next(b)["x"]) for _ in range(4)]
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    # The state is the base loader's: it resumes a plain DataLoader on another shard count too.
    with DataLoader(streams(store), num_workers=1, batch_size=B, seed=SEED, shard_index=1, shard_count=2) as c:
        c.load_state_dict(state)
        assert np.array_equal(next(c)["x"], want[0][B // 2 :])


def test_a_batch_that_does_not_split_over_the_devices_is_refused(store):
    with pytest.raises(ValueError, match=r"per-process batch 30 .*batch_size 30 / shard_count 1.* 4 shards .*multiple of 4"):
        lxj.DataLoader(streams(store), batch_size=30)
    two = lxj.sharding(devices=jax.devices()[:2])
    with lxj.DataLoader(streams(store), num_workers=1, batch_size=30, seed=SEED, sharding=two) as lx:
        assert next(lx)["x"].shape == (30, 8)


def test_a_shard_the_sharding_does_not_put_on_this_process_is_refused(store):
    # One process holds every device, so the sharding puts the whole batch here: shard 1 of 2
    # (rows 16..32) is not what its devices hold.
    with pytest.raises(ValueError, match=r"hold rows \[0, 32\) .*shard 1 of 2 is rows \[16, 32\)"):
        lxj.DataLoader(streams(store), batch_size=B, shard_index=1, shard_count=2)


def test_leaves_must_be_per_process_batches(store):
    def summarize(batch):
        return {"x": batch["x"], "mean": batch["x"].mean(axis=0)}

    with lxj.DataLoader(streams(store), num_workers=1, batch_size=B, transform=summarize) as lx:
        with pytest.raises(ValueError, match=r"leaf \['mean'\] has shape \(8,\).*32 rows"):
            next(lx)

    def tag(batch):  # leaves that are not arrays (a NumPy scalar is not) stay as they are
        return {"x": batch["x"], "name": "digits", "total": batch["x"].sum()}

    with lxj.DataLoader(streams(store), num_workers=1, batch_size=B, transform=tag) as lx:
        got = next(lx)
    assert got["name"] == "digits" and isinstance(got["total"], np.float32) and isinstance(got["x"], jax.Array)


def test_mix_returns_global_arrays(tmp_path):
    a, b = write_store(tmp_path / "a", 300), write_store(tmp_path / "b", 200, offset=100_000)
    kw = dict(batch_size=B, seed=SEED, num_workers=2)
    with DataLoader.mix([streams(a), streams(b)], [0.7, 0.3], **kw) as base:
        want = [next(base) for _ in range(4)]
    with lxj.DataLoader.mix([streams(a), streams(b)], [0.7, 0.3], **kw) as lx:
        assert isinstance(lx, lxj.DataLoader)
        first = [next(lx) for _ in range(2)]
        state = lx.state_dict()
    with lxj.DataLoader.mix([streams(a), streams(b)], [0.7, 0.3], sharding=lxj.sharding(), **kw) as lx:
        lx.load_state_dict(state)
        got = first + [next(lx) for _ in range(2)]
    for g, w in zip(got, want):
        for name in ("x", "y"):
            assert isinstance(g[name], jax.Array) and len(g[name].addressable_shards) == 4
            assert np.array_equal(np.asarray(g[name]), w[name])


def test_pickling_is_refused_with_advice(store):
    with lxj.DataLoader(streams(store), num_workers=1, batch_size=B) as lx:
        with pytest.raises(TypeError, match="build the loader in each process"):
            pickle.dumps(lx)


# --- Two real JAX processes (jax.distributed, CPU collectives), 2 devices each. -------------

STEPS, SAVE_AT = 4, 2


def worker(process_id, port, root):
    """One of 2 processes: prints, per step, what it holds and what the global batch gives."""
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    from jax.experimental import multihost_utils

    assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
    total = jax.jit(lambda x: x.sum())
    with lxj.DataLoader(streams(root), num_workers=2, batch_size=B, seed=SEED) as lx:
        out = {"shard": [lx.shard_index, lx.shard_count], "steps": []}
        for k in range(STEPS):
            if k == SAVE_AT:
                out["state"] = lx.state_dict()
            batch = next(lx)
            x = batch["x"]
            local = sorted(x.addressable_shards, key=lambda s: s.index[0].start)
            out["steps"].append(
                {
                    "shape": list(x.shape),
                    "local": digest(np.concatenate([np.asarray(s.data) for s in local])),
                    "sum": float(total(x)),
                    "x": digest(multihost_utils.process_allgather(x, tiled=True)),
                    "y": digest(multihost_utils.process_allgather(batch["y"], tiled=True)),
                }
            )
    print("RESULT " + json.dumps(out), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_build_the_same_global_batches(store):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    port = free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", str(i), str(port), str(store)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    results = []
    for i, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"process {i} did not finish in 120 s")
        assert p.returncode == 0, f"process {i} failed:\n{err[-3000:]}"
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, out
        results.append(json.loads(lines[0][len("RESULT ") :]))

    want = base_batches(store, STEPS)
    for i, r in enumerate(results):
        assert r["shard"] == [i, 2]
        for k, (got, w) in enumerate(zip(r["steps"], want)):
            assert got["shape"] == [B, 8]
            assert got["local"] == digest(w["x"][i * B // 2 : (i + 1) * B // 2]), f"process {i} step {k}: wrong rows"
            assert got["sum"] == float(w["x"].sum()), f"process {i} step {k}: jitted sum of the global batch"
            assert got["x"] == digest(w["x"]) and got["y"] == digest(w["y"]), f"process {i} step {k}"
    # Elastic: the state either process saved resumes a single-process loader at the same step.
    assert results[0]["state"] == results[1]["state"]
    with lxj.DataLoader(streams(store), num_workers=1, batch_size=B, seed=SEED) as lx:
        lx.load_state_dict(results[1]["state"])
        assert digest(np.asarray(next(lx)["x"])) == results[0]["steps"][SAVE_AT]["x"]


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    from pathlib import Path

    worker(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))


def test_packed_loaders_give_global_arrays_and_metrics(tmp_path):
    from loaderx.converter import from_iterator
    from loaderx.dataset import RaggedDataset

    rng = np.random.default_rng(3)
    from_iterator(tmp_path / "docs", iter([rng.integers(1, 500, int(n)).astype(np.int32) for n in rng.integers(1, 90, 200)]), progress=False)
    kw = dict(seq_len=64, batch_size=8, packing="best_fit", mode="cyclic", seed=SEED)
    with DataLoader.packed(RaggedDataset(tmp_path / "docs"), num_workers=2, **kw) as base:
        want = [next(base) for _ in range(3)]
    lx = lxj.DataLoader.packed(RaggedDataset(tmp_path / "docs"), **kw)
    for w in want:
        got = next(lx)
        assert set(got) == set(w)
        for key, value in got.items():
            assert isinstance(value, jax.Array) and value.shape == (8, 64) and len(value.sharding.device_set) == 4
            assert np.array_equal(np.asarray(value), w[key]), key
    assert lx.metrics()["next"]["count"] == 3
    lx.close()
