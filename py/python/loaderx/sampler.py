"""Index sampler: batch ``k`` is a pure function of (length, batch_size, mode, seed, k).

Three modes, given by name (``"sequential"``, ``"iid"``, ``"cyclic"``, any case), by number
(0, 1, 2, as in the reference) or as :class:`Sampler.Mode`:

* SEQUENTIAL: ``0, 1, 2, ...`` in order, wrapping around at the end. For evaluation.
* IID: each index drawn uniformly with replacement, so "an epoch" of steps sees about 63% of
  the records. The DataLoader's default, as in the reference.
* CYCLIC: a fresh random permutation per pass over the data, without replacement, so a
  pass sees every record once (but for the pass's last partial batch, which is dropped): what
  ``shuffle=True`` means elsewhere, and the usual choice for training.

Drop-in compatible with ``loaderx.sampler`` of loaderx 0.9.11. ``seek`` is O(1) in every
mode, and SEQUENTIAL reproduces the reference exactly. IID draws with replacement without
bias; CYCLIC walks a fresh permutation per cycle and drops each cycle's remainder, so every
batch has ``batch_size`` distinct indices (when ``length < batch_size``, a CYCLIC batch is the
whole permutation of ``length`` indices).
"""

from __future__ import annotations

import enum
import operator
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from . import _loaderx

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Sampler"]

_U64 = (1 << 64) - 1


def _uint(value: SupportsIndex, name: str) -> int:
    """A Python integer as a u64 (the edge); what values make a sampler is the engine's rule."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not 0 <= v <= _U64:
        raise ValueError(f"{name} must be in 0..2**64-1, got {v}")
    return v


class Sampler:
    """Endless batches of indices into ``range(length)``."""

    class Mode(enum.IntEnum):
        SEQUENTIAL = 0
        IID = 1
        CYCLIC = 2  # without replacement, round-robin

    def __init__(self, length: int, batch_size: int, mode: int | str, seed: int = 42) -> None:
        self.length = _uint(length, "length")
        self.batch_size = _uint(batch_size, "batch_size")
        self.mode = _mode(mode)
        self.seed = _uint(seed, "seed")
        self._s = _loaderx.Sampler(self.length, self.batch_size, int(self.mode), self.seed)

    def next(self) -> npt.NDArray[np.uint64]:
        """The batch at the current step (a new uint64 array); advances the step."""
        return self._s.next()

    def seek(self, step: int) -> None:
        """Make the next :meth:`next` return batch ``step`` (0-based). O(1)."""
        self._s.seek(_uint(step, "step"))

    def batch_at(self, step: int) -> npt.NDArray[np.uint64]:
        """Batch ``step`` without moving the cursor."""
        return self._s.batch_at(_uint(step, "step"))

    @property
    def batch_len(self) -> int:
        """Records per batch: ``batch_size``, or the length in CYCLIC mode over fewer records."""
        return int(self._s.batch_len)

    @property
    def step(self) -> int:
        """The step the next :meth:`next` returns."""
        return self._s.step

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> npt.NDArray[np.uint64]:
        return self.next()

    def __repr__(self) -> str:
        return (
            f"Sampler(length={self.length}, batch_size={self.batch_size}, "
            f"mode={self.mode.name}, seed={self.seed}, step={self.step})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.length, self.batch_size, int(self.mode), self.seed, self.step))


def _mode(mode: Any) -> Sampler.Mode:
    """A sampler mode, given as a :class:`Sampler.Mode`, its number or its name (any case)."""
    if isinstance(mode, str):
        try:
            return Sampler.Mode[mode.upper()]
        except KeyError:
            pass
    elif not isinstance(mode, (bool, float)):
        try:
            return Sampler.Mode(operator.index(mode))
        except (ValueError, TypeError):
            pass
    raise ValueError(
        f"unknown sampler mode {mode!r}: expected 'sequential' (0), 'iid' (1) or 'cyclic' (2)"
    )


def _restore(length: int, batch_size: int, mode: int, seed: int, step: int) -> Sampler:
    s = Sampler(length, batch_size, mode, seed)
    s.seek(step)
    return s
