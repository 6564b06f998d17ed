"""The examples in examples/ run as documented, and do what their docs say."""

import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script, *args):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_torch_digits_trains_and_a_resumed_run_ends_with_the_same_weights(tmp_path):
    straight = run("torch_digits.py", "--workdir", tmp_path / "a", "--steps", 200)
    stopped = run("torch_digits.py", "--workdir", tmp_path / "b", "--steps", 200, "--stop-at", 70)
    assert "checkpoint at step 70" in stopped and "accuracy" not in stopped
    resumed = run("torch_digits.py", "--workdir", tmp_path / "b", "--steps", 200, "--resume")
    weights = [re.search(r"^weights (\w+)$", out, re.M).group(1) for out in (straight, resumed)]
    assert weights[0] == weights[1]
    accuracy = float(re.search(r"^accuracy ([\d.]+)$", straight, re.M).group(1))
    assert accuracy >= 0.9
    losses = [float(v) for v in re.findall(r"^step \d+ loss ([\d.]+)$", straight, re.M)]
    assert len(losses) == 4 and losses[-1] < losses[0]


def test_mixing_keeps_exact_shares_and_resumes_with_new_weights_on_two_ranks(tmp_path):
    out = run("mixing.py", "--workdir", tmp_path)
    rows = re.findall(r"^step (\d+) weights ([\d./]+)\s+source 0:\s*(\d+)\s+source 1:\s*(\d+)", out, re.M)
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [(r[1], int(r[2]), int(r[3])) for r in rows[:3]] == [("0.7/0.3", 14, 6)] * 3
    assert [(r[1], int(r[2]), int(r[3])) for r in rows[3:]] == [("0.5/0.5", 10, 10)] * 3
    assert "checkpoint at step 3" in out and "rank 0 has 10 records" in out


def test_parquet_to_loader_round_trips_the_digits(tmp_path):
    out = run("parquet_to_loader.py", "--workdir", tmp_path)
    assert "store image: 1797 records of (64,) float32" in out and "store label: 1797 records of () int64" in out
    assert "batch x (128, 64) float32, y (128,) int64" in out
    assert "fixed_size_list<item: float>[64], equal to the source: True" in out
    assert re.search(r"(\d+) row groups", out) and int(re.search(r"(\d+) row groups", out).group(1)) > 1


def test_hf_to_loaderx_keeps_tokens_text_and_labels(tmp_path):
    out = run("hf_to_loaderx.py", "--workdir", tmp_path)
    assert "tokens: 1000 ragged records of int64" in out and "labels: 1000 records" in out
    assert "equal to the source: True" in out
    lengths = [int(v) for v in re.search(r"lengths \[([\d, ]+)\]", out).group(1).split(",")]
    assert re.search(r"padded batch \(3, (\d+)\)", out).group(1) == str(max(lengths))


def test_ray_convert_writes_manifests_and_trains_from_them(tmp_path):
    out = run("ray_convert.py", "--workdir", tmp_path, "--steps", 300)
    stores = {c: re.search(rf"manifest {c}: (\d+) stores, (\d+) records", out).groups() for c in "xy"}
    assert stores["x"] == stores["y"] and stores["x"][1] == "1797" and int(stores["x"][0]) >= 2
    total, source = re.search(r"sum (\d+) \(source sum (\d+)\)", out).groups()
    assert total == source
    assert float(re.search(r"^accuracy ([\d.]+)$", out, re.M).group(1)) >= 0.9


def test_gpt_packed_resumes_on_another_rank_count_to_the_same_weights(tmp_path):
    straight = run("gpt_packed.py", "--workdir", tmp_path / "a", "--steps", 60, "--ranks", 4)
    stopped = run("gpt_packed.py", "--workdir", tmp_path / "b", "--steps", 60, "--ranks", 2, "--stop-at", 25)
    assert "checkpoint at step 25" in stopped and "weights" not in stopped
    resumed = run("gpt_packed.py", "--workdir", tmp_path / "b", "--steps", 60, "--ranks", 3, "--resume")
    assert "resumed at step 25 on 3 ranks (saved on 2)" in resumed
    weights = [re.search(r"^weights (\w+)$", out, re.M).group(1) for out in (straight, resumed)]
    assert weights[0] == weights[1]
    losses = [float(v) for v in re.findall(r"^step \d+ loss ([\d.]+)$", straight, re.M)]
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_torch_images_trains_a_cnn_on_a_store_of_jpegs(tmp_path):
    out = run("torch_images.py", "--workdir", tmp_path, "--steps", 300)
    assert "store: 1600 JPEGs (jpeg), pictures (64, 64, 3) uint8" in out
    losses = [float(v) for v in re.findall(r"^step \d+ loss ([\d.]+)$", out, re.M)]
    assert len(losses) == 3 and losses[-1] < 0.5
    accuracy = float(re.search(r"^accuracy ([\d.]+) on 400 held-out JPEGs", out, re.M).group(1))
    assert accuracy >= 0.9
