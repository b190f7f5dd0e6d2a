#!/usr/bin/env python3
"""Kernel durations of GPT-2 124M training with all memory resident (plain
cudaMalloc, no Unified Memory), in the configuration of the bundled H200 trace
(tests/data/README.md): random init, batch 8 x 512, AdamW,
zero_grad(set_to_none=False).  These are the kernels' compute times, which an
access-set trace cannot give (its kernel times include fault stalls); the
simulator uses them.

Writes OUT/gpt2-resident-kernels.csv (iteration,start_ns,dur_ns,gx,gy,gz,bx,by,bz,name)
and OUT/gpt2-resident.json (iteration times, environment).  GPU only.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import GPT2Config, GPT2LMHeadModel


def main(out: str, timed: int = 10, profiled: int = 3) -> None:
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")

    def step() -> None:
        model(x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(timed):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)

    trace_path = os.path.join("/tmp", "gpt2_prof.json")
    markers = []
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(profiled):
            torch.cuda.synchronize()
            markers.append(time.perf_counter_ns())
            step()
            torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    # Iterations are separated by the synchronize gaps: split on the largest gaps.
    gaps = sorted(range(1, len(kernels)),
                  key=lambda i: kernels[i]["ts"] - kernels[i - 1]["ts"] - kernels[i - 1]["dur"])[-(profiled - 1):]
    bounds = [0] + sorted(gaps) + [len(kernels)]
    with open(os.path.join(out, "gpt2-resident-kernels.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "start_ns", "dur_ns", "gx", "gy", "gz", "bx", "by", "bz", "name"])
        for it in range(profiled):
            for e in kernels[bounds[it]:bounds[it + 1]]:
                a = e.get("args", {})
                g, b = a.get("grid", [0, 0, 0]), a.get("block", [0, 0, 0])
                w.writerow([it, int(e["ts"] * 1000), int(e["dur"] * 1000), *g, *b, e["name"]])
    result = {
        "what": "GPT-2 124M training, batch 8x512, AdamW, resident (cudaMalloc)",
        "iteration_s": times,
        "median_iteration_s": sorted(times)[len(times) // 2],
        "kernels_per_iteration": [bounds[i + 1] - bounds[i] for i in range(profiled)],
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "cuda": torch.version.cuda,
    }
    with open(os.path.join(out, "gpt2-resident.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "iteration_s"}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
