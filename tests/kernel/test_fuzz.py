"""The ioctl fuzzer (fuzz_ioctl.c): DEEPUM_FUZZ_CALLS random calls, 100,000
in a normal run and 1,000,000 with `tests/qemu/run fuzz`.  It fails on any
errno the header does not document; the kernel-log check of conftest.py,
panic_on_warn and oops=panic catch the rest."""

from __future__ import annotations

import os
import subprocess

import klib
from _deepum_uapi import lib


def test_fuzz_ioctls() -> None:
    calls = int(os.environ.get("DEEPUM_FUZZ_CALLS", "100000"))
    try:
        run = subprocess.run([os.environ["DEEPUM_FUZZ_BIN"], str(calls)], capture_output=True, text=True)
    finally:
        # The fuzzer puts the defaults back itself, unless it died first.
        fd = klib.open_dev()
        try:
            klib.handshake(fd)
            klib.call(fd, "CONFIG", klib.config_req(lib.DEEPUM_SCOPE_DEFAULTS))
        finally:
            os.close(fd)
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    assert klib.sysfs("contexts") == "0"
