"""From an HF ``datasets.Dataset`` to loaderx stores (built locally; nothing is downloaded).

A small text dataset with token ids of varying length: the ``tokens`` column (a list of ints
per row) becomes a ragged store, the ``text`` column a store of byte strings, and ``label`` a
dense one. The DataLoader reads the dense labels; a RaggedDataset with ``pad`` gives padded
token batches.

    python examples/hf_to_loaderx.py --workdir /tmp/hf-demo
"""

import argparse
import tempfile
from pathlib import Path

import datasets
import numpy as np

from loaderx.converter import from_arrow
from loaderx.dataset import DenseDataset, RaggedDataset, pad

WORDS = "the a loader store reads every record once per epoch and never twice".split()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="loaderx-hf-")))
    args = p.parse_args()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, int(rng.integers(2, 9)))) for _ in range(1000)]
    hf = datasets.Dataset.from_dict({
        "text": texts,
        "tokens": [[WORDS.index(w) for w in t.split()] for t in texts],
        "label": [len(t.split()) % 2 for t in texts],
    })
    print(hf)
    for column in ("text", "tokens", "label"):
        from_arrow(args.workdir / column, hf, column=column, progress=False)

    tokens, labels = RaggedDataset(args.workdir / "tokens"), DenseDataset(args.workdir / "label")
    batch, lengths = pad(tokens[[0, 1, 2]])
    print(f"tokens: {len(tokens)} ragged records of {tokens.dtype}; padded batch {batch.shape}, lengths {lengths.tolist()}")
    print(f"labels: {len(labels)} records, first {labels[:5].tolist()}")
    text = RaggedDataset(args.workdir / "text")  # byte strings: uint8 records
    first = text[0].tobytes().decode()
    print(f"text: {len(text)} byte strings, first {first!r}, equal to the source: {first == texts[0]}")


if __name__ == "__main__":
    main()
