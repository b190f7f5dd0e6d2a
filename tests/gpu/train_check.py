#!/usr/bin/env python3
"""Training losses of one workload, for tests/gpu/test_userlib_gpu.py, which
runs this with and without libdeepum and compares.

usage: train_check.py WORKLOAD ITERATIONS [--count-kernels]
       WORKLOAD: gpt2, bert, resnet50 or gpt2-tiny (scripts/gpu/models.py)

Random initialisation from a config (no downloads), fixed seeds and inputs,
deterministic algorithms where PyTorch has them.  Marks each iteration for
libdeepum (pydeepum.torch.mark_iteration).  Prints one JSON line:
{"model": ..., "losses": [...]}, and with --count-kernels the number of
kernels the last iteration ran by CUPTI (torch.profiler), to check that
libdeepum saw every launch.  Refuses (exit 3) unless the GPU has twice the
workload's memory free (models.build).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts/gpu")]

import torch  # noqa: E402

import models  # noqa: E402
from pydeepum.torch import mark_iteration  # noqa: E402


def count_kernels(step) -> int:
    """Kernels @step runs, as CUPTI sees them."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "kernel")


def main(name: str, iterations: int, kernels: bool) -> None:
    # Some backward kernels (adaptive pooling) have no deterministic version:
    # they warn, and the test measures the run-to-run noise they leave.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    workload = models.build(name)
    losses = []

    def step() -> None:
        losses.append(workload.step().item())

    result = {"model": name}
    for i in range(iterations):
        mark_iteration()
        if kernels and i == iterations - 1:
            result["kernels_last_iteration"] = count_kernels(step)
        else:
            step()
    result["losses"] = losses
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["--count-kernels"]):
        raise SystemExit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["--count-kernels"])
