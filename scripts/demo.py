#!/usr/bin/env python3
"""The loaderx demo (`make demo`).

1. Converts scikit-learn's bundled handwritten digits into stores (images and labels).
2. Trains a small NumPy softmax classifier for a few hundred steps from the endless DataLoader,
   with a progress bar, then prints the test accuracy and the loader's throughput.
3. Writes a larger generated image store (20,000 records of 64x64x3 uint8, 12 KiB each),
   streams it through the DataLoader and prints batches/s and MiB/s.

Usage: python scripts/demo.py [--workdir DIR] [--steps N] [--quick]
"""

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

try:
    from tqdm.auto import tqdm
except ImportError:  # the bar is a nicety; the demo runs without it
    tqdm = None


def digits_stores(work):
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.uint8)  # (1797, 8, 8), values 0..16
    labels = digits.target.astype(np.int64)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(images))
    test, train = order[:360], order[360:]
    for name, idx in (("train", train), ("test", test)):
        from_numpy(work / f"digits_{name}_x", images[idx], codec="zstd", progress=False)
        from_numpy(work / f"digits_{name}_y", labels[idx], codec="zstd", progress=False)
    print(f"digits: {len(train)} train / {len(test)} test images of 8x8, stored with zstd in {work}")
    return len(train)


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def train(work, steps, batch_size):
    streams = {"x": DenseDataset(work / "digits_train_x"), "y": DenseDataset(work / "digits_train_y")}

    def collate(batch):
        return {"x": batch["x"].reshape(len(batch["x"]), -1).astype(np.float32) / 16.0, "y": batch["y"]}

    w = np.zeros((64, 10), dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    lr = 0.5
    loader = DataLoader(streams, num_workers=2, batch_size=batch_size, mode=2, seed=0, transform=collate)
    # A live bar on a terminal; plain lines every 100 steps in logs.
    bar = tqdm(total=steps, desc="training", unit="step", mininterval=0.2) if tqdm and sys.stderr.isatty() else None
    loss = float("nan")
    waited = 0.0
    start = time.perf_counter()
    for step in range(steps):
        t = time.perf_counter()
        batch = next(loader)
        waited += time.perf_counter() - t
        x, y = batch["x"], batch["y"]
        p = softmax(x @ w + b)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-9).mean())
        p[np.arange(len(y)), y] -= 1.0
        w -= lr * (x.T @ p) / len(y)
        b -= lr * p.mean(axis=0)
        if bar:
            bar.update(1)
            if step % 20 == 0:
                bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        elif step % 100 == 0 or step == steps - 1:
            print(f"training: step {step + 1}/{steps}, loss {loss:.3f}", flush=True)
    elapsed = time.perf_counter() - start
    if bar:
        bar.close()
    loader.close()
    tx, ty = DenseDataset(work / "digits_test_x"), DenseDataset(work / "digits_test_y")
    x = tx[:].reshape(len(tx), -1).astype(np.float32) / 16.0
    accuracy = float((np.argmax(x @ w + b, axis=1) == ty[:]).mean())
    print(f"trained {steps} steps of {batch_size}: final loss {loss:.3f}, test accuracy {accuracy:.1%}")
    print(
        f"loader: {steps / elapsed:.0f} steps/s end to end; the training loop waited "
        f"{waited / steps * 1e6:.0f} us per batch for data"
    )
    return accuracy


def image_stream(work, n, batches):
    path = work / "images_64x64x3"
    if not (path / "schema.msgpack").exists():
        rng = np.random.default_rng(1)
        yy, xx = np.mgrid[0:64, 0:64]

        def block(start, count):
            # Smooth colour gradients plus a little noise: mildly compressible, like photos.
            phase = rng.random((count, 1, 1, 3)) * 6.28
            base = 127 + 100 * np.sin(phase + (xx[None, :, :, None] + yy[None, :, :, None]) / 9.0)
            noise = rng.integers(-4, 5, size=(count, 64, 64, 3))
            return np.clip(base + noise, 0, 255).astype(np.uint8)

        images = np.lib.format.open_memmap(work / "images.npy", mode="w+", dtype=np.uint8, shape=(n, 64, 64, 3))
        for start in range(0, n, 2000):
            images[start : start + 2000] = block(start, min(2000, n - start))
        images.flush()
        from_numpy(path, np.load(work / "images.npy", mmap_mode="r"), codec="zstd")
        (work / "images.npy").unlink()
    ds = DenseDataset(path)
    stats = ds._store.stats()
    print(
        f"image store: {len(ds)} records of {ds.item_shape} {ds.dtype} "
        f"({ds._row_bytes >> 10} KiB each), zstd ratio {len(ds) * ds._row_bytes / stats['live_bytes']:.2f}x"
    )
    loader = DataLoader({"image": ds}, num_workers=4, batch_size=256, mode=1, seed=0)
    for _ in range(5):
        next(loader)
    start = time.perf_counter()
    for _ in range(batches):
        next(loader)
    elapsed = time.perf_counter() - start
    loader.close()
    mib = batches * 256 * ds._row_bytes / (1 << 20)
    print(f"streamed {batches} batches of 256: {batches / elapsed:.0f} batches/s, {mib / elapsed:.0f} MiB/s")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default="demo-data", help="where the stores go (default: ./demo-data)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="smaller image store and fewer steps")
    args = parser.parse_args()
    work = Path(args.workdir)
    for old in work.glob("digits_*"):
        shutil.rmtree(old)
    work.mkdir(parents=True, exist_ok=True)
    digits_stores(work)
    steps = 100 if args.quick else args.steps
    accuracy = train(work, steps, 64)
    path = image_stream(work, 4000 if args.quick else 20_000, 50 if args.quick else 200)
    print(f"\ninspect the stores: loaderx info {path}   (the command comes with the package)")
    if accuracy < 0.8:
        sys.exit(f"test accuracy {accuracy:.1%} is below 80%: something is wrong")


if __name__ == "__main__":
    main()
