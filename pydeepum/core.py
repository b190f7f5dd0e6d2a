"""The prefetch core, one record at a time: for tests, debugging and tools.
(Replay drives the same core from C, without a Python call per record.)"""

from __future__ import annotations

import numpy as np

from ._lowlevel import constant, errno_error, ffi, lib, struct_dtype, to_dataclass
from .config import Config, checked, to_cdata
from .errors import RecordError
from .replay import CoreStats
from .trace import RECORD_DTYPE

CMD_DTYPE = struct_dtype("deepum_cmd")
PREFETCH = constant("DEEPUM_CMD_PREFETCH")
EVICT = constant("DEEPUM_CMD_EVICT")
DISCARD = constant("DEEPUM_CMD_DISCARD")
CMD_DEMAND = constant("DEEPUM_CMD_F_DEMAND")
OP_NAMES = {PREFETCH: "prefetch", EVICT: "evict", DISCARD: "discard"}


class Core:
    """One prefetch core instance (struct deepum_core)."""

    def __init__(self, cfg: Config):
        self.config = checked(cfg)
        ptr = ffi.new("struct deepum_core **")
        rc = lib.deepum_core_create(to_cdata(self.config), ptr)
        if rc < 0:
            raise errno_error(rc, "deepum_core_create")
        self._core = ffi.gc(ptr[0], lib.deepum_core_destroy)
        self._max = lib.deepum_core_max_cmds(self._core)
        self._cmds = np.zeros(self._max, dtype=CMD_DTYPE)
        self._ncmds = ffi.new("__u32 *")

    def process(self, record: np.void | np.ndarray, index: int = 0) -> np.ndarray:
        """Feed one record (RECORD_DTYPE); the commands it produced."""
        rec = np.asarray(record, dtype=RECORD_DTYPE).reshape(1)
        rc = lib.deepum_core_process(
            self._core,
            ffi.from_buffer("struct deepum_record[]", rec),
            ffi.from_buffer("struct deepum_cmd[]", self._cmds),
            self._max,
            self._ncmds,
        )
        if rc < 0:
            raise RecordError(index, "rejected by the prefetch core (unknown type or flags)")
        return self._cmds[: self._ncmds[0]].copy()

    def run(self, records: np.ndarray) -> np.ndarray:
        """Feed many records; all commands, in order."""
        out = [self.process(rec, i) for i, rec in enumerate(records)]
        return np.concatenate(out) if out else np.zeros(0, dtype=CMD_DTYPE)

    def stats(self) -> CoreStats:
        s = ffi.new("struct deepum_stats *")
        lib.deepum_core_get_stats(self._core, s)
        return to_dataclass(CoreStats, s)

    def is_resident(self, addr: int) -> bool:
        return bool(lib.deepum_core_is_resident(self._core, addr))

    def exec_successors(self, exec_id: int) -> list[int]:
        out = ffi.new("__u32[]", 8)
        return list(out[0 : lib.deepum_core_exec_successors(self._core, exec_id, out, 8)])

    def exec_starts(self, exec_id: int) -> list[int]:
        out = ffi.new("__u64[]", 8)
        return list(out[0 : lib.deepum_core_exec_starts(self._core, exec_id, out, 8)])

    def block_successors(self, exec_id: int, addr: int, level: int = 0) -> list[int] | None:
        """Successors of @addr in @exec_id's table at @level; None if it has no entry."""
        out = ffi.new("__u64[]", 8)
        n = lib.deepum_core_block_successors(self._core, exec_id, addr, level, out, 8)
        return None if n < 0 else list(out[0:n])
