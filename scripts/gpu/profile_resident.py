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

sys.path.insert(0, str(Path(__file__).resolve().parent))


def split_iterations(kernels: list[dict], profiled: int) -> list[list[dict]]:
    """@kernels (sorted by start) as @profiled iterations of equal length
    with the same kernel sequence, which synchronized training steps are.
    (Splitting at the largest idle gaps, as this did first, cut BERT's
    first profiled iteration at its host syncs.)"""
    per, extra = divmod(len(kernels), profiled)
    parts = [kernels[i * per:(i + 1) * per] for i in range(profiled)]
    names = [[k["name"] for k in part] for part in parts]
    if extra or not per or any(n != names[0] for n in names[1:]):
        raise ValueError(f"{len(kernels)} kernels do not make {profiled} identical iterations")
    return parts


def main(name: str, out: str, timed: int = 10, profiled: int = 3) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import models

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
    iterations = split_iterations(sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]),
                                  profiled)
    with gzip.open(os.path.join(out, f"{name}-resident-kernels.csv.gz"), "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "start_ns", "dur_ns", "gx", "gy", "gz", "bx", "by", "bz", "name"])
        for it, kernels in enumerate(iterations):
            for e in kernels:
                a = e.get("args", {})
                g, b = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
                w.writerow([it, int(e["ts"] * 1000), int(e["dur"] * 1000), *g, *b, e["name"]])
    result = {
        "what": f"{workload.description}, resident (cudaMalloc)",
        "iteration_s": times,
        "median_iteration_s": sorted(times)[len(times) // 2],
        "kernels_per_iteration": [len(kernels) for kernels in iterations],
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
