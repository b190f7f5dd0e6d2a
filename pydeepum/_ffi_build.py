"""cffi build script for pydeepum._native: the prefetch core and the replay
engine, compiled from the same C sources as the kernel module and libdeepum."""

from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cdef import CORE_DIR, NATIVE_DIR, ROOT, UAPI_DIR, USERLIB_DIR, cdef  # noqa: E402

ffibuilder = FFI()
ffibuilder.cdef(cdef())


# Built by hand in a folder of its own (make test-asan's): cffi compiles from inside that folder, so
# the sources are named by absolute path; setuptools wants them relative to the project root.
BUILD_DIR = sys.argv[1] if __name__ == "__main__" and len(sys.argv) > 1 else None


def _path(path: Path) -> str:
    return str(path) if BUILD_DIR else str(path.relative_to(ROOT))


ffibuilder.set_source(
    "pydeepum._native",
    '#include "replay.h"\n#include "sim.h"\n#include "marks.h"\nextern long dum_port_fail_allocs_after;\n',
    # libdeepum's iteration detector too: the simulator marks an unmarked program where libdeepum would
    sources=[_path(p) for p in sorted(CORE_DIR.glob("*.c"))] + [_path(p) for p in sorted(NATIVE_DIR.glob("*.c"))]
    + [_path(USERLIB_DIR / "iteration_detector.c")],
    include_dirs=[_path(NATIVE_DIR), _path(CORE_DIR), _path(UAPI_DIR)],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"],
)
ffibuilder.cdef("extern long dum_port_fail_allocs_after;")

if __name__ == "__main__":
    # Run from the project root; an argument: the folder to build in.
    ffibuilder.compile(tmpdir=BUILD_DIR or ".", verbose=False)
