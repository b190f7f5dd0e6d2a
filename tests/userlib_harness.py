"""Running programs against libdeepum and the test doubles of tests/fakecuda
(a fake libcuda, libcupti, /dev/deepum and UVM tools queue), and reading
back what the fake driver logged and what libdeepum's statistics say.
Shared by tests/test_userlib.py and tests/test_engine.py."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
# DEEPUM_TEST_SANITIZER: the runtime of a sanitizer libdeepum was built with
# (make test-tsan, test-asan), preloaded ahead of that build, which DEEPUM_TEST_USERLIB names.
SANITIZER = os.environ.get("DEEPUM_TEST_SANITIZER", "")
USERLIB = Path(os.environ.get("DEEPUM_TEST_USERLIB", BUILD / "userlib"))
LIB = USERLIB / "libdeepum.so"
LIB_FAULTS = USERLIB / "libdeepum-faultinject.so"
FAKE = BUILD / "fakecuda"
FAKE_CUPTI = FAKE / "libcupti.so"
MIB = 1 << 20
NONE = 0xFFFFFFFF
HOOKS = {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
         "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", "cuMemAlloc_v2",
         "cuMemAllocPitch_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemFreeAsync",
         "cuMemFreeAsync_ptsz", "cuGetProcAddress", "cuGetProcAddress_v2",
         "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz", "cuStreamBeginCapture_v2",
         "cuStreamBeginCapture_v2_ptsz", "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz",
         "cuStreamEndCapture", "cuStreamEndCapture_ptsz"}
LAUNCHES = ("cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel")
# struct deepum_launch_page (kmod/include/uapi/deepum.h): 4 u32, 128 stream handles, 128 positions, the rings
PAGE_POSITIONS_OFFSET = 16 + 128 * 8


def preload(*libs: Path) -> str:
    """LD_PRELOAD for @libs, the sanitizer's runtime ahead of them."""
    return ":".join(str(lib) for lib in ([SANITIZER, *libs] if SANITIZER else libs))


def build() -> None:
    """libdeepum and the test doubles, made if out of date."""
    for directory in ("userlib", "tests/fakecuda"):
        done = subprocess.run(["make", "-s", "-C", str(ROOT / directory)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Call:
    name: str
    args: dict[str, str]
    line: str

    def result(self) -> str:
        """What a line ending in "-> X" says the call returned."""
        return self.line.rsplit("-> ", 1)[-1]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[Call]
    stats: dict | None

    def named(self, *names: str) -> list[Call]:
        return [c for c in self.calls if c.name in names]

    def launches(self) -> list[Call]:
        return [c for c in self.calls if c.name.startswith(LAUNCHES)]

    def warnings(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("deepum:")]

    def delivered_ids(self) -> list[int]:
        return [int(c.args["value"], 16) & 0xFFFFFFFF for c in self.named("cuStreamWriteValue64_v2")]

    def counter(self, name: str) -> int:
        assert self.stats is not None, "libdeepum wrote no statistics"
        return self.stats["counters"][name]


def parse_log(path: Path) -> list[Call]:
    calls = []
    for line in path.read_text().splitlines() if path.exists() else []:
        name, *words = line.split()
        calls.append(Call(name, dict(w.split("=", 1) for w in words if "=" in w), line))
    return calls


_runs = count()


def run_app(tmp_path: Path, resolve: str, *scenario: str, lib: Path | None = LIB, audit: bool = True,
            fakedev: bool = False, app: str = "cuda_app", env: dict[str, str] | None = None) -> Run:
    """Run the test program against the fake driver, libdeepum preloaded
    (and audited) unless @lib is None; with @fakedev, /dev/deepum is faked."""
    # A sanitizer's runtime cannot load a second time in the auditor's namespace.
    if SANITIZER and lib is not None and audit and resolve.startswith("runtime"):
        pytest.skip("the runtime's way to the driver needs the auditor, which a sanitizer build cannot be")
    n = next(_runs)
    log, stats = tmp_path / f"fake{n}.log", tmp_path / f"stats{n}.json"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "FAKECUDA_", "FAKEDEV_", "LD_"))}
    # A position write before every launch unless a test asks otherwise: tests
    # see each launch's exec ID in the write that delivers it.
    environ.update(LD_LIBRARY_PATH=str(FAKE), FAKECUDA_LOG=str(log), DEEPUM_STATS=str(stats),
                   DEEPUM_DEVICE=str(tmp_path / "no-such-device"), DEEPUM_WRITE_EVERY="1")
    if lib is not None:
        libs = [lib]
        if fakedev:
            device = tmp_path / "deepum-device"
            device.touch()
            environ["DEEPUM_DEVICE"] = str(device)
            # The UVM file CUDA opens, which the module's context binds to.
            uvm = tmp_path / "nvidia-uvm"
            uvm.touch()
            environ.update(FAKECUDA_UVM_DEVICE=str(uvm), DEEPUM_UVM_DEVICE=str(uvm))
            libs.insert(0, FAKE / "libfakedev.so")
        environ["LD_PRELOAD"] = preload(*libs)
        if audit and not SANITIZER:
            environ["LD_AUDIT"] = str(lib)
    environ.update(env or {})
    done = subprocess.run([str(FAKE / app), resolve, *scenario], env=environ, capture_output=True, text=True,
                          timeout=60)
    assert not (SANITIZER and "Sanitizer: " in done.stderr), done.stderr  # whatever the test expects of the run
    return Run(done.returncode, done.stdout, done.stderr, parse_log(log),
               json.loads(stats.read_text()) if stats.exists() else None)


