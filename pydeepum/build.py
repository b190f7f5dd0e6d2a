"""Building kernel mode for this machine's driver (docs/INSTALL.md, steps 1-2):
NVIDIA's nvidia-uvm with deepum's patch, then deepum.ko with its UVM backend
against it.  Needs the source tree (kmod/ next to this package)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ModuleError

ROOT = Path(__file__).resolve().parent.parent
BUILD_UVM = ROOT / "kmod" / "nvidia" / "build-uvm"

# The build commands, indirect so that tests can record them.
_run = subprocess.run


@dataclass(frozen=True)
class BuildPlan:
    commands: list[list[str]]  # in order
    uvm_ko: str  # the patched nvidia-uvm.ko they make
    deepum_ko: str  # deepum.ko with the UVM backend


def build_plan(nvidia_src: str | os.PathLike, out: str | os.PathLike | None = None,
               kver: str | None = None) -> BuildPlan:
    """What build() runs: kmod/Makefile with NVIDIA_SRC, which patches and
    builds nvidia-uvm from @nvidia_src into @out (default build/nvidia) with
    kmod/nvidia/build-uvm, then deepum.ko against it."""
    if not BUILD_UVM.is_file():
        raise ModuleError(f"{BUILD_UVM} is missing: deepumctl build runs from deepum's source tree")
    src = Path(nvidia_src)
    if not src.exists():
        raise ModuleError(f"{src}: no such NVIDIA source (a kernel-open tree, an open-gpu-kernel-modules "
                          "checkout, or Debian's nvidia-open-kernel-source .deb)")
    out = Path(out) if out is not None else ROOT / "build" / "nvidia"
    kver = kver or os.uname().release
    return BuildPlan(
        commands=[["make", "-C", str(ROOT / "kmod"), f"NVIDIA_SRC={src.resolve()}", f"NVIDIA_OUT={out.resolve()}",
                   f"KVER={kver}"]],
        uvm_ko=str((out / "src" / "nvidia-uvm.ko").resolve()),
        deepum_ko=str(ROOT / "kmod" / "deepum.ko"),
    )


def build(plan: BuildPlan) -> None:
    """Run @plan's commands; the first that fails stops it, with its output's tail."""
    for argv in plan.commands:
        result = _run(argv, capture_output=True, text=True)
        if result.returncode:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-12:])
            raise ModuleError(f"{' '.join(argv)} failed:\n{tail}")
