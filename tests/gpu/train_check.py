#!/usr/bin/env python3
"""Training losses of one model, for tests/gpu/test_userlib_gpu.py, which
runs this with and without libdeepum and compares.

usage: train_check.py MODEL ITERATIONS [--count-kernels]
       MODEL: gpt2, bert or resnet50

Random initialisation from a config (no downloads), fixed seeds and inputs,
deterministic algorithms where PyTorch has them.  Marks each iteration for
libdeepum (deepum_mark_iteration, when the library is loaded).  Prints one
JSON line: {"model": ..., "losses": [...]}, and with --count-kernels the
number of kernels the last iteration ran by CUPTI (torch.profiler), to
check that libdeepum saw every launch.

The H200 rule: it refuses (exit 3) unless the GPU has twice the memory the
model needs free, so that managed memory never oversubscribes the GPU.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts

import torch  # noqa: E402

GIB = 1 << 30
NEEDS = {"gpt2": 12 * GIB, "bert": 8 * GIB, "resnet50": 8 * GIB}


def build(model: str):
    """(module, optimizer, one training step's loss function)."""
    if model == "gpt2":  # GPT-2 124M, batch 8 x 512, as the bundled H200 trace
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257)
        net = GPT2LMHeadModel(cfg).cuda().train()
        x = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")
        return net, torch.optim.AdamW(net.parameters(), lr=1e-4), lambda: net(x, labels=x).loss
    if model == "bert":  # BERT-base masked LM, batch 16 x 128
        from transformers import BertConfig, BertForMaskedLM

        cfg = BertConfig()
        net = BertForMaskedLM(cfg).cuda().train()
        x = torch.randint(0, cfg.vocab_size, (16, 128), device="cuda")
        return net, torch.optim.AdamW(net.parameters(), lr=1e-4), lambda: net(input_ids=x, labels=x).loss
    if model == "resnet50":  # ResNet-50, batch 32 x 3 x 224 x 224, 1000 classes
        from torchvision.models import resnet50

        net = resnet50(weights=None).cuda().train()
        x = torch.randn(32, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        loss = torch.nn.CrossEntropyLoss()
        return net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), lambda: loss(net(x), y)
    raise SystemExit(f"unknown model {model!r}; one of {', '.join(NEEDS)}")


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


def main(model: str, iterations: int, kernels: bool) -> None:
    free, _ = torch.cuda.mem_get_info()
    if free < 2 * NEEDS[model]:
        print(f"train_check: {free / GIB:.1f} GiB free, {model} needs {2 * NEEDS[model] / GIB:.0f}: refusing",
              file=sys.stderr)
        sys.exit(3)
    torch.manual_seed(0)
    # Some backward kernels (adaptive pooling) have no deterministic version:
    # they warn, and the test measures the run-to-run noise they leave.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    mark = getattr(ctypes.CDLL(None), "deepum_mark_iteration", None)
    net, opt, step_loss = build(model)
    losses = []

    def step() -> None:
        loss = step_loss()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        losses.append(loss.item())

    result = {"model": model}
    for i in range(iterations):
        if mark:
            mark()
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
