"""examples/jax_digits.py runs as documented: it writes its stores into --workdir, trains (the
loss falls) to at least 85% accuracy on the digits, and reports the loader's batch rate."""

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jax_digits.py"


def test_jax_digits_trains(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the example sets 4 host devices itself
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "120", "--workdir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    losses = [(int(k), float(v)) for k, v in re.findall(r"^step (\d+) loss ([\d.]+)$", out, re.M)]
    assert [k for k, _ in losses] == [0, 50, 100, 119], out
    assert losses[-1][1] < losses[0][1] / 4, f"the loss did not fall: {losses}"
    accuracy = float(re.search(r"^accuracy ([\d.]+)$", out, re.M).group(1))
    assert accuracy >= 0.85, out
    assert float(re.search(r"^batches_per_s ([\d.]+)$", out, re.M).group(1)) > 0, out
    assert (tmp_path / "images").is_dir() and (tmp_path / "labels").is_dir()
