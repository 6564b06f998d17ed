"""Many stores as one dataset.

A manifest (``manifest.json``) lists stores in order, each with the number of records it held
when it was added, and the record layout they share. :class:`loaderx.dataset.DenseDataset` and
:class:`~loaderx.dataset.RaggedDataset` open a manifest like a store: by the file's path, or by
a directory that holds ``manifest.json`` and no store of its own. Global index ``i`` is record
``i - offset`` of the store it falls in, so the DataLoader, the Sampler, sharding and resume
work over it unchanged, and a gather that spans stores reads them in parallel.

Build a big dataset with independent writers: each writes its own store (with
:func:`loaderx.converter.from_numpy` or ``from_iterator``), then one :func:`commit` lists them
all. The commit opens and checks every store first (the layout must match the others'), then
replaces the manifest atomically: a reader sees the old list or the new one, and a store that
failed or is still being written is never listed. Opening checks every store against its entry:
a store whose length changed since it was listed, or that is missing, is an error naming it.

Stores may be local paths (relative ones are relative to the manifest's directory) or URLs;
the manifest itself is a local file. Datasets over a manifest are read-only.
"""

import os
from pathlib import Path

from . import _loaderx

__all__ = ["MANIFEST_FILE", "commit", "stores"]

MANIFEST_FILE = "manifest.json"


def _manifest_file(path):
    """The manifest file ``path`` names (the file itself, or ``manifest.json`` in a directory
    that is not a store), or None when ``path`` is not a manifest."""
    if isinstance(path, str) and _loaderx.is_url(path):
        return None
    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        return p
    if p.is_dir() and (p / MANIFEST_FILE).is_file() and not (p / "meta.zr").exists():
        return p / MANIFEST_FILE
    return None


def commit(path, stores, storage_options=None):
    """Add ``stores`` to the manifest at ``path`` (a ``.json`` file, or a directory to hold
    ``manifest.json``), creating it if there is none.

    ``stores`` are listed as given: paths relative to the manifest's directory, absolute paths,
    or URLs. Every store is opened and checked before anything is written; a store of another
    layout, a missing store or one listed twice raises and leaves the manifest as it was.
    Commit from one process at a time. Returns the listed ``(store, records)`` pairs.
    """
    p = Path(path)
    if p.is_dir() or p.suffix != ".json":
        p = p / MANIFEST_FILE
    return _loaderx.commit(os.fspath(p), [os.fspath(s) for s in stores], storage_options)


def stores(path):
    """The ``(store, records)`` pairs the manifest at ``path`` lists, each checked."""
    found = _manifest_file(path)
    if found is None:
        raise FileNotFoundError(f"{os.fspath(path)}: no {MANIFEST_FILE} there")
    many = _loaderx.Many(os.fspath(found))
    try:
        return many.stores
    finally:
        many.close()


class _Records:
    """A manifest's stores as a dataset reads them (the part of Zrecord a dataset uses)."""

    codec = "zstd"

    def __init__(self, path, storage_options=None, cache=None):
        from .zrecord import _cache

        self.path = Path(path)
        self.storage_options = dict(storage_options) if storage_options else None
        self.cache = _cache(cache)
        cache_dir, cache_bytes = self.cache or (None, None)
        self._s = _loaderx.Many(os.fspath(path), self.storage_options, None, cache_dir, cache_bytes)

    def __len__(self):
        return len(self._s)

    def listing(self):
        """The stores as listed, with their records: ``[[store, records], ...]``."""
        return [[path, int(n)] for path, n in self._s.stores]

    def gather(self, idxs, dst, offsets):
        self._s.gather(idxs, dst, offsets)

    def close(self):
        self._s.close()
