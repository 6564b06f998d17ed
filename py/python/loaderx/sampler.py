"""Index sampler: batch ``k`` is a pure function of (length, batch_size, mode, seed, k).

Drop-in compatible with ``loaderx.sampler`` of loaderx 0.9.11. ``seek`` is O(1) in every
mode, and SEQUENTIAL reproduces the reference exactly. IID draws with replacement without
bias; CYCLIC walks a fresh permutation per cycle and drops each cycle's remainder, so every
batch has ``batch_size`` distinct indices (when ``length < batch_size``, a CYCLIC batch is the
whole permutation of ``length`` indices).
"""

import enum
import operator

from . import _loaderx

__all__ = ["Sampler"]

_U64 = (1 << 64) - 1


def _uint(value, name):
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

    def __init__(self, length: int, batch_size: int, mode: int, seed: int = 42):
        self.length = _uint(length, "length")
        self.batch_size = _uint(batch_size, "batch_size")
        try:
            self.mode = Sampler.Mode(operator.index(mode))
        except (ValueError, TypeError):
            raise ValueError(f"unknown sampler mode {mode!r}: expected 0 (SEQUENTIAL), 1 (IID) or 2 (CYCLIC)") from None
        self.seed = _uint(seed, "seed")
        self._s = _loaderx.Sampler(self.length, self.batch_size, int(self.mode), self.seed)

    def next(self):
        """The batch at the current step (a new uint64 array); advances the step."""
        return self._s.next()

    def seek(self, step: int):
        """Make the next :meth:`next` return batch ``step`` (0-based). O(1)."""
        self._s.seek(_uint(step, "step"))

    def batch_at(self, step: int):
        """Batch ``step`` without moving the cursor."""
        return self._s.batch_at(_uint(step, "step"))

    @property
    def step(self):
        """The step the next :meth:`next` returns."""
        return self._s.step

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def __repr__(self):
        return (
            f"Sampler(length={self.length}, batch_size={self.batch_size}, "
            f"mode={self.mode.name}, seed={self.seed}, step={self.step})"
        )

    def __reduce__(self):
        return (_restore, (self.length, self.batch_size, int(self.mode), self.seed, self.step))


def _restore(length, batch_size, mode, seed, step):
    s = Sampler(length, batch_size, mode, seed)
    s.seek(step)
    return s
