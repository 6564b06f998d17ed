"""Train a small classifier on scikit-learn's digits with torch, checkpoint, and resume exactly.

The loader runs inside torchdata's StatefulDataLoader (two worker processes) through
``loaderx.torch.IterableDataset``, so the checkpoint holds the loader's position next to the
model and the optimizer. A run stopped with ``--stop-at K`` and continued with ``--resume``
ends with the very same weights as a run that never stopped:

    python examples/torch_digits.py --workdir /tmp/digits --steps 300
    python examples/torch_digits.py --workdir /tmp/digits --steps 300 --stop-at 120
    python examples/torch_digits.py --workdir /tmp/digits --steps 300 --resume
"""

import argparse
import hashlib
import tempfile
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torchdata.stateful_dataloader import StatefulDataLoader

import loaderx.torch as lt
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset


def write_stores(workdir):
    """The digits as two stores: 8x8 images scaled to [0, 1] and their labels."""
    if not (workdir / "labels").exists():
        digits = load_digits()
        from_numpy(workdir / "images", (digits.data / 16).astype(np.float32), progress=False)
        from_numpy(workdir / "labels", digits.target.astype(np.int64), progress=False)
    return {"x": DenseDataset(workdir / "images"), "y": DenseDataset(workdir / "labels")}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "loaderx-torch-digits")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--stop-at", type=int, help="save a checkpoint after this many steps and stop")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --workdir")
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    checkpoint = args.workdir / "checkpoint.pt"

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: the same float sums in every run
    streams = write_stores(args.workdir)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = StatefulDataLoader(
        lt.IterableDataset(DataLoader(streams, batch_size=64, seed=0)), batch_size=None, num_workers=2
    )
    step = 0
    if args.resume:
        saved = torch.load(checkpoint)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        loader.load_state_dict(saved["loader"])
        step = saved["step"]

    batches = iter(loader)
    while step < args.steps:
        batch = next(batches)
        loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step == args.stop_at:
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader.state_dict(), "step": step}
            torch.save(state, checkpoint)
            print(f"checkpoint at step {step}")
            return

    with torch.no_grad():
        x, y = streams["x"][:], streams["y"][:]
        accuracy = (model(torch.from_numpy(x)).argmax(1).numpy() == y).mean()
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in model.parameters())).hexdigest()
    print(f"accuracy {accuracy:.4f}")
    print(f"weights {digest[:16]}")


if __name__ == "__main__":
    main()
