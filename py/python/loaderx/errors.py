"""The exceptions loaderx raises.

Every store error is a :class:`ZrecordError` (the reference's exception, with its numeric
``code``), and where Python users expect a builtin it is that builtin too: an index out of
range is an :class:`IndexError`, a bad argument a :class:`ValueError`, a file problem an
:class:`OSError`. So ``except ZrecordError`` keeps working for code written against
loaderx 0.9.11, and ``except IndexError`` works as it does for any sequence. A DataLoader
worker process that dies or cannot start is a :class:`WorkerError`.

The Rust extension maps each kind of error to its class in one ``match`` (``py/src/error.rs``);
the numeric codes come from the same place, through :data:`CODES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from . import _loaderx

if TYPE_CHECKING:
    from typing_extensions import Self

#: ``{kind: code}``: the reference's numeric error code of each kind of failure, from the one
#: table in ``loaderx_core::error::ErrorKind`` (never written out here).
CODES: dict[str, int] = dict(_loaderx.ERROR_CODES)


class ZrecordError(RuntimeError):
    """A store operation failed. ``code`` is the reference's error code. ``file`` and ``offset``
    say where damaged bytes are (corrupt stores), ``index`` which record an error is about;
    each is None when it does not apply."""

    #: The kind of failure (a key of :data:`CODES`); None for the base class.
    kind: ClassVar[str | None] = None

    def __init__(
        self,
        code: int,
        message: str | None = None,
        *,
        file: str | None = None,
        offset: int | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message if message is not None else f"zrecord error {code}")
        self.code = code
        self.file = file
        self.offset = offset
        self.index = index

    @classmethod
    def new(cls, message: str, **fields: Any) -> Self:
        """An error of this class with its kind's code."""
        return cls(CODES[cls.kind], message, **fields)  # type: ignore[index]  # None only on the base class

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {"file": self.file, "offset": self.offset, "index": self.index}
        return (_rebuild, (type(self), self.code, str(self), fields))


def _rebuild(cls: type[ZrecordError], code: int, message: str, fields: dict[str, Any]) -> ZrecordError:
    return cls(code, message, **fields)


class StoreIOError(ZrecordError, OSError):
    """A file operation failed, or the path is not a directory."""

    kind = "io"


class StoreNotFoundError(ZrecordError, FileNotFoundError):
    """There is no store at the path."""

    kind = "not_found"


class StoreIndexError(ZrecordError, IndexError):
    """An index is not below the store's length."""

    kind = "index"


class RecordSizeError(ZrecordError, ValueError):
    """A record is empty or larger than 1 MiB."""

    kind = "record_size"


class StoreFullError(ZrecordError):
    """The store would exceed 2**24 records."""

    kind = "too_large"


class BadArgumentError(ZrecordError, ValueError):
    """A buffer is too small, destination ranges overlap, offsets are wrong, or a dataset is
    opened as the wrong kind."""

    kind = "argument"


class CorruptStoreError(ZrecordError):
    """A file of the store is damaged, or a record fails to decode or to fit the schema."""

    kind = "corrupt"


class ChecksumError(CorruptStoreError):
    """A record's stored bytes do not match the checksum ``checksums.lx`` holds for them: damage
    on disk or in transit (a remote read is fetched once more first). ``file``, ``offset`` and
    ``index`` say where."""


class ImageDecodeError(CorruptStoreError):
    """A record of an image store is not a picture: empty, not JPEG/PNG/WebP, damaged or
    truncated, over the pixel limit (``max_pixels``, a decompression-bomb guard), or not of the
    size ``crop="none"`` needs. ``index`` names the record; the message says why."""


class NotAStoreError(ZrecordError):
    """The directory is not a loaderx store, or a newer version wrote it."""

    kind = "not_a_store"


class DictionaryError(ZrecordError):
    """zstd_dict without a dictionary, training failed, or re-training was refused."""

    kind = "dictionary"


class StoreLockedError(ZrecordError):
    """Another process is writing to the store."""

    kind = "locked"


class StoreClosedError(ZrecordError, ValueError):
    """The handle was closed (a ValueError, as for a closed file)."""

    kind = "closed"


class WorkerError(RuntimeError):
    """A DataLoader worker process died or could not start (``workers="processes"``)."""


__all__ = [
    "ZrecordError",
    "StoreIOError",
    "StoreNotFoundError",
    "StoreIndexError",
    "RecordSizeError",
    "StoreFullError",
    "BadArgumentError",
    "CorruptStoreError",
    "ChecksumError",
    "ImageDecodeError",
    "NotAStoreError",
    "DictionaryError",
    "StoreLockedError",
    "StoreClosedError",
    "WorkerError",
    "CODES",
]
