"""Image sets for the image tests, benchmarks and example, made from the photographs that
scikit-learn and scikit-image ship (nothing is downloaded).

``jpegs(n)`` gives ImageNet-like JPEGs: each a random part (40-100 % of the area) of one of the
photographs, resized to 500x375 (a quarter of them 375x500), at quality 90 (or the qualities
given). Its class is the photograph it came from, so a small CNN can learn to tell them apart.
``oddities()`` gives the inputs a decoder must also take: PNG of every colour type and depth,
grey, CMYK and progressive JPEG, EXIF-rotated JPEGs, and lossy and lossless WebP.

    python scripts/image_set.py OUT_DIR --count 2000     # OUT_DIR/<class>/<k>.jpg
"""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

import numpy as np
from PIL import Image

#: The photographs, as (package, file): colour pictures of distinct scenes.
PHOTOS = [
    ("sklearn", "china.jpg"),
    ("sklearn", "flower.jpg"),
    ("skimage", "astronaut.png"),
    ("skimage", "chelsea.png"),
    ("skimage", "coffee.png"),
    ("skimage", "rocket.jpg"),
    ("skimage", "motorcycle_left.png"),
    ("skimage", "hubble_deep_field.jpg"),
]


def _photo_path(package: str, name: str) -> Path:
    if package == "sklearn":
        import sklearn.datasets

        return Path(sklearn.datasets.__file__).parent / "images" / name
    import skimage

    return Path(skimage.__file__).parent / "data" / name


def photos() -> list[Image.Image]:
    """The photographs as RGB images."""
    return [Image.open(_photo_path(p, n)).convert("RGB") for p, n in PHOTOS]


def _encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def jpegs(n: int, seed: int = 0, qualities: tuple[int, ...] = (90,), size: tuple[int, int] = (500, 375)) -> list[tuple[bytes, int]]:
    """``n`` JPEGs with their class (the photograph's number), deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    sources = photos()
    out = []
    for k in range(n):
        cls = k % len(sources)
        src = sources[cls]
        w, h = size if rng.random() >= 0.25 else size[::-1]
        share = rng.uniform(0.4, 1.0)
        # The largest part of the photograph with the output's aspect, scaled by the share.
        fit = min(src.width / w, src.height / h)
        cw, ch = max(8, int(w * fit * np.sqrt(share))), max(8, int(h * fit * np.sqrt(share)))
        left = int(rng.integers(0, src.width - cw + 1))
        top = int(rng.integers(0, src.height - ch + 1))
        part = src.resize((w, h), Image.BILINEAR, box=(left, top, left + cw, top + ch))
        if rng.random() < 0.5:
            part = part.transpose(Image.FLIP_LEFT_RIGHT)
        quality = int(qualities[k % len(qualities)])
        out.append((_encode(part, "JPEG", quality=quality), cls))
    return out


def _with_orientation(img: Image.Image, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _encode(img, "JPEG", quality=95, exif=exif.tobytes())


def oddities() -> dict[str, bytes]:
    """Named encoded images of every kind the decoders must take."""
    src = photos()[3].resize((120, 80), Image.BILINEAR)
    rgb = np.asarray(src)
    alpha = Image.fromarray(np.dstack([rgb, np.full(rgb.shape[:2], 128, np.uint8)]))
    grey = src.convert("L")
    deep = Image.fromarray(np.asarray(grey).astype(np.uint16) * 257)
    return {
        "rgb.png": _encode(src, "PNG"),
        "rgba.png": _encode(alpha, "PNG"),
        "grey.png": _encode(grey, "PNG"),
        "grey_alpha.png": _encode(grey.convert("LA"), "PNG"),
        "palette.png": _encode(src.convert("P", palette=Image.ADAPTIVE, colors=64), "PNG"),
        "grey16.png": _encode(deep, "PNG"),
        "rgb.jpg": _encode(src, "JPEG", quality=90),
        "grey.jpg": _encode(grey, "JPEG", quality=90),
        "cmyk.jpg": _encode(src.convert("CMYK"), "JPEG", quality=90),
        "progressive.jpg": _encode(src, "JPEG", quality=90, progressive=True),
        "subsampling444.jpg": _encode(src, "JPEG", quality=90, subsampling=0),
        "exif3.jpg": _with_orientation(src, 3),
        "exif6.jpg": _with_orientation(src, 6),
        "exif8.jpg": _with_orientation(src, 8),
        "lossy.webp": _encode(src, "WEBP", quality=90),
        "lossless.webp": _encode(src, "WEBP", lossless=True),
    }


def write_tree(out: Path, count: int, seed: int = 0) -> list[Path]:
    """``count`` JPEGs as ``out/<class>/<k>.jpg``; returns their paths."""
    paths = []
    for k, (data, cls) in enumerate(jpegs(count, seed)):
        p = out / f"{cls:02d}" / f"{k:06d}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    paths = write_tree(args.out, args.count, args.seed)
    total = sum(os.path.getsize(p) for p in paths)
    print(f"{len(paths)} JPEGs in {args.out} ({total / len(paths) / 1e3:.0f} kB each)")


if __name__ == "__main__":
    main()
