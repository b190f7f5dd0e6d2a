"""pydeepum.device and deepumctl's module commands without the kernel module:
a fake /dev/deepum answers the ioctls (with the real prefetch core behind
it), and fake sysfs, kmod and udev stand in for the rest.  The real module
is tested in QEMU (tests/kernel/)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from pydeepum import device as devmod
from pydeepum._lowlevel import constant, ffi, to_dataclass
from pydeepum.cli import cli
from pydeepum.config import checked, default_config, to_cdata
from pydeepum.core import Core
from pydeepum.errors import (
    AlreadyAttachedError,
    ConfigError,
    DeviceError,
    DeviceInputError,
    DeviceMemoryError,
    DevicePermissionError,
    ModuleError,
    ModuleNotLoadedError,
    NotAttachedError,
    ProtocolError,
)
from pydeepum.replay import CoreStats
from pydeepum.trace import LAUNCH, RECORD_DTYPE
from testlib import rec

IOCTLS = {constant(f"DEEPUM_IOC_{name}"): name for name in devmod.ARG_STRUCTS}


class FakeKernel:
    """The ioctls of deepum.ko as Device uses them, per open file, with a
    real core per context.  fail[name] = errno makes that ioctl fail;
    accept_max bounds what one TEST_INJECT takes."""

    def __init__(self) -> None:
        self.defaults = default_config()
        self.files: dict[int, SimpleNamespace] = {}
        self.fail: dict[str, int] = {}
        self.accept_max = constant("DEEPUM_TEST_BATCH_MAX")
        self.contexts = 0

    def ioctl(self, fd: int, request: int, buf: Any, mutate: bool = True) -> int:
        name = IOCTLS[request]
        if name in self.fail:
            raise OSError(self.fail[name], os.strerror(self.fail[name]))
        f = self.files.setdefault(fd, SimpleNamespace(core=None, cmds=[]))
        arg = ffi.from_buffer(f"struct {devmod.ARG_STRUCTS[name]} *", buf)
        getattr(self, name.lower())(f, arg)
        return 0

    def api(self, f: SimpleNamespace, arg: Any) -> None:
        if arg.api >> 16 != constant("DEEPUM_API_MAJOR"):
            raise OSError(errno.EINVAL, "")
        arg.ioctls = sum(1 << constant(f"DEEPUM_IOC_NR_{n}") for n in devmod.ARG_STRUCTS)

    def attach(self, f: SimpleNamespace, arg: Any) -> None:
        if f.core:
            raise OSError(errno.EBUSY, "")
        f.core = Core(self.defaults)
        self.contexts += 1
        arg.pid, arg.context = os.getpid(), self.contexts

    def _core(self, f: SimpleNamespace) -> Core:
        if not f.core:
            raise OSError(errno.ENOTCONN, "")
        return f.core

    def _feed(self, f: SimpleNamespace, records: np.ndarray) -> None:
        core = self._core(f)
        for r in records:
            f.cmds.extend(core.process(r))

    def set_exec_id(self, f: SimpleNamespace, arg: Any) -> None:
        self._feed(f, np.array([rec(LAUNCH, exec_id=arg.exec_id)]))

    def config(self, f: SimpleNamespace, arg: Any) -> None:
        cfg = checked(to_dataclass(type(self.defaults), arg.config))
        if arg.scope == devmod.SCOPE_DEFAULTS:
            self.defaults = cfg
        else:
            self._core(f)
            f.core = Core(cfg)
        arg.config = to_cdata(cfg)[0]

    def get_config(self, f: SimpleNamespace, arg: Any) -> None:
        cfg = self.defaults if arg.scope == devmod.SCOPE_DEFAULTS else self._core(f).config
        arg.config = to_cdata(cfg)[0]

    def stats(self, f: SimpleNamespace, arg: Any) -> None:
        stats = self._core(f).stats() if arg.scope == devmod.SCOPE_CONTEXT else CoreStats(
            **{name: 7 for name in devmod.struct_fields("deepum_stats")})
        for name, value in dataclasses.asdict(stats).items():
            setattr(arg.stats, name, value)

    def test_inject(self, f: SimpleNamespace, arg: Any) -> None:
        n = min(arg.count, self.accept_max)
        recs = np.frombuffer(ffi.buffer(ffi.cast("struct deepum_record *", arg.records), n * RECORD_DTYPE.itemsize),
                             dtype=RECORD_DTYPE)
        self._feed(f, recs)
        arg.accepted = n

    def test_drain(self, f: SimpleNamespace, arg: Any) -> None:
        self._core(f)
        n = min(arg.max, len(f.cmds))
        out = ffi.cast("struct deepum_cmd *", arg.cmds)
        for i, cmd in enumerate(f.cmds[:n]):
            ffi.memmove(out + i, cmd.tobytes(), cmd.dtype.itemsize)
        del f.cmds[:n]
        arg.count = n


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeKernel:
    fake = FakeKernel()
    node = tmp_path / "deepum"
    node.write_bytes(b"")
    monkeypatch.setattr(devmod, "_ioctl", fake.ioctl)
    monkeypatch.setattr(devmod, "DEVICE", node)
    return fake


def open_device() -> devmod.Device:
    return devmod.Device(devmod.DEVICE)


# ---- Device ---------------------------------------------------------------------


def test_handshake(kernel: FakeKernel) -> None:
    with open_device() as dev:
        assert dev.api.version == f"{constant('DEEPUM_API_MAJOR')}.{constant('DEEPUM_API_MINOR')}"
        assert dev.api.has("ATTACH") and dev.api.has("TEST_DRAIN")


def test_attach_and_context_calls(kernel: FakeKernel) -> None:
    with open_device() as dev:
        with pytest.raises(NotAttachedError, match="DEEPUM_IOC_STATS"):
            dev.stats()
        a = dev.attach()
        assert a.pid == os.getpid() and a.context == 1
        with pytest.raises(AlreadyAttachedError):
            dev.attach()
        dev.set_exec_id(3)
        stats = dev.stats()
        assert isinstance(stats, CoreStats) and stats.launches == 1
        assert dev.stats(global_scope=True).records == 7


def test_replay_equals_core(kernel: FakeKernel, gpt2) -> None:
    """Batches are offered again when the queue takes only part of them."""
    kernel.accept_max = 300
    records = gpt2.records[:5000]
    with open_device() as dev:
        dev.attach()
        cmds = dev.replay(records, batch=1000)
    want = Core(default_config()).run(records)
    assert cmds.tobytes() == want.tobytes() and len(want)


def test_config(kernel: FakeKernel) -> None:
    with open_device() as dev:
        dev.attach()
        got = dev.configure(dataclasses.replace(dev.config(), corr_ways=8))
        assert got.corr_ways == 8 and dev.config().corr_ways == 8
        assert dev.config(defaults=True).corr_ways == default_config().corr_ways
        with pytest.raises(ConfigError, match="corr_ways"):
            dev.configure(dataclasses.replace(got, corr_ways=99))


@pytest.mark.parametrize("err,cls", [
    (errno.EPROTO, ProtocolError), (errno.ENOTCONN, NotAttachedError), (errno.EBUSY, AlreadyAttachedError),
    (errno.EINVAL, DeviceInputError), (errno.E2BIG, DeviceInputError), (errno.ENOMEM, DeviceMemoryError),
    (errno.EPERM, DevicePermissionError), (errno.EACCES, DevicePermissionError), (errno.EINTR, DeviceError),
])
def test_errno_to_exception(kernel: FakeKernel, err: int, cls: type) -> None:
    with open_device() as dev:
        kernel.fail["STATS"] = err
        with pytest.raises(cls) as exc:
            dev.stats(global_scope=True)
    assert exc.value.errno == err and str(exc.value).startswith("DEEPUM_IOC_STATS: ")


def test_eperm_explains_test_ioctls(kernel: FakeKernel) -> None:
    with open_device() as dev:
        dev.attach()
        kernel.fail["TEST_INJECT"] = errno.EPERM
        with pytest.raises(DevicePermissionError, match="enable_test_ioctls=1"):
            dev.inject(np.zeros(1, dtype=RECORD_DTYPE))


def test_refused_handshake(kernel: FakeKernel) -> None:
    kernel.fail["API"] = errno.EINVAL
    with pytest.raises(ProtocolError, match="does not speak API 1"):
        open_device()


def test_open_errors(kernel: FakeKernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModuleNotLoadedError, match="deepumctl load"):
        devmod.Device(tmp_path / "missing")

    def denied(*_: Any) -> int:
        raise PermissionError(errno.EACCES, "denied")

    monkeypatch.setattr(devmod.os, "open", denied)
    with pytest.raises(DevicePermissionError, match="permission denied"):
        open_device()


def test_records_dtype_checked(kernel: FakeKernel) -> None:
    with open_device() as dev:
        dev.attach()
        with pytest.raises(TypeError):
            dev.inject(np.zeros(3, dtype=np.uint64))


# ---- the module: sysfs, kmod, udev -------------------------------------------------


@pytest.fixture
def sysfs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kernel: FakeKernel) -> SimpleNamespace:
    """A loaded module as sysfs would show it."""
    mod, dev = tmp_path / "module", tmp_path / "class"
    (mod / "parameters").mkdir(parents=True)
    (dev / "stats").mkdir(parents=True)
    for name, value in {"enable_test_ioctls": "Y", "fault_queue_len": "16384"}.items():
        (mod / "parameters" / name).write_text(value + "\n")
    (mod / "refcnt").write_text("2\n")
    (dev / "contexts").write_text("1\n")
    (dev / "backend").write_text("record\n")
    columns = devmod.struct_fields("deepum_stats")
    (dev / "snapshot").write_text(" ".join(str(i + 1) for i in range(len(columns))) + "\n")
    monkeypatch.setattr(devmod, "SYSFS_MODULE", mod)
    monkeypatch.setattr(devmod, "SYSFS_DEVICE", dev)
    monkeypatch.setattr(devmod.os, "geteuid", lambda: 0)
    return SimpleNamespace(module=mod, device=dev, columns=columns)


def test_sysfs_stats_columns(sysfs: SimpleNamespace) -> None:
    stats = devmod.sysfs_stats()
    assert [getattr(stats, c) for c in sysfs.columns] == list(range(1, len(sysfs.columns) + 1))
    # A newer module appends columns; an older one has fewer.
    (sysfs.device / "snapshot").write_text("5 6 " + " ".join("1" for _ in sysfs.columns) + "\n")
    assert devmod.sysfs_stats().records == 5
    (sysfs.device / "snapshot").write_text("9 8\n")
    stats = devmod.sysfs_stats()
    assert (stats.records, stats.launches, stats.prefetch_late) == (9, 8, 0)


def test_module_status(sysfs: SimpleNamespace) -> None:
    st = devmod.module_status()
    assert st.loaded and st.contexts == 1 and st.refcount == 2 and st.backend == "record"
    assert st.parameters == {"enable_test_ioctls": "Y", "fault_queue_len": "16384"}
    assert st.stats.records == 1


class FakeMonitor:
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def poll(self, timeout: float) -> Any:
        return self.events.pop(0) if self.events else None


def udev_event(name: str, action: str = "add") -> Any:
    return SimpleNamespace(sys_name=name, action=action, device_node=f"/dev/{name}")


@pytest.fixture
def kmod(monkeypatch: pytest.MonkeyPatch, sysfs: SimpleNamespace) -> SimpleNamespace:
    """Records the kmod commands run; the module starts unloaded."""
    state = SimpleNamespace(argv=[], returncode=0, stderr="", events=[udev_event("other"), udev_event("deepum")])
    sysfs.module.rename(sysfs.module.with_name("unloaded"))

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess:
        state.argv.append(argv)
        return subprocess.CompletedProcess(argv, state.returncode, "", state.stderr)

    monkeypatch.setattr(devmod, "_run", run)
    monkeypatch.setattr(devmod, "_device_monitor", lambda: FakeMonitor(state.events))
    state.sysfs = sysfs
    return state


def test_load(kmod: SimpleNamespace, tmp_path: Path) -> None:
    ko = tmp_path / "deepum.ko"
    ko.write_bytes(b"")
    assert devmod.load_module(["enable_test_ioctls=1"], ko=ko) == "/dev/deepum"
    assert kmod.argv == [["insmod", str(ko), "enable_test_ioctls=1"]]


def test_load_modprobe(kmod: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(devmod, "SOURCE_KO", tmp_path / "not-built.ko")
    devmod.load_module()
    assert kmod.argv == [["modprobe", "deepum"]]
    kmod.returncode, kmod.stderr = 1, "modprobe: FATAL: Module deepum not found"
    with pytest.raises(ModuleError, match="not found.*neither built here"):
        devmod.load_module()


def test_load_refusals(kmod: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ModuleError, match="no such module file"):
        devmod.load_module(ko=tmp_path / "missing.ko")
    with pytest.raises(ModuleError, match="NAME=VALUE"):
        devmod.load_module(["enable_test_ioctls"])
    kmod.events.clear()
    with pytest.raises(ModuleError, match="did not appear within 0.5 s"):
        devmod.load_module(timeout=0.5)
    monkeypatch.setattr(devmod.os, "geteuid", lambda: 1000)
    with pytest.raises(ModuleError, match="needs root"):
        devmod.load_module()


@pytest.fixture
def driver(kmod: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SimpleNamespace:
    """The NVIDIA driver 580.159.04 running, its nvidia-uvm loaded, and a
    patched build of the same version (a stand-in .ko: the bytes the checks read)."""
    nvidia, uvm_mod = tmp_path / "sys-nvidia", tmp_path / "sys-nvidia_uvm"
    nvidia.mkdir()
    uvm_mod.mkdir()
    (nvidia / "version").write_text("580.159.04\n")
    ko = tmp_path / "nvidia-uvm.ko"
    ko.write_bytes(b"\x7fELF...__ksymtab_uvm_ext_register\0...\0version=580.159.04\0license=Dual MIT/GPL\0")
    deepum = tmp_path / "deepum.ko"
    deepum.write_bytes(b"")
    holders: list[int] = []
    monkeypatch.setattr(devmod, "SYSFS_NVIDIA", nvidia)
    monkeypatch.setattr(devmod, "SYSFS_NVIDIA_UVM", uvm_mod)
    monkeypatch.setattr(devmod, "device_holders", lambda node=None: holders if node == devmod.UVM_DEVICE else [])
    return SimpleNamespace(kmod=kmod, ko=ko, deepum=deepum, nvidia=nvidia, uvm_mod=uvm_mod, holders=holders)


def test_load_swaps_in_the_patched_nvidia_uvm_first(driver: SimpleNamespace) -> None:
    want = [["rmmod", "nvidia_uvm"], ["insmod", str(driver.ko)], ["insmod", str(driver.deepum)]]
    assert devmod.load_commands(ko=driver.deepum, uvm_ko=driver.ko) == want
    assert driver.kmod.argv == []  # checking runs nothing
    assert devmod.load_module(ko=driver.deepum, uvm_ko=driver.ko) == "/dev/deepum"
    assert driver.kmod.argv == want


def test_the_swap_refuses_what_cannot_work(driver: SimpleNamespace, tmp_path: Path) -> None:
    stock = tmp_path / "stock.ko"
    stock.write_bytes(b"\0version=580.159.04\0")
    with pytest.raises(ModuleError, match="not an nvidia-uvm with deepum's patch"):
        devmod.load_commands(ko=driver.deepum, uvm_ko=stock)
    (driver.nvidia / "version").write_text("580.95.05\n")
    with pytest.raises(ModuleError, match="is nvidia-uvm 580.159.04, the running driver is 580.95.05"):
        devmod.load_commands(ko=driver.deepum, uvm_ko=driver.ko)
    (driver.nvidia / "version").write_text("580.159.04\n")
    driver.holders.append(4242)
    with pytest.raises(ModuleError, match="open \\(4242\\): stop the CUDA programs first"):
        devmod.load_commands(ko=driver.deepum, uvm_ko=driver.ko)
    driver.holders.clear()
    (driver.nvidia / "version").unlink()
    with pytest.raises(ModuleError, match="no NVIDIA driver is loaded"):
        devmod.load_commands(ko=driver.deepum, uvm_ko=driver.ko)
    assert driver.kmod.argv == []


def test_a_failed_swap_puts_the_stock_nvidia_uvm_back(driver: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess:
        driver.kmod.argv.append(argv)
        failed = argv[0] == "insmod" and argv[1] == str(driver.ko)
        return subprocess.CompletedProcess(argv, int(failed), "", "Invalid module format" if failed else "")

    monkeypatch.setattr(devmod, "_run", run)
    with pytest.raises(ModuleError, match="Invalid module format; the stock nvidia-uvm was loaded back"):
        devmod.load_module(ko=driver.deepum, uvm_ko=driver.ko)
    assert driver.kmod.argv == [["rmmod", "nvidia_uvm"], ["insmod", str(driver.ko)], ["modprobe", "nvidia_uvm"]]


def test_load_dry_run_prints_every_command(driver: SimpleNamespace) -> None:
    result = CliRunner().invoke(cli, ["load", "--dry-run", "--ko", str(driver.deepum), "--uvm-ko", str(driver.ko),
                                      "fault_queue_len=4096"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["rmmod nvidia_uvm", f"insmod {driver.ko}",
                                          f"insmod {driver.deepum} fault_queue_len=4096"]
    result = CliRunner().invoke(cli, ["load", "--dry-run", "--json", "--uvm-ko", str(driver.ko)])
    assert json.loads(result.output)["commands"][:2] == [["rmmod", "nvidia_uvm"], ["insmod", str(driver.ko)]]
    assert driver.kmod.argv == []


def test_build_runs_the_patch_build_then_deepum_against_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pydeepum import build as buildmod

    src = tmp_path / "nvidia-open-kernel-source.deb"
    src.write_bytes(b"")
    out = tmp_path / "out"
    runs: list[list[str]] = []
    monkeypatch.setattr(buildmod, "_run", lambda a, **_: runs.append(a) or subprocess.CompletedProcess(a, 0, "", ""))
    result = CliRunner().invoke(cli, ["build", "--nvidia-src", str(src), "--out", str(out), "--kver", "6.1.0-57-amd64"])
    assert result.exit_code == 0, result.output
    (make,) = runs  # kmod/Makefile patches and builds nvidia-uvm, then deepum.ko against it
    assert make[:3] == ["make", "-C", str(buildmod.ROOT / "kmod")]
    assert make[3:] == [f"NVIDIA_SRC={src}", f"NVIDIA_OUT={out}", "KVER=6.1.0-57-amd64"]
    assert f"deepumctl load --uvm-ko {out}/src/nvidia-uvm.ko" in result.output
    runs.clear()
    dry = CliRunner().invoke(cli, ["build", "--nvidia-src", str(src), "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0 and runs == [] and len(dry.output.splitlines()) == 1

    monkeypatch.setattr(buildmod, "_run", lambda a, **_: subprocess.CompletedProcess(a, 2, "", "build-uvm: no patch "
                                                                                     "series for driver 550.54.14"))
    failed = CliRunner().invoke(cli, ["build", "--nvidia-src", str(src), "--out", str(out)])
    assert failed.exit_code == 2 and "no patch series for driver 550.54.14" in failed.output
    missing = CliRunner().invoke(cli, ["build", "--nvidia-src", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such NVIDIA source" in missing.output


def test_unload_restores_the_stock_nvidia_uvm(sysfs: SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    argv: list[list[str]] = []
    monkeypatch.setattr(devmod, "_run", lambda a, **_: argv.append(a) or subprocess.CompletedProcess(a, 0, "", ""))
    monkeypatch.setattr(devmod, "device_holders", lambda node=None: [])
    monkeypatch.setattr(devmod, "SYSFS_NVIDIA_UVM", tmp_path)  # loaded
    (sysfs.device / "contexts").write_text("0\n")
    devmod.unload_module(restore_uvm=True)
    assert argv == [["rmmod", "deepum"], ["rmmod", "nvidia_uvm"], ["modprobe", "nvidia_uvm"]]


def test_unload(sysfs: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = []
    monkeypatch.setattr(devmod, "_run", lambda a, **_: argv.append(a) or subprocess.CompletedProcess(a, 0, "", ""))
    sleeper = subprocess.Popen(["sleep", "60"])
    monkeypatch.setattr(devmod, "device_holders", lambda: [sleeper.pid])
    try:
        with pytest.raises(ModuleError, match=rf"1 context\(s\) attached .*{sleeper.pid}"):
            devmod.unload_module()
        assert argv == [] and sleeper.poll() is None
        devmod.unload_module(force=True)
        assert sleeper.wait(timeout=10) == -15  # SIGTERM
        assert argv == [["rmmod", "deepum"]]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unload_in_use(sysfs: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    (sysfs.device / "contexts").write_text("0\n")
    monkeypatch.setattr(devmod, "_run", lambda a, **_: subprocess.CompletedProcess(
        a, 1, "", "rmmod: ERROR: Module deepum is in use"))
    with pytest.raises(ModuleError, match=r"in use \(2 user\(s\) left\)"):
        devmod.unload_module()


# ---- deepumctl --------------------------------------------------------------------------


def deepumctl(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_cli_status(sysfs: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    r = deepumctl("status", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["contexts"] == 1
    r = deepumctl("status")
    assert r.exit_code == 0 and "backend record" in r.output and "enable_test_ioctls=Y" in r.output
    monkeypatch.setattr(devmod, "SYSFS_MODULE", sysfs.module / "gone")
    assert deepumctl("status").output == "deepum: not loaded\n"


def test_cli_stats(kernel: FakeKernel) -> None:
    r = deepumctl("stats", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["records"] == 7
    r = deepumctl("stats", "--watch", "0.01", "--count", "2", "--json")
    assert r.exit_code == 0 and len(r.output.splitlines()) == 2
    kernel.fail["API"] = errno.EACCES
    r = deepumctl("stats")
    assert r.exit_code == 2 and "permission denied" in r.output


def test_cli_config(kernel: FakeKernel) -> None:
    r = deepumctl("config", "set", "--defaults", "--json", "corr_ways=8")
    assert r.exit_code == 0 and json.loads(r.output)["corr_ways"] == 8
    assert kernel.defaults.corr_ways == 8
    r = deepumctl("config", "get", "--defaults")
    assert r.exit_code == 0 and "corr_ways          8" in r.output
    for args in (["config", "get"], ["config", "set", "corr_ways=8"], ["config", "set", "--defaults", "x=1"],
                 ["config", "set", "--defaults", "corr_ways=99"]):
        assert deepumctl(*args).exit_code == 2, args


def test_cli_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devmod, "DEVICE", tmp_path / "deepum")
    r = deepumctl("stats")
    assert r.exit_code == 2 and "is the module loaded" in r.output


def test_cli_load_unload(kmod: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ko = tmp_path / "deepum.ko"
    ko.write_bytes(b"")
    r = deepumctl("load", "--ko", str(ko), "fault_queue_len=1024")
    assert r.exit_code == 0 and "deepum loaded: /dev/deepum" in r.output, r.output
    monkeypatch.setattr(devmod.os, "geteuid", lambda: 1000)
    r = deepumctl("unload")
    assert r.exit_code == 2 and "needs root" in r.output
