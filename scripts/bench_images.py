"""Images/s for decode + RandomResizedCrop(224) + horizontal flip, batch 64, side by side in one
run (docs/benchmarks.md, "Images"). Runs in the torch venv (``make bench-images``):

* loaderx: ``DataLoader({"image": ImageDataset(store, 224, crop="random_resized", flip=True)})``
  with its default worker threads; decoding, cropping and resizing run on the engine's threads.
* torch: ``torch.utils.data.DataLoader`` with 4 worker processes over the JPEG files, each read,
  decoded by torchvision's ``decode_jpeg`` and transformed by v2 ``RandomResizedCrop(224,
  antialias=True)`` and ``RandomHorizontalFlip()``, collated to ``(64, 3, 224, 224)`` uint8.
* Pillow in loaderx's ``workers="processes"``: the store's raw bytes, decoded with Pillow, cropped
  and resized by ``Image.resize(box=...)`` (bilinear), mirrored, stacked, in 2 worker processes.
* The decode limit: libjpeg-turbo decoding the same files to RGB in a tight C loop on 2 threads
  (scripts/c/djpeg_loop.c), nothing else.
* Time to the first batch: a new loader's construction and first ``next()``, ours and torch's.

    PY scripts/bench_images.py [--count 2000] [--seconds 8] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import image_set  # noqa: E402

BATCH = 64
SIZE = 224


def _rate(batches, seconds, warm=2):
    """Images per second over about ``seconds``, after ``warm`` batches."""
    it = iter(batches)
    for _ in range(warm):
        next(it)
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        b = next(it)
        n += len(b["image"] if isinstance(b, dict) else b)
    return n / (time.perf_counter() - t)


# --- loaderx --------------------------------------------------------------------------------
def ours(store, seed=0):
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import ImageDataset

    ds = ImageDataset(store, SIZE, crop="random_resized", flip=True)
    return DataLoader({"image": ds}, batch_size=BATCH, seed=seed)


class PillowCrops:
    """A transform for loaderx's worker processes: Pillow decodes, crops, resizes and mirrors."""

    def __init__(self, seed):
        self.seed = seed

    def __call__(self, batch):
        from PIL import Image

        rng = np.random.default_rng([self.seed, int(batch["jpeg"][0][:64].sum())])
        out = np.empty((len(batch["jpeg"]), SIZE, SIZE, 3), np.uint8)
        for k, data in enumerate(batch["jpeg"]):
            with Image.open(io.BytesIO(data.tobytes())) as im:
                im = im.convert("RGB")
                w, h = im.size
                area = w * h * rng.uniform(0.08, 1.0)
                aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
                cw, ch = min(w, max(1, round((area * aspect) ** 0.5))), min(h, max(1, round((area / aspect) ** 0.5)))
                left, top = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                pic = im.resize((SIZE, SIZE), Image.BILINEAR, box=(left, top, left + cw, top + ch))
                if rng.random() < 0.5:
                    pic = pic.transpose(Image.FLIP_LEFT_RIGHT)
                out[k] = np.asarray(pic)
        return {"image": out}


def pillow_processes(store, seed=0):
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import RaggedDataset

    return DataLoader(
        {"jpeg": RaggedDataset(store)}, batch_size=BATCH, seed=seed, transform=PillowCrops(seed), workers="processes", num_workers=2
    )


# --- torch ----------------------------------------------------------------------------------
class TorchJpegs:
    """Map-style torch dataset over JPEG files: read, decode_jpeg, v2 transforms."""

    def __init__(self, files):
        self.files = [str(f) for f in files]
        self.t = None

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import torchvision
        from torchvision.transforms import v2

        if self.t is None:
            self.t = v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip()])
        return self.t(torchvision.io.decode_jpeg(torchvision.io.read_file(self.files[i])))


def torch_loader(files, workers=4):
    import torch

    dl = torch.utils.data.DataLoader(
        TorchJpegs(files), batch_size=BATCH, shuffle=True, num_workers=workers, persistent_workers=True, prefetch_factor=2
    )

    def endless():
        while True:
            yield from dl

    return endless()


# --- the decode limit -----------------------------------------------------------------------
def decode_limit(files, threads=2, rounds=3):
    src = Path(__file__).resolve().parent / "c" / "djpeg_loop.c"
    exe = Path(tempfile.gettempdir()) / "loaderx_djpeg_loop"
    subprocess.run(["gcc", "-O2", "-pthread", str(src), "-ljpeg", "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), str(threads), str(rounds), *map(str, files)], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def _first_batch(make):
    t = time.perf_counter()
    loader = make()
    next(iter(loader))
    took = time.perf_counter() - t
    close = getattr(loader, "close", None)
    if close:
        close()
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from loaderx.converter import from_images

    work = args.work or Path(tempfile.mkdtemp(prefix="lx-bench-images-"))
    files_dir, store = work / "jpegs", work / "store"
    if not store.exists():
        shutil.rmtree(files_dir, ignore_errors=True)
        files = image_set.write_tree(files_dir, args.count)
        from_images(store, files)
    files = sorted(files_dir.rglob("*.jpg"))
    # Warm the page cache for every reader alike.
    for f in files:
        f.read_bytes()

    rows = {}
    rows["decode_limit_libjpeg_turbo_2_threads"] = decode_limit(files)
    loader = ours(store)
    rows["loaderx"] = _rate(loader, args.seconds)
    loader.close()
    tl = torch_loader(files)
    rows["torch_4_workers"] = _rate(tl, args.seconds)
    del tl
    loader = pillow_processes(store)
    rows["pillow_loaderx_processes"] = _rate(loader, args.seconds)
    loader.close()
    rows["first_batch_s_loaderx"] = _first_batch(lambda: ours(store))
    rows["first_batch_s_torch"] = _first_batch(lambda: torch_loader(files))
    rows["vs_torch"] = rows["loaderx"] / rows["torch_4_workers"]
    rows["vs_decode_limit"] = rows["loaderx"] / rows["decode_limit_libjpeg_turbo_2_threads"]
    rows["vs_pillow_processes"] = rows["loaderx"] / rows["pillow_loaderx_processes"]
    if args.json:
        print(json.dumps(rows))
    else:
        for k, v in rows.items():
            print(f"{k:40s} {v:10.3f}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
