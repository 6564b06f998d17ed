"""Train a tiny GPT-style model on packed token rows, stop, and resume on another process count.

Documents of a synthetic language (a random Markov chain over 64 tokens, 8 to 300 tokens each)
go into a ragged store; ``DataLoader.packed`` packs them best-fit into rows of 64 tokens. The
model attends causally within each document of a row, using ``segment_ids`` as the attention
mask, and predicts each next token of the same document.

Data parallelism is shown with ``--ranks N`` loaders in this one process, rank ``r`` taking
shard ``r`` of each global batch (as N processes would, one loader each); the step trains on
the ranks' rows joined in rank order, which is the global batch whatever N is. A checkpoint
holds the model, the optimizer and the loader state one rank saved; ``--resume`` may use
another ``--ranks``, and the run still ends with the very same weights as one that never
stopped:

    python examples/gpt_packed.py --workdir /tmp/gpt --steps 60 --ranks 4
    python examples/gpt_packed.py --workdir /tmp/gpt2 --steps 60 --ranks 2 --stop-at 25
    python examples/gpt_packed.py --workdir /tmp/gpt2 --steps 60 --ranks 3 --resume
"""

import argparse
import hashlib
import tempfile
from pathlib import Path

import numpy as np
import torch

from loaderx.converter import from_iterator
from loaderx.dataloader import DataLoader
from loaderx.dataset import RaggedDataset

VOCAB, SEQ_LEN, BATCH, WIDTH = 64, 64, 12, 32


def write_store(path):
    """3000 documents of a Markov chain: each token depends on the one before."""
    if path.exists():
        return
    rng = np.random.default_rng(0)
    cumulative = np.cumsum(rng.dirichlet(np.full(VOCAB, 0.1), VOCAB), axis=1)

    def documents():
        for n in rng.integers(8, 300, 3000):
            doc = np.empty(n, np.uint16)
            doc[0] = rng.integers(VOCAB)
            for k, u in enumerate(rng.random(n - 1), 1):
                doc[k] = min(int(np.searchsorted(cumulative[doc[k - 1]], u)), VOCAB - 1)
            yield doc

    from_iterator(path, documents(), progress=False)


class TinyGPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, WIDTH)
        self.positions = torch.nn.Embedding(SEQ_LEN, WIDTH)
        self.attn = torch.nn.MultiheadAttention(WIDTH, 4, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(), torch.nn.Linear(4 * WIDTH, WIDTH))
        self.norm1, self.norm2 = torch.nn.LayerNorm(WIDTH), torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens, positions, segment_ids):
        x = self.tokens(tokens) + self.positions(positions)
        # A slot attends to the earlier slots of its own document; padding (segment 0) to itself
        # only, so no row of the mask is empty.
        same = segment_ids[:, :, None] == segment_ids[:, None, :]
        causal = torch.tril(torch.ones(SEQ_LEN, SEQ_LEN, dtype=torch.bool))
        allowed = (same & causal & (segment_ids[:, :, None] > 0)) | torch.eye(SEQ_LEN, dtype=torch.bool)
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, attn_mask=~allowed.repeat_interleave(4, dim=0), need_weights=False)
        x = x + a
        return self.head(x + self.mlp(self.norm2(x)))


def loss_of(model, batch):
    tokens = torch.from_numpy(batch["tokens"].astype(np.int64))
    seg = torch.from_numpy(batch["segment_ids"])
    logits = model(tokens, torch.from_numpy(batch["positions"].astype(np.int64)), seg)
    # Next token of the same document only: not across a document boundary, not into padding.
    target = tokens[:, 1:]
    keep = (seg[:, 1:] == seg[:, :-1]) & (seg[:, 1:] > 0)
    return torch.nn.functional.cross_entropy(logits[:, :-1][keep], target[keep])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "loaderx-gpt-packed")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--ranks", type=int, default=1, help="loaders sharing each global batch, as processes would")
    p.add_argument("--stop-at", type=int, help="save a checkpoint after this many steps and stop")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --workdir")
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    store, checkpoint = args.workdir.parent / "gpt-docs", args.workdir / "checkpoint.pt"
    write_store(store)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one thread: the same float sums in every run
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ranks = [
        DataLoader.packed(
            RaggedDataset(store), SEQ_LEN, BATCH, "best_fit", "cyclic", seed=0, bins=16,
            shard_index=r, shard_count=args.ranks, num_workers=1,
        )
        for r in range(args.ranks)
    ]
    start = 0
    if args.resume:
        saved = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        for loader in ranks:
            loader.load_state_dict(saved["loader"])  # saved by one rank of another count
        start = saved["loader"]["step"]
        print(f"resumed at step {start} on {args.ranks} ranks (saved on {saved['ranks']})")
    for step in range(start, args.steps):
        parts = [next(loader) for loader in ranks]
        batch = {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
        loss = loss_of(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % 20 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}")
        if args.stop_at is not None and step + 1 == args.stop_at:
            state = ranks[-1].state_dict()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": state, "ranks": args.ranks}, checkpoint)
            print(f"checkpoint at step {step + 1}")
            break
    else:
        digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.state_dict().values())).hexdigest()[:16]
        print(f"weights {digest}")
    for loader in ranks:
        loader.close()


if __name__ == "__main__":
    main()
