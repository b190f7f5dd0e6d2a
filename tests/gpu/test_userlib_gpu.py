"""libdeepum on a real GPU (the H200 test machine): launch overhead per
delivery path, and real PyTorch training under `deepumctl run`.

    make all && make -C userlib
    .venv/bin/python -m pytest -m gpu tests/gpu -v

There is no kernel module or user-mode engine on that machine yet, so the
library runs in observe mode: it intercepts, identifies and delivers, with
managed memory, but nothing prefetches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent.parent
ITERATIONS = 6


def test_default_delivery_costs_at_most_a_microsecond_per_launch(tmp_path):
    out = tmp_path / "bench_launch.json"
    subprocess.run([sys.executable, str(ROOT / "scripts/bench_launch"), "--json", str(out)], check=True)
    summary = json.loads(out.read_text())["summary"]
    assert summary["write"]["overhead_us"] <= 1.0, summary
    assert summary["callback"]["overhead_us"] > summary["write"]["overhead_us"], summary


def train(model: str, stats: Path | None = None) -> dict:
    """train_check.py's result; under `deepumctl run` with @stats, counting
    the last iteration's kernels too."""
    command = [sys.executable, str(ROOT / "tests/gpu/train_check.py"), model, str(ITERATIONS)]
    if stats is not None:
        command = [sys.executable, "-c", "from pydeepum.cli import cli; cli()", "run", "--mode", "observe",
                   "--stats", str(stats), "--", *command, "--count-kernels"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def max_relative_difference(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) == ITERATIONS
    return max(abs(x - y) / max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


@pytest.mark.parametrize("model", ["gpt2", "bert", "resnet50"])
def test_training_is_unchanged_and_its_launches_repeat(tmp_path, model):
    plain, plain_again = train(model)["losses"], train(model)["losses"]
    stats = tmp_path / "run.json"
    under = train(model, stats)
    noise = max_relative_difference(plain, plain_again)  # what non-deterministic kernels leave
    assert max_relative_difference(plain, under["losses"]) <= max(10 * noise, 1e-5), (plain, under)

    data = json.loads(stats.read_text())
    assert [p["active"] for p in data["processes"]] == [True], data["processes"]
    totals = data["totals"]
    # the CUDA runtime's entry points came through cuGetProcAddress, and all were known
    assert totals["getproc_hooked"] > 0 and totals["getproc_unmatched"] == 0
    assert totals["allocs_redirected"] > 0 and totals["allocs_fallback"] == 0
    assert totals["launches_unidentified"] == 0 and totals["exec_untracked"] == 0
    steady = data["steady_state"]  # iterations 2 .. ITERATIONS
    assert steady["iterations"] == ITERATIONS - 1
    assert steady["exec_hits"] / steady["launches"] >= 0.99, steady
    # every kernel CUPTI saw run in the last iteration went through libdeepum
    (proc,) = data["processes"]
    assert proc["iterations"][-1]["launches"] == under["kernels_last_iteration"]
