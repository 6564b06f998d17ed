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
a store whose length changed since it was listed, or that is missing, is an error naming it;
after appending to listed stores, :func:`refresh` lists their new lengths.

Stores may be local paths (relative ones are relative to the manifest's directory) or URLs;
the manifest itself is a local file. Datasets over a manifest are read-only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from . import _loaderx
from .errors import BadArgumentError, CorruptStoreError, StoreNotFoundError
from .zrecord import _location, _shown, _writable

if TYPE_CHECKING:
    from ._typing import Cache, StrPath

__all__ = ["MANIFEST_FILE", "commit", "refresh", "stores"]

MANIFEST_FILE = _loaderx.MANIFEST_FILE


def _manifest_file(path: StrPath) -> Path | str | None:
    """The manifest file ``path`` names (the file itself, or ``manifest.json`` in a directory
    that is not a store), or None when ``path`` is not a manifest (native's one rule, which the
    CLI and the JS package follow too). A manifest at a URL is named by its ``.json`` object and
    kept as the URL string."""
    found = _loaderx.manifest_file(os.fspath(path))
    if found is None:
        return None
    return os.fspath(path) if _loaderx.is_url(os.fspath(path)) else Path(found)


def commit(path: StrPath, stores: Iterable[StrPath], storage_options: dict[str, str] | None = None) -> list[tuple[str, int]]:
    """Add ``stores`` to the manifest at ``path`` (a ``.json`` file, or a directory to hold
    ``manifest.json``), creating it if there is none.

    ``stores`` are listed as given: paths relative to the manifest's directory, absolute paths,
    or URLs (local paths normalized, so ``./A/`` is listed as ``A``). The manifest's directory
    is created if missing. Every store is opened and checked before anything is written; a store
    of another layout, a missing store or one listed twice (under any spelling) raises and leaves
    the manifest as it was. Commit a local manifest from one process at a time.

    ``path`` may be an ``s3://``, ``gs://`` or ``az://`` URL (a ``.json`` object, or a prefix to
    hold ``manifest.json``; relative store paths are relative to its prefix). Then any number
    of processes on any machines may commit at once: each commit writes only if the manifest is
    still the version it read (``If-Match``, or ``If-None-Match`` for a new one), and a commit
    that loses the race reads the new manifest and tries again, so no entry is ever lost. One
    that keeps losing (12 attempts) raises :class:`~loaderx.errors.StoreLockedError`. Open a
    remote manifest by its ``.json`` URL. Returns the listed ``(store, records)`` pairs.
    """
    if isinstance(stores, (str, bytes, os.PathLike)):
        raise TypeError(f"stores is a list of stores, got one {type(stores).__name__}: commit(path, [store])")
    where = _location(path)
    if isinstance(where, str):
        # A manifest on object storage: committed with conditional writes (see the docstring).
        url = where if where.lower().endswith(".json") else f"{where.rstrip('/')}/{MANIFEST_FILE}"
        if url.split("://", 1)[0].lower() in ("http", "https"):
            raise BadArgumentError.new(f"cannot commit a manifest to {_shown(url)}: HTTP URLs are read-only")
        return _loaderx.commit(url, [_spelling(s) for s in stores], storage_options)
    p = _writable(path, "commit a manifest to")
    if p.is_dir() or p.suffix != ".json":
        p = p / MANIFEST_FILE
    listed = [_spelling(s) for s in stores]
    _check_twice(p, listed)
    made = [d for d in (p.parent, *p.parent.parents) if not d.exists()]
    for d in reversed(made):  # the manifest's directory, as a converter makes a store's
        d.mkdir()
    try:
        return _loaderx.commit(os.fspath(p), listed, storage_options)
    except BaseException:
        for d in made:
            try:
                d.rmdir()
            except OSError:
                break
        raise


def refresh(path: StrPath, storage_options: dict[str, str] | None = None) -> list[tuple[str, int]]:
    """Re-read the length of every store the manifest at ``path`` lists, after stores grew
    (appended to with a converter), and replace the manifest atomically with the new lengths.

    A dataset opened over a manifest refuses a store whose length changed since it was listed
    (its records would shift under every index after it); ``refresh`` is how the change is
    accepted. The stores are checked as :func:`commit` checks them. Returns the listed
    ``(store, records)`` pairs.
    """
    found = _manifest_file(_location(path))
    if found is None:
        raise StoreNotFoundError.new(f"{_shown(os.fspath(path))}: no {MANIFEST_FILE} there")
    if isinstance(found, str):
        raise BadArgumentError.new(
            f"{_shown(found)}: a manifest at a URL lists stores that never change (stores at URLs are "
            "written once); commit new stores to it instead"
        )
    try:
        listed = [entry["path"] for entry in json.loads(found.read_text())["stores"]]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptStoreError.new(f"{found}: not a loaderx manifest ({type(e).__name__}: {e})", file=os.fspath(found)) from None
    fresh = found.with_name(f".{found.name}.refresh-{os.getpid()}.json")
    try:
        pairs = _loaderx.commit(os.fspath(fresh), listed, storage_options)
        os.replace(fresh, found)  # the engine wrote and synced it; the rename is atomic
        _sync_dir(found.parent)
    finally:
        if fresh.exists():
            fresh.unlink()
    return pairs


def _sync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not openable as a file (Windows): the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _spelling(store: StrPath) -> str:
    """How a store is listed: URLs as given, local paths normalized (``./A/`` and ``A`` are one
    spelling), so one store is never listed under two names."""
    s = os.fspath(store)
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    where = _location(s)
    return where if isinstance(where, str) else os.path.normpath(where)


def _check_twice(manifest_file: Path, new: list[str]) -> None:
    """Refuse a store that the manifest (or this commit) would list twice under different
    spellings (a relative and an absolute path, or through a symlink)."""
    seen: dict[str, str] = {}
    already: list[str] = []
    if manifest_file.is_file():
        try:
            already = [entry["path"] for entry in json.loads(manifest_file.read_text())["stores"]]
        except (ValueError, KeyError, TypeError):
            return  # the engine reports the damaged manifest
    for listed in [*already, *new]:
        where = _location(listed)
        key = where if isinstance(where, str) else os.path.realpath(manifest_file.parent / where)
        if key in seen:
            this, other = _shown(listed), _shown(seen[key])
            which = f"{this} is listed twice" if seen[key] == listed else f"{this} and {other} are the same store"
            raise BadArgumentError.new(f"{which}; a manifest lists each store once")
        seen[key] = listed


def stores(path: StrPath) -> list[tuple[str, int]]:
    """The ``(store, records)`` pairs the manifest at ``path`` lists, each checked."""
    found = _manifest_file(_location(path))
    if found is None:
        raise StoreNotFoundError.new(f"{_shown(os.fspath(path))}: no {MANIFEST_FILE} there")
    many = _loaderx.Handle(os.fspath(found), manifest=True)
    try:
        return many.stores
    finally:
        many.close()


class _Records:
    """A manifest's stores as a dataset reads them (the part of Zrecord a dataset uses)."""

    codec = "zstd"

    def __init__(
        self, path: StrPath, storage_options: dict[str, str] | None = None, cache: Cache | None = None, verify: str = "fetched"
    ) -> None:
        from .zrecord import _cache, _verify_mode

        self.path: Path | str = path if isinstance(path, str) and _loaderx.is_url(path) else Path(path)
        self.storage_options = dict(storage_options) if storage_options else None
        self.cache = _cache(cache)
        self.verify_mode = _verify_mode(verify)
        cache_dir, cache_bytes = self.cache or (None, None)
        self.engine = _loaderx.Handle(
            os.fspath(path), manifest=True, storage_options=self.storage_options, cache_dir=cache_dir, cache_bytes=cache_bytes
        )
        self.engine.set_verify(self.verify_mode)

    def set_verify(self, verify: str) -> None:
        from .zrecord import _verify_mode

        self.verify_mode = _verify_mode(verify)
        self.engine.set_verify(self.verify_mode)

    def __len__(self) -> int:
        return len(self.engine)

    def listing(self) -> list[list[Any]]:
        """The stores as listed, with their records: ``[[store, records], ...]``."""
        return [[path, int(n)] for path, n in self.engine.stores]

    def gather(self, idxs: npt.NDArray[np.uint64], dst: npt.NDArray[np.uint8], offsets: npt.NDArray[np.uint64]) -> None:
        self.engine.gather(idxs, dst, offsets)

    def close(self) -> None:
        self.engine.close()


class _Joined:
    """Datasets' stores read as one index space, in order (``Handle.join``, the engine's join):
    the part of Zrecord a dataset uses. Read-only; closing it leaves the parts open."""

    codec = "zstd"
    storage_options = None
    cache = None

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        self.path = " + ".join(os.fspath(p.path) for p in self.parts)  # what reprs show
        self.engine = _loaderx.Handle.join([p.engine for p in self.parts])

    @property
    def verify_mode(self) -> str:
        modes = {p.verify_mode for p in self.parts}
        return modes.pop() if len(modes) == 1 else "mixed"

    def set_verify(self, verify: str) -> None:
        for p in self.parts:
            p._set_verify(verify)

    def __len__(self) -> int:
        return len(self.engine)

    def listing(self) -> list[Any] | None:
        """Each part's listing (None for a part that is one store), or None if no part has one."""
        parts = [p._listing() for p in self.parts]
        return parts if any(p is not None for p in parts) else None

    def close(self) -> None:
        self.engine.close()
