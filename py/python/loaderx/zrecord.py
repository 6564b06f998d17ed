"""Zrecord: an unordered, append-only store of byte records (the low-level layer).

Drop-in compatible with ``loaderx.zrecord`` of loaderx 0.9.11. Every call that touches data
releases the GIL and runs in the Rust engine; ``gather`` decodes straight into the caller's
array. Types are the caller's business: see :mod:`loaderx.dataset` for typed views.

A handle is safe to use from many threads, with or without the GIL: the Rust handle is
thread-safe, and the one piece of Python state that changes after construction (the handle,
replaced after ``fork()`` or dropped by ``close()``) changes under ``_HANDLE_LOCK``. After
``fork()`` the child reopens the store on its first call, and a pickled handle is reopened by
path.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import _loaderx, _process
from ._closing import Closing
from .arrow import Exports
from .errors import BadArgumentError, StoreClosedError, StoreIndexError, ZrecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer, Self, TypeGuard

    from ._typing import Cache, Indices, StrPath

__all__ = ["Zrecord", "ZrecordError", "CODECS", "SCHEMA", "FORMAT", "MAX_RECORD_LEN", "VERIFY_MODES"]

#: Compression tags, as stored in each table entry.
CODECS: dict[str, int] = dict(_loaderx.CODECS)
#: The per-store schema file (written by the converters, read by the datasets).
SCHEMA = _loaderx.SCHEMA_FILE
#: The ``format`` value a loaderx schema carries.
FORMAT = _loaderx.FORMAT
#: Largest record in bytes (records are 1 .. MAX_RECORD_LEN bytes).
MAX_RECORD_LEN = _loaderx.MAX_RECORD_LEN

#: Guards the swap of a Zrecord's handle (reopen after fork, close). One lock for all handles:
#: the swap is rare and short. A fresh lock in each forked child, so a lock some parent thread
#: held at the moment of the fork can never block the child.
_HANDLE_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    global _HANDLE_LOCK
    _HANDLE_LOCK = threading.Lock()


_process.in_child(_new_lock_in_child)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _location(path: StrPath) -> str | Path:
    """A local path as a Path; a URL (s3://, gs://, az://, http(s)://) kept as the string.
    ``file:///abs/path`` is that local path; any other ``scheme://`` is a
    :class:`BadArgumentError` (never a local folder named after the scheme)."""
    s = os.fspath(path)
    if isinstance(s, str) and s[:7].lower() == "file://":
        parsed = urllib.parse.urlsplit(s)
        if parsed.netloc not in ("", "localhost") or parsed.query or parsed.fragment:
            raise BadArgumentError.new(f"{_shown(s)}: a file:// URL names a local path, as file:///abs/path")
        return Path(urllib.request.url2pathname(parsed.path))
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    if _loaderx.is_url(s):
        return s
    if _SCHEME.match(s):
        raise BadArgumentError.new(
            f"{_shown(s)}: unsupported URL scheme; a store is a local path, a file:// URL or an "
            "s3://, gs://, az:// or http(s):// URL"
        )
    return Path(s)


def _writable(path: StrPath, what: str = "write") -> Path:
    """The local directory a write goes to. A store at a URL is never changed in place, so a URL
    (any ``scheme://`` but ``file://``) is a :class:`BadArgumentError` naming it, never a local
    folder called ``s3:``; converters stage a new store for a URL instead (``converter._target``)."""
    where = _location(path)
    if not isinstance(where, Path):
        raise BadArgumentError.new(
            f"cannot {what} {_shown(where)}: stores on URLs are read-only (written once, never "
            "changed in place); write to a local directory and copy it up (loaderx.remote.copy, "
            "loaderx cp), or give the URL to a converter (from_numpy, from_iterator, ...)"
        )
    return where


def _shown(url: str) -> str:
    """``url`` as it may appear in messages (userinfo and query values hidden)."""
    redact = getattr(_loaderx, "redact_url", None)
    return redact(url) if redact is not None else url


def _cache(cache: Cache | None) -> tuple[str, int] | None:
    """``(directory, max_bytes)`` for a remote store's disk cache, or None."""
    if cache is None:
        return None
    try:
        directory, max_bytes = cache
    except (TypeError, ValueError):
        raise ValueError(f"cache must be (directory, max_bytes), got {cache!r}") from None
    return (os.fspath(directory), int(max_bytes))


def _codec_name(codec: str) -> str:
    """The codec's name as stored: ``zstd-dict`` (the CLI's spelling) is ``zstd_dict``."""
    return "zstd_dict" if codec == "zstd-dict" else codec


VERIFY_MODES = ("off", "fetched", "always")
"""What ``verify=`` takes: which reads are checked against the store's checksums
(``checksums.lx``). ``"fetched"`` (the default) checks every byte that comes over the network,
``"always"`` local reads too; a mismatch is :class:`~loaderx.errors.ChecksumError`."""


def _verify_mode(verify: str) -> str:
    """``verify`` checked: one of :data:`VERIFY_MODES`."""
    if verify not in VERIFY_MODES:
        raise BadArgumentError.new(f"verify must be 'off', 'fetched' or 'always', not {verify!r}")
    return verify


def _codec_tag(codec: str) -> int:
    try:
        return CODECS[_codec_name(codec)]
    except (KeyError, TypeError):
        raise ValueError(f"unknown codec {codec!r}, expected one of {sorted(CODECS)}") from None


def _python_ints(idxs: object) -> list[int] | None:
    """The integers of a list NumPy could not type (ints beyond int64, or int64 mixed with
    uint64), or None if it holds anything but integers."""
    flat = np.asarray(idxs, dtype=object).reshape(-1)
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in flat):
        return [int(x) for x in flat]
    return None


def _out_of_range(bad: int, length: int | None) -> StoreIndexError:
    return StoreIndexError.new(f"index {bad} out of range for a store of {length} records")


_U64 = np.dtype(np.uint64)


def _engine_ready(idxs: object) -> TypeGuard[npt.NDArray[np.uint64]]:
    """Whether ``idxs`` goes to the engine as it is: a 1-D contiguous, aligned, native uint64
    array (what samplers and loaders pass). The engine checks every index against the length."""
    if type(idxs) is not np.ndarray or idxs.dtype != _U64 or idxs.ndim != 1:
        return False
    flags = idxs.flags
    return flags.c_contiguous and flags.aligned


def _indices(idxs: Any, length: int | None = None) -> npt.NDArray[np.uint64]:
    """Python integers as record indices (a contiguous uint64 array): negative values count
    from ``length`` when it is given, and anything still negative, or past 2**64, is an
    :class:`IndexError`; anything that is not an integer a :class:`TypeError`. Whether each
    index is below the store's length is the engine's one check."""
    if _engine_ready(idxs):  # small calls are mostly this function's overhead
        return idxs
    a = np.asarray(idxs) if not isinstance(idxs, np.ndarray) else idxs
    if a.size == 0:
        return np.empty(0, dtype=np.uint64)
    if a.dtype.kind in "fO" and not isinstance(idxs, np.ndarray):
        ints = _python_ints(idxs)
        if ints is not None:
            ints = [i + length if i < 0 and length is not None else i for i in ints]
            bad = next((i for i in ints if not 0 <= i < 1 << 64), None)
            if bad is not None:
                raise _out_of_range(bad if bad >= 0 or length is None else bad - length, length)
            return np.array(ints, dtype=np.uint64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got dtype {a.dtype}")
    a = a.reshape(-1)
    if a.dtype.kind == "i":
        a = a.astype(np.int64, copy=False)
        if length is not None:
            a = np.where(a < 0, a + length, a)
        if (a < 0).any():
            bad = int(a[a < 0][0])
            raise _out_of_range(bad - length if length is not None else bad, length)
    # A copy where the array is not contiguous or not aligned (a view at an odd byte offset).
    return np.require(a, dtype=np.uint64, requirements=["C", "A"])


def _offsets(offsets: Indices, name: str = "offsets") -> npt.NDArray[np.uint64]:
    """Byte offsets as a contiguous uint64 array; negative or non-integer offsets are a
    :class:`BadArgumentError`."""
    try:
        return _indices(offsets)
    except (StoreIndexError, TypeError) as e:
        raise BadArgumentError.new(f"{name}: {e}") from None


def _check_split(size: int, offsets: npt.NDArray[np.uint64]) -> None:
    """Refuse offsets that do not cut ``size`` bytes into records, saying what they would make
    of them (the engine's own checks would see a wrapped-around length)."""
    if offsets.size == 0:
        return
    ends = np.append(offsets[1:], np.uint64(size))
    back = np.flatnonzero(ends < offsets)
    if back.size:
        k = int(back[0])
        lengths = ends.astype(np.int64) - offsets.astype(np.int64)
        shown = lengths[:8].tolist() + (["..."] if lengths.size > 8 else [])
        raise BadArgumentError.new(
            f"offsets do not split the {size} bytes of src into records: record {k} would run from "
            f"byte {int(offsets[k])} to byte {int(ends[k])}. Offsets are where records start, "
            f"increasing, each below {size} (record i runs to offsets[i + 1], the last to the end "
            f"of src); these give record lengths {shown}, which sum to {int(lengths.sum())}, "
            f"not {size}"
        )


def _bytes_view(array: npt.NDArray[Any] | Buffer, name: str) -> npt.NDArray[np.uint8]:
    """A flat uint8 view of a C-contiguous array or bytes-like object (never a copy)."""
    if isinstance(array, np.ndarray):
        if not array.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        return array.reshape(-1).view(np.uint8)
    try:
        view = memoryview(array)
    except TypeError:
        raise TypeError(f"{name} must be a numpy array or a bytes-like object, not {type(array).__name__}") from None
    if not view.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    return np.frombuffer(view, dtype=np.uint8)


class Zrecord(Exports, Closing):
    """A store of byte records in a directory, created if it does not exist.

    Args:
        path (str | Path): Directory holding the store.
        codec (str): Default compression for :meth:`append`: ``"raw"``, ``"zstd"`` or
            ``"zstd_dict"`` (which needs a dictionary, see :meth:`train_dict`).
        verify (str): Which reads are checked against the store's per-record checksums:
            ``"off"``, ``"fetched"`` (the default: what comes over the network) or ``"always"``
            (local reads too). See :data:`VERIFY_MODES`.
    """

    def __init__(
        self,
        path: StrPath,
        codec: str = "zstd",
        storage_options: dict[str, str] | None = None,
        cache: Cache | None = None,
        verify: str = "fetched",
    ) -> None:
        _codec_tag(codec)
        self.codec = codec
        self.verify_mode = _verify_mode(verify)
        self.path = _location(path)
        self.storage_options = dict(storage_options) if storage_options else None
        self.cache = _cache(cache)
        self._store: _loaderx.Handle | None = self._open(True)
        self._pid = _process.current()

    @classmethod
    def _existing(
        cls, path: StrPath, storage_options: dict[str, str] | None = None, cache: Cache | None = None, verify: str = "fetched"
    ) -> Self:
        """A handle on a store that exists (never creates one)."""
        self = cls.__new__(cls)
        self.codec = "zstd"
        self.verify_mode = _verify_mode(verify)
        self.path = _location(path)
        self.storage_options = dict(storage_options) if storage_options else None
        self.cache = _cache(cache)
        self._store = self._open(False)
        self._pid = _process.current()
        return self

    def _open(self, create: bool) -> _loaderx.Handle:
        cache_dir, cache_bytes = self.cache or (None, None)
        handle = _loaderx.Handle(
            os.fspath(self.path), create=create, storage_options=self.storage_options, cache_dir=cache_dir, cache_bytes=cache_bytes
        )
        handle.set_verify(self.verify_mode)
        return handle

    def set_verify(self, verify: str) -> None:
        """Change which reads are checked (see :data:`VERIFY_MODES`)."""
        self.verify_mode = _verify_mode(verify)
        self._s.set_verify(self.verify_mode)

    @property
    def digest(self) -> str | None:
        """The digest of the store's content (``"sha256:..."``), from its schema, dictionary,
        table and checksums, without reading a record: equal for stores that read back the same,
        whatever their layout. ``None`` unless checksums cover every record (see
        :meth:`add_checksums`) and the table is as their writer left it."""
        return self._s.digest()

    def add_checksums(self, adopt: bool = False) -> dict[str, Any]:
        """Give every record without a checksum one and make the checksums vouch for the store
        again (``loaderx checksum add``): for stores written or changed by loaderx 0.9.11 or an
        older loaderx. A record whose checksum does not match is damage and is listed under
        ``mismatched`` (its checksum kept), unless ``adopt`` takes its bytes as they are.
        Returns the counts ``verified``, ``added``, ``replaced`` and the ``mismatched`` indices."""
        return self._s.add_checksums(bool(adopt))

    def verify_report(self, deep: bool = False) -> dict[str, Any]:
        """Check every record: against its checksum where one covers it, else by decoding it
        (``deep`` decodes every record too). Returns ``checked``, ``bad`` (``[(index, reason)]``),
        ``unlisted`` and the checksum counts ``verified``, ``mismatched``, ``uncovered`` and
        ``unverified`` (checksums written before another writer changed the table)."""
        return self._s.verify_report(bool(deep))

    @property
    def _s(self) -> _loaderx.Handle:
        store = self._store
        if store is None:
            raise StoreClosedError.new("I/O operation on a closed Zrecord")
        if _process.forked_since(self._pid):
            # Forked: take a handle of our own instead of sharing the parent's (once, even when
            # several threads of the child get here together).
            with _HANDLE_LOCK:
                if _process.forked_since(self._pid):
                    if self._store is None:
                        raise StoreClosedError.new("I/O operation on a closed Zrecord")
                    self._store = self._open(True)
                    self._pid = _process.current()
                store = self._store
            if store is None:
                raise StoreClosedError.new("I/O operation on a closed Zrecord")
        return store

    @property
    def engine(self) -> _loaderx.Handle:
        """The native handle this store reads and writes through (a forked child's own): what the
        package's layers over a store (datasets, mixing, Arrow export) call. Raises
        :class:`~loaderx.errors.StoreClosedError` once the store is closed."""
        return self._s

    def __len__(self) -> int:
        return len(self._s)

    def __repr__(self) -> str:
        state = "closed" if self._store is None else f"{len(self)} records"
        return f"Zrecord({_shown(os.fspath(self.path))!r}, {state})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (os.fspath(self.path), self.codec, self.storage_options, self.cache, self.verify_mode))

    def sync(self) -> None:
        """Make everything appended so far durable (data, then table, then header)."""
        self._s.sync()

    def lengths(self, idxs: Indices) -> npt.NDArray[np.uint32]:
        """Logical (decoded) size in bytes of each record, as uint32."""
        return self._s.lengths(_indices(idxs, len(self)))

    def gather(self, idxs: Indices, dst: npt.NDArray[Any] | Buffer, offsets: Indices) -> None:
        """Decode records ``idxs`` into ``dst`` (C-contiguous) at byte ``offsets``.

        All indices, destination ranges and table entries are checked before anything is
        written; ranges must not overlap.
        """
        store = self._s
        idxs = _indices(idxs, len(store))
        offsets = _offsets(offsets)
        if offsets.size != idxs.size:
            raise BadArgumentError.new(f"{idxs.size} indices but {offsets.size} offsets")
        store.gather(idxs, _bytes_view(dst, "dst"), offsets)

    def append(self, src: npt.NDArray[Any] | Buffer, offsets: Indices, codec: str | None = None) -> int:
        """Append the records packed in ``src``; record ``i`` starts at byte ``offsets[i]`` and
        runs to the next offset (the last one to the end of ``src``).

        All-or-nothing: on any error nothing is appended. Returns the index of the first new
        record.
        """
        tag = _codec_tag(self.codec if codec is None else codec)
        data, starts = _bytes_view(src, "src"), _offsets(offsets)
        _check_split(data.size, starts)
        return self._s.append(data, starts, tag)

    def train_dict(self, samples: npt.NDArray[Any] | Buffer, sizes: Indices, target: int) -> int:
        """Train a zstd dictionary of at most ``target`` bytes on the packed ``samples`` (byte
        lengths ``sizes``), store it as dict.zr and use it for ``zstd_dict`` records.

        Any dtype works: samples are used as bytes. Refused when the store already holds
        ``zstd_dict`` records, because replacing the dictionary would make them unreadable.
        Returns the dictionary size.
        """
        if isinstance(samples, np.ndarray):
            samples = np.ascontiguousarray(samples)
        samples = _bytes_view(samples, "samples")
        sizes = np.ascontiguousarray(sizes, dtype=np.uint64).reshape(-1)
        return self._s.train_dict(samples, sizes, int(target))

    def has_dict(self) -> bool:
        """True if the store has a zstd dictionary (dict.zr)."""
        return self._s.has_dict()

    def delete(self, idxs: Indices) -> None:
        """Remove records, keeping the index space dense: each hole is filled with the current
        last record (largest index first). Only the table changes; see :meth:`compact`.
        Waits for running reads and appends, and blocks new ones while it runs."""
        self._s.delete(_indices(idxs, len(self)))

    def compact(self) -> None:
        """Reclaim the bytes of deleted records, in place. Safe to interrupt: running it again
        finishes the job. Takes exclusive access while it runs."""
        self._s.compact()

    def stats(self) -> dict[str, int]:
        """``records``, ``live_bytes``, ``chunk_bytes`` and ``reclaimable`` (an upper bound on
        what :meth:`compact` would free)."""
        return self._s.stats()

    def verify(self) -> tuple[int, list[tuple[int, str]]]:
        """Decode every record. Returns ``(checked, [(index, reason), ...])``."""
        return self._s.verify()

    def close(self) -> None:
        """Release the store. Idempotent."""
        with _HANDLE_LOCK:
            store = getattr(self, "_store", None)
            self._store = None
        if store is not None and getattr(self, "_pid", None) == _process.current():
            store.close()

    def __del__(self) -> None:
        self.close()
