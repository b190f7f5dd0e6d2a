"""The deepum kernel module from Python: the ioctls of /dev/deepum (Device),
and the module itself (load_module, unload_module, module_status).

Struct layouts, ioctl numbers and constants come from the compiled UAPI
header (pydeepum._native, cffi API mode); nothing here restates them.  A
refused ioctl raises the pydeepum.errors exception for its errno, and results
come back as dataclasses (Config, CoreStats) and numpy arrays (RECORD_DTYPE,
CMD_DTYPE).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._lowlevel import constant, ffi, struct_fields, to_dataclass
from .config import Config, checked, to_cdata
from .core import CMD_DTYPE
from .errors import (
    AlreadyAttachedError,
    DeviceError,
    DeviceInputError,
    DeviceMemoryError,
    DevicePermissionError,
    ModuleError,
    ModuleNotLoadedError,
    NotAttachedError,
    ProtocolError,
)
from .replay import CoreStats
from .trace import RECORD_DTYPE

DEVICE = Path("/dev/deepum")
SYSFS_DEVICE = Path("/sys/class/misc/deepum")
SYSFS_MODULE = Path("/sys/module/deepum")
# The source tree's module, which load_module() prefers when it is built.
SOURCE_KO = Path(__file__).resolve().parent.parent / "kmod" / "deepum.ko"
# NVIDIA's driver, as far as swapping in a patched nvidia-uvm is concerned.
SYSFS_NVIDIA = Path("/sys/module/nvidia")
SYSFS_NVIDIA_UVM = Path("/sys/module/nvidia_uvm")
UVM_DEVICE = Path("/dev/nvidia-uvm")

BATCH_MAX = constant("DEEPUM_TEST_BATCH_MAX")
SCOPE_CONTEXT = constant("DEEPUM_SCOPE_CONTEXT")
SCOPE_DEFAULTS = constant("DEEPUM_SCOPE_DEFAULTS")
SCOPE_GLOBAL = constant("DEEPUM_SCOPE_GLOBAL")

# Each ioctl's argument struct: the header pairs them in its _IOWR() lines, and
# tests/test_uapi.py checks this copy against them (an installed package has
# no header to read).
ARG_STRUCTS = {
    "API": "deepum_api",
    "ATTACH": "deepum_attach",
    "SET_EXEC_ID": "deepum_set_exec_id",
    "CONFIG": "deepum_config_req",
    "GET_CONFIG": "deepum_config_req",
    "INVALIDATE": "deepum_range",
    "STATS": "deepum_stats_req",
    "BIND_UVM": "deepum_bind_uvm",
    "TEST_INJECT": "deepum_test_inject",
    "TEST_DRAIN": "deepum_test_drain",
}

# The system calls, indirect so that tests can put a fake kernel behind them.
_ioctl = fcntl.ioctl
_run = subprocess.run


@dataclass(frozen=True)
class ApiInfo:
    """What DEEPUM_IOC_API answered."""

    api: int  # major << 16 | minor
    features: int  # DEEPUM_FEATURE_* bits
    ioctls: int  # bit n: ioctl number n is available

    @property
    def version(self) -> str:
        return f"{self.api >> 16}.{self.api & 0xFFFF}"

    def has(self, ioctl: str) -> bool:
        return bool(self.ioctls >> constant(f"DEEPUM_IOC_NR_{ioctl}") & 1)


@dataclass(frozen=True)
class Attachment:
    pid: int  # the process the file is bound to
    context: int  # the context's number, unique while the module is loaded


# errno -> exception class and what it means, whatever the ioctl.
_ERRORS = {
    errno.EPROTO: (ProtocolError, "no API handshake on this file"),
    errno.ENOTCONN: (NotAttachedError, "the file is not attached to a context"),
    errno.EBUSY: (AlreadyAttachedError, "the file is already attached"),
    errno.EINVAL: (DeviceInputError, "invalid argument"),
    errno.E2BIG: (DeviceInputError, "the argument has fields this module does not know"),
    errno.ENOMEM: (DeviceMemoryError, "the module has no memory for it"),
    errno.EACCES: (DevicePermissionError, "permission denied"),
    errno.EPERM: (DevicePermissionError, "not permitted"),
}
_EPERM_WHY = {
    "CONFIG": "the defaults need CAP_SYS_ADMIN; a context, its own process",
    "TEST_INJECT": "the module was loaded without enable_test_ioctls=1, or the context is another process's",
    "TEST_DRAIN": "the module was loaded without enable_test_ioctls=1, or the context is another process's",
}


def ioctl_error(errnum: int, ioctl: str) -> DeviceError:
    """The exception for DEEPUM_IOC_@ioctl failing with @errnum."""
    cls, why = _ERRORS.get(errnum, (DeviceError, os.strerror(errnum)))
    if errnum == errno.EPERM:
        why = f"not permitted: {_EPERM_WHY.get(ioctl, 'the context belongs to another process')}"
    return cls(errnum, f"DEEPUM_IOC_{ioctl}: {why}")


def _records(records: np.ndarray) -> np.ndarray:
    if records.dtype != RECORD_DTYPE:
        raise TypeError("records must have pydeepum.trace.RECORD_DTYPE")
    return np.ascontiguousarray(records)


class Device:
    """An open file of /dev/deepum, past the API handshake.  Attach it to get
    a context: a prefetch pipeline for this process."""

    def __init__(self, path: str | os.PathLike | None = None):
        path = DEVICE if path is None else path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ModuleNotLoadedError(errno.ENOENT, f"{path}: no such device; is the module loaded? "
                                       "(deepumctl load)") from None
        except PermissionError as e:
            raise DevicePermissionError(e.errno, f"{path}: permission denied (root, or the group "
                                        "a udev rule gives the device)") from None
        try:
            self.api = self._handshake()
        except BaseException:
            os.close(self._fd)
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def fileno(self) -> int:
        return self._fd

    def _ioctl(self, ioctl: str, **fields: Any) -> Any:
        arg = ffi.new(f"struct {ARG_STRUCTS[ioctl]} *", fields)
        try:
            _ioctl(self._fd, constant(f"DEEPUM_IOC_{ioctl}"), ffi.buffer(arg))
        except OSError as e:
            raise ioctl_error(e.errno, ioctl) from None
        return arg

    def _handshake(self) -> ApiInfo:
        want = constant("DEEPUM_API_VERSION")
        try:
            arg = self._ioctl("API", api=want)
        except DeviceInputError:
            raise ProtocolError(errno.EINVAL, f"the module does not speak API {want >> 16}.x") from None
        return ApiInfo(api=arg.api, features=arg.features, ioctls=arg.ioctls)

    def attach(self) -> Attachment:
        """Bind this file to the calling process: it gets its own context."""
        arg = self._ioctl("ATTACH")
        return Attachment(pid=arg.pid, context=arg.context)

    def set_exec_id(self, exec_id: int, *, stream: int = 0, name_hash: int = 0, ts: int = 0) -> None:
        """The kernel with @exec_id is about to run (a LAUNCH record; @ts 0: now)."""
        self._ioctl("SET_EXEC_ID", exec_id=exec_id, stream=stream, name_hash=name_hash, ts=ts)

    def invalidate(self, addr: int, length: int) -> None:
        """[addr, addr + length) holds dead data (a FREE record)."""
        self._ioctl("INVALIDATE", addr=addr, len=length)

    def config(self, *, defaults: bool = False) -> Config:
        """The context's configuration, or with @defaults what new contexts get."""
        arg = self._ioctl("GET_CONFIG", scope=SCOPE_DEFAULTS if defaults else SCOPE_CONTEXT)
        return to_dataclass(Config, arg.config)

    def configure(self, cfg: Config, *, defaults: bool = False) -> Config:
        """Replace the context's core (tables start empty), or with @defaults
        set what new contexts get (CAP_SYS_ADMIN).  Returns what is in force."""
        cfg = checked(cfg)  # names the offending field, which EINVAL cannot
        arg = self._ioctl("CONFIG", scope=SCOPE_DEFAULTS if defaults else SCOPE_CONTEXT,
                          config=to_cdata(cfg)[0])
        return to_dataclass(Config, arg.config)

    def stats(self, *, global_scope: bool = False) -> CoreStats:
        """The context's counters, or with @global_scope the module's."""
        arg = self._ioctl("STATS", scope=SCOPE_GLOBAL if global_scope else SCOPE_CONTEXT)
        return to_dataclass(CoreStats, arg.stats)

    def bind_uvm(self, fd: int) -> None:
        """Take the GPU faults of @fd's nvidia-uvm VA space (a /dev/nvidia-uvm
        file of this process that CUDA initialised) into this context."""
        try:
            self._ioctl("BIND_UVM", fd=fd)
        except DeviceError as e:
            why = {errno.ENODEV: "the module has no nvidia-uvm backend (or runs with enable_test_ioctls)",
                   errno.EBADF: f"fd {fd} is not an open nvidia-uvm file",
                   errno.EBUSY: "the context or that VA space is bound already"}.get(e.errno)
            if why:
                raise type(e)(e.errno, f"DEEPUM_IOC_BIND_UVM: {why}") from None
            raise

    def inject(self, records: np.ndarray) -> int:
        """TEST_INJECT up to BATCH_MAX records; how many the fault queue took."""
        records = _records(records)
        ptr = ffi.from_buffer("struct deepum_record[]", records)
        arg = self._ioctl("TEST_INJECT", records=int(ffi.cast("uintptr_t", ptr)), count=len(records))
        return int(arg.accepted)

    def drain(self, max_cmds: int = BATCH_MAX, *, wait: bool = False) -> np.ndarray:
        """TEST_DRAIN: up to @max_cmds recorded commands; with @wait, first
        let the pipeline process every record queued so far."""
        out = np.zeros(max_cmds, dtype=CMD_DTYPE)
        ptr = ffi.from_buffer("struct deepum_cmd[]", out)
        arg = self._ioctl("TEST_DRAIN", cmds=int(ffi.cast("uintptr_t", ptr)), max=max_cmds,
                          flags=constant("DEEPUM_DRAIN_F_WAIT") if wait else 0)
        return out[: arg.count]

    def drain_all(self) -> np.ndarray:
        """Every command the pipeline produced for the records queued so far."""
        chunks = []
        while len(chunk := self.drain(wait=True)):
            chunks.append(chunk)
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=CMD_DTYPE)

    def replay(self, records: np.ndarray, batch: int = 1024) -> np.ndarray:
        """Every record through the context's pipeline, in batches of @batch,
        draining after each so that the recording never overflows; all the
        commands, in order."""
        records = _records(records)
        out = []
        for start in range(0, len(records), batch):
            chunk = records[start : start + batch]
            while len(chunk):
                chunk = chunk[self.inject(chunk) :]
                out.append(self.drain_all())
        return np.concatenate(out) if out else np.zeros(0, dtype=CMD_DTYPE)


# ---- the module ---------------------------------------------------------------


def sysfs_stats() -> CoreStats:
    """The module-wide counters from /sys/class/misc/deepum/snapshot: its
    columns are the header's counters in order (a newer module's extra
    columns are ignored; an older module's missing ones read 0)."""
    values = [int(v) for v in (SYSFS_DEVICE / "snapshot").read_text().split()]
    names = struct_fields("deepum_stats")
    return CoreStats(**{name: values[i] if i < len(values) else 0 for i, name in enumerate(names)})


def device_holders(node: Path | None = None) -> list[int]:
    """Processes other than this one with @node (/dev/deepum) open (all of them only as root)."""
    try:
        rdev = (DEVICE if node is None else node).stat().st_rdev
    except FileNotFoundError:
        return []
    holders = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if any(fd.stat().st_rdev == rdev for fd in (proc / "fd").iterdir()):
                holders.append(int(proc.name))
        except OSError:  # gone, or not ours to look at
            continue
    return sorted(holders)


@dataclass(frozen=True)
class ModuleStatus:
    loaded: bool
    device: str | None = None  # the device node, when it exists
    parameters: dict[str, str] = field(default_factory=dict)
    refcount: int = 0  # open files and other users holding the module
    contexts: int = 0  # attached contexts
    backend: str = ""  # the migration backend new contexts get
    holders: list[int] = field(default_factory=list)
    stats: CoreStats | None = None  # module-wide counters


def module_status() -> ModuleStatus:
    """The module as sysfs shows it; needs no access to /dev/deepum."""
    if not SYSFS_MODULE.exists():
        return ModuleStatus(loaded=False)
    params = {p.name: p.read_text().strip() for p in sorted((SYSFS_MODULE / "parameters").iterdir())}
    return ModuleStatus(
        loaded=True,
        device=str(DEVICE) if DEVICE.exists() else None,
        parameters=params,
        refcount=int((SYSFS_MODULE / "refcnt").read_text()),
        contexts=int((SYSFS_DEVICE / "contexts").read_text()),
        backend=(SYSFS_DEVICE / "backend").read_text().strip(),
        holders=device_holders(),
        stats=sysfs_stats(),
    )


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ModuleError(f"{what} needs root")


def _device_monitor() -> Any:
    """A started pyudev monitor of misc devices.  Without udevd (a minimal VM)
    only the kernel's own events arrive, so it listens to those."""
    import pyudev

    source = "udev" if Path("/run/udev/control").exists() else "kernel"
    monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source=source)
    monitor.filter_by("misc")
    monitor.start()
    return monitor


def _modinfo_version(data: bytes) -> str | None:
    """The version= entry of a .ko's .modinfo section."""
    m = re.search(rb"(?:^|\0)version=([^\0]+)\0", data)
    return m.group(1).decode(errors="replace") if m else None


def uvm_swap_commands(uvm_ko: str | os.PathLike) -> list[list[str]]:
    """The commands that replace the running nvidia-uvm with @uvm_ko, a build
    with deepum's uvm_ext patch (kmod/nvidia/build-uvm), after checking that it
    is one, that it is the running driver's version, and that no process has
    /dev/nvidia-uvm open (the stock module could not be removed under it)."""
    path = Path(uvm_ko)
    try:
        running = (SYSFS_NVIDIA / "version").read_text().strip()
    except FileNotFoundError:
        raise ModuleError("no NVIDIA driver is loaded (no /sys/module/nvidia)") from None
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModuleError(f"{path}: {e.strerror}") from None
    if b"uvm_ext_register" not in data:
        raise ModuleError(f"{path}: not an nvidia-uvm with deepum's patch (no uvm_ext exports); "
                          "build one with kmod/nvidia/build-uvm")
    built = _modinfo_version(data)
    if built != running:
        raise ModuleError(f"{path} is nvidia-uvm {built or 'of no version'}, the running driver is {running}: "
                          "build the patch against the running driver's source")
    holders = device_holders(UVM_DEVICE)
    if holders:
        raise ModuleError(f"processes have {UVM_DEVICE} open ({', '.join(map(str, holders))}): "
                          "stop the CUDA programs first")
    steps = [["rmmod", "nvidia_uvm"]] if SYSFS_NVIDIA_UVM.exists() else []
    return steps + [["insmod", str(path)]]


def load_commands(params: Sequence[str] = (), ko: str | os.PathLike | None = None,
                  uvm_ko: str | os.PathLike | None = None) -> list[list[str]]:
    """What load_module() runs, in order, once its checks passed."""
    _need_root("loading a kernel module")
    if SYSFS_MODULE.exists():
        raise ModuleError("deepum is already loaded (deepumctl unload first)")
    for p in params:
        if "=" not in p:
            raise ModuleError(f"module parameter {p!r}: want NAME=VALUE")
    if ko is None and SOURCE_KO.is_file():
        ko = SOURCE_KO
    if ko is not None and not Path(ko).is_file():
        raise ModuleError(f"{ko}: no such module file (build it with: make -C kmod)")
    steps = uvm_swap_commands(uvm_ko) if uvm_ko is not None else []
    return steps + [["insmod", str(ko), *params] if ko is not None else ["modprobe", "deepum", *params]]


def load_module(params: Sequence[str] = (), ko: str | os.PathLike | None = None,
                timeout: float = 10.0, uvm_ko: str | os.PathLike | None = None) -> str:
    """Load deepum.ko with @params (NAME=VALUE): @ko with insmod, else the
    source tree's kmod/deepum.ko if built, else modprobe; with @uvm_ko, swap
    that patched nvidia-uvm in first (uvm_swap_commands()).  Returns the
    device node once udev (or the kernel) announced it.  If the swap fails
    half-way, the stock nvidia-uvm is put back."""
    steps = load_commands(params, ko, uvm_ko)
    *swap, argv = steps
    for step in swap:
        result = _run(step, capture_output=True, text=True)
        if result.returncode:
            why = f"{' '.join(step)}: {result.stderr.strip() or 'failed'}"
            if step[0] == "insmod":
                _run(["modprobe", "nvidia_uvm"], capture_output=True, text=True)
                why += "; the stock nvidia-uvm was loaded back"
            raise ModuleError(why)

    monitor = _device_monitor()  # before loading: the event cannot be missed
    result = _run(argv, capture_output=True, text=True)
    if result.returncode:
        hint = "" if ko is not None or SOURCE_KO.is_file() else \
            "; deepum.ko is neither built here (make -C kmod) nor installed (make -C kmod dkms-install)"
        raise ModuleError(f"{' '.join(argv)}: {result.stderr.strip() or 'failed'}{hint}")
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        device = monitor.poll(timeout=left)
        if device is None:
            break
        if device.sys_name == "deepum" and device.action == "add":
            return device.device_node or str(DEVICE)
    raise ModuleError(f"{DEVICE} did not appear within {timeout} s of loading the module")


def _stop_holders(pids: list[int], timeout: float) -> None:
    """SIGTERM @pids and wait, on pidfds (no polling), until they exited."""
    waiting = []
    for pid in pids:
        try:
            waiting.append(os.pidfd_open(pid))
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout
    try:
        while waiting and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(waiting, [], [], left)
            for fd in ready:
                waiting.remove(fd)
                os.close(fd)
    finally:
        for fd in waiting:
            os.close(fd)


# Putting the driver's own nvidia-uvm back after deepum is gone.
RESTORE_UVM_COMMANDS = [["rmmod", "nvidia_uvm"], ["modprobe", "nvidia_uvm"]]


def unload_module(force: bool = False, timeout: float = 10.0, restore_uvm: bool = False) -> None:
    """rmmod deepum.  Refuses while contexts are attached; @force first
    stops (SIGTERM) every process holding /dev/deepum open and waits up to
    @timeout for them.  Never forces the kernel: it refuses while any file is
    open, and deepumctl never unloads under an open file.  With
    @restore_uvm, then the stock nvidia-uvm replaces the patched one."""
    _need_root("unloading a kernel module")
    if not SYSFS_MODULE.exists():
        raise ModuleError("deepum is not loaded")
    contexts = int((SYSFS_DEVICE / "contexts").read_text())
    holders = device_holders()
    if contexts and not force:
        raise ModuleError(f"{contexts} context(s) attached (processes with /dev/deepum open: "
                          f"{', '.join(map(str, holders)) or 'unknown'}); stop them, or --force")
    if force and holders:
        _stop_holders(holders, timeout)
    result = _run(["rmmod", "deepum"], capture_output=True, text=True)
    if result.returncode:
        users = (SYSFS_MODULE / "refcnt").read_text().strip() if SYSFS_MODULE.exists() else "?"
        raise ModuleError(f"rmmod deepum: {result.stderr.strip() or 'failed'} ({users} user(s) left)")
    if restore_uvm:
        holders = device_holders(UVM_DEVICE)
        if holders:
            raise ModuleError(f"deepum unloaded, but processes have {UVM_DEVICE} open "
                              f"({', '.join(map(str, holders))}): stop them, then deepumctl unload --restore-uvm")
        for step in RESTORE_UVM_COMMANDS:
            if step[0] == "rmmod" and not SYSFS_NVIDIA_UVM.exists():
                continue
            result = _run(step, capture_output=True, text=True)
            if result.returncode:
                raise ModuleError(f"{' '.join(step)}: {result.stderr.strip() or 'failed'}")
