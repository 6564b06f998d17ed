"""Train a small MLP on scikit-learn's digits with JAX and optax, fed by loaderx.jax.

The 1797 8x8 images (float32 in [0, 1]) and their labels (int32, 0..9) go into two loaderx
stores. ``loaderx.jax.DataLoader`` yields each global batch of 64 as ``jax.Array``s sharded
over the devices (4 CPU devices here, set by XLA_FLAGS before JAX is imported), and a jitted
adam step trains on them with the parameters replicated. On several hosts the same script
runs unchanged after ``jax.distributed.initialize()``: each process reads only its rows.

    python examples/jax_digits.py [--steps 300] [--workdir DIR]

Prints the loss every 50 steps, then ``accuracy <float>`` over all 1797 images and
``batches_per_s <float>``, the loader's rate of global batches.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402  (after XLA_FLAGS)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import loaderx.jax  # noqa: E402
from loaderx.converter import from_numpy  # noqa: E402
from loaderx.dataset import DenseDataset  # noqa: E402


def write_stores(workdir):
    """The digits as two stores, ``images`` and ``labels`` (kept for a rerun in the same dir)."""
    digits = load_digits()
    if not (workdir / "images").exists():
        from_numpy(workdir / "images", (digits.images / 16).astype(np.float32), progress=False)
        from_numpy(workdir / "labels", digits.target.astype(np.int32), progress=False)
    return digits


def init_mlp(key, sizes=(64, 128, 10)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {"w": jax.random.normal(k, (m, n)) * jnp.sqrt(2 / m), "b": jnp.zeros(n)}
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    ]


def logits(params, images):
    h = images.reshape(images.shape[0], -1)
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    return h @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, batch):
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, batch["x"]), batch["y"]).mean()


def train(workdir, steps):
    digits = write_stores(workdir)
    streams = {"x": DenseDataset(workdir / "images"), "y": DenseDataset(workdir / "labels")}
    loader = loaderx.jax.DataLoader(streams, batch_size=64, num_workers=2, seed=0)

    optimizer = optax.adam(3e-3)
    replicated = NamedSharding(loader.sharding.mesh, PartitionSpec())
    params = jax.device_put(init_mlp(jax.random.key(0)), replicated)
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    with loader:
        for k in range(steps):
            params, opt_state, loss = step(params, opt_state, next(loader))
            if k % 50 == 0 or k == steps - 1:
                print(f"step {k} loss {float(loss):.4f}", flush=True)

        start = time.perf_counter()
        for _ in range(steps):
            jax.block_until_ready(next(loader))
        rate = steps / (time.perf_counter() - start)

    predicted = jnp.argmax(logits(params, jnp.asarray(digits.images / 16, dtype=jnp.float32)), axis=-1)
    print(f"accuracy {float(jnp.mean(predicted == digits.target)):.4f}")
    print(f"batches_per_s {rate:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workdir", type=Path, help="where the stores go (default: a temporary directory)")
    args = parser.parse_args()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        train(args.workdir, args.steps)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            train(Path(tmp), args.steps)


if __name__ == "__main__":
    main()
