"""The context-manager protocol of every loaderx object that holds a store or workers
(:class:`~loaderx.zrecord.Zrecord`, the datasets, :class:`~loaderx.dataloader.DataLoader`).

Invariant: ``with obj:`` yields ``obj`` itself and calls ``obj.close()`` on the way out, on an
exception too, which it never suppresses. ``close`` is the subclass's, and idempotent.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self


class Closing:
    """``with`` support for a class that defines :meth:`close`."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        self.close()
