"""The exceptions loaderx raises.

Every store error is a :class:`ZrecordError` (the reference's exception, with its numeric
``code``), and where Python users expect a builtin it is that builtin too: an index out of
range is an :class:`IndexError`, a bad argument a :class:`ValueError`, a file problem an
:class:`OSError`. So ``except ZrecordError`` keeps working for code written against
loaderx 0.9.11, and ``except IndexError`` works as it does for any sequence. A DataLoader
worker process that dies or cannot start is a :class:`WorkerError`.

The Rust extension maps its errors onto these classes by name (``py/src/error.rs``).
"""


class ZrecordError(RuntimeError):
    """A store operation failed. ``code`` is the reference's error code."""

    def __init__(self, code, message=None):
        super().__init__(message if message is not None else f"zrecord error {code}")
        self.code = code

    def __reduce__(self):
        return (type(self), (self.code, str(self)))


class StoreIOError(ZrecordError, OSError):
    """A file operation failed, or the path is not a directory (code -2)."""


class StoreNotFoundError(ZrecordError, FileNotFoundError):
    """There is no store at the path (code -2)."""


class StoreIndexError(ZrecordError, IndexError):
    """An index is not below the store's length (code -3)."""


class RecordSizeError(ZrecordError, ValueError):
    """A record is empty or larger than 1 MiB (code -4)."""


class StoreFullError(ZrecordError):
    """The store would exceed 2**24 records (code -5)."""


class BadArgumentError(ZrecordError, ValueError):
    """A buffer is too small, destination ranges overlap, or offsets are wrong (code -6)."""


class CorruptStoreError(ZrecordError):
    """A file of the store is damaged, or a record fails to decode (code -7)."""


class NotAStoreError(ZrecordError):
    """The directory is not a loaderx store, or a newer version wrote it (code -8)."""


class DictionaryError(ZrecordError):
    """zstd_dict without a dictionary, training failed, or re-training was refused (code -9)."""


class StoreLockedError(ZrecordError):
    """Another process is writing to the store (code -10)."""


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
    "NotAStoreError",
    "DictionaryError",
    "StoreLockedError",
    "WorkerError",
]
