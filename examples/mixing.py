"""Mix two datasets 70/30, checkpoint, and resume with new weights on a different number of ranks.

Source 0 is scikit-learn's digits; source 1 the same digits shifted one pixel right (a stand-in
for a second, augmented or synthetic dataset). Both have the streams ``x`` (image), ``y`` (label)
and ``src`` (which source, so the shares can be counted). Every batch holds exactly 70% of
source 0, not only on average. The checkpoint records where each source's stream stands, so the
run continues with 50/50 weights, on two ranks that split each global batch.

    python examples/mixing.py --workdir /tmp/mixing
"""

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

BATCH = 20


def write_source(root, images, labels, src):
    if not (root / "src").exists():
        from_numpy(root / "x", images.astype(np.float32), progress=False)
        from_numpy(root / "y", labels.astype(np.int64), progress=False)
        from_numpy(root / "src", np.full(len(labels), src, np.int8), progress=False)
    return {name: DenseDataset(root / name) for name in ("x", "y", "src")}


def shares(batch):
    return f"source 0: {int((batch['src'] == 0).sum()):2d}  source 1: {int((batch['src'] == 1).sum()):2d}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "loaderx-mixing")
    args = p.parse_args()
    digits = load_digits()
    images = digits.images / 16
    shifted = np.roll(images, 1, axis=2)
    sources = [
        write_source(args.workdir / "digits", images.reshape(-1, 64), digits.target, 0),
        write_source(args.workdir / "shifted", shifted.reshape(-1, 64), digits.target, 1),
    ]

    with DataLoader.mix(sources, weights=[0.7, 0.3], batch_size=BATCH, seed=1) as loader:
        for _ in range(3):
            batch = next(loader)
            print(f"step {loader.step - 1} weights 0.7/0.3  {shares(batch)}")
        checkpoint = json.dumps(loader.state_dict())  # what a training loop would save
    print("checkpoint at step", json.loads(checkpoint)["step"])

    # Resume with new weights on two ranks: each takes half of every global batch.
    state = json.loads(checkpoint)
    ranks = [
        DataLoader.mix(sources, weights=[0.5, 0.5], batch_size=BATCH, seed=1, shard_index=r, shard_count=2)
        for r in range(2)
    ]
    for r in ranks:
        r.load_state_dict(state)
    for _ in range(3):
        halves = [next(r) for r in ranks]
        joined = {name: np.concatenate([h[name] for h in halves]) for name in halves[0]}
        print(f"step {ranks[0].step - 1} weights 0.5/0.5  {shares(joined)}  (rank 0 has {len(halves[0]['y'])} records)")
    for r in ranks:
        r.close()


if __name__ == "__main__":
    main()
