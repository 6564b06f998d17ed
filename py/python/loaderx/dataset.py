"""Typed NumPy views over a store, one class per record shape.

Drop-in compatible with ``loaderx.dataset`` of loaderx 0.9.11. A ``schema.msgpack`` in the store
records the per-row dtype, ``item_shape`` and ``kind``:

* :class:`DenseDataset`: every record is exactly one row of ``item_shape``. A read gathers at a
  fixed stride straight into the array it returns, and a record of the wrong size is an error.
  This is what :class:`loaderx.dataloader.DataLoader` reads.
* :class:`RaggedDataset`: a record is ``(rows, *item_shape)``; a read returns a list of arrays.
  :func:`pad` turns such a list into a dense batch.

Indexing takes an int (negative counts from the end), a slice, a list or integer array, or a
boolean mask, and out-of-range indices raise :class:`IndexError`. Datasets pickle by path and
reopen their store after ``fork()``, so they work inside torch ``DataLoader`` workers.
"""

import operator
import os
from pathlib import Path

import numpy as np

from . import _loaderx
from .arrow import Exports
from .manifest import _manifest_file, _Records
from .zrecord import CODECS, SCHEMA, Zrecord, _engine_ready, _indices, _location

__all__ = ["DenseDataset", "RaggedDataset", "pad"]


def pad(records, max_len=None, pad_value=0):
    """Pad a list of ragged arrays into a dense ``(B, max_len, *tail)`` stack.

    Returns ``(padded, lengths)``, where ``lengths`` is each record's row count. ``max_len``
    defaults to the longest record; a record longer than an explicit ``max_len`` is an error,
    never a silent truncation.
    """
    b = len(records)
    if b == 0:
        raise ValueError("pad needs at least one record")
    records = [np.asarray(r) for r in records]
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    longest = int(lengths.max())
    ml = longest if max_len is None else int(max_len)
    if longest > ml:
        raise ValueError(f"a record has {longest} rows, over max_len={ml}")
    first = records[0]
    padded = np.full((b, ml, *first.shape[1:]), pad_value, dtype=first.dtype)
    for i, r in enumerate(records):
        padded[i, : len(r)] = r
    return padded, lengths


def _open(path, kind, storage_options, cache):
    """The store at ``path`` (a directory or a URL), or the stores of a manifest
    (:mod:`loaderx.manifest`), and the schema, checked for ``kind`` by the engine. Opening never
    creates a store."""
    where = _location(path)
    missing = FileNotFoundError(f"{os.fspath(where)}: no {SCHEMA} there; it is not a loaderx dataset")
    listed = _manifest_file(where)
    if listed is not None:
        store = _Records(listed, storage_options, cache)
    elif isinstance(where, Path) and not (where / "meta.zr").is_file():
        raise missing
    else:
        store = Zrecord._existing(where, storage_options, cache)
    schema = store._s.schema()
    if schema is None:
        store.close()
        raise missing
    schema.validate(kind)
    return store, schema


class _Base(Exports):
    """What both kinds share: the schema, the store handle and index parsing."""

    _kind = None

    def __init__(self, path, storage_options=None, cache=None):
        self._store, self._schema = _open(path, self._kind, storage_options, cache)
        self.path = self._store.path
        self.dtype = np.dtype(self._schema.dtype)
        self.item_shape = tuple(self._schema.item_shape)
        self._row_bytes = self._schema.item_bytes
        self.schema = self._schema.to_dict()
        codec = self._schema.codec
        self.codec = codec if codec is not None else "zstd"
        self._store.codec = self.codec if self.codec in CODECS else "zstd"

    def __len__(self):
        return len(self._store)

    def __repr__(self):
        return f"{type(self).__name__}({os.fspath(self.path)!r}, {len(self)} x {self.item_shape} {self.dtype})"

    def __reduce__(self):
        return (type(self), (os.fspath(self.path), self._store.storage_options, self._store.cache))

    def _idxs(self, idx):
        """Any supported index as a contiguous uint64 array, bounds-checked (by the engine)."""
        if _engine_ready(idx):  # what samplers and loaders pass; small batches are mostly overhead
            return idx
        n = len(self)
        if isinstance(idx, slice):
            return np.arange(*idx.indices(n), dtype=np.uint64)
        if isinstance(idx, (int, np.integer)):
            idx = [operator.index(idx)]
        a = np.asarray(idx) if not isinstance(idx, np.ndarray) else idx
        if a.dtype == np.bool_:
            if a.shape != (n,):
                raise IndexError(f"boolean mask of shape {a.shape} does not match a dataset of {n} records")
            return np.flatnonzero(a).astype(np.uint64)
        return _indices(idx, n)

    def _listing(self):
        """For a dataset over a manifest, its stores as listed with their records (what a loader
        state records, so a state from another set of stores is refused); None for one store."""
        listing = getattr(self._store, "listing", None)
        return listing() if listing is not None else None

    def __getitem__(self, idx):
        if isinstance(idx, (int, np.integer)):
            return self.__getitems__(idx)[0]
        return self.__getitems__(idx)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()

    def close(self):
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
            self._store = None


class DenseDataset(_Base):
    """Fixed-shape records: ``ds[idxs]`` is an array of shape ``(len(idxs), *item_shape)``,
    ``ds[i]`` one sample of shape ``item_shape``."""

    _kind = "dense"

    def __getitems__(self, idxs):
        idxs = self._idxs(idxs)
        flat = self._store._s.gather_fixed_new(idxs, self._row_bytes)
        return flat.view(self.dtype).reshape((idxs.size, *self.item_shape))


class RaggedDataset(_Base):
    """Variable-length records: ``ds[i]`` is one ``(rows, *item_shape)`` array, ``ds[idxs]``
    a list of them (views into one gathered buffer)."""

    _kind = "ragged"

    def __getitems__(self, idxs):
        idxs = self._idxs(idxs)
        # One engine call: every length checked against the schema, the records back to back in
        # a recycled buffer. The samples are views into it, cut at Python-int row bounds.
        flat, byte_lens = self._store._s.gather_ragged_new(idxs, self._schema)
        values = flat.view(self.dtype).reshape((flat.size // self._row_bytes, *self.item_shape))
        ends = np.cumsum(byte_lens // self._row_bytes, dtype=np.int64).tolist()
        return [values[a:b] for a, b in zip([0, *ends], ends)]
