"""Running a program under libdeepum (what `deepumctl run` and `deepumctl
trace record` do): the environment, the child process, and the statistics
(and, when tracing, the captures) its CUDA processes leave.

libdeepum is loaded both as LD_PRELOAD (programs that call the driver by
symbol) and as LD_AUDIT (the CUDA runtime, which looks the driver up through
its own dlopen handle; userlib/README.md explains).  Every CUDA process of the
run writes its statistics to a file of its own (DEEPUM_STATS with %p);
`run()` collects them once the command exits.  `record()` also has libdeepum's
tracer write a capture per process (DEEPUM_TRACE) and imports the one process
that marked iterations into a deepum trace.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DeepumError, DeepumInputError
from .importers import import_cupti_capture
from .trace import Trace

LIBRARY_ENV = "DEEPUM_LIB"
DELIVERIES = ("write", "callback")
MODES = ("auto", "observe", "user", "demand", "off")
FAULT_SOURCES = ("auto", "uvm-tools", "cupti")  # the tracer's (DEEPUM_FAULTS); auto: the UVM queue, else CUPTI


class LibraryNotFound(DeepumInputError):
    """libdeepum.so is neither where DEEPUM_LIB says nor in the build tree."""


class CommandNotRunnable(DeepumError):
    """The command could not be started; @returncode is what a shell would give."""

    def __init__(self, command: str, why: str, returncode: int):
        super().__init__(f"{command}: {why}")
        self.returncode = returncode


def find_library() -> Path:
    """libdeepum.so: $DEEPUM_LIB, else the source tree's build/userlib/."""
    configured = os.environ.get(LIBRARY_ENV)
    path = Path(configured) if configured else Path(__file__).resolve().parent.parent / "build/userlib/libdeepum.so"
    if not path.is_file():
        raise LibraryNotFound(f"{path}: no such library; build it with `make -C userlib`"
                              f" or point {LIBRARY_ENV} at libdeepum.so")
    return path.resolve()


@dataclass(frozen=True)
class TraceOptions:
    iterations: int = 0  # iterations to record from the first mark; 0: all the program marks
    access_set: bool = True  # managed memory to the host at every mark
    per_launch: bool = False  # and what each launch brought in, after it (every launch's accesses)
    cupti: str | None = None  # libcupti.so to load; None: libdeepum searches
    faults: str = "auto"  # UM records from the UVM tools queue or from CUPTI (DEEPUM_FAULTS)

    def __post_init__(self) -> None:
        if self.iterations < 0:
            raise DeepumInputError(f"iterations must not be negative, got {self.iterations}")
        if self.faults not in FAULT_SOURCES:
            raise DeepumInputError(f"faults must be one of {', '.join(FAULT_SOURCES)}, got {self.faults!r}")
        if self.per_launch and not self.access_set:
            raise DeepumInputError("per-launch access sets move memory to the host at marks too: "
                                   "they need the access set on")


@dataclass(frozen=True)
class RunOptions:
    delivery: str = "write"
    managed: bool = True
    mode: str | None = None  # None: libdeepum's own default ("auto")
    trace: TraceOptions | None = None  # None: no tracer
    capacity: int | None = None  # the user-mode engine's budget in bytes (DEEPUM_CAPACITY)

    def __post_init__(self) -> None:
        if self.delivery not in DELIVERIES:
            raise DeepumInputError(f"delivery must be one of {', '.join(DELIVERIES)}, got {self.delivery!r}")
        if self.mode is not None and self.mode not in MODES:
            raise DeepumInputError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.capacity is not None and self.capacity < 2 << 20:
            raise DeepumInputError(f"the capacity must be at least one 2 MiB block, got {self.capacity}")


@dataclass
class RunResult:
    command: list[str]
    returncode: int  # as a shell reports it: 128 + N for death by signal N
    processes: list[dict[str, Any]] = field(default_factory=list)  # libdeepum's stats, one per CUDA process

    def totals(self) -> dict[str, int]:
        """Counters summed over the processes."""
        out: dict[str, int] = {}
        for proc in self.processes:
            for key, value in proc.get("counters", {}).items():
                out[key] = out.get(key, 0) + int(value)
        return out

    def steady_state(self, first: int = 1) -> dict[str, int]:
        """Launches and known-ID hits from iteration index @first on (0-based),
        summed over the processes that marked iterations."""
        out = {"iterations": 0, "launches": 0, "exec_hits": 0, "exec_new": 0}
        for proc in self.processes:
            for it in proc.get("iterations", [])[first:]:
                out["iterations"] += 1
                for key in ("launches", "exec_hits", "exec_new"):
                    out[key] += int(it[key])
        return out

    def engines(self) -> list[dict[str, Any]]:
        """The user-mode engine's statistics of each process that ran one."""
        return [proc["engine"] for proc in self.processes if "engine" in proc]

    def as_dict(self) -> dict[str, Any]:
        return {"command": self.command, "returncode": self.returncode, "totals": self.totals(),
                "steady_state": self.steady_state(), "processes": self.processes}


def _prepend(value: str, existing: str | None) -> str:
    return f"{value}:{existing}" if existing else value


def environment(base: Mapping[str, str], library: Path, options: RunOptions, workdir: Path) -> dict[str, str]:
    """The child's environment: @base plus libdeepum and its settings; its
    processes leave their statistics (and captures) in @workdir."""
    env = dict(base)
    env["LD_PRELOAD"] = _prepend(str(library), base.get("LD_PRELOAD"))
    env["LD_AUDIT"] = _prepend(str(library), base.get("LD_AUDIT"))
    env["DEEPUM_STATS"] = str(workdir / "stats.%p.json")
    env["DEEPUM_DELIVERY"] = options.delivery
    env["DEEPUM_MANAGED"] = "1" if options.managed else "0"
    if options.mode is not None:
        env["DEEPUM_MODE"] = options.mode
    if options.capacity is not None:
        env["DEEPUM_CAPACITY"] = str(options.capacity)
    if options.trace is not None:
        env["DEEPUM_TRACE"] = str(workdir / "capture.%p.csv")
        env["DEEPUM_TRACE_ITERATIONS"] = str(options.trace.iterations)
        env["DEEPUM_TRACE_ACCESS_SET"] = ("launch" if options.trace.per_launch else
                                          "1" if options.trace.access_set else "0")
        env["DEEPUM_FAULTS"] = options.trace.faults
        if options.trace.cupti:
            env["DEEPUM_CUPTI"] = options.trace.cupti
    return env


def _collect(stats_dir: Path) -> list[dict[str, Any]]:
    processes = []
    for path in sorted(stats_dir.glob("stats.*.json")):
        try:
            processes.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise DeepumError(f"{path}: unreadable libdeepum statistics: {e}") from None
    return sorted(processes, key=lambda p: p.get("pid", 0))


def _run_in(workdir: Path, command: Sequence[str], options: RunOptions, library: Path | None) -> RunResult:
    if not command:
        raise DeepumInputError("no command to run")
    library = library or find_library()
    env = environment(os.environ, library, options, workdir)
    try:
        child = subprocess.Popen(list(command), env=env)
    except FileNotFoundError:
        raise CommandNotRunnable(command[0], "command not found", 127) from None
    except PermissionError:
        raise CommandNotRunnable(command[0], "permission denied", 126) from None
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, lambda sig, frame: child.send_signal(sig))
    try:
        status = child.wait()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    return RunResult(list(command), 128 - status if status < 0 else status, _collect(workdir))


def run(command: Sequence[str], options: RunOptions = RunOptions(), library: Path | None = None) -> RunResult:
    """Run @command under libdeepum and wait for it.

    Like a shell, this process ignores SIGINT and SIGQUIT while the command
    runs (the terminal delivers them to the command) and passes SIGTERM on.
    A command that cannot be started gives 127 (not found) or 126.
    """
    with tempfile.TemporaryDirectory(prefix="deepum-run-") as tmp:
        return _run_in(Path(tmp), command, options, library)


class TraceNotRecorded(DeepumError):
    """The command ran, but left no usable capture; @result says how it ran."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result


def record(command: Sequence[str], trace: TraceOptions = TraceOptions(), block_shift: int = 21,
           library: Path | None = None, keep_capture: Path | None = None) -> tuple[Trace, RunResult]:
    """Run @command under libdeepum's tracer (observe mode, managed memory)
    and turn the capture of the one process that marked iterations into a
    Trace.  With @keep_capture, that capture is copied there too."""
    options = RunOptions(managed=True, mode="observe", trace=trace)
    with tempfile.TemporaryDirectory(prefix="deepum-trace-") as tmp:
        result = _run_in(Path(tmp), command, options, library)
        # libdeepum creates a process's capture at its first mark.
        captures = sorted(Path(tmp).glob("capture.*.csv"))
        if len(captures) != 1:
            why = ("no process marked an iteration (call pydeepum.torch.mark_iteration() "
                   "at the start of every iteration, and once after the last)" if not captures else
                   f"{len(captures)} processes marked iterations; trace one at a time")
            raise TraceNotRecorded(why, result)
        if keep_capture is not None:
            shutil.copyfile(captures[0], keep_capture)
        try:
            recorded = import_cupti_capture(captures[0], block_shift)
        except DeepumError as e:
            raise TraceNotRecorded(str(e), result) from None
    recorded.meta["provenance"] = {"command": list(command), "returncode": result.returncode,
                                   "iterations_asked": trace.iterations, "access_set_asked": trace.access_set,
                                   "per_launch_asked": trace.per_launch}
    return recorded, result
