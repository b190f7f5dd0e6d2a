"""Build _deepum_uapi: a cffi (API mode) view of kmod/include/uapi/deepum.h for
the kernel tests.  The C compiler checks the struct layout against the header
and supplies every constant, ioctl encoding included, so the tests restate
nothing by hand.  It also exposes ioctl(2) itself: fcntl.ioctl() cannot pass
an arbitrary address, which the EFAULT tests need.

    python tests/kernel/uapi_build.py OUTDIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

UAPI_DIR = Path(__file__).resolve().parents[2] / "kmod" / "include" / "uapi"

CDEF = """
typedef int... __u32;
typedef int... __u64;

struct deepum_api {
    __u32 api;
    __u32 flags;
    __u64 features;
    __u64 ioctls;
    __u64 reserved[4];
};

#define DEEPUM_API_MAJOR ...
#define DEEPUM_API_MINOR ...
#define DEEPUM_API_VERSION ...
#define DEEPUM_FEATURE_PREFETCH ...
#define DEEPUM_FEATURE_PREEVICT ...
#define DEEPUM_FEATURE_INVALIDATE ...
#define DEEPUM_IOC_MAGIC ...
#define DEEPUM_IOC_NR_API ...
#define DEEPUM_IOC_API ...

#define _IOC_NRSHIFT ...
#define _IOC_TYPESHIFT ...
#define _IOC_SIZESHIFT ...
#define _IOC_DIRSHIFT ...
#define _IOC_NONE ...
#define _IOC_READ ...
#define _IOC_WRITE ...

int ioctl(int fd, unsigned long request, ...);
"""


def main(outdir: str) -> None:
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_deepum_uapi", '#include <sys/ioctl.h>\n#include "deepum.h"', include_dirs=[str(UAPI_DIR)])
    ffi.compile(tmpdir=outdir)


if __name__ == "__main__":
    main(sys.argv[1])
