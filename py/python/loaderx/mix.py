"""Weighted mixing of datasets for :meth:`loaderx.dataloader.DataLoader.mix`.

Every batch holds exactly ``counts[j]`` records of dataset ``j``: the largest-remainder
apportionment of the batch size by the weights, the same at every step (each count is within 1
of ``batch_size * w_j / sum(w)``). Proportions are exact per batch, not only in expectation.
Each dataset reads its own stream (the sampler's stream of batch size 1 in the loader's mode),
so batch ``k`` is a pure function of the seed and ``k``, unaffected by the worker count. The
datasets are interleaved within a batch by one fixed pattern, so a shard (a slice of the global
batch) holds each dataset within 2 records of its share.

A loader state records where each dataset's stream stands. It loads into a loader over the same
datasets (same lengths, seed, mode and global batch) with the same or new weights: with new
weights each stream continues where it stood, taking a new number of records per batch.

Schedules: ``weights`` may be a list of ``(step, weights)`` points, held between points
(``interpolation="step"``) or moved linearly from one to the next (``"linear"``); before the
first point its weights hold, after the last the last's. Each step apportions its batch by the
weights at that step (exact per batch at every step), and a source may have weight 0 for part
of the schedule. A state records the schedule; a resume may bring another one, which decides
the steps from the resume on.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from . import _loaderx
from .dataset import DenseDataset, ImageDataset, RaggedDataset
from .errors import BadArgumentError

__all__ = ["INTERPOLATIONS", "MixSampler", "preview", "schedule_points"]


#: How a schedule's weights move between its points.
INTERPOLATIONS = ("step", "linear")


def schedule_points(weights: Any, interpolation: str = "step") -> tuple[list[tuple[int, list[float]]], str, bool]:
    """``weights`` as schedule points ``[(step, weights)]``, its interpolation, and whether it is
    a schedule (False for one list of weights). Takes a list of weights, a list of ``(step,
    weights)`` points, or a dict ``{"points": [...], "interpolation": ...}`` (a state's form)."""
    if isinstance(weights, dict):
        interpolation = weights.get("interpolation", interpolation)
        weights = weights.get("points", ())
    if interpolation not in INTERPOLATIONS:
        raise BadArgumentError.new(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    try:
        items = list(weights)
    except TypeError:
        raise TypeError(f"weights must be a list of weights or of (step, weights) points, got {weights!r}") from None
    if items and all(isinstance(w, (int, float, np.integer, np.floating)) and not isinstance(w, bool) for w in items):
        return [(0, [float(w) for w in items])], "step", False
    points = []
    for k, point in enumerate(items):
        try:
            step, ws = point
            points.append((operator.index(step), [float(w) for w in ws]))
        except (TypeError, ValueError):
            raise BadArgumentError.new(
                f"schedule point {k} is {point!r}: a point is (step, [weight, ...]) with an integer step >= 0"
            ) from None
        if points[-1][0] < 0:
            raise BadArgumentError.new(f"schedule point {k} is at step {points[-1][0]}: steps are >= 0")
    if not points:
        raise BadArgumentError.new("weights are empty: give one weight per source, or (step, weights) points")
    return points, interpolation, True


class MixSampler:
    """Batches of indices into the datasets' joined index space (dataset ``j``'s record ``e`` is
    ``sum(lengths[:j]) + e``), for the DataLoader. ``weights`` is one weight per dataset or a
    schedule (:func:`schedule_points`). Pickles with its position."""

    def __init__(
        self,
        lengths: Sequence[int],
        weights: Any,
        batch_size: int,
        mode: int,
        seed: int,
        base: tuple[int, Sequence[int]] | None = None,
        interpolation: str = "step",
    ) -> None:
        self.lengths = [int(n) for n in lengths]
        self.points, self.interpolation, self.scheduled = schedule_points(weights, interpolation)
        self.batch_size = int(batch_size)
        self.mode = int(mode)
        self.seed = int(seed)
        self._s = _loaderx.Mixer(self.lengths, self.points, self.interpolation, self.batch_size, self.mode, self.seed)
        self._base: tuple[int, list[int]] | None = None
        if base is not None:
            self.rebase(*base)

    @property
    def weights(self) -> list[float]:
        """The weights at step 0 (at every step unless scheduled)."""
        return self.weights_at(0)

    @property
    def schedule(self) -> dict[str, Any] | None:
        """The schedule as a state records it (None for constant weights)."""
        if not self.scheduled:
            return None
        return {"points": [[s, list(w)] for s, w in self.points], "interpolation": self.interpolation}

    def weights_at(self, step: int) -> list[float]:
        """The weights at ``step``."""
        return [float(w) for w in self._s.weights_at(int(step))]

    @property
    def batch_len(self) -> int:
        """Records per batch."""
        return int(self._s.batch_len)

    @property
    def counts(self) -> list[int]:
        """Records per batch of each dataset at step 0 (at every step unless scheduled)."""
        return self.counts_at(0)

    def counts_at(self, step: int) -> list[int]:
        """Records of each dataset in batch ``step``."""
        return [int(c) for c in self._s.counts_at(int(step))]

    def batch_at(self, step: int) -> npt.NDArray[np.uint64]:
        return self._s.batch_at(int(step))

    def slots_at(self, step: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint64]]:
        """Each slot of batch ``step``: its dataset, and the position in that dataset's stream."""
        sources, positions = self._s.slots_at(int(step))
        return sources, positions

    def positions_at(self, step: int) -> list[int]:
        """Where each dataset's stream stands before ``step``."""
        return list(self._s.positions_at(int(step)))

    def rebase(self, step: int, positions: Sequence[int]) -> None:
        """Continue each stream from ``positions`` at ``step``."""
        self._s.rebase(int(step), [int(p) for p in positions])
        self._base = (int(step), [int(p) for p in positions])

    def __reduce__(self) -> tuple[Any, ...]:
        weights = self.schedule if self.scheduled else self.weights
        return (MixSampler, (self.lengths, weights, self.batch_size, self.mode, self.seed, self._base))


def preview(config: dict[str, Any], steps: Sequence[int]) -> dict[str, Any]:
    """Each source's records per batch at each of ``steps``, for a mix config: ``{"weights":
    weights or schedule points, "batch_size": B, "interpolation": ..., "sources": [names]}``, or
    a loader state of a mix (its schedule, or its weights). What ``loaderx mix-preview`` prints."""
    if not isinstance(config, dict):
        raise BadArgumentError.new(f"a mix config is a JSON object, got {type(config).__name__}")
    if "config" in config and ("schedule" in config or "weights" in config):  # a loader state
        weights: Any = config.get("schedule") or config.get("weights")
        batch, interpolation, names = config["config"].get("batch_size"), "step", None
    else:
        weights, batch = config.get("weights"), config.get("batch_size")
        interpolation, names = config.get("interpolation", "step"), config.get("sources")
    if weights is None or not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise BadArgumentError.new("a mix config needs \"weights\" (weights or schedule points) and a positive \"batch_size\"")
    points, interpolation, _ = schedule_points(weights, interpolation)
    width = len(points[0][1])
    names = [str(n) for n in names] if names is not None else [f"source{j}" for j in range(width)]
    if len(names) != width:
        raise BadArgumentError.new(f"{len(names)} source names for {width} weights")
    mixer = _loaderx.Mixer([1] * width, points, interpolation, batch, 0, 0)
    rows = [{"step": int(k), "counts": [int(c) for c in mixer.counts_at(int(k))]} for k in steps]
    return {"sources": names, "batch_size": batch, "rows": rows}


def _listing(ds: object) -> Any:
    """``ds._listing()`` where a dataset has one (manifests, joined sources), else None."""
    listing = getattr(ds, "_listing", None)
    return listing() if listing is not None else None


def _joined(parts: Sequence[Any]) -> Any:
    """One stream's sources as one dataset over their joined index space (dataset ``j``'s record
    ``e`` is ``sum(lengths[:j]) + e``), read by the engine's join."""
    first = parts[0]
    if not isinstance(first, (DenseDataset, RaggedDataset, ImageDataset)) or any(type(p) is not type(first) for p in parts):
        kinds = ", ".join(type(p).__name__ for p in parts)
        raise TypeError(
            f"DataLoader.mix reads loaderx datasets: each stream's sources must all be DenseDataset, all "
            f"RaggedDataset or all ImageDataset, got {kinds}"
        )
    if isinstance(first, ImageDataset) and any(p._options != first._options for p in parts):
        raise ValueError(
            "DataLoader.mix: a stream's ImageDataset sources must make the same pictures (size, crop, flip, "
            "dtype, scale, ratio, seed, max_pixels, resize); give them the same arguments"
        )
    return type(first)._join(parts)
