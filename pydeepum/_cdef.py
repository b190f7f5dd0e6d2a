"""Turn deepum's C headers into cffi declarations.

Nothing is restated by hand: the struct definitions, prototypes and the names
of the DEEPUM_* / DUM_REPLAY_* integer macros are lifted from the headers
themselves, and cffi's API mode then has the C compiler check every field
offset and size against the real headers and fill in every macro's value.
Only the standard library is used: the kernel tests import this file alone.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UAPI_DIR = ROOT / "kmod" / "include" / "uapi"
CORE_DIR = ROOT / "kmod" / "core"
NATIVE_DIR = ROOT / "pydeepum" / "_native_src"

USERLIB_DIR = ROOT / "userlib"

HEADERS = (UAPI_DIR / "deepum.h", CORE_DIR / "core.h", NATIVE_DIR / "replay.h", NATIVE_DIR / "sim.h",
           NATIVE_DIR / "marks.h")

# The fixed-width names as linux/types.h (x86-64, arm64) and port.h define them.
PRELUDE = """
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef __u32 u32;
typedef __u64 u64;
"""

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DEFINE = re.compile(r"^\s*#\s*define\s+((?:DEEPUM|DUM_REPLAY|DUM_SIM)_[A-Z0-9_]+)\s+(\S.*)$")


_LITERAL = re.compile(r"^(0x[0-9a-fA-F]+|[0-9]+)[uU]?$")


def _declarations(text: str) -> tuple[list[tuple[str, str]], str]:
    """The (name, value) of each integer macro, and the rest.  A plain literal
    keeps its value (struct array sizes use it); cffi gets any other from the
    compiler ("...")."""
    text = _COMMENT.sub("", text)
    macros = []
    body = []
    for line in text.splitlines():
        m = _DEFINE.match(line)
        if m:
            # Function-like macros and bare names (include guards) have no value.
            if not m.group(1).endswith("_H") and "(" not in line.split(m.group(1))[1][:1]:
                literal = _LITERAL.match(m.group(2).strip())
                macros.append((m.group(1), literal.group(1) if literal else "..."))
            continue
        if line.lstrip().startswith("#"):
            continue
        body.append(line)
    return macros, "\n".join(body)


_IOCTL = re.compile(r"^\s*#\s*define\s+DEEPUM_IOC_(\w+)\s+_IO\w*\(\s*DEEPUM_IOC_MAGIC\s*,\s*DEEPUM_IOC_NR_\1\s*,"
                    r"\s*struct\s+(\w+)\s*\)", re.M)


def ioctl_structs(header: Path = UAPI_DIR / "deepum.h") -> dict[str, str]:
    """Each ioctl's name ("API", "ATTACH", ...) and its argument struct's tag
    ("deepum_api", ...), as the UAPI header's command definitions pair them."""
    return {m.group(1): m.group(2) for m in _IOCTL.finditer(header.read_text())}


def cdef(headers: tuple[Path, ...] = HEADERS) -> str:
    """Declarations of @headers (by default: UAPI, core and replay) for cffi."""
    parts = [PRELUDE]
    for header in headers:
        macros, body = _declarations(header.read_text())
        parts.append(body)
        parts.extend(f"#define {name} {value}" for name, value in macros)
    return "\n".join(parts)
