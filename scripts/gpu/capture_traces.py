#!/usr/bin/env python3
"""Access-set traces of real training on the GPU, taken with deepum's own
tracer (`deepumctl trace record`), with their provenance.

usage: capture_traces.py --out DIR [--iterations 6] [--warmup 1] [--timeout 170] [--per-launch] WORKLOAD...
       WORKLOAD: gpt2, bert, resnet50 (scripts/gpu/models.py); gpt2-tiny for a quick check

For each workload, one process trains it under the tracer: --warmup
untraced iterations, then --iterations traced ones (each marked with
pydeepum.torch.mark_iteration(), and a last mark to close them); at every
mark all managed memory goes back to the host, so each iteration records its
complete first-touch stream.  With --per-launch the tracer also moves what
each launch brought in back to the host after it, so every launch records all
the blocks it touches ("perlaunch" instead of "accessset" in the names; many
times slower).  With --warmup 0 the trace starts at the program's first
step, which allocates what later steps reuse ("cold-accessset",
"cold-perlaunch").  Written to DIR:

  h200-<workload>-accessset-<N>it.dut.gz   the trace (provenance in its metadata)
  h200-<workload>-accessset-<N>it.json     provenance: command, date, GPU, driver,
                                           CUDA, torch and transformers versions,
                                           iteration times, losses, peak memory,
                                           per-iteration counts, the tracer's
                                           summary; for gpt2, the comparison with
                                           the reference capture (validate_trace.py)

Run one workload per call: each takes 1-2 minutes on the H200, and
--timeout (seconds) stops one that would not.  A capture stopped by the
timeout keeps the iterations it completed: the trace is then named for
those (a per-launch trace of a large model can take minutes per iteration),
its JSON says "timed_out", and the iteration times and losses are the ones
the training process printed before it was stopped.  Exits 1 if any
workload failed (its JSON then says why; a timeout without one complete
iteration is a failure), 0 otherwise; a gpt2 trace that disagrees with the
reference is reported, not failed.  The GPU-memory rule is enforced by
models.build() in the training process.

(Internally, "capture_traces.py --train WORKLOAD ITERATIONS WARMUP" is that
training process.)
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import json
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE)]

# What the file names call each workload (the reference trace's naming).
STEMS = {"gpt2": "gpt2-124m-bs8x512", "bert": "bert-base-bs16x128", "resnet50": "resnet50-bs32x224",
         "gpt2-tiny": "gpt2-tiny-bs4x128", "gpt2-xl": "gpt2-xl-1.5b-bs4x512"}


def train(name: str, iterations: int, warmup: int) -> None:
    """The traced process: one JSON line per traced iteration as it ends
    (what a capture stopped by its timeout keeps), then one about the run."""
    import torch

    import models
    from pydeepum.torch import loaded, mark_iteration

    if not loaded():
        raise SystemExit("capture_traces.py --train runs under deepumctl trace record")
    workload = models.build(name)
    for _ in range(warmup):
        workload.step()
    torch.cuda.synchronize()
    seconds, losses = [], []
    for _ in range(iterations):
        mark_iteration()  # waits for the GPU and moves managed memory to the host
        start = time.perf_counter()
        loss = workload.step()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
        # As in bench_train's runs, the next step runs without this one's loss tensor (kept,
        # it changes where the next step's tensors go; whether that is why ResNet-50's exec
        # IDs took eight steps to settle here and two there is untested)
        del loss
        print(json.dumps({"iteration": len(seconds) - 1, "s": seconds[-1], "loss": losses[-1]}), flush=True)
    mark_iteration()  # closes the last iteration
    print(json.dumps({
        "workload": name, "description": workload.description,
        "parameters": sum(p.numel() for p in workload.net.parameters()),
        "warmup_iterations": warmup, "iteration_s": seconds, "losses": losses,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda, "torch": torch.__version__,
        "transformers": __import__("transformers").__version__, "python": sys.version.split()[0],
    }))


def find_cupti() -> str | None:
    """A libcupti of the NVIDIA wheels next to torch, for libdeepum to load if
    the training process has not loaded one itself (it prefers that one)."""
    for packages in site.getsitepackages():
        found = sorted(glob.glob(os.path.join(packages, "nvidia", "**", "libcupti.so*"), recursive=True))
        if found:
            return found[-1]
    return None


def driver_version() -> str:
    try:
        return Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except OSError:
        return "unknown"


def stem(name: str, iterations: int, per_launch: bool, warmup: int) -> str:
    # "cold": traced from the program's first step, which allocates what later steps reuse
    cold = "cold-" if warmup == 0 else ""
    return f"h200-{STEMS[name]}-{cold}{'perlaunch' if per_launch else 'accessset'}-{iterations}it"


def cut_at_last_mark(capture: Path) -> int:
    """Truncate a capture whose tracer was killed after its last complete
    iteration mark (M line): what follows belongs to no complete iteration
    and may end in a half-written line.  Returns the marks kept."""
    marks, keep, offset = 0, 0, 0
    with capture.open("rb") as f:
        for line in f:
            offset += len(line)
            if line.startswith(b"M,") and line.endswith(b"\n"):
                marks, keep = marks + 1, offset
    with capture.open("r+b") as f:
        f.truncate(keep)
    return marks


def salvage(name: str, out: Path, workdir: Path, per_launch: bool, warmup: int, provenance: dict,
            stdout: str) -> Path | None:
    """After a timeout: the complete iterations of the capture libdeepum left
    in @workdir (deepumctl's temporary directory survives its SIGKILL), as a
    trace named for them, or None with provenance["error"] saying why."""
    from pydeepum.errors import DeepumError
    from pydeepum.importers import import_cupti_capture

    captures = sorted(workdir.glob("deepum-trace-*/capture.*.csv"))
    if len(captures) != 1:
        provenance["error"] += f"; {len(captures)} captures left behind, nothing kept"
        return None
    marks = cut_at_last_mark(captures[0])
    if marks < 2:
        provenance["error"] += "; no iteration was complete"
        return None
    try:
        trace = import_cupti_capture(captures[0])
    except DeepumError as e:
        provenance["error"] += f"; its capture could not be read: {e}"
        return None
    kept = marks - 1
    provenance["timed_out"] = provenance.pop("error") + f"; kept the {kept} complete iterations"
    provenance["iterations"] = kept
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"iteration"')]
    provenance["run"] = {"iteration_s": [r["s"] for r in rows], "losses": [r["loss"] for r in rows]}
    trace.meta["provenance"] = {"command": provenance["command"], "returncode": None}
    path = out / f"{stem(name, kept, per_launch, warmup)}.dut.gz"
    trace.write(path)
    provenance["trace"] = path.name
    return path


def capture(name: str, out: Path, iterations: int, warmup: int, timeout: float,
            worker: list[str] | None = None, faults: str = "auto", per_launch: bool = False) -> dict:
    """Trace @name into @out; its provenance (with "error" if it failed).
    @worker replaces the training process (tests run the plumbing without a GPU)."""
    trace_path = out / f"{stem(name, iterations, per_launch, warmup)}.dut.gz"
    worker = worker or [sys.executable, str(Path(__file__).resolve()), "--train", name, str(iterations), str(warmup)]
    cupti = find_cupti()
    command = [sys.executable, "-c", "from pydeepum.cli import cli; cli()", "trace", "record",
               "--iterations", str(iterations), "-o", str(trace_path), *(["--cupti", cupti] if cupti else []),
               "--faults", faults, *(["--per-launch"] if per_launch else []), "--", *worker]
    # deepumctl's temporary directory (the raw capture) where a timeout can find it.
    workdir = out / f".capture-{name}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "TMPDIR": str(workdir)}
    provenance: dict = {
        "workload": name, "trace": trace_path.name, "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "driver": driver_version(), "iterations": iterations,
        "access_set": True, "per_launch": per_launch, "faults": faults,
    }
    started = time.monotonic()
    # A session of its own, so that a timeout stops the training process too, not only deepumctl.
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        provenance["error"] = f"timed out after {timeout:.0f} s"
        provenance["stderr_tail"] = stderr[-4000:]
        salvaged = salvage(name, out, workdir, per_launch, warmup, provenance, stdout)
        return provenance if salvaged is None else describe(salvaged, name, provenance)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    done = subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
    provenance["wall_s"] = round(time.monotonic() - started, 1)
    provenance["tracer_summary"] = [line for line in done.stderr.splitlines()
                                    if line.startswith(("deepum", "  ", str(trace_path)))]
    if done.returncode != 0 or not trace_path.exists():
        provenance["error"] = f"deepumctl trace record exited {done.returncode}"
        provenance["stderr_tail"] = done.stderr[-4000:]
        return provenance
    provenance["run"] = json.loads(done.stdout.splitlines()[-1])
    return describe(trace_path, name, provenance)


def unsettled_note(per_iteration: list[dict]) -> str | None:
    """What to say of a trace whose last iteration had not settled (the
    prefetch core's rule, DEEPUM_UNSETTLED_SHARE), if it had not."""
    from pydeepum._lowlevel import constant

    last = per_iteration[-1] if per_iteration else None
    if not last or last["new_exec_ids"] * constant("DEEPUM_UNSETTLED_SHARE") <= last["launches"]:
        return None
    return (f"not settled: {last['new_exec_ids']:,} of the last iteration's {last['launches']:,} launches had "
            f"exec IDs no earlier iteration had; more --warmup captures the loop as it runs later")


def describe(trace_path: Path, name: str, provenance: dict) -> dict:
    """Put @provenance into the trace's metadata, and what the trace holds into @provenance."""
    from pydeepum.trace import Trace
    from validate_trace import REFERENCE, compare

    trace = Trace.read(trace_path)
    trace.meta["provenance"].update({k: v for k, v in provenance.items() if k != "command"})
    trace.write(trace_path)
    provenance["sha256"] = hashlib.sha256(trace_path.read_bytes()).hexdigest()
    provenance["per_iteration"] = trace.iteration_summary()
    provenance["source"] = trace.meta["source"]
    if name == "gpt2":
        verdict = compare(trace, Trace.read(REFERENCE))
        provenance["validation"] = {"reference": REFERENCE.name, "ok": verdict["ok"],
                                    "launches": verdict["launches"], "blocks": verdict["blocks"]}
    return provenance


def main() -> None:
    if sys.argv[1:2] == ["--train"]:
        if len(sys.argv) != 5:
            raise SystemExit(__doc__)
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="+", choices=sorted(STEMS))
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=170)
    ap.add_argument("--faults", choices=("auto", "uvm-tools", "cupti"), default="auto",
                    help="the tracer's fault source (auto: the UVM queue where it can be read, else CUPTI)")
    ap.add_argument("--per-launch", action="store_true", help="every launch's accesses, not first touches")
    args = ap.parse_args()
    # Per-launch traces of large models take minutes per iteration: 3 (one to
    # learn from, two to predict) is what fits a call on the H200.
    least = 3 if args.per_launch else 5
    if args.iterations < least or args.warmup < 0:
        ap.error(f"the traces need at least {least} iterations and a warm-up of 0 or more")
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    for name in args.workloads:
        provenance = capture(name, args.out, args.iterations, args.warmup, args.timeout, faults=args.faults,
                             per_launch=args.per_launch)
        path = args.out / provenance["trace"].replace(".dut.gz", ".json")
        path.write_text(json.dumps(provenance, indent=2) + "\n")
        failed |= "error" in provenance
        print(f"{name}: {provenance.get('error', provenance.get('timed_out', 'ok'))}; {path}")
        for line in provenance.get("tracer_summary", []):
            print(f"  {line}")
        note = unsettled_note(provenance.get("per_iteration", []))
        if note:
            print(f"  {note}")
        if "validation" in provenance:
            v = provenance["validation"]
            launches, blocks = v["launches"], v["blocks"]
            print(f"  against {v['reference']}: launches {launches['ours']:.0f} vs {launches['reference']:.0f},"
                  f" blocks {blocks['ours']:.0f} vs {blocks['reference']:.0f}: {'agree' if v['ok'] else 'DIFFER'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
