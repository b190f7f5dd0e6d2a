#!/usr/bin/env python3
"""Memory copied in from the host under libdeepum's emulated budget, for
tests/gpu/test_engine_gpu.py.

usage: copied_check.py MIB ITERATIONS

One tensor of MIB MiB copied in from the host (as a model's weights are
when it is loaded: a copy into managed memory the GPU never touched, which
the driver fills on the GPU with no fault and no migration event), one as
large written by a kernel; then ITERATIONS marked iterations that each read
both, timed.  Prints one JSON line: each tensor's address and size, and per
iteration the seconds each read took.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch  # noqa: E402

from pydeepum.torch import loaded, mark_iteration  # noqa: E402


def timed_read(t: torch.Tensor) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    t.sum().item()
    return time.perf_counter() - start


def main() -> None:
    size, iterations = int(sys.argv[1]) << 20, int(sys.argv[2])
    copied = torch.ones(size // 4).cuda()
    written = torch.ones(size // 4, device="cuda")
    seconds = []
    for _ in range(iterations):
        mark_iteration()
        seconds.append({"copied": timed_read(copied), "written": timed_read(written)})
    mark_iteration()
    print(json.dumps({"copied": [copied.data_ptr(), size], "written": [written.data_ptr(), size],
                      "seconds": seconds, "libdeepum": loaded()}))


if __name__ == "__main__":
    main()
