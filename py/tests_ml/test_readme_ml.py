"""The README's torch and JAX blocks run, each in a fresh interpreter of this (the torch/JAX)
venv; py/tests/test_quickstart_and_readme.py runs every other block and leaves these here."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_quickstart_and_readme import _BLOCKS, needs_ml  # noqa: E402

ML_BLOCKS = [b for b in _BLOCKS if needs_ml(b)]


def test_the_readme_shows_the_torch_and_jax_entry_points():
    text = "\n".join(ML_BLOCKS)
    assert "import loaderx.torch" in text and "import loaderx.jax" in text and "from loaderx.ray import" in text


@pytest.mark.parametrize("block", ML_BLOCKS, ids=[f"block{i}" for i in range(len(ML_BLOCKS))])
def test_readme_ml_block_runs(block, tmp_path):
    script = tmp_path / "snippet.py"
    script.write_text(block)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{block}\n--- stderr\n{proc.stderr[-6000:]}"
