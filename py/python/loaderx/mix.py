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
from .dataset import DenseDataset

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


class _Joined:
    """Several datasets with the same record layout as one index space, in order."""

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts]).astype(np.uint64)
        self._rows: tuple[np.dtype[Any], tuple[int, ...], int] | None = None
        layouts = {(p.dtype, p.item_shape) for p in self.parts if isinstance(p, DenseDataset)}
        if len(layouts) == 1 and all(isinstance(p, DenseDataset) for p in self.parts):
            dtype, shape = layouts.pop()
            self._rows = (dtype, shape, self.parts[0]._row_bytes)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __repr__(self) -> str:
        return f"mix of [{', '.join(map(repr, self.parts))}]"

    def _listing(self) -> list[Any] | None:
        parts = [_listing(p) for p in self.parts]
        return parts if any(p is not None for p in parts) else None

    def __getitems__(self, idxs: npt.ArrayLike) -> Any:
        at: npt.NDArray[Any]  # where one part's records go in the batch
        out: Any  # the batch: an array, or a list of ragged records
        idxs = np.asarray(idxs, dtype=np.uint64)
        which = np.searchsorted(self.offsets, idxs, side="right") - 1
        if self._rows is not None:
            # Dense parts: each part's records go straight into their rows of the batch.
            dtype, shape, row_bytes = self._rows
            out = np.empty((idxs.size, *shape), dtype=dtype)
            flat = out.reshape(-1).view(np.uint8)
            for j in np.unique(which):
                at = np.flatnonzero(which == j).astype(np.uint64)
                self.parts[j]._open_store()._s.gather_rows(idxs[at] - self.offsets[j], flat, at, row_bytes)
            return out
        pieces: dict[int, tuple[npt.NDArray[Any], npt.NDArray[Any] | list[npt.NDArray[Any]]]] = {}
        for j in np.unique(which):
            at = np.flatnonzero(which == j)
            pieces[int(j)] = (at, self.parts[j].__getitems__(idxs[at] - self.offsets[j]))
        first = next(iter(pieces.values()))[1]
        if isinstance(first, np.ndarray):
            out = np.empty((idxs.size, *first.shape[1:]), dtype=first.dtype)
            for at, got in pieces.values():
                out[at] = got
            return out
        out = [None] * idxs.size
        for at, got in pieces.values():
            for k, record in zip(at, got):
                out[k] = record
        return out
