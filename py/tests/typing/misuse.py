"""Misuse that the typed API rejects: `make lint` checks this file with ``mypy --strict``.

Every line below is a mistake a type checker must catch, each silenced by its own
``# type: ignore[code]``. The config warns about unused ignores, so an API that falls back to
``Any`` (or to no annotations) fails the check here: the mistake is no longer seen, and the
ignore is reported. Never run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset, pad
from loaderx.errors import ZrecordError
from loaderx.manifest import commit
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord


def mistakes(images: DenseDataset, tokens: RaggedDataset, error: ZrecordError) -> None:
    from_numpy("out", [[1, 2], [3, 4]])  # type: ignore[arg-type]
    from_numpy("out", np.zeros(3), chunk_bytes="64M")  # type: ignore[arg-type]
    from_iterator(42, [b"abc"])  # type: ignore[arg-type]
    DenseDataset(["a", "b"])  # type: ignore[arg-type]
    images["a"]  # type: ignore[index]
    shape: list[int] = images.item_shape  # type: ignore[assignment]
    record: list[Any] = tokens[0]  # type: ignore[assignment]
    pad(tokens[0:2], max_len="4")  # type: ignore[arg-type]
    DataLoader([images])  # type: ignore[arg-type]
    loader = DataLoader({"image": images}, batch_size=16)
    text: str = next(loader)  # type: ignore[assignment]
    loader.load_state_dict([0])  # type: ignore[arg-type]
    loader.seek("3")  # type: ignore[arg-type]
    Sampler(100, 10, 1).batch_at(None)  # type: ignore[arg-type]
    DataLoader.mix({"image": images}, [1.0])  # type: ignore[arg-type]
    commit("manifest.json", [1, 2])  # type: ignore[list-item]
    Zrecord("raw").append(b"abc", [0], codec=3)  # type: ignore[arg-type]
    code: str = error.code  # type: ignore[assignment]
