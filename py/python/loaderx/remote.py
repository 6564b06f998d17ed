"""Putting stores on object storage: :func:`copy` sends a local store's live bytes to an
``s3://``, ``gs://`` or ``az://`` URL (``loaderx cp`` on the command line).

Only the bytes that hold data go up: the table up to the store's length and each chunk up to its
last record, never the sparse space writers preallocate (each chunk file is 4 GiB apparent,
``meta.zr`` 256 MiB), so a 200 MB store sends about 200 MB where a generic copy of its
directory sends gigabytes. ``meta.zr`` goes up last, and only where no store is: readers open a
store by its ``meta.zr``, so a half-copied store is never opened, and a URL that already holds a
store is refused (:class:`~loaderx.errors.StoreLockedError`), never overwritten. An interrupted
copy resumes: objects it finished are listed in ``.loaderx-upload`` under the URL with their
SHA-256, and a later copy of the same store skips them. The copy is read back: its length and
content digest must equal the local store's.

``dst`` may also be a new local directory (one that does not exist yet, or is empty): the files
are made at their full sizes with only the live bytes written, the rest left sparse as writers
leave it, in a directory beside ``dst`` that is renamed into place once complete, and read back
the same way. A directory that holds anything is refused (``BadArgumentError``).

Stores at URLs stay read-only: appending to one or deleting from one is refused, because a
remote store cannot be changed in place atomically (a reader could see a table and chunks from
two versions).

Credentials and endpoints come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``) and
``storage_options`` (object_store's keys). Errors name the URL: no permission to write is a
:class:`~loaderx.errors.StoreIOError`, a missing bucket a
:class:`~loaderx.errors.StoreNotFoundError`, a store already there or a copy that lost the race
to publish a :class:`~loaderx.errors.StoreLockedError`.
"""

from __future__ import annotations

import os
from typing import Any

from . import _loaderx
from ._typing import StrPath

__all__ = ["copy", "list_stores", "remove_partial"]


def copy(src: StrPath, dst: str, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """Copies the local store ``src`` to the URL or new local directory ``dst`` (see the module
    docs). Returns what it
    did: ``{"url", "objects", "skipped", "sent_bytes", "live_bytes", "apparent_bytes",
    "digest"}``."""
    return _loaderx.copy_store(os.fspath(src), dst, storage_options)


def remove_partial(dst: str, storage_options: dict[str, str] | None = None, *, published: bool = False) -> int:
    """Removes what an interrupted copy left at ``dst``; returns the objects removed. A
    published store (its ``meta.zr`` there) is refused with
    :class:`~loaderx.errors.StoreLockedError`, unless ``published=True`` (a writer removing a
    store it wrote that no manifest lists)."""
    return _loaderx.remove_partial_copy(dst, storage_options, published)


def list_stores(url: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """The names directly under the prefix ``url`` (the stores of a manifest's ``parts/``),
    sorted."""
    return _loaderx.list_children(url, storage_options)
