"""A user's script over the public API, typed: `make lint` checks it with ``mypy --strict``
(py/pyproject.toml, [tool.mypy]).

Each ``assert_type`` pins the type an IDE shows for a value, so an API that falls back to
``Any`` (or to no annotations) fails the check. The script also runs, on stores it writes into a
temporary directory: ``.venv/bin/python py/tests/typing/usage.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, assert_type

import numpy as np
import numpy.typing as npt

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset, pad
from loaderx.errors import CODES, StoreIndexError, StoreNotFoundError, ZrecordError
from loaderx.manifest import commit, stores
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord


def write(root: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(120, 8, 8), dtype=np.uint8)
    assert_type(from_numpy(root / "images", images), int)
    assert_type(from_numpy(str(root / "labels"), np.arange(120, dtype=np.int64), codec="raw"), int)
    assert_type(from_numpy(root / "more_images", images[:40], progress=False), int)
    assert_type(from_numpy(root / "more_labels", np.arange(40, dtype=np.int64)), int)
    tokens = [np.arange(n, dtype=np.int32) for n in range(1, 31)]
    assert_type(from_iterator(root / "tokens", tokens), int)
    assert_type(from_iterator(root / "blobs", iter([b"abc", b"de"]), codec="zstd"), int)


def read(root: Path) -> None:
    with DenseDataset(root / "images") as images:
        assert_type(len(images), int)
        assert_type(images[0:4], npt.NDArray[Any])
        assert_type(images[[1, 2, -1]], npt.NDArray[Any])
        assert_type(images[np.arange(3)], npt.NDArray[Any])
        assert_type(images.__getitems__(np.arange(3, dtype=np.uint64)), npt.NDArray[Any])
        assert_type(images.dtype, np.dtype[Any])
        assert_type(images.item_shape, tuple[int, ...])
        assert_type(images.codec, str)
        assert images[5].shape == (8, 8)
    tokens = RaggedDataset(root / "tokens", storage_options=None)
    assert_type(tokens[0], npt.NDArray[Any])
    assert_type(tokens[np.int64(1)], npt.NDArray[Any])
    assert_type(tokens[0:3], list[npt.NDArray[Any]])
    assert_type(tokens[[0, 2]], list[npt.NDArray[Any]])
    padded, lengths = pad(tokens[0:3], pad_value=-1)
    assert_type(padded, npt.NDArray[Any])
    assert_type(lengths, npt.NDArray[np.int64])
    assert padded.shape == (3, 3) and lengths.tolist() == [1, 2, 3]
    tokens.close()


def scale(batch: dict[str, Any]) -> tuple[npt.NDArray[np.float32], npt.NDArray[Any]]:
    return batch["image"].astype(np.float32) / 255, batch["label"]


def train(root: Path) -> None:
    images, labels = DenseDataset(root / "images"), DenseDataset(root / "labels")
    loader = DataLoader({"image": images, "label": labels}, num_workers=2, batch_size=10, mode=Sampler.Mode.CYCLIC)
    assert_type(loader, DataLoader[dict[str, Any]])
    batch = next(loader)
    assert_type(batch, dict[str, Any])
    assert batch["image"].shape == (10, 8, 8)
    state = loader.state_dict()
    assert_type(state, dict[str, Any])
    assert_type(loader.step, int)
    loader.close()

    with DataLoader({"image": images, "label": labels}, batch_size=10, mode="cyclic", transform=scale) as scaled:
        assert_type(scaled, DataLoader[tuple[npt.NDArray[np.float32], npt.NDArray[Any]]])
        scaled.load_state_dict(state)
        x, y = next(scaled)
        assert_type(x, npt.NDArray[np.float32])
        assert x.shape == (10, 8, 8) and y.shape == (10,)
        scaled.seek(5)
        for _step, (x, _) in zip(range(2), scaled):
            assert_type(x, npt.NDArray[np.float32])

    more = {"image": DenseDataset(root / "more_images"), "label": DenseDataset(root / "more_labels")}
    mixed = DataLoader.mix([{"image": images, "label": labels}, more], [3.0, 1.0], batch_size=8)
    assert_type(mixed, DataLoader[dict[str, Any]])
    assert_type(next(mixed), dict[str, Any])
    mixed.close()
    with DataLoader.mix([{"image": images, "label": labels}, more], [1, 1], batch_size=8, transform=scale) as pairs:
        assert_type(next(pairs)[0], npt.NDArray[np.float32])


def sample() -> None:
    sampler = Sampler(100, 10, Sampler.Mode.IID, seed=1)
    assert_type(sampler.next(), npt.NDArray[np.uint64])
    assert_type(sampler.batch_at(5), npt.NDArray[np.uint64])
    sampler.seek(2)
    assert_type(sampler.step, int)
    for idxs in sampler:
        assert_type(idxs, npt.NDArray[np.uint64])
        break


def manifests(root: Path) -> None:
    (root / "all").mkdir()
    listed = commit(root / "all", ["../images", root / "more_images"])
    assert_type(listed, list[tuple[str, int]])
    assert_type(stores(root / "all"), list[tuple[str, int]])
    with DenseDataset(root / "all") as both:
        assert len(both) == 160


def records(root: Path) -> None:
    with Zrecord(root / "raw", codec="raw") as store:
        assert_type(store.append(b"abcdef", [0, 3]), int)
        assert_type(store.append(np.zeros((2, 4), np.uint8), np.array([0, 4], np.uint64), codec="zstd"), int)
        assert_type(store.lengths([0, 1]), npt.NDArray[np.uint32])
        out = np.zeros(6, np.uint8)
        store.gather([0, 1], out, [0, 3])
        assert bytes(out) == b"abcdef"
        assert_type(store.stats(), dict[str, int])
        assert_type(store.verify(), tuple[int, list[tuple[int, str]]])
        store.sync()


def errors(root: Path) -> None:
    assert_type(CODES, dict[str, int])
    with DenseDataset(root / "labels") as labels:
        try:
            labels[[0, 1000]]
        except StoreIndexError as e:
            assert_type(e.code, int)
            assert_type(e.file, str | None)
            assert_type(e.index, int | None)
            assert e.code == CODES["index"]
        else:
            raise AssertionError("index 1000 of 120 records was accepted")
    try:
        DenseDataset(root / "missing")
    except FileNotFoundError as e:
        assert not isinstance(e, ZrecordError) or isinstance(e, StoreNotFoundError)
    assert_type(StoreNotFoundError.new("gone"), StoreNotFoundError)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root)
        read(root)
        train(root)
        sample()
        manifests(root)
        records(root)
        errors(root)
    print("usage: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
