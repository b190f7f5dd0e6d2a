"""deepumctl against the real module: load, status, stats, config, unload."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import klib
from _deepum_uapi import lib
from click.testing import CliRunner, Result

from pydeepum.cli import cli

NOBODY = 65534


def deepumctl(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_status(ctx: int) -> None:
    r = deepumctl("status", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.output)
    assert st["loaded"] and st["device"] == klib.DEV and st["backend"] == "record"
    assert st["contexts"] >= 1 and st["refcount"] >= 1
    assert st["parameters"]["enable_test_ioctls"] == "Y"
    assert st["stats"]["records"] == klib.stats(ctx, lib.DEEPUM_SCOPE_GLOBAL).records
    r = deepumctl("status")
    assert r.exit_code == 0 and "deepum: loaded" in r.output, r.output


def test_stats(ctx: int) -> None:
    klib.call(ctx, "SET_EXEC_ID", exec_id=1)
    klib.drain_all(ctx)
    r = deepumctl("stats", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["launches"] == klib.stats(ctx, lib.DEEPUM_SCOPE_GLOBAL).launches
    r = deepumctl("stats")
    assert r.exit_code == 0 and "launches" in r.output


def test_stats_watch() -> None:
    r = deepumctl("stats", "--json", "--watch", "0.05", "--count", "3")
    assert r.exit_code == 0, r.output
    samples = [json.loads(line) for line in r.output.splitlines()]
    assert len(samples) == 3 and samples[0]["time"] < samples[2]["time"]
    r = deepumctl("stats", "--watch", "0.05", "--count", "2")
    assert r.exit_code == 0 and len(re.findall(r"^  records ", r.output, re.M)) == 2, r.output
    assert deepumctl("stats", "--watch", "0").exit_code == 2


def test_config_defaults() -> None:
    try:
        r = deepumctl("config", "set", "--defaults", "--json", "corr_ways=8", "lookahead_kernels=0x40")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["corr_ways"] == 8
        r = deepumctl("config", "get", "--defaults", "--json")
        cfg = json.loads(r.output)
        assert cfg["corr_ways"] == 8 and cfg["lookahead_kernels"] == 64
        assert cfg["corr_sets"] == lib.DEEPUM_CFG_CORR_SETS_DEFAULT
        fd = klib.open_attached()
        try:
            assert klib.get_config(fd, lib.DEEPUM_SCOPE_CONTEXT).corr_ways == 8
        finally:
            os.close(fd)
    finally:
        r = deepumctl("config", "set", "--defaults", "corr_ways=0", "lookahead_kernels=0")
    assert r.exit_code == 0, r.output
    cfg = json.loads(deepumctl("config", "get", "--defaults", "--json").output)
    assert cfg["corr_ways"] == lib.DEEPUM_CFG_CORR_WAYS_DEFAULT  # FIELD=0: back to the default


def test_config_refusals() -> None:
    for args in (["config", "get"], ["config", "set", "corr_ways=8"],
                 ["config", "set", "--defaults", "nonsense=1"], ["config", "set", "--defaults", "corr_ways=x"],
                 ["config", "set", "--defaults", "corr_ways=99"]):
        r = deepumctl(*args)
        assert r.exit_code == 2, (args, r.output)
        assert "Error:" in r.output


def hold_device() -> int:
    """A child process with an attached context, waiting to be stopped."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        klib.open_attached()
        os.write(w, b"x")
        while True:
            signal.pause()
    os.close(w)
    assert os.read(r, 1) == b"x"
    os.close(r)
    return pid


def test_unload_and_load(module: Callable[..., None]) -> None:
    holder = hold_device()
    try:
        r = deepumctl("unload")
        assert r.exit_code == 2 and "1 context(s) attached" in r.output and str(holder) in r.output, r.output
        assert klib.loaded()
        r = deepumctl("unload", "--force")
        assert r.exit_code == 0, r.output
    finally:
        os.kill(holder, signal.SIGKILL)
        _, status = os.waitpid(holder, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM  # --force stopped it
    assert not klib.loaded()
    assert deepumctl("unload").exit_code == 2  # not loaded

    r = deepumctl("load", "enable_test_ioctls=1", "cmd_queue_len=4096")
    assert r.exit_code == 0, r.output
    assert "/dev/deepum" in r.output and Path(klib.DEV).is_char_device()
    assert klib.param("cmd_queue_len") == "4096"
    r = deepumctl("load")
    assert r.exit_code == 2 and "already loaded" in r.output


def test_load_refusals(module: Callable[..., None]) -> None:
    assert klib.unload() == 0
    for args, message in ((["load", "--ko", "/nonexistent/deepum.ko"], "no such module file"),
                          (["load", "fault_queue_len=100"], "insmod"),
                          (["load", "enable_test_ioctls"], "NAME=VALUE")):
        r = deepumctl(*args)
        assert r.exit_code == 2 and message in r.output, (args, r.output)
        assert not klib.loaded()


def test_not_root(ctx: int) -> None:
    def child() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        for args, message in ((["load"], "needs root"), (["unload"], "needs root"),
                              (["stats"], "permission denied"), (["config", "get", "--defaults"], "permission denied")):
            r = deepumctl(*args)
            assert r.exit_code == 2 and message in r.output, (args, r.output)
        assert deepumctl("status").exit_code == 0  # sysfs is world-readable

    klib.in_child(child)
