"""Synthetic training-loop traces, as noisy as real ones.

A model of L layers trains for N iterations.  Each iteration launches, per
layer, forward kernels (read weights and the previous activation, write an
activation), backward kernels in reverse (read activations and weights, write
gradients), then one optimizer kernel per layer (weights, gradients, two
optimizer states).  Tensors live at addresses a caching allocator would give:
persistent tensors (weights, gradients, optimizer states) once and for all,
activations re-allocated at the same addresses each iteration.

Noise, as measured on real H200 traces (docs/TRACE_FORMAT.md):

* order_noise: many SMs fault in parallel, so a kernel's blocks arrive as an
  interleaving of several sequential streams, different every iteration;
* drift: each iteration a fraction of activations lands at a different
  address, so a fraction of the blocks differs from the previous iteration;
* reorder_at: from that iteration on, the layers run in a different (fixed)
  order, as when a model's control flow changes.

Exec IDs are assigned the way libdeepum does: a kernel whose arguments
(tensor addresses) changed is a new exec ID.  FAULT records list every block
a kernel touches (not only first touches), so capacity-limited replays see
re-faults after eviction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .errors import ConfigError
from .trace import (
    ALLOC,
    FAULT,
    FREE,
    ITER_END,
    ITER_FLUSHED,
    ITERATION,
    LAUNCH,
    TRACE_ACCESS_SET,
    TRACE_SYNTHETIC,
    Trace,
    empty_records,
    name_hash,
)

_BASE = 0x7F0000000000  # where the allocator's arena starts


@dataclass(frozen=True)
class SynthSpec:
    layers: int = 24
    iterations: int = 6
    weight_bytes: int = 24 << 20  # per layer
    activation_bytes: int = 16 << 20  # per layer
    kernels_per_layer: int = 3  # forward kernels; backward runs as many
    order_noise: int = 4  # parallel streams a kernel's blocks interleave (1: in order)
    drift: float = 0.03  # activations moved per iteration
    reorder_at: int = -1  # iteration from which layers run in another order; -1: never
    access_set: bool = True  # memory flushed to the host at each iteration
    frees: bool = False  # report activation frees (FREE records) at iteration end
    kernel_ns: int = 20_000  # compute time of a kernel per MiB it touches (LAUNCH len)
    seed: int = 1
    block_shift: int = 21

    def check(self) -> None:
        if self.layers < 1 or self.iterations < 1 or self.kernels_per_layer < 1:
            raise ConfigError("layers, iterations and kernels_per_layer must be >= 1")
        if self.weight_bytes < 1 or self.activation_bytes < 1:
            raise ConfigError("tensor sizes must be positive")
        if self.order_noise < 1:
            raise ConfigError("order_noise must be >= 1")
        if not 0.0 <= self.drift <= 1.0:
            raise ConfigError("drift must be within 0..1")


class _Allocator:
    """Bump allocation in 2 MiB-aligned segments, like the caching allocator's large pool."""

    def __init__(self, block: int):
        self.block = block
        self.next = _BASE

    def take(self, size: int) -> tuple[int, int]:
        size = -(-size // self.block) * self.block
        addr, self.next = self.next, self.next + size
        return addr, size


def generate(spec: SynthSpec) -> Trace:
    spec.check()
    rng = np.random.default_rng(spec.seed)
    block = 1 << spec.block_shift
    alloc = _Allocator(block)
    rows: list[tuple[int, ...]] = []
    ts = 0

    def emit(rtype: int, addr: int = 0, length: int = 0, exec_id: int = 0, aux: int = 0, flags: int = 0):
        rows.append((ts, addr, length, exec_id, aux, rtype, flags))

    persistent = {}
    for layer in range(spec.layers):
        for kind in ("w", "g", "m", "v"):
            persistent[kind, layer] = alloc.take(spec.weight_bytes)
    activations = {layer: alloc.take(spec.activation_bytes) for layer in range(spec.layers + 1)}
    for addr, size in list(persistent.values()) + list(activations.values()):
        emit(ALLOC, addr, size)

    exec_ids: dict[tuple, int] = {}
    layer_order = list(range(spec.layers))
    for it in range(spec.iterations):
        if it == spec.reorder_at:
            layer_order = list(rng.permutation(spec.layers))
        flags = ITER_FLUSHED if spec.access_set else 0
        emit(ITERATION, aux=it, flags=flags)
        moved = [layer for layer in activations if rng.random() < spec.drift]
        for layer in moved:
            activations[layer] = alloc.take(spec.activation_bytes)
            emit(ALLOC, *activations[layer])
        seq = []
        for layer in layer_order:
            for k in range(spec.kernels_per_layer):
                seq.append(("fwd", layer, k, (persistent["w", layer], activations[layer], activations[layer + 1])))
        for layer in reversed(layer_order):
            for k in range(spec.kernels_per_layer):
                seq.append(("bwd", layer, k, (activations[layer + 1], persistent["w", layer],
                                              persistent["g", layer], activations[layer])))
        for layer in layer_order:
            seq.append(("opt", layer, 0, tuple(persistent[kind, layer] for kind in "wgmv")))
        for name, layer, k, tensors in seq:
            key = (name, layer, k, tuple(a for a, _ in tensors))
            eid = exec_ids.setdefault(key, len(exec_ids))
            blocks = _kernel_blocks(tensors, k, spec.kernels_per_layer, block)
            duration = max(1, len(blocks) * block >> 20) * spec.kernel_ns
            emit(LAUNCH, name_hash(f"{name}_layer{layer}_k{k}"), duration, eid)
            for addr in _interleave(blocks, spec.order_noise, rng):
                emit(FAULT, addr, block, eid, 1)
            ts += duration
        if spec.frees:
            for layer in range(1, spec.layers + 1):
                emit(FREE, *activations[layer])
        ts += spec.kernel_ns
    emit(ITERATION, aux=spec.iterations, flags=ITER_END)

    records = empty_records(len(rows))
    cols = list(zip(*rows))
    for i, name in enumerate(("ts", "addr", "len", "exec_id", "aux", "type", "flags")):
        records[name] = np.asarray(cols[i], dtype=np.uint64)
    flags = TRACE_SYNTHETIC | (TRACE_ACCESS_SET if spec.access_set else 0)
    return Trace(records=records, block_shift=spec.block_shift, flags=flags,
                 meta={"source": {"format": "synthetic", "spec": asdict(spec)}})


def _kernel_blocks(tensors, k: int, nk: int, block: int) -> list[int]:
    """Blocks kernel k of nk touches: its share of every tensor."""
    out = []
    for addr, size in tensors:
        n = size // block
        lo, hi = n * k // nk, max(n * (k + 1) // nk, n * k // nk + 1)
        out.extend(addr + i * block for i in range(lo, min(hi, n)))
    return out


def _interleave(blocks: list[int], streams: int, rng: np.random.Generator) -> list[int]:
    """The blocks as `streams` sequential streams progressing at random rates."""
    if streams == 1 or len(blocks) < 2:
        return blocks
    chunks = [list(c) for c in np.array_split(np.asarray(blocks, dtype=np.uint64), streams) if len(c)]
    out: list[int] = []
    pos = [0] * len(chunks)
    live = list(range(len(chunks)))
    while live:
        i = live[int(rng.integers(len(live)))]
        out.append(int(chunks[i][pos[i]]))
        pos[i] += 1
        if pos[i] == len(chunks[i]):
            live.remove(i)
    return out
