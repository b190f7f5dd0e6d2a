"""The UAPI header is the contract: it must stand alone in strict C90 and in
C++, and its structs must have no implicit padding."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pydeepum._lowlevel import ffi

HEADER = Path(__file__).resolve().parent.parent / "kmod" / "include" / "uapi" / "deepum.h"
STRUCTS = ["deepum_record", "deepum_cmd", "deepum_config", "deepum_stats",
           "deepum_trace_header", "deepum_api", "deepum_attach", "deepum_set_exec_id",
           "deepum_config_req", "deepum_range", "deepum_stats_req", "deepum_test_inject",
           "deepum_test_drain"]


def _compile(compiler: str, lang_flags: list[str], tmp_path: Path) -> None:
    if not shutil.which(compiler):
        pytest.fail(f"{compiler} is needed to check the UAPI header")
    src = tmp_path / "use.c"
    # Use every struct, so each is complete in this language.
    src.write_text('#include "deepum.h"\n' + "".join(
        f"int size_{s} = (int)sizeof(struct {s});\n" for s in STRUCTS))
    subprocess.run([compiler, *lang_flags, "-Wall", "-Wextra", "-Werror", "-pedantic",
                    f"-I{HEADER.parent}", "-fsyntax-only", str(src)], check=True)


def test_header_compiles_as_c90(tmp_path):
    _compile("gcc", ["-std=c90", "-x", "c"], tmp_path)


def test_header_compiles_as_cxx(tmp_path):
    _compile("g++", ["-std=c++11", "-x", "c++"], tmp_path)


@pytest.mark.parametrize("name", STRUCTS)
def test_structs_have_no_implicit_padding(name):
    ctype = ffi.typeof(f"struct {name}")
    end = 0
    for field_name, field in ctype.fields:
        assert field.offset == end, f"{name}.{field_name} leaves a hole"
        size = ffi.sizeof(field.type)
        assert field.offset % min(size, 8) == 0, f"{name}.{field_name} is misaligned"
        assert field.type.kind in ("primitive", "array", "struct"), f"{name}.{field_name}"
        end = field.offset + size
    assert end == ffi.sizeof(ctype) and end % 8 == 0


def test_only_u32_and_u64_fields():
    for name in STRUCTS:
        for field_name, field in ffi.typeof(f"struct {name}").fields:
            t = field.type.item if field.type.kind == "array" else field.type
            if t.kind == "struct":  # nested contract structs, checked on their own, always last
                assert field_name == ffi.typeof(f"struct {name}").fields[-1][0]
                continue
            assert t.cname in ("unsigned int", "unsigned long long"), f"{name}.{field_name}"


def test_the_device_layer_names_each_ioctls_struct_as_the_header_does():
    from pydeepum._cdef import ioctl_structs
    from pydeepum.device import ARG_STRUCTS

    assert ARG_STRUCTS == ioctl_structs() and len(ARG_STRUCTS) >= 10
