"""Peers of the packed section (scripts/bench_packed.py): LitData's TokensLoader and Grain's
packing over the same token documents, each in its own format. Runs in the peers' venv (they need
torch, grain and array_record: ``make bench-peers-venv``) and prints one JSON object.

    PY scripts/bench_packed_peers.py --docs DOCS.npz --work DIR [--seconds S] [--quick]

``DOCS.npz`` holds ``lengths`` (int64) and ``tokens`` (uint16, the documents back to back).

* LitData: ``optimize(..., item_loader=TokensLoader())`` writes the documents as one token
  stream; ``StreamingDataset(item_loader=TokensLoader(block_size=L), shuffle=True)`` through
  ``StreamingDataLoader(batch_size=8, num_workers=2)`` reads (L)-token blocks. That is
  concatenation with no document bookkeeping (no segment ids, no padding).
* Grain: each document is an ArrayRecord record (uncompressed and zstd, ``group_size:1`` for
  random access), documents longer than L written as L-token pieces (Grain's packers refuse a
  longer element). ``MapDataset.source(ArrayRecordDataSource).shuffle().map(decode)``, then
  ``ConcatThenSplitIterDataset`` or ``BestFitPackIterDataset`` (128 bins, as loaderx's
  default), ``batch(8)``; in this process and with ``mp_prefetch`` over 2 worker processes.
* Padding of Grain's best fit over a whole epoch of the same pieces, per bin count.

Tokens/s count the slots of the batches (8 x L each), as the loaderx rows do.
"""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

BATCH = 8


def _pieces(lengths, seq_len):
    """(start, length) of every document, longer ones cut into seq_len pieces."""
    ends = np.cumsum(lengths)
    out = []
    for start, n in zip((ends - lengths).tolist(), lengths.tolist()):
        while n > seq_len:
            out.append((start, seq_len))
            start, n = start + seq_len, n - seq_len
        out.append((start, n))
    return out


def _rate(batches, seq_len, seconds):
    """Slots (BATCH x seq_len per batch) per second over ``seconds``, after 3 warm-up batches."""
    it = iter(batches)
    for _ in range(3):
        next(it)
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        next(it)
        n += 1
    return n * BATCH * seq_len / (time.perf_counter() - t)


# --- LitData -------------------------------------------------------------------------------

_TOKENS = None


def _emit(span):
    """One optimize() input: documents [a, b) of the token file, one array each."""
    global _TOKENS
    if _TOKENS is None:
        _TOKENS = np.load(os.environ["LX_PEERS_TOKENS"], mmap_mode="r")
        _ENDS[:] = np.cumsum(np.load(os.environ["LX_PEERS_LENGTHS"])).tolist()
    a, b = span
    for i in range(a, b):
        start = _ENDS[i - 1] if i else 0
        yield np.array(_TOKENS[start : _ENDS[i]])


_ENDS: list = []


def litdata_rates(lengths, work, seq_lens, seconds):
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader, optimize

    out = work / "litdata-tokens"
    if not (out / "index.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        n = len(lengths)
        step = max(1, n // 16)
        spans = [(a, min(n, a + step)) for a in range(0, n, step)]
        optimize(fn=_emit, inputs=spans, output_dir=str(out), chunk_bytes="64MB", num_workers=2, item_loader=TokensLoader(), verbose=False)
    rates = {}
    for seq_len in seq_lens:
        ds = StreamingDataset(str(out), item_loader=TokensLoader(block_size=seq_len), shuffle=True, drop_last=True, seed=1)
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2, drop_last=True)

        def forever(loader=loader):
            while True:
                yield from loader

        rates[seq_len] = _rate(forever(), seq_len, seconds)
    return rates


# --- Grain ---------------------------------------------------------------------------------


def _array_record(path, tokens, pieces, options):
    from array_record.python.array_record_module import ArrayRecordWriter

    if path.exists():
        return
    tmp = path.with_suffix(".tmp")
    w = ArrayRecordWriter(str(tmp), options)
    for start, n in pieces:
        w.write(tokens[start : start + n].tobytes())
    w.close()
    os.replace(tmp, path)


def _decode(raw):
    return {"tokens": np.frombuffer(raw, np.uint16)}


def _grain_batches(path, seq_len, packing, bins, workers):
    import grain
    from grain import experimental as ge

    ds = grain.MapDataset.source(grain.sources.ArrayRecordDataSource([str(path)])).shuffle(seed=1).repeat().map(_decode)
    it = ds.to_iter_dataset()
    if packing == "best_fit":
        it = ge.BestFitPackIterDataset(it, length_struct={"tokens": seq_len}, num_packing_bins=bins, shuffle_bins=False)
    else:
        it = ge.ConcatThenSplitIterDataset(it, length_struct={"tokens": seq_len})
    it = it.batch(BATCH, drop_remainder=True)
    if workers:
        it = it.mp_prefetch(grain.multiprocessing.MultiprocessingOptions(num_workers=workers))
    return it


def grain_rates(lengths, tokens, work, seq_lens, seconds, bins):
    rates = {}
    for seq_len in seq_lens:
        pieces = _pieces(lengths, seq_len)
        for codec, options in (("raw", "uncompressed,group_size:1"), ("zstd", "zstd:3,group_size:1")):
            path = work / f"grain-{codec}-{seq_len}.array_record"
            _array_record(path, tokens, pieces, options)
            for packing in ("concat", "best_fit"):
                for workers in (0, 2):
                    key = f"{codec}/{seq_len}/{packing}/{workers}"
                    rates[key] = _rate(_grain_batches(path, seq_len, packing, bins, workers), seq_len, seconds)
                    print(f"grain {key}: {rates[key] / 1e6:.2f} M tokens/s", file=sys.stderr, flush=True)
    return rates


def grain_padding(lengths, seq_lens, bin_counts):
    """Grain's best-fit padding over one epoch of the pieces (in order, no shuffle), per bins."""
    import grain
    from grain import experimental as ge

    out = {}
    for seq_len in seq_lens:
        pieces = [n for _, n in _pieces(lengths, seq_len)]
        for bins in bin_counts:
            src = grain.MapDataset.source(pieces).map(lambda n: {"tokens": np.ones(n, np.uint16)}).to_iter_dataset()
            packed = ge.BestFitPackIterDataset(src, length_struct={"tokens": seq_len}, num_packing_bins=bins, shuffle_bins=False)
            rows = filled = 0
            for row in packed:
                rows += 1
                filled += int((row["tokens_segment_ids"] != 0).sum())
            out[f"{seq_len}/{bins}"] = 1 - filled / (rows * seq_len)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--bins", type=int, default=128)
    ap.add_argument("--padding-bins", default="8,128,1024")
    args = ap.parse_args()
    from absl import flags  # Grain's worker processes read absl flags, parsed or not

    flags.FLAGS(sys.argv[:1])
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    docs = np.load(args.docs)
    lengths, tokens = docs["lengths"], docs["tokens"]
    np.save(work / "peers-tokens.npy", tokens)
    np.save(work / "peers-lengths.npy", lengths)
    os.environ["LX_PEERS_TOKENS"] = str(work / "peers-tokens.npy")
    os.environ["LX_PEERS_LENGTHS"] = str(work / "peers-lengths.npy")
    seq_lens = (2048, 8192)
    result = {
        "grain_padding": grain_padding(lengths, seq_lens, [int(b) for b in args.padding_bins.split(",")]),
        "litdata": litdata_rates(lengths, work, seq_lens, args.seconds),
        "grain": grain_rates(lengths, tokens, work, seq_lens, args.seconds, args.bins),
    }
    import grain
    import litdata

    result["versions"] = {"grain": grain.__version__, "litdata": litdata.__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
