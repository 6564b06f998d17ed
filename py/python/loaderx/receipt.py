"""Receipts: which records a training run read, from one small JSON document.

:meth:`loaderx.dataloader.DataLoader.receipt` writes one: the content digest of each stream
(:attr:`loaderx.dataset.DenseDataset.digest`), the loader configuration that decides every
global batch (records, global batch size, sampler mode and seed; a mix's source lengths), and the
steps consumed, as segments. A segment is a run of steps taken one after another with one world
size (``shard_count``), and for a mix one set of weights and the streams' positions where it
starts. A resumed loader carries the segments of the state it resumed from, so the receipt of
the last run covers the whole training, across resumes and changes of world size.

:func:`indices` turns a receipt and a step back into the record indices every rank read at that
step, without the stores: a batch is a pure function of the configuration and the step (the
sampler, :mod:`loaderx.sampler`), and rank ``r`` of ``n`` takes rows ``[r * b // n, (r + 1) * b //
n)`` of it. ``python -m loaderx receipt STEP receipt.json`` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._state import Shard, _damaged, _digests, _int, _list, _segment
from .errors import BadArgumentError

FORMAT = "loaderx-receipt"
VERSION = 1


def check(receipt: object) -> dict[str, Any]:
    """A receipt, checked: BadArgumentError for anything that is not one this loaderx reads."""
    if not isinstance(receipt, Mapping) or receipt.get("format") != FORMAT:
        raise BadArgumentError.new(f"not a loaderx receipt (its format must be {FORMAT!r})")
    if receipt.get("version") != VERSION:
        raise BadArgumentError.new(f"receipt version {receipt.get('version')!r}; this loaderx reads version {VERSION}")
    config = receipt.get("config")
    if not isinstance(config, Mapping):
        raise _damaged("the receipt has no config")
    for key in ("length", "batch_size", "mode", "seed"):
        _int(config.get(key), f"config.{key}", 0)
    segments = _list(receipt.get("segments"), "segments", _segment)
    mix = config.get("mix")
    if mix is not None and any("weights" not in s for s in segments):
        raise _damaged("a mix's segments need their weights and positions")
    return {**receipt, "segments": list(segments), "digests": _digests(receipt.get("digests", {}))}


def indices(receipt: object, step: int, mask: Any = None) -> dict[str, Any]:
    """The record indices of ``step``: ``{"step", "shard_count", "ranks": [[index, ...] per rank]}``
    (for a mix, indices into its sources joined in order). BadArgumentError when the run did not
    consume ``step``. A run with an exclusion mask needs that mask (a :class:`~loaderx.mask.Mask`
    or its file; its digest is in the receipt)."""
    r = check(receipt)
    excluded = r["config"].get("exclude")
    if isinstance(excluded, list):
        raise BadArgumentError.new("this mixed run sampled through masks per source: receipts do not replay it yet")
    if excluded is not None:
        from .mask import as_mask

        if mask is None:
            raise BadArgumentError.new("this run sampled through an exclusion mask: give its mask file too")
        mask = as_mask(mask)
        if mask.digest != excluded.get("digest"):
            raise BadArgumentError.new(f"this run used the mask {excluded.get('digest')}, not {mask.digest}")
    step = _int(step, "step", 0)
    segment = next((s for s in r["segments"] if s["start"] <= step < s["end"]), None)
    if segment is None:
        spans = ", ".join(f"{s['start']}..{s['end'] - 1}" for s in r["segments"]) or "none"
        raise BadArgumentError.new(f"step {step} was not consumed by this run (steps consumed: {spans})")
    config = r["config"]
    if config.get("mix") is not None:
        from .mix import MixSampler

        weights = segment.get("schedule") or segment["weights"]
        sampler: Any = MixSampler(config["mix"], weights, config["batch_size"], config["mode"], config["seed"])
        sampler.rebase(segment["start"], segment["positions"])
    else:
        from .sampler import Sampler

        sampler = Sampler(config["length"], config["batch_size"], config["mode"], config["seed"])
    batch = np.asarray(sampler.batch_at(step))
    if excluded is not None:
        batch = mask.select(batch)
    count = segment["shard_count"]
    ranks = [Shard(k, count).take(batch).tolist() for k in range(count)]
    return {"step": step, "shard_count": count, "ranks": ranks}
