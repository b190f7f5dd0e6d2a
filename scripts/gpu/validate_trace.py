#!/usr/bin/env python3
"""Compare a trace taken with deepum's tracer to the reference capture of the
same workload (by default the bundled GPT-2 124M, batch 8 x 512 trace taken
with CUPTI directly, tests/data/README.md): kernels per iteration, and
distinct 2 MiB blocks per iteration, within noise.

usage: validate_trace.py OURS [--reference TRACE] [--skip N] [--json]

Only iterations from --skip on (default 1) are compared: the first traced
iteration still differs from steady state (allocator warm-up).  Kernel
counts are deterministic, so they must agree within 1%.  Distinct blocks
vary from iteration to iteration: they must agree within the reference's own
spread (max - min over the compared iterations) or 5%, whichever is larger.
Bytes moved per iteration are shown too, not judged.  Exits 0 when both
agree, 1 otherwise.  Needs only pydeepum (no GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from pydeepum.trace import Trace  # noqa: E402

REFERENCE = ROOT / "tests/data/h200-gpt2-124m-bs8x512-accessset-6it.dut.gz"
KERNEL_TOLERANCE = 0.01
BLOCK_TOLERANCE = 0.05


def compare(ours: Trace, reference: Trace, skip: int = 1) -> dict:
    """Per-iteration figures of both traces and the verdict on each measure."""
    mine, theirs = ours.iteration_summary(), reference.iteration_summary()
    if len(mine) <= skip or len(theirs) <= skip:
        raise SystemExit(f"need more than {skip} iterations in each trace "
                         f"(ours has {len(mine)}, the reference {len(theirs)})")
    verdict = {"skip": skip, "ours": mine, "reference": theirs}
    for measure, tolerance in (("launches", KERNEL_TOLERANCE), ("blocks", BLOCK_TOLERANCE)):
        ref = [i[measure] for i in theirs[skip:]]
        median_ref = statistics.median(ref)
        allowed = max(tolerance * median_ref, max(ref) - min(ref) if measure == "blocks" else 0)
        median_ours = statistics.median(i[measure] for i in mine[skip:])
        verdict[measure] = {"ours": median_ours, "reference": median_ref, "allowed": allowed,
                            "ok": abs(median_ours - median_ref) <= allowed}
    verdict["ok"] = verdict["launches"]["ok"] and verdict["blocks"]["ok"]
    return verdict


def report(verdict: dict) -> str:
    lines = [f"{'iteration':>9} {'launches':>9} {'ref':>6} {'blocks':>7} {'ref':>6} {'GiB moved':>10} {'ref':>6}"]
    for mine, theirs in zip(verdict["ours"], verdict["reference"]):
        lines.append(f"{mine['iteration']:>9} {mine['launches']:>9} {theirs['launches']:>6} {mine['blocks']:>7} "
                     f"{theirs['blocks']:>6} {mine['bytes'] / (1 << 30):>10.2f} {theirs['bytes'] / (1 << 30):>6.2f}")
    for measure in ("launches", "blocks"):
        v = verdict[measure]
        lines.append(f"{measure} per iteration from iteration {verdict['skip']} on (median): ours {v['ours']:.0f}, "
                     f"reference {v['reference']:.0f}, allowed difference {v['allowed']:.0f}: "
                     f"{'agree' if v['ok'] else 'DIFFER'}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours")
    ap.add_argument("--reference", default=str(REFERENCE))
    ap.add_argument("--skip", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    verdict = compare(Trace.read(args.ours), Trace.read(args.reference), args.skip)
    print(json.dumps(verdict, indent=2) if args.json else report(verdict))
    sys.exit(0 if verdict["ok"] else 1)


if __name__ == "__main__":
    main()
