"""The loader state and the shard: the two values every loaderx loader shares.

:class:`LoaderState` is what :class:`loaderx.dataloader.DataLoader` (and its ``loaderx.jax``
subclass), ``loaderx.torch.IterableDataset`` and ``loaderx.torch.BatchSampler`` save and load.
:class:`Shard` is one process's place in a global batch and the rule for which rows it takes.

The saved form is a plain dict of JSON types (``state_dict()`` returns it; JSON, pickle and
``torch.save`` round-trip it unchanged). Version 2, the one written today::

    {"version": 2,                    # the state format's version (CURRENT_VERSION)
     "step": 7,                       # the next global step: the number of batches taken
     "config": {"length": 103,        # what a loader must match to resume exactly: records,
                "batch_size": 12,     #   the global batch, the sampler's mode and seed,
                "mode": 2, "seed": 11,
                "streams": ["id"],    #   the stream names (loaders only, not a BatchSampler),
                "mix": [61, 29],      #   the mixed sources' lengths (mixing loaders only),
                "stores": {...}},     #   the stores as listed (streams over manifests only)
     "fingerprint": "d324c7073ca1a645",  # sha256 of the config (JSON, sorted keys), 16 hex digits
     "shard_count": 2,                # the saver's shard count, for information only
     "weights": [2.0, 1.0],           # mixing loaders only: the weights when saved
     "schedule": {"points": [[0, [2.0, 1.0]], [1000, [1.0, 1.0]]], "interpolation": "linear"},
                                      # a scheduled mix's schedule; optional, loaderx 0.10.1 on
     "positions": [64, 32],           # mixing loaders only: where each source's stream stands
     "digests": {"id": "sha256:..."}, # each stream's content digest (None: not every record
                                      #   has a checksum); optional, loaderx 0.10.1 on
     "history": [{"start": 0, "end": 7, "shard_count": 2}]}
                                      # the steps consumed, as segments (loaderx.receipt);
                                      #   optional, loaderx 0.10.1 on

``digests``, ``history`` and ``schedule`` are optional keys of version 2: a loader that predates them ignores
them, and a state without them loads (without the content check, and with no steps consumed
before it in receipts).

Invariants:

* A state is global: it does not depend on the saver's shard, so any rank's state resumes every
  rank of any shard count that divides the same global batch.
* Every version ever written loads. A dict without ``"version"`` is version 1 (what loaderx
  0.10.0 saved, including its older form that kept the shard in the config and the
  fingerprint);
  :data:`MIGRATIONS` maps each version to the function that upgrades a dict of it to the next,
  so loading applies them in turn and then validates the current form. A migrated state
  resumes at the same step with the same batches as the loader that saved it would have.
* A state from a newer loaderx (a version above :data:`CURRENT_VERSION`), a damaged state
  (a missing or mistyped field, a fingerprint that does not match the config) and a state from
  another config are each a :class:`~loaderx.errors.BadArgumentError` (a ``ValueError``) that
  says which; a state that is not a dict is a ``TypeError``. Never a ``KeyError``.
* A state resumes only the content it was saved over: a stream whose content digest differs
  from the saved one (even with the same length) is a BadArgumentError naming it.
"""

from __future__ import annotations

import hashlib
import json
import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping, Protocol, TypeVar, cast

from .errors import BadArgumentError

__all__ = ["CURRENT_VERSION", "MIGRATIONS", "LoaderState", "Shard", "base_config", "fingerprint"]

_A = TypeVar("_A")


class _Rows(Protocol):
    """A batch a shard slices: a list, an array."""

    def __len__(self) -> int: ...
    def __getitem__(self, rows: slice, /) -> Any: ...


_B = TypeVar("_B", bound=_Rows)

#: The version :meth:`LoaderState.to_dict` writes.
CURRENT_VERSION = 2

#: The config keys a version-1 state may hold that are not part of what a state must match: the
#: shard, which loaderx kept there before resume was elastic.
_SHARD_KEYS = ("shard_index", "shard_count")


def fingerprint(config: Mapping[str, Any]) -> str:
    """A short hash of a loader config: the first 16 hex digits of the SHA-256 of its JSON with
    sorted keys."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def base_config(length: int, batch_size: int, mode: int, seed: int) -> dict[str, Any]:
    """The part of a state's config that decides the global batches: the records, the global
    batch size and the sampler's mode and seed (the whole config of a BatchSampler; a
    DataLoader adds its streams)."""
    return {"length": int(length), "batch_size": int(batch_size), "mode": int(mode), "seed": int(seed)}


def _damaged(why: str) -> BadArgumentError:
    return BadArgumentError.new(f"the loader state is damaged: {why}")


def _int(value: Any, what: str, least: int) -> int:
    if isinstance(value, bool):
        raise _damaged(f"{what} must be an integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise _damaged(f"{what} must be an integer, got {value!r}") from None
    if n < least:
        raise _damaged(f"{what} must be >= {least}, got {n}")
    return n


def _list(value: Any, what: str, item: Callable[[Any, str], _A]) -> tuple[_A, ...]:
    if not isinstance(value, (list, tuple)):
        raise _damaged(f"{what} must be a list, got {type(value).__name__}")
    return tuple(item(v, f"{what}[{k}]") for k, v in enumerate(value))


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _damaged(f"{what} must be a number, got {value!r}")
    return float(value)


def _config(state: Mapping[str, Any]) -> dict[str, Any]:
    config = state.get("config")
    if not isinstance(config, dict):
        raise _damaged("it has no config dict")
    return dict(config)


def _digests(value: Any) -> dict[str, str | None]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()):
        raise _damaged(f"digests must map stream names to digests, got {value!r}")
    return dict(value)


def _segment(value: Any, what: str) -> dict[str, Any]:
    """One segment of a state's history: ``start``/``end`` steps and the ``shard_count``, and for
    a mix its ``weights`` and the streams' ``positions`` at ``start``."""
    if not isinstance(value, dict):
        raise _damaged(f"{what} must be a dict, got {type(value).__name__}")
    start, end = _int(value.get("start"), f"{what}.start", 0), _int(value.get("end"), f"{what}.end", 0)
    if end <= start:
        raise _damaged(f"{what} ends at {end}, not after its start {start}")
    out: dict[str, Any] = {"start": start, "end": end, "shard_count": _int(value.get("shard_count"), f"{what}.shard_count", 1)}
    if "weights" in value or "positions" in value:
        out["weights"] = list(_list(value.get("weights"), f"{what}.weights", _number))
        out["positions"] = list(_list(value.get("positions"), f"{what}.positions", lambda v, w: _int(v, w, 0)))
    if value.get("schedule") is not None:
        out["schedule"] = _schedule(value["schedule"], f"{what}.schedule")
    return out


def _schedule(value: Any, what: str) -> dict[str, Any]:
    """A mix's weight schedule: ``{"points": [[step, [weight, ...]], ...], "interpolation":
    "step" | "linear"}``, checked for its form (the mixer checks the weights)."""
    if not isinstance(value, dict) or value.get("interpolation") not in ("step", "linear"):
        raise _damaged(f"{what} must be a dict with points and an interpolation of 'step' or 'linear', got {value!r}")
    points = _list(value.get("points"), f"{what}.points", lambda p, w: p)
    out = []
    for k, p in enumerate(points):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise _damaged(f"{what}.points[{k}] must be [step, weights], got {p!r}")
        out.append([_int(p[0], f"{what}.points[{k}] step", 0), list(_list(p[1], f"{what}.points[{k}] weights", _number))])
    return {"points": out, "interpolation": value["interpolation"]}


def _v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 (loaderx 0.10.0, no "version" key) to 2: the same fields, with the shard taken
    out of the config where the state predates elastic resume. The fingerprint is checked
    against the config as saved, then computed over the config without the shard."""
    config = _config(state)
    if state.get("fingerprint") != fingerprint(config):
        raise _damaged("its fingerprint does not match its config")
    config = {k: v for k, v in config.items() if k not in _SHARD_KEYS}
    return {**state, "version": 2, "config": config, "fingerprint": fingerprint(config)}


#: ``{version: upgrade}``: ``upgrade`` turns a state dict of ``version`` into one of ``version + 1``.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


@dataclass(frozen=True)
class LoaderState:
    """A loader's position: the next global ``step`` and the ``config`` it belongs to.

    ``shard_count`` (the saver's, for information), ``weights`` and ``positions`` (mixing
    loaders) are None where they do not apply. Build one with :meth:`from_dict` (any version) and
    save it with :meth:`to_dict` (the current one).
    """

    step: int
    config: dict[str, Any]
    shard_count: int | None = None
    weights: tuple[float, ...] | None = None
    positions: tuple[int, ...] | None = None
    #: Each stream's content digest when the state was saved (None where a stream had none).
    digests: dict[str, str | None] | None = None
    #: The steps consumed to reach ``step``, as segments (see :mod:`loaderx.receipt`).
    history: tuple[dict[str, Any], ...] | None = None
    #: A mix's weight schedule (``{"points": [[step, weights], ...], "interpolation": ...}``),
    #: None for constant weights.
    schedule: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The saved form, of :data:`CURRENT_VERSION`: a new dict of JSON types."""
        out: dict[str, Any] = {
            "version": CURRENT_VERSION,
            "step": self.step,
            "config": dict(self.config),
            "fingerprint": fingerprint(self.config),
        }
        if self.shard_count is not None:
            out["shard_count"] = self.shard_count
        if self.weights is not None:
            out["weights"] = list(self.weights)
        if self.positions is not None:
            out["positions"] = list(self.positions)
        if self.digests is not None:
            out["digests"] = dict(self.digests)
        if self.history is not None:
            out["history"] = [dict(h) for h in self.history]
        if self.schedule is not None:
            out["schedule"] = _schedule(self.schedule, "schedule")
        return out

    @classmethod
    def from_dict(cls, state: object) -> LoaderState:
        """The state a saved dict of any version holds, migrated to the current one. Raises
        TypeError for a non-dict and BadArgumentError for a newer version or a damaged state."""
        if not isinstance(state, Mapping):
            raise TypeError(f"a loader state is a dict from state_dict(), got {type(state).__name__}")
        d = dict(state)
        version = d.get("version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise _damaged(f"its version must be a positive integer, got {version!r}")
        if version > CURRENT_VERSION:
            raise BadArgumentError.new(
                f"the loader state has version {version}, written by a newer loaderx; this one reads "
                f"versions 1 to {CURRENT_VERSION}: upgrade loaderx to load it"
            )
        while version < CURRENT_VERSION:
            d = MIGRATIONS[version](d)
            version += 1
        config = _config(d)
        if d.get("fingerprint") != fingerprint(config):
            raise _damaged("its fingerprint does not match its config")
        if "step" not in d:
            raise _damaged("it has no step")
        mixed = "weights" in d or "positions" in d
        return cls(
            step=_int(d["step"], "step", 0),
            config=config,
            shard_count=None if d.get("shard_count") is None else _int(d["shard_count"], "shard_count", 1),
            weights=_list(d.get("weights"), "weights", _number) if mixed else None,
            positions=_list(d.get("positions"), "positions", lambda v, w: _int(v, w, 0)) if mixed else None,
            digests=_digests(d["digests"]) if "digests" in d else None,
            history=_list(d["history"], "history", _segment) if "history" in d else None,
            schedule=_schedule(d["schedule"], "schedule") if d.get("schedule") is not None else None,
        )

    @classmethod
    def load(cls, state: object, config: Mapping[str, Any]) -> LoaderState:
        """:meth:`from_dict`, then :meth:`check` against ``config``."""
        loaded = cls.from_dict(state)
        loaded.check(config)
        return loaded

    def check_content(self, digests: Mapping[str, str | None], shown: Mapping[str, str]) -> None:
        """Raise BadArgumentError when a stream's content changed since the state was saved:
        its digest then (where it had one) differs from ``digests`` now. ``shown`` names each
        stream's store."""
        for name, then in sorted((self.digests or {}).items()):
            now = digests.get(name)
            if then is not None and now != then:
                what = f"its content digest is now {now}" if now else "it no longer has a content digest"
                raise BadArgumentError.new(
                    f"stream {name!r} ({shown.get(name, '?')}) changed since the state was saved: it had "
                    f"content digest {then}, {what}; resuming would read other records at the same steps"
                )

    def check(self, config: Mapping[str, Any]) -> None:
        """Raise BadArgumentError unless this state resumes a loader of ``config`` exactly, naming
        the differences."""
        if self.config != config:
            keys = sorted(set(self.config) | set(config))
            diff = {k: (self.config.get(k), config.get(k)) for k in keys if self.config.get(k) != config.get(k)}
            why = f"the state is from a different DataLoader config (theirs, ours): {diff}"
            if "batch_size" in diff:
                why += "; the global batch_size must stay the same to resume exactly"
            raise BadArgumentError.new(why)
        if "mix" in config and (self.positions is None or len(self.positions) != len(config["mix"])):
            raise _damaged("it has no stream position for each source of this mix")


@dataclass(frozen=True)
class Shard:
    """One process's place in a global batch: shard ``index`` of ``count``.

    The slicing rule: of a global batch of ``n`` rows (``count`` divides ``n``), shard ``index``
    takes rows ``[index * n // count, (index + 1) * n // count)``. So the shards, joined in index
    order, are the global batch, for any ``count``.
    """

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        for name in ("index", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"shard_{name} must be an integer, got {value!r}")
        if self.count < 1:
            raise BadArgumentError.new(f"shard_count must be at least 1, got {self.count}")
        if not 0 <= self.index < self.count:
            raise BadArgumentError.new(f"shard_index must be in 0..{self.count - 1}, got {self.index}")

    @classmethod
    def of(cls, index: Any, count: Any, place: Callable[[], Shard] | None = None) -> Shard:
        """The shard ``index`` of ``count``; where either is None, it comes from ``place()``
        (this process's place, :meth:`torch` or :meth:`jax`), or index 0 of 1 without one."""
        if index is None or count is None:
            here = place() if place is not None else cls()
            index = here.index if index is None else index
            count = here.count if count is None else count
        return cls(_integer(index, "shard_index"), _integer(count, "shard_count"))

    @classmethod
    def torch(cls) -> Shard:
        """This process's rank of the world size under torch.distributed (0 of 1 when it is not
        initialised)."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return cls(int(dist.get_rank()), int(dist.get_world_size()))
        return cls()

    @classmethod
    def jax(cls) -> Shard:
        """``jax.process_index()`` of ``jax.process_count()``."""
        import jax

        return cls(int(jax.process_index()), int(jax.process_count()))

    def as_kwargs(self) -> dict[str, int]:
        """``{"shard_index": index, "shard_count": count}``, the loaders' keyword arguments."""
        return {"shard_index": self.index, "shard_count": self.count}

    def per(self, batch: int) -> int:
        """Rows of a global batch of ``batch`` this shard takes; BadArgumentError unless ``count``
        divides ``batch``."""
        if batch % self.count:
            raise BadArgumentError.new(
                f"the global batch_size {batch} is not divisible by shard_count {self.count}; "
                f"use a multiple of {self.count}"
            )
        return batch // self.count

    def rows(self, batch: int) -> slice:
        """This shard's rows of a global batch of ``batch`` rows."""
        per = self.per(batch)
        return slice(self.index * per, (self.index + 1) * per)

    def fraction(self) -> tuple[Fraction, Fraction]:
        """This shard's rows as ``(start, stop)`` fractions of any global batch."""
        return Fraction(self.index, self.count), Fraction(self.index + 1, self.count)

    def take(self, batch: _B) -> _B:
        """This shard's rows of a global batch (the batch itself when ``count`` is 1)."""
        return batch if self.count == 1 else cast("_B", batch[self.rows(len(batch))])


def _integer(value: Any, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
