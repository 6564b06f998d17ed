"""Exclusion masks: records of a store that training skips, without rewriting the store.

A mask is a bitmap over a store's records saved with the store's identity, a SHA-256 of its
schema and its table (docs/format.md, "Exclusion masks"; the viewer and Node compute the same
identity). ``DataLoader({...}, exclude=mask)`` then samples from the kept records only: its
sampler runs over the ``kept`` records and each drawn index ``j`` reads the ``j``-th kept record
(a rank/select index in the engine, O(log n) per index), so batches stay a pure function of the
configuration and the step, and seek, resume, elastic resume and sharding stay exact.

A mask made for another store, or for this store after an append, a delete, a replace or a
compaction (each changes its table), is refused with :class:`~loaderx.errors.BadArgumentError`.

    >>> mask = Mask.build(dataset, exclude=[3, 17, 42])      # or a store path
    >>> mask.save("train.lxmask")
    >>> loader = DataLoader({"x": dataset}, exclude="train.lxmask")
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _loaderx
from ._typing import StrPath

__all__ = ["Mask", "identity", "joined_records"]


def _handle(store: Any, storage_options: dict[str, str] | None) -> _loaderx.Handle:
    """The engine handle of a dataset, or of the store or manifest at a path."""
    engine = getattr(store, "engine", None)
    if engine is not None:
        return engine  # type: ignore[no-any-return]
    from .manifest import _manifest_file

    location = os.fspath(store)
    listing = _manifest_file(location)
    if listing is not None:
        return _loaderx.Handle(os.fspath(listing), manifest=True, storage_options=storage_options)
    return _loaderx.Handle(location, create=False, storage_options=storage_options)


def identity(store: Any, storage_options: dict[str, str] | None = None) -> str:
    """The identity masks are made for (``"sha256:..."``): a dataset's, or the store's or
    manifest's at a path. Reads the schema and the table, never a record."""
    return "sha256:" + _handle(store, storage_options).mask_identity().hex()


class Mask:
    """An exclusion mask: which records of one store are excluded, and that store's identity."""

    def __init__(self, inner: _loaderx.Mask) -> None:
        self._m = inner

    @classmethod
    def build(cls, store: Any, exclude: Iterable[int] | npt.NDArray[np.integer[Any]], storage_options: dict[str, str] | None = None) -> Mask:
        """A mask of ``store`` (a dataset, or a store or manifest path) excluding the records
        ``exclude`` (any order; repeats allowed). An index past the end is an
        :class:`~loaderx.errors.StoreIndexError`; excluding every record a BadArgumentError."""
        handle = _handle(store, storage_options)
        idx = exclude if isinstance(exclude, np.ndarray) else np.asarray(list(exclude))
        if idx.size and (idx.dtype.kind not in "iu" or idx.min() < 0):
            raise ValueError("exclude takes record indices: non-negative integers")
        return cls(_loaderx.Mask.build(len(handle), handle.mask_identity(), np.ascontiguousarray(idx, dtype=np.uint64).ravel()))

    @classmethod
    def load(cls, path: StrPath) -> Mask:
        """Reads a mask file (a damaged one is a :class:`~loaderx.errors.CorruptStoreError`)."""
        return cls(_loaderx.Mask(Path(path).read_bytes()))

    def to_bytes(self) -> bytes:
        return self._m.to_bytes()

    def save(self, path: StrPath) -> None:
        """Writes the mask file (to a temporary name first, so a reader never sees half a mask)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(self.to_bytes())
        os.replace(tmp, path)

    @property
    def length(self) -> int:
        """Records of the store the mask is for."""
        return self._m.length

    @property
    def excluded(self) -> int:
        return self._m.excluded

    @property
    def kept(self) -> int:
        return self._m.kept

    @property
    def identity(self) -> str:
        """The identity (``"sha256:..."``) of the store the mask is for."""
        return self._m.identity

    @property
    def digest(self) -> str:
        """SHA-256 of the mask file: what a loader's state and receipt record."""
        return "sha256:" + hashlib.sha256(self.to_bytes()).hexdigest()

    def excluded_indices(self) -> npt.NDArray[np.uint64]:
        """The excluded records, ascending."""
        hit = self._m.excluded_at(np.arange(self.length, dtype=np.uint64))
        return np.flatnonzero(hit).astype(np.uint64)

    def select(self, idxs: npt.ArrayLike) -> npt.NDArray[np.uint64]:
        """The records at positions ``idxs`` of the kept records (each below :attr:`kept`)."""
        return self._m.select(np.ascontiguousarray(idxs, dtype=np.uint64).ravel())

    def check(self, store: Any, storage_options: dict[str, str] | None = None) -> None:
        """Refuses (BadArgumentError) a store this mask was not made for."""
        handle = _handle(store, storage_options)
        self._m.check(len(handle), handle.mask_identity())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"Mask({self.excluded} of {self.length} records excluded, for {self.identity[:19]}...)"


def _from_bytes(data: bytes) -> Mask:
    return Mask(_loaderx.Mask(data))


def as_mask(exclude: Mask | StrPath) -> Mask:
    """A Mask, or the mask file at a path."""
    return exclude if isinstance(exclude, Mask) else Mask.load(exclude)


def joined_records(lengths: list[int], masks: list[Mask | None], idxs: Any) -> npt.NDArray[np.uint64]:
    """Positions among the kept records of parts of ``lengths`` records joined in order (part
    ``j`` through ``masks[j]``, or all its records for None), as indices of the joined records:
    position ``g`` in part ``j`` is its kept record ``g - kept_before[j]``, at ``before[j] +
    select_j(...)``."""
    kept = [n if m is None else m.kept for n, m in zip(lengths, masks)]
    kept_before = np.concatenate([[0], np.cumsum(kept)]).astype(np.uint64)
    before = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint64)
    g = np.ascontiguousarray(idxs, dtype=np.uint64).ravel()
    part = np.searchsorted(kept_before, g, side="right") - 1
    out = np.empty_like(g)
    for k in np.unique(part):
        at = part == k
        local = g[at] - kept_before[k]
        mask = masks[k]
        out[at] = before[k] + (local if mask is None else mask.select(local))
    return out


class Masked:
    """Streams read through masks: the parts of ``dataset`` (its sources joined in order, of
    ``lengths``; one part for a single store) each through its mask (or none). Position ``g`` of
    the kept records is part ``j``'s kept record ``g - kept_before[j]``, read at
    ``lengths_before[j] + select_j(...)``. What a DataLoader with ``exclude=`` gathers from;
    pickles (the dataset by path, the masks as bytes)."""

    def __init__(self, dataset: Any, lengths: list[int], masks: list[Mask | None]) -> None:
        self.dataset = dataset
        self.lengths = list(lengths)
        self.masks = list(masks)
        #: Records kept of each part.
        self.kept = [n if m is None else m.kept for n, m in zip(self.lengths, self.masks)]
        self._kept_before = np.concatenate([[0], np.cumsum(self.kept)]).astype(np.uint64)

    @classmethod
    def one(cls, dataset: Any, mask: Mask) -> Masked:
        """One store's dataset through its mask."""
        return cls(dataset, [mask.length], [mask])

    def __len__(self) -> int:
        return int(self._kept_before[-1])

    def _map(self, idxs: Any) -> npt.NDArray[np.uint64]:
        return joined_records(self.lengths, self.masks, idxs)

    def __getitems__(self, idxs: Any) -> Any:
        return self.dataset.__getitems__(self._map(idxs))

    def __getattr__(self, name: str) -> Any:
        # item_shape, dtype, digest, engine...: the dataset's; at_step only where it has one.
        dataset = self.__dict__.get("dataset")
        if dataset is None or name.startswith("__"):
            raise AttributeError(name)
        if name == "at_step":
            inner = dataset.at_step
            return lambda idxs, step, seed: inner(self._map(idxs), step, seed)
        return getattr(dataset, name)
