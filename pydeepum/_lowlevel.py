"""Private layer over the compiled core (pydeepum._native).

Everything above this module sees Python values, numpy arrays and
exceptions, never cdata or negative errno values.  Struct layouts and
constants come from the compiled headers, never from Python literals.
"""

from __future__ import annotations

import errno
import os
from dataclasses import make_dataclass
from typing import Any

import numpy as np

from ._native import ffi, lib

_NUMPY_OF_C = {
    "uint32_t": "<u4",
    "unsigned int": "<u4",
    "uint64_t": "<u8",
    "unsigned long long": "<u8",
    "unsigned long": "<u8",
}


def _c_scalar(ctype: Any) -> str:
    # Typedefs such as __u64 resolve to their primitive through cffi.
    return _NUMPY_OF_C[ctype.cname]


def struct_dtype(struct_name: str) -> np.dtype:
    """A numpy dtype with exactly the compiled layout of a C struct."""
    ctype = ffi.typeof(f"struct {struct_name}")
    names, formats, offsets = [], [], []
    for name, field in ctype.fields:
        names.append(name)
        offsets.append(field.offset)
        if field.type.kind == "array":
            formats.append((_c_scalar(field.type.item), field.type.length))
        else:
            formats.append(_c_scalar(field.type))
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": ffi.sizeof(ctype)}
    )


def struct_fields(struct_name: str) -> list[str]:
    """Field names of a C struct, reserved ones left out."""
    ctype = ffi.typeof(f"struct {struct_name}")
    return [name for name, _ in ctype.fields if not name.startswith("reserved")]


def struct_dataclass(struct_name: str, class_name: str, doc: str) -> type:
    """A frozen dataclass with one int field per (non-reserved) struct field."""
    cls = make_dataclass(
        class_name, [(name, int) for name in struct_fields(struct_name)], frozen=True
    )
    cls.__doc__ = doc
    cls.__module__ = "pydeepum"
    return cls


def to_dataclass(cls: type, cdata: Any) -> Any:
    return cls(**{name: int(getattr(cdata, name)) for name in cls.__dataclass_fields__})


def errno_error(rc: int, what: str) -> Exception:
    """The exception for a negative errno returned by the core."""
    from .errors import ConfigError

    code = -rc
    if code == errno.ENOMEM:
        return MemoryError(f"{what}: out of memory")
    if code == errno.EINVAL:
        return ConfigError(f"{what}: invalid argument")
    return OSError(code, f"{what}: {os.strerror(code)}")


def check(rc: int, what: str) -> None:
    if rc < 0:
        raise errno_error(rc, what)


def constant(name: str) -> int:
    return int(getattr(lib, name))


def detect_iterations(exec_ids: np.ndarray, exec_max: int) -> np.ndarray:
    """The indexes into @exec_ids (launches in order) before which
    libdeepum's iteration detector, sized for @exec_max exec IDs, marks an
    iteration."""
    ids = np.ascontiguousarray(exec_ids, dtype="<u4")
    marks = np.empty(len(ids), dtype="<u8")
    n_marks = ffi.new("__u64 *")
    check(lib.dum_detect_iterations(ffi.from_buffer("__u32[]", ids), len(ids), exec_max,
                                    ffi.from_buffer("__u64[]", marks), n_marks), "iteration detector")
    return marks[: n_marks[0]]


__all__ = ["ffi", "lib", "struct_dtype", "struct_fields", "check", "constant", "detect_iterations"]
