"""The training workloads of the GPU scripts and tests, random init, no
downloads: GPT-2 124M at batch 8 x 512 (the configuration of the bundled H200
trace, tests/data/README.md, and of profile_resident.py), BERT-base at
16 x 128, ResNet-50 at 32 x 224, and a two-layer GPT-2 for quick checks.

ResNet-50 is written out here (He et al., 2016: bottleneck blocks 3-4-6-3)
because the H200 machine has torch and transformers but not torchvision.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

GIB = 1 << 30


@dataclass
class Workload:
    description: str
    net: nn.Module
    optimizer: torch.optim.Optimizer
    loss: Callable[[], torch.Tensor]  # one forward pass, on fixed inputs

    def step(self) -> torch.Tensor:
        """One training iteration; its loss (not synchronized)."""
        loss = self.loss()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)
        return loss


def _gpt2(layers: int, width: int, heads: int, batch: int, tokens: int) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=50257)
    net = GPT2LMHeadModel(cfg).cuda().train()
    x = torch.randint(0, cfg.vocab_size, (batch, tokens), device="cuda")
    return Workload(f"GPT-2 ({layers} layers, d={width}, {heads} heads, vocab 50257), batch {batch} x {tokens}, AdamW",
                    net, torch.optim.AdamW(net.parameters(), lr=1e-4), lambda: net(x, labels=x).loss)


def _bert() -> Workload:
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig()  # BERT-base: 12 layers, d=768, 12 heads, vocab 30522
    net = BertForMaskedLM(cfg).cuda().train()
    x = torch.randint(0, cfg.vocab_size, (16, 128), device="cuda")
    return Workload("BERT-base masked LM (12 layers, d=768, 12 heads), batch 16 x 128, AdamW",
                    net, torch.optim.AdamW(net.parameters(), lr=1e-4), lambda: net(input_ids=x, labels=x).loss)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (with the block's stride), 1x1 expand by 4, plus the shortcut."""

    def __init__(self, inputs: int, width: int, stride: int):
        super().__init__()
        outputs = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(inputs, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, outputs, 1, bias=False), nn.BatchNorm2d(outputs))
        self.shortcut = nn.Identity() if stride == 1 and inputs == outputs else nn.Sequential(
            nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet50(classes: int = 1000) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                               nn.MaxPool2d(3, 2, 1)]
    inputs = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(inputs, width, stride if i == 0 else 1))
            inputs = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inputs, classes)]
    return nn.Sequential(*layers)


def _resnet50() -> Workload:
    net = resnet50().cuda().train()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (32,), device="cuda")
    loss = nn.CrossEntropyLoss()
    return Workload("ResNet-50 (bottlenecks 3-4-6-3, 1000 classes), batch 32 x 3 x 224 x 224, SGD momentum 0.9",
                    net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), lambda: loss(net(x), y))


# name: (builder, GPU memory it needs at most, with margin; the reference GPT-2 peaked at 7.97 GiB)
WORKLOADS: dict[str, tuple[Callable[[], Workload], int]] = {
    "gpt2": (lambda: _gpt2(12, 768, 12, 8, 512), 12 * GIB),
    "bert": (_bert, 8 * GIB),
    "resnet50": (_resnet50, 8 * GIB),
    "gpt2-tiny": (lambda: _gpt2(2, 256, 4, 4, 128), 2 * GIB),
    # GPT-2 XL (1.56B parameters): weights, gradients and AdamW states ~25 GB, plus activations.
    "gpt2-xl": (lambda: _gpt2(48, 1600, 25, 4, 512), 48 * GIB),
}


def build(name: str) -> Workload:
    """The workload @name, built after checking the GPU can hold it twice over.

    The H200 rule: managed memory must never exceed what the GPU has free
    (oversubscription can hang it).  The check runs before anything is
    allocated, and PyTorch's allocator is capped at twice the workload's
    need, so a workload that grows beyond its estimate fails with an
    out-of-memory error instead of oversubscribing.
    """
    if name not in WORKLOADS:
        raise SystemExit(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    builder, needs = WORKLOADS[name]
    free, total = torch.cuda.mem_get_info()
    if free < 2 * needs:
        print(f"{name}: {free / GIB:.1f} GiB free on the GPU, {2 * needs / GIB:.0f} GiB needed: refusing",
              file=sys.stderr)
        sys.exit(3)
    torch.cuda.set_per_process_memory_fraction(2 * needs / total)
    torch.manual_seed(0)
    return builder()
