"""Writes the loader-state fixtures: states saved by loaderx 0.10.0, for py/tests/test_loader_state.py
and py/tests_ml/test_loader_state_ml.py, which check that they still load and resume exactly.

    PYTHONPATH=py/python python py/tests/fixtures_gen/loader_states.py py/tests/fixtures/loader_states

Each case is one JSON file: the ``setup`` that rebuilds the loader (over the data
:func:`build_data` writes, which depends on nothing but this file), the ``state`` the loader saved
after taking ``state.step`` batches, and ``next``: the ids of the batches (or, for a
BatchSampler, the index lists) it returned right after saving. The file was run once, on 0.10.0
(commit 863b138); do not regenerate the committed files with later code, since they pin what
0.10.0 wrote. The torch and jax cases are written only where those packages import.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

N = 103  # records of the id store: not a multiple of the batch
B = 12  # the global batch, divisible by 1, 2, 3, 4 and 6
TAKE_AFTER = 3  # batches recorded after each saved state

#: name -> (kind, setup, steps taken before saving)
CASES: dict[str, tuple[str, dict[str, Any], int]] = {
    "plain_iid": ("loader", {"data": "ids", "mode": 1, "seed": 5}, 7),
    "plain_cyclic": ("loader", {"data": "ids", "mode": 2, "seed": 11}, 13),
    "sequential_two_streams": ("loader", {"data": "ids+sq", "mode": 0, "seed": 42}, 10),
    "sharded_rank1_of_2": ("loader", {"data": "ids", "mode": 2, "seed": 11, "shard_index": 1, "shard_count": 2}, 9),
    "manifest": ("loader", {"data": "manifest", "mode": 2, "seed": 3}, 11),
    "mix_2_1": ("mix", {"data": "mix", "mode": 2, "seed": 11, "weights": [2, 1]}, 8),
    "mix_sharded_rank2_of_3": (
        "mix",
        {"data": "mix", "mode": 1, "seed": 7, "weights": [2, 1], "shard_index": 2, "shard_count": 3},
        6,
    ),
    "torch_iterable": ("torch_iterable", {"data": "ids", "mode": 2, "seed": 11}, 5),
    "torch_batch_sampler": (
        "torch_batch_sampler",
        {"length": N, "mode": 2, "seed": 11, "shard_index": 1, "shard_count": 2},
        4,
    ),
    "jax": ("jax", {"data": "ids", "mode": 2, "seed": 11}, 6),
}


def build_data(root: Path) -> dict[str, Any]:
    """The stores every case reads, written below ``root``: ids ``0..N``, their squares, the same
    ids as a manifest of three stores, and two sources (ids 1000.., 2000..) for a mix."""
    from loaderx import manifest
    from loaderx.converter import from_numpy

    ids = np.arange(N, dtype=np.int64)
    from_numpy(root / "ids", ids, codec="zstd", progress=False)
    from_numpy(root / "sq", ids * ids, progress=False)
    for k, (a, b) in enumerate([(0, 40), (40, 41), (41, N)]):
        from_numpy(root / "parts" / f"p{k}", np.arange(a, b, dtype=np.int64), progress=False)
    manifest.commit(root / "parts", ["p0", "p1", "p2"])
    from_numpy(root / "web", 1000 + np.arange(61, dtype=np.int64), progress=False)
    from_numpy(root / "books", 2000 + np.arange(29, dtype=np.int64), progress=False)
    return {
        "ids": {"id": root / "ids"},
        "ids+sq": {"id": root / "ids", "sq": root / "sq"},
        "manifest": {"id": root / "parts"},
        "mix": [{"id": root / "web"}, {"id": root / "books"}],
    }


def _streams(paths: dict[str, Path]) -> dict[str, Any]:
    from loaderx.dataset import DenseDataset

    return {name: DenseDataset(path) for name, path in paths.items()}


def make(kind: str, setup: dict[str, Any], data: dict[str, Any], **override: Any) -> Any:
    """The loader (or torch dataset or sampler) a case describes; ``override`` replaces setup keys
    (another shard, say)."""
    s = {**setup, **override}
    shard = {k: s[k] for k in ("shard_index", "shard_count") if k in s}
    common = dict(batch_size=B, mode=s.get("mode", 1), seed=s.get("seed", 42), num_workers=2, **shard)
    if kind == "loader":
        from loaderx.dataloader import DataLoader

        return DataLoader(_streams(data[s["data"]]), **common)
    if kind == "mix":
        from loaderx.dataloader import DataLoader

        return DataLoader.mix([_streams(src) for src in data[s["data"]]], s["weights"], **common)
    if kind == "torch_iterable":
        import loaderx.torch as lt
        from loaderx.dataloader import DataLoader

        return lt.IterableDataset(DataLoader(_streams(data[s["data"]]), **common))
    if kind == "torch_batch_sampler":
        import loaderx.torch as lt

        return lt.BatchSampler(s["length"], B, s["mode"], s["seed"], **shard)
    if kind == "jax":
        import loaderx.jax as lj

        return lj.DataLoader(_streams(data[s["data"]]), shard_index=0, shard_count=1, **common)
    raise ValueError(f"unknown case kind {kind!r}")


def ids_of(batch: Any) -> list[int]:
    """A batch as a list of ints: the ``id`` stream of a loader batch, or a sampler's indices."""
    if isinstance(batch, dict):
        batch = batch["id"]
    return [int(v) for v in np.asarray(batch).ravel()]


def run_case(kind: str, setup: dict[str, Any], steps: int, data: dict[str, Any]) -> dict[str, Any]:
    """Take ``steps`` batches, save the state, take TAKE_AFTER more."""
    obj = make(kind, setup, data)
    if kind == "torch_batch_sampler":
        it = iter(obj)
        for _ in range(steps):
            next(it)
        state = obj.state_dict()
        after = [ids_of(next(it)) for _ in range(TAKE_AFTER)]
        return {"state": state, "next": after}
    if kind == "torch_iterable":
        it = iter(obj)  # no torch workers: this process iterates the loader
        for _ in range(steps):
            next(it)
        state = obj.state_dict()
        after = [ids_of({"id": next(it)["id"].numpy()}) for _ in range(TAKE_AFTER)]
        obj.loader.close()
        return {"state": state, "next": after}
    with obj:
        for _ in range(steps):
            next(obj)
        state = obj.state_dict()
        after = [ids_of(next(obj)) for _ in range(TAKE_AFTER)]
    return {"state": state, "next": after}


def main(out: Path) -> None:
    import tempfile

    import loaderx

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = build_data(Path(tmp))
        for name, (kind, setup, steps) in CASES.items():
            try:
                got = run_case(kind, setup, steps, data)
            except ImportError as e:
                print(f"skipped {name}: {e}", file=sys.stderr)
                continue
            doc = {"loaderx": loaderx.__version__, "kind": kind, "setup": setup, **got}
            (out / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            print(f"wrote {name}.json (step {got['state']['step']})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
