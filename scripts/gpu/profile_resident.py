#!/usr/bin/env python3
"""Kernel durations of a training workload with all memory resident (plain
cudaMalloc, no Unified Memory): the kernels' compute times, which an
access-set trace cannot give (its kernel times include fault stalls).  The
simulator takes them with `deepumctl simulate --compute FILE`.

    python3 scripts/gpu/profile_resident.py WORKLOAD OUTDIR

WORKLOAD is one of scripts/gpu/models.py's (the same models and batches the
traces are captured with).  Writes OUTDIR/<workload>-resident-kernels.csv.gz
(iteration,start_ns,dur_ns,gx,gy,gz,bx,by,bz,name) and
OUTDIR/<workload>-resident.json (iteration times, environment).  GPU only.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import models  # noqa: E402


def main(name: str, out: str, timed: int = 10, profiled: int = 3) -> None:
    workload = models.build(name)
    for _ in range(3):
        workload.step()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        t0 = time.perf_counter()
        workload.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)

    trace_path = os.path.join("/tmp", f"{name}_prof.json")
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(profiled):
            torch.cuda.synchronize()
            workload.step()
            torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    # Iterations are separated by the synchronize gaps: split on the largest gaps.
    gaps = sorted(range(1, len(kernels)),
                  key=lambda i: kernels[i]["ts"] - kernels[i - 1]["ts"] - kernels[i - 1]["dur"])[-(profiled - 1):]
    bounds = [0] + sorted(gaps) + [len(kernels)]
    with gzip.open(os.path.join(out, f"{name}-resident-kernels.csv.gz"), "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "start_ns", "dur_ns", "gx", "gy", "gz", "bx", "by", "bz", "name"])
        for it in range(profiled):
            for e in kernels[bounds[it]:bounds[it + 1]]:
                a = e.get("args", {})
                g, b = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
                w.writerow([it, int(e["ts"] * 1000), int(e["dur"] * 1000), *g, *b, e["name"]])
    result = {
        "what": f"{workload.description}, resident (cudaMalloc)",
        "iteration_s": times,
        "median_iteration_s": sorted(times)[len(times) // 2],
        "kernels_per_iteration": [bounds[i + 1] - bounds[i] for i in range(profiled)],
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "cuda": torch.version.cuda,
    }
    with open(os.path.join(out, f"{name}-resident.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "iteration_s"}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
