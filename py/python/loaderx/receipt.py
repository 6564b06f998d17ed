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


def _masks(excluded: Any, mask: Any, sources: int) -> list[Any] | None:
    """The run's masks, one (or None) per source, checked against the digests it recorded."""
    from .mask import as_mask

    if excluded is None:
        return None
    recorded = excluded if isinstance(excluded, list) else [excluded]
    if len(recorded) != sources:
        raise _damaged(f"config.exclude lists {len(recorded)} masks for {sources} sources")
    given = mask if isinstance(mask, (list, tuple)) else [mask]
    if mask is None or len(given) != len(recorded):
        need = "its mask file" if len(recorded) == 1 else f"a list of {len(recorded)}: each source's mask file, or None"
        raise BadArgumentError.new(f"this run sampled through exclusion masks: give {need}")
    out: list[Any] = []
    for j, (want, m) in enumerate(zip(recorded, given)):
        if want is None:
            if m is not None:
                raise BadArgumentError.new(f"source {j} of this run was not masked: give None for it")
            out.append(None)
            continue
        if m is None:
            raise BadArgumentError.new(f"source {j} of this run was masked: give its mask file")
        m = as_mask(m)
        if m.digest != want.get("digest"):
            raise BadArgumentError.new(f"this run used the mask {want.get('digest')}, not {m.digest}")
        out.append(m)
    return out


def indices(receipt: object, step: int, mask: Any = None, sources: Any = None) -> dict[str, Any]:
    """The record indices of ``step``: ``{"step", "shard_count", "ranks": [[index, ...] per rank]}``
    (for a mix, indices into its sources joined in order). BadArgumentError when the run did not
    consume ``step``. A run with an exclusion mask needs that mask (a :class:`~loaderx.mask.Mask`
    or its file; its digest is in the receipt); a mix with masks per source a list of them, None
    for a source without one.

    A packed run (:meth:`~loaderx.dataloader.DataLoader.packed`) needs its ``sources`` too (its
    RaggedDataset, or the list of them), whose document lengths decide its rows. Its ``ranks``
    list the records each rank's rows hold, in order of first appearance, and ``rows`` each
    rank's rows as ``[record, first token, tokens]`` segments in column order."""
    r = check(receipt)
    config = r["config"]
    mix = config.get("mix")
    packed = config.get("packed")
    if packed is not None and sources is None:
        raise BadArgumentError.new("this run packed token documents: give its sources (their document lengths decide the rows)")
    count_sources = len(mix) if mix is not None else 1
    masks = _masks(config.get("exclude"), mask, count_sources)
    step = _int(step, "step", 0)
    segment = next((s for s in r["segments"] if s["start"] <= step < s["end"]), None)
    if segment is None:
        spans = ", ".join(f"{s['start']}..{s['end'] - 1}" for s in r["segments"]) or "none"
        raise BadArgumentError.new(f"step {step} was not consumed by this run (steps consumed: {spans})")
    sampler: Any
    if mix is not None:
        from .mix import MixSampler

        weights = segment.get("schedule") or segment["weights"]
        sampler = MixSampler(mix, weights, config["batch_size"], config["mode"], config["seed"])
        sampler.rebase(segment["start"], segment["positions"])
    else:
        from .sampler import Sampler

        sampler = Sampler(config["length"], config["batch_size"], config["mode"], config["seed"])
    count = segment["shard_count"]
    if packed is not None:
        return _packed(config, sources, masks, sampler if mix is not None else None, step, count)
    batch = np.asarray(sampler.batch_at(step))
    if masks is not None:
        from .mask import joined_records

        lengths = [m.length if m is not None else n for m, n in zip(masks, mix or [config["length"]])]
        batch = joined_records(lengths, masks, batch)
    ranks = [Shard(k, count).take(batch).tolist() for k in range(count)]
    return {"step": step, "shard_count": count, "ranks": ranks}


def _packed(config: Mapping[str, Any], sources: Any, masks: list[Any] | None, mix: Any, step: int, count: int) -> dict[str, Any]:
    """A packed run's step: each row's segments, from the sources' document lengths."""
    from .packing import PackedSource, check_packing, check_source

    datasets = [check_source(d) for d in (sources if isinstance(sources, (list, tuple)) else [sources])]
    kept = [len(d) if m is None else m.kept for d, m in zip(datasets, masks or [None] * len(datasets))]
    want = config["mix"] if mix is not None else [config["length"]]
    if kept != list(want):
        raise BadArgumentError.new(f"this run packed sources of {list(want)} documents (kept); these hold {kept}")
    p = config["packed"]
    seq_len, packing, bins = check_packing(p.get("seq_len"), p.get("packing"), p.get("bins", 128))
    b = config["batch_size"]
    src = PackedSource(datasets, seq_len, b, packing, bins, config["mode"], config["seed"], Shard(0, 1), mix, masks)
    if mix is None:
        plan = [(0, step * b, np.arange(b))]
    else:
        which, positions = mix.slots_at(step)
        plan = []
        for j in np.unique(which).tolist():
            slots = np.flatnonzero(which == j)
            plan.append((j, int(positions[slots[0]]), slots))
    before = np.concatenate([[0], np.cumsum([len(d) for d in datasets])]).astype(np.int64)
    rows: list[list[list[int]]] = [[] for _ in range(b)]
    for j, first, slots in plan:
        row, _col, length, doc, offset = src.packer(j).segments(first, len(slots))
        for g_row, g_len, g_doc, g_off in zip(row.tolist(), length.tolist(), doc.tolist(), offset.tolist()):
            rows[int(slots[g_row - first])].append([int(before[j]) + g_doc, g_off, g_len])
    out_rows = [Shard(k, count).take(rows) for k in range(count)]
    ranks = [list(dict.fromkeys(seg[0] for row in rank for seg in row)) for rank in out_rows]
    return {"step": step, "shard_count": count, "ranks": ranks, "rows": out_rows}
