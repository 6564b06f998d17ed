"""Weighted mixing of datasets for :meth:`loaderx.dataloader.DataLoader.mix`.

Every batch holds exactly ``counts[j]`` records of dataset ``j``: the largest-remainder
apportionment of the batch size by the weights, the same at every step (each count is within 1
of ``batch_size * w_j / sum(w)``). Proportions are exact per batch, not only in expectation.
Each dataset reads its own stream (the sampler's stream of batch size 1 in the loader's mode),
so batch ``k`` is a pure function of the seed and ``k``, unaffected by the worker count. The
datasets are interleaved within a batch by one fixed pattern, so a shard (a slice of the global
batch) holds each dataset within 2 records of its share.

A loader state records where each dataset's stream stands. It loads into a loader over the same
datasets (same lengths, seed, mode and global batch) with the same or new weights: with new
weights each stream continues where it stood, taking a new number of records per batch.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from . import _loaderx
from .dataset import DenseDataset, RaggedDataset

__all__ = ["MixSampler"]


class MixSampler:
    """Batches of indices into the datasets' joined index space (dataset ``j``'s record ``e`` is
    ``sum(lengths[:j]) + e``), for the DataLoader. Pickles with its position."""

    def __init__(
        self,
        lengths: Sequence[int],
        weights: Sequence[float],
        batch_size: int,
        mode: int,
        seed: int,
        base: tuple[int, Sequence[int]] | None = None,
    ) -> None:
        self.lengths = [int(n) for n in lengths]
        self.weights = [float(w) for w in weights]
        self.batch_size = int(batch_size)
        self.mode = int(mode)
        self.seed = int(seed)
        self._s = _loaderx.Mixer(self.lengths, self.weights, self.batch_size, self.mode, self.seed)
        self._base: tuple[int, list[int]] | None = None
        if base is not None:
            self.rebase(*base)

    @property
    def batch_len(self) -> int:
        """Records per batch."""
        return int(self._s.batch_len)

    @property
    def counts(self) -> list[int]:
        """Records per batch of each dataset."""
        return list(self._s.counts)

    def batch_at(self, step: int) -> npt.NDArray[np.uint64]:
        return self._s.batch_at(int(step))

    def positions_at(self, step: int) -> list[int]:
        """Where each dataset's stream stands before ``step``."""
        return list(self._s.positions_at(int(step)))

    def rebase(self, step: int, positions: Sequence[int]) -> None:
        """Continue each stream from ``positions`` at ``step``."""
        self._s.rebase(int(step), [int(p) for p in positions])
        self._base = (int(step), [int(p) for p in positions])

    def __reduce__(self) -> tuple[Any, ...]:
        return (MixSampler, (self.lengths, self.weights, self.batch_size, self.mode, self.seed, self._base))


def _listing(ds: object) -> Any:
    """``ds._listing()`` where a dataset has one (manifests, joined sources), else None."""
    listing = getattr(ds, "_listing", None)
    return listing() if listing is not None else None


def _joined(parts: Sequence[Any]) -> Any:
    """One stream's sources as one dataset over their joined index space (dataset ``j``'s record
    ``e`` is ``sum(lengths[:j]) + e``), read by the engine's join."""
    first = parts[0]
    if not isinstance(first, (DenseDataset, RaggedDataset)) or any(type(p) is not type(first) for p in parts):
        kinds = ", ".join(type(p).__name__ for p in parts)
        raise TypeError(
            f"DataLoader.mix reads loaderx datasets: each stream's sources must all be DenseDataset or all "
            f"RaggedDataset, got {kinds}"
        )
    return type(first)._join(parts)
