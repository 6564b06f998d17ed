"""Convert a dataset on Ray into manifests of loaderx stores, then train from them.

A local Ray instance (2 CPUs) stands in for a cluster: Ray Data reads scikit-learn's digits,
normalizes them in parallel tasks, and ``LoaderxDatasink`` writes the image and label columns,
each task its own stores, committed into one manifest per column when the job completes. The
DataLoader then trains a softmax regression (NumPy) from the manifests, as from any store.

    python examples/ray_convert.py --workdir /tmp/ray-demo
"""

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import ray
from sklearn.datasets import load_digits

from loaderx import manifest
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.ray import LoaderxDatasink, LoaderxDatasource


def normalize(batch):
    return {"x": (batch["x"] / 16).astype(np.float32), "y": batch["y"].astype(np.int64)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="loaderx-ray-")))
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False

    digits = load_digits()
    source = ray.data.from_items([{"x": x, "y": int(y)} for x, y in zip(digits.data, digits.target)],
                                 override_num_blocks=4)
    source.map_batches(normalize).write_datasink(LoaderxDatasink(args.workdir / "digits", column=["x", "y"]))
    for column in ("x", "y"):
        listed = manifest.stores(args.workdir / "digits" / column)
        print(f"manifest {column}: {len(listed)} stores, {sum(n for _, n in listed)} records")

    # Reading back through Ray gives the same records (any order).
    back = ray.data.read_datasource(LoaderxDatasource(args.workdir / "digits" / "y", column="y"))
    print(f"ray read: {back.count()} labels, sum {back.sum('y')} (source sum {int(digits.target.sum())})")
    ray.shutdown()

    streams = {"x": DenseDataset(args.workdir / "digits" / "x"), "y": DenseDataset(args.workdir / "digits" / "y")}
    w, b = np.zeros((64, 10), np.float32), np.zeros(10, np.float32)
    with DataLoader(streams, batch_size=64, seed=0) as loader:
        for step in range(args.steps):
            batch = next(loader)
            logits = batch["x"] @ w + b
            probs = np.exp(logits - logits.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            probs[np.arange(len(probs)), batch["y"]] -= 1  # the softmax cross-entropy gradient
            w -= 0.5 * batch["x"].T @ probs / len(probs)
            b -= 0.5 * probs.mean(0)
    x, y = streams["x"][:], streams["y"][:]
    print(f"accuracy {((x @ w + b).argmax(1) == y).mean():.4f}")


if __name__ == "__main__":
    main()
