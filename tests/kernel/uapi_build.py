"""Build _deepum_uapi: a cffi (API mode) view of kmod/include/uapi/deepum.h for
the kernel tests.  The C compiler checks the struct layout against the header
and supplies every constant, ioctl encoding included; the declarations come
from the header through pydeepum/_cdef.py, so the tests restate nothing.  It
also exposes ioctl(2) itself (fcntl.ioctl() cannot pass an arbitrary address,
which the EFAULT tests need), and the module syscalls, so that the tests load
and unload deepum.ko without starting a process per cycle.

    python tests/kernel/uapi_build.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "pydeepum"))
from _cdef import UAPI_DIR, cdef  # noqa: E402  (the header extractor, standard library only)

# The kernel's ioctl encoding, to craft commands of other sizes and directions.
IOCTL_CDEF = """
#define _IOC_NRSHIFT ...
#define _IOC_TYPESHIFT ...
#define _IOC_SIZESHIFT ...
#define _IOC_DIRSHIFT ...
#define _IOC_NONE ...
#define _IOC_READ ...
#define _IOC_WRITE ...

int ioctl(int fd, unsigned long request, ...);

#define O_NONBLOCK ...
int finit_module(int fd, const char *params, int flags);
int delete_module(const char *name, int flags);
"""

# glibc 2.36 has no wrappers for these two.
MODULE_SYSCALLS = """
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int finit_module(int fd, const char *params, int flags)
{
	return syscall(SYS_finit_module, fd, params, flags);
}

static int delete_module(const char *name, int flags)
{
	return syscall(SYS_delete_module, name, flags);
}
"""


def main(outdir: str) -> None:
    ffi = FFI()
    ffi.cdef(cdef((UAPI_DIR / "deepum.h",)) + IOCTL_CDEF)
    ffi.set_source(
        "_deepum_uapi",
        '#include <sys/ioctl.h>\n#include "deepum.h"\n' + MODULE_SYSCALLS,
        include_dirs=[str(UAPI_DIR)],
    )
    ffi.compile(tmpdir=outdir)


if __name__ == "__main__":
    main(sys.argv[1])
