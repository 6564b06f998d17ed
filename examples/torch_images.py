"""Train a small CNN on a store of JPEGs: the engine decodes, crops and flips on its own threads.

The JPEGs are made from the photographs scikit-learn and scikit-image ship (scripts/image_set.py:
random parts of eight photographs, 500x375 at quality 90, in one folder per photograph). They are
stored as they are with ``from_images``, their labels with ``from_numpy``, and read by an
``ImageDataset`` with torchvision's ``RandomResizedCrop`` and a horizontal flip for training and a
centre crop for testing. The network learns which photograph a crop came from:

    python examples/torch_images.py --workdir /tmp/photos --steps 300
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from loaderx.converter import from_images, from_numpy, image_files
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, ImageDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import image_set  # noqa: E402

SIZE = 64


def write_split(workdir, name, count, seed):
    """``count`` JPEGs in folders by class, then the image store and the label store."""
    if not (workdir / f"{name}-labels").exists():
        image_set.write_tree(workdir / f"{name}-jpegs", count, seed=seed)
        files = image_files(workdir / f"{name}-jpegs")
        from_images(workdir / f"{name}-images", files, progress=False)
        labels = np.array([int(f.parent.name) for f in files], dtype=np.int64)
        from_numpy(workdir / f"{name}-labels", labels, progress=False)
    return DenseDataset(workdir / f"{name}-labels")


def as_input(pictures):
    """(B, H, W, 3) uint8 pictures as the (B, 3, H, W) float input of the network."""
    return torch.from_numpy(pictures).permute(0, 3, 1, 2).float().div_(255.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "loaderx-torch-images")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--count", type=int, default=1600, help="training JPEGs (200 per class)")
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    train_labels = write_split(args.workdir, "train", args.count, seed=0)
    test_labels = write_split(args.workdir, "test", 400, seed=1)
    classes = len(image_set.PHOTOS)
    train = ImageDataset(args.workdir / "train-images", SIZE, crop="random_resized", scale=(0.25, 1.0), flip=True)
    loader = DataLoader({"image": train, "label": train_labels}, batch_size=64, seed=0)
    print(f"store: {len(train)} JPEGs ({train.media}), pictures {train.item_shape} {train.dtype}")

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, classes),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        batch = next(loader)
        loss = torch.nn.functional.cross_entropy(model(as_input(batch["image"])), torch.from_numpy(batch["label"]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    loader.close()
    print(f"trained {args.steps} steps in {time.perf_counter() - t0:.1f} s")

    test = ImageDataset(args.workdir / "test-images", SIZE, crop="center")
    idx = np.arange(len(test))
    with torch.no_grad():
        predicted = model(as_input(test[idx])).argmax(1).numpy()
    accuracy = float((predicted == test_labels[idx]).mean())
    print(f"accuracy {accuracy:.3f} on {len(test)} held-out JPEGs ({classes} classes)")


if __name__ == "__main__":
    main()
