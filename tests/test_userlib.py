"""libdeepum against a fake libcuda (tests/fakecuda): interception by symbol
and through cuGetProcAddress, execution IDs, stream-ordered delivery and
stream capture, managed redirection, pass-through and survival of failures,
`deepumctl run`, and the tracer (with a fake libcupti) and `deepumctl trace
record`.

Every assertion is on what the fake driver (and the fake /dev/deepum) logged
having been called with, on the statistics libdeepum wrote at exit, or on
the trace made of the tracer's capture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pydeepum._lowlevel import constant
from pydeepum.errors import TraceFormatError
from pydeepum.importers import import_file
from pydeepum.trace import (ALLOC, FAULT, ITER_END, ITER_FLUSHED, ITERATION, LAUNCH, Trace,
                            name_hash)
from userlib_harness import (FAKE, FAKE_CUPTI, HOOKS, LAUNCHES, LIB, LIB_FAULTS, MIB, NONE, PAGE_POSITIONS_OFFSET, ROOT,
                             Run, _runs, build, parse_log, preload, run_app)



@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    build()


def observe(tmp_path: Path, resolve: str, *scenario: str, **kwargs) -> Run:
    """Active without a module: DEEPUM_MODE=observe."""
    env = {"DEEPUM_MODE": "observe", **kwargs.pop("env", {})}
    r = run_app(tmp_path, resolve, *scenario, env=env, **kwargs)
    assert r.returncode == 0, r.stderr
    assert r.warnings() == []
    return r


def assert_each_launch_follows_its_delivery(r: Run, delivery: str = "cuStreamWriteValue64_v2") -> None:
    """Every launch is immediately preceded (in the driver's log) by the
    delivery of its exec ID on the same stream."""
    ordered = [c for c in r.calls if c.name != "cuModuleGetFunction"]
    assert r.launches()
    for i, call in enumerate(ordered):
        if call in r.launches():
            assert ordered[i - 1].name == delivery, (call, ordered[i - 1])


# ---- the library itself ------------------------------------------------------------------


@pytest.mark.plain_build
def test_library_exports_only_the_hooks_and_needs_neither_cuda_nor_cxx():
    exported = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True, text=True,
                              check=True).stdout.split()
    names = {w for w in exported if w.startswith(("cu", "la_", "deepum"))}
    assert names == HOOKS | {"la_version", "la_objopen", "la_symbind64", "deepum_mark_iteration", "deepum_report_free"}
    needed = subprocess.run(["readelf", "-d", str(LIB)], capture_output=True, text=True, check=True).stdout
    libraries = {line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line}
    assert libraries <= {"libc.so.6", "ld-linux-x86-64.so.2"}, libraries


def _cuda_include() -> Path | None:
    for root in sorted(Path("/usr/local").glob("cuda*"), reverse=True):
        if (root / "include/cuda.h").is_file() and (root / "include/cupti_activity.h").is_file():
            return root / "include"
    return None


@pytest.mark.skipif(_cuda_include() is None, reason="no CUDA toolkit (cuda.h, CUPTI's headers) on this machine")
def test_cuda_and_cupti_abi_headers_match_nvidia(tmp_path):
    source = ROOT / "tests/fakecuda/abi_check.c"
    include = _cuda_include()

    def build_and_run(name: str, *flags: str) -> str:
        exe = tmp_path / name
        done = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", *flags, "-o", str(exe), str(source)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr  # a prototype that differs from NVIDIA's fails here
        return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout

    nvidia = build_and_run("nvidia", "-DWITH_CUDA_H", f"-I{include}")
    build_and_run("nvidia_internal", "-DWITH_CUDA_H", "-D__CUDA_API_VERSION_INTERNAL", f"-I{include}")
    ours = build_and_run("ours")
    assert ours == nvidia


# ---- interception ------------------------------------------------------------------------


def test_symbol_path_intercepts_every_launch_form(tmp_path):
    r = observe(tmp_path, "symbol", "variants")
    assert {c.name for c in r.launches()} == {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"}
    assert_each_launch_follows_its_delivery(r)
    assert r.counter("launches") == len(r.launches()) == 26


@pytest.mark.parametrize("resolve", ["runtime", "runtime-ptsz", "runtime-v1"])
def test_runtime_path_is_intercepted_through_get_proc_address(tmp_path, resolve):
    r = observe(tmp_path, resolve, "loop", "2", app="cuda_app_dlopen")
    assert r.counter("launches") == len(r.launches()) == 6
    # cuGetProcAddress itself, then the launch, Ex, cooperative, alloc, pitch, free, stream-ordered
    # alloc and free, begin and end capture
    assert r.counter("getproc_hooked") == 11
    assert r.counter("getproc_unmatched") == 0
    assert_each_launch_follows_its_delivery(r)
    if resolve == "runtime-ptsz":
        assert {c.name for c in r.launches()} == {"cuLaunchKernel_ptsz"}
        # a NULL stream of a _ptsz launch is the thread's own default stream
        assert {c.args["stream"] for c in r.named("cuStreamWriteValue64_v2")} == {"0x2"}


def test_runtime_path_needs_the_audit_half(tmp_path):
    """The runtime asks its own dlopen handle for cuGetProcAddress: an
    LD_PRELOAD alone never sees it, so nothing is intercepted."""
    r = run_app(tmp_path, "runtime", "loop", "2", app="cuda_app_dlopen", audit=False,
                env={"DEEPUM_MODE": "observe"})
    assert r.returncode == 0
    assert len(r.launches()) == 6 and not r.named("cuStreamWriteValue64_v2")
    assert r.stats is None  # libdeepum was never called


def test_unknown_entry_point_versions_are_left_alone(tmp_path):
    r = observe(tmp_path, "runtime-future", "loop", "1", app="cuda_app_dlopen")
    assert {c.name for c in r.launches()} == {"cuLaunchKernel_future"}
    assert r.counter("getproc_unmatched") == 1
    assert r.counter("launches") == 0


def test_an_unknown_entry_point_version_makes_every_launch_ask_about_capture(tmp_path):
    """A driver newer than libdeepum could begin captures it does not see."""
    r = observe(tmp_path, "runtime-future", "variants", app="cuda_app_dlopen")
    intercepted = [c for c in r.launches() if c.name != "cuLaunchKernel_future"]
    assert len(intercepted) == r.counter("launches") == r.counter("capture_queries") == 2  # Ex, cooperative
    names = [c.name for c in r.calls]
    for launch in intercepted:
        i = r.calls.index(launch)
        since_last_launch = names[max(j for j in range(i) if names[j].startswith(LAUNCHES)):i]
        assert "cuStreamIsCapturing" in since_last_launch and names[i - 1] == "cuStreamWriteValue64_v2"


NVCC = shutil.which("nvcc") or next((str(p) for p in sorted(Path("/usr/local").glob("cuda*/bin/nvcc"))), None)


@pytest.mark.skipif(NVCC is None, reason="no nvcc: the real CUDA runtime is not available")
@pytest.mark.plain_build
def test_the_real_cuda_runtime_gets_its_driver_entry_points_through_libdeepum(tmp_path):
    """NVIDIA's libcudart_static, against the fake driver: every hooked API
    it asks cuGetProcAddress for comes back as libdeepum's trampoline."""
    source = tmp_path / "app.cu"
    source.write_text("__global__ void k(int *p) { *p = 1; }\n"
                      "int main() { int *d; cudaMalloc(&d, 4); k<<<1, 1>>>(d); return 0; }\n")
    exe = tmp_path / "app"
    subprocess.run([NVCC, "-cudart", "static", "-o", str(exe), str(source)], check=True, capture_output=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "LD_"))}
    log, stats = tmp_path / "fake.log", tmp_path / "stats.json"
    environ.update(LD_LIBRARY_PATH=str(FAKE), LD_PRELOAD=str(LIB), LD_AUDIT=str(LIB), FAKECUDA_LOG=str(log),
                   DEEPUM_STATS=str(stats), DEEPUM_MODE="observe")
    subprocess.run([str(exe)], env=environ, capture_output=True, timeout=60)  # the fake cannot run it to the end
    hooked_apis = {"cuGetProcAddress", "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
                   "cuMemAlloc", "cuMemAllocPitch", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync",
                   "cuStreamBeginCapture",
                   "cuStreamBeginCaptureToGraph", "cuStreamEndCapture"}
    asked = [c for c in parse_log(log) if c.name == "cuGetProcAddress_v2" and c.args["symbol"] in hooked_apis]
    counters = json.loads(stats.read_text())["counters"]
    assert len(asked) >= 7
    assert counters["getproc_hooked"] == len(asked)
    assert counters["getproc_unmatched"] == 0


# ---- execution IDs -----------------------------------------------------------------------


def test_exec_ids_are_stable_across_iterations_whatever_their_scalars(tmp_path):
    """cuda_app's loop changes scale's factor and size and fill's value every iteration."""
    r = observe(tmp_path, "symbol", "loop", "5")
    scalars = {c.args["args"] for c in r.launches() if c.args["f"] == "scale"}
    assert len(scalars) == 5
    ids = r.delivered_ids()
    assert [ids[i:i + 3] for i in range(0, 15, 3)] == [[0, 1, 2]] * 5
    iterations = r.stats["iterations"]
    assert len(iterations) == 5
    assert iterations[0] == {"launches": 3, "exec_hits": 0, "exec_new": 3}
    assert all(it == {"launches": 3, "exec_hits": 3, "exec_new": 0} for it in iterations[1:])


def test_distinct_launches_get_distinct_ids_and_equal_ones_the_same(tmp_path):
    """Labels as in cuda_app.c's scenario_variants."""
    ids = observe(tmp_path, "symbol", "variants").delivered_ids()
    assert len(ids) == 26 and NONE not in ids
    base = ids[0]
    # the same launch again, with another scalar, through cuLaunchKernelEx, the argument buffer,
    # cuLaunchCooperativeKernel, a CUkernel handle, or on another stream
    assert [ids[i] for i in (1, 2, 8, 9, 10, 11, 12)] == [base] * 7
    # another grid, block, shared memory size, pointer argument, kernel name
    changed = [ids[i] for i in (3, 4, 5, 6, 7)]
    assert len(set(changed)) == 5 and base not in changed
    # padding bytes of an argument buffer are not arguments, and fill's only pointer is the same
    assert ids[13] == ids[14] == ids[15] and ids[13] not in [base, *changed]


def test_only_pointers_into_allocations_name_the_data(tmp_path):
    """Labels as in cuda_app.c's scenario_variants: adam(param, moment, lr, step, seed)
    and gather(struct {n, src, seed, dst}, flags)."""
    ids = observe(tmp_path, "symbol", "variants").delivered_ids()
    adam = ids[16]
    # other float and int scalars, a 64-bit seed and a host pointer: not pointers into allocations
    assert ids[17] == ids[18] == adam
    # a pointer to another allocation, elsewhere in its own, or the two pointers swapped
    moved = [ids[i] for i in (19, 20, 21)]
    assert len(set(moved)) == 3 and adam not in moved
    gather = ids[22]
    # pointers inside a by-value struct count, its scalars do not, in either launch form
    assert ids[23] == ids[25] == gather
    assert ids[24] != gather


def test_the_common_path_never_asks_the_driver_about_capture(tmp_path):
    r = observe(tmp_path, "symbol", "streams")
    assert not r.named("cuStreamIsCapturing")
    assert r.counter("capture_queries") == 0 and r.counter("delivered") == r.counter("launches") == 7


def test_a_full_id_table_leaves_launches_untracked(tmp_path):
    r = observe(tmp_path, "symbol", "many", "20", env={"DEEPUM_EXEC_MAX": "16"})
    assert r.delivered_ids() == list(range(16)) + [NONE] * 4 + [0, 1, 2]
    assert len(r.launches()) == 23
    assert r.counter("exec_untracked") == 4 and r.counter("exec_hits") == 3


def test_kernels_the_driver_cannot_name_are_untracked_not_fatal(tmp_path):
    r = observe(tmp_path, "symbol", "loop", "2", env={"FAKECUDA_FAIL": "cuFuncGetName"})
    assert r.delivered_ids() == [NONE] * 6
    assert r.counter("launches_unidentified") == 6 and r.stats["active"]


def test_threads_share_one_consistent_id_table(tmp_path):
    r = observe(tmp_path, "symbol", "threads", "4", "500")
    ids = r.delivered_ids()
    assert len(ids) == r.counter("launches") == 4000
    assert sorted(set(ids)) == list(range(8))  # 4 threads x 2 kernels, each on its own buffers
    assert r.counter("exec_new") == 8 and r.counter("exec_hits") == 3992
    per_stream: dict[str, list[int]] = {}
    for c in r.named("cuStreamWriteValue64_v2"):
        per_stream.setdefault(c.args["stream"], []).append(int(c.args["value"], 16) >> 32)
    assert len(per_stream) == 4
    assert all(seqs == list(range(1, 1001)) for seqs in per_stream.values())


# ---- delivery ----------------------------------------------------------------------------


def test_positions_are_written_every_few_launches_and_every_launch_is_in_the_ring(tmp_path):
    """DEEPUM_WRITE_EVERY=2: a stream write before every 2nd launch of a stream
    since the last iteration mark only (5 marked iterations of 3 launches)."""
    r = observe(tmp_path, "symbol", "loop", "5", env={"DEEPUM_WRITE_EVERY": "2"})
    writes = r.named("cuStreamWriteValue64_v2")
    assert [int(w.args["value"], 16) >> 32 for w in writes] == [2, 5, 8, 11, 14]  # of 15 on the legacy stream
    assert r.counter("delivered") == r.counter("launches") == 15 and r.counter("position_writes") == 5
    ordered = [c for c in r.calls if c.name != "cuModuleGetFunction"]
    for w in writes:  # each immediately before the launch it names
        assert ordered[ordered.index(w) + 1].name == "cuLaunchKernel"


def test_write_delivery_is_per_stream_and_in_stream_order(tmp_path):
    r = observe(tmp_path, "symbol", "streams")
    assert_each_launch_follows_its_delivery(r)
    launches = r.launches()
    writes = r.named("cuStreamWriteValue64_v2")
    slots: dict[str, int] = {}
    for launch, write in zip(launches, writes, strict=True):
        stream = {"(nil)": "0x1"}.get(launch.args["stream"], launch.args["stream"])  # NULL: the legacy stream
        assert write.args["stream"] == stream
        value = int(write.args["value"], 16)
        seq, slot = value >> 32, (int(write.args["offset"]) - PAGE_POSITIONS_OFFSET) // 8
        assert slots.setdefault(stream, slot) == slot  # the stream's own position word
        assert seq == sum(1 for w in writes[:writes.index(write) + 1] if w.args["stream"] == stream)
    assert len(set(slots.values())) == len(slots) == 4  # s1, s2, legacy, per-thread
    ids = r.delivered_ids()
    # vec_add, scale(a, 1.0), scale(a, 1.0), vec_add, vec_add, scale(b, 3.0), vec_add
    assert ids == [0, 1, 1, 0, 0, 2, 0]


def test_a_launch_on_tensors_that_moved_keeps_the_exec_id_of_its_place(tmp_path):
    """8 layers, each forward layer also scaling a mask allocated anew every
    iteration: 8 new hashes per iteration.  With DEEPUM_EXEC_BY_PLACE=1, once
    iterations are marked, each takes the ID its place had (the k-th scale
    launch of the iteration); by default each is a new ID."""
    default = run_app(tmp_path, "symbol", "layers-moving", "6", "8", env={"DEEPUM_MODE": "observe"})
    assert default.returncode == 0 and default.warnings() == [], default.stderr
    assert default.stats["counters"]["exec_by_place"] == 0
    assert [it["exec_new"] for it in default.stats["iterations"][:6]] == [24] + [8] * 5
    r = run_app(tmp_path, "symbol", "layers-moving", "6", "8",
                env={"DEEPUM_MODE": "observe", "DEEPUM_EXEC_BY_PLACE": "1"})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    per_iteration = r.stats["iterations"][:6]
    assert [it["launches"] for it in per_iteration] == [24] * 6
    assert per_iteration[0]["exec_new"] == 24
    assert all(it["exec_hits"] == 24 and it["exec_new"] == 0 for it in per_iteration[1:]), per_iteration
    assert r.stats["counters"]["exec_by_place"] == 5 * 8
    scales = [c for c in r.launches() if c.args["f"] == "scale"]
    ids = r.delivered_ids()
    scale_ids = [ids[i] for i, c in enumerate(r.launches()) if c.args["f"] == "scale"]
    assert len(scales) == 48 and scale_ids == scale_ids[:8] * 6 and len(set(scale_ids)) == 8
    # Without the program's marks, places start with the detected ones: two thirds of each
    # step repeat, so the period is found and the 4th step marked; the 5th and 6th steps'
    # masks keep their places' IDs.
    unmarked = run_app(tmp_path, "symbol", "layers-moving-unmarked", "6", "8",
                       env={"DEEPUM_MODE": "observe", "DEEPUM_EXEC_BY_PLACE": "1"})
    c = unmarked.stats["counters"]
    assert c["iterations_detected"] == 3 and c["exec_by_place"] == 2 * 8 and c["exec_new"] == 16 + 4 * 8


def test_iterations_are_found_when_the_program_marks_none(tmp_path):
    """12 unmarked steps of 8 layers (16 launches, each exec ID once per step):
    the period is settled in the third step, and every later step is marked
    where it begins, with its launches counted in it."""
    r = run_app(tmp_path, "symbol", "layers-unmarked", "12", "8", env={"DEEPUM_MODE": "observe"})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    detected = r.stats["counters"]["iterations_detected"]
    assert detected == 9
    assert [it["launches"] for it in r.stats["iterations"]] == [16] * detected
    assert all(it["exec_hits"] == 16 for it in r.stats["iterations"])
    assert r.stats["setup"]["launches"] == 16 * (12 - detected)
    marked = run_app(tmp_path, "symbol", "layers", "12", "8", env={"DEEPUM_MODE": "observe"})
    assert marked.stats["counters"]["iterations_detected"] == 0  # the program's own marks win
    assert len(marked.stats["iterations"]) == 13


def test_without_cudas_uvm_file_the_module_sees_launches_only(tmp_path):
    """A module that takes no GPU faults (no UVM file bound) is worth one
    warning, not a failure: the exec IDs still go to it."""
    r = run_app(tmp_path, "symbol", "loop", "3", fakedev=True,
                env={"DEEPUM_DELIVERY": "callback", "DEEPUM_UVM_DEVICE": str(tmp_path / "elsewhere"),
                     "FAKEDEV_NO_LAUNCH_PAGE": "1"})
    assert r.returncode == 0 and r.stdout == run_app(tmp_path, "symbol", "loop", "3", lib=None).stdout
    (warning,) = r.warnings()
    assert "did not take this process's GPU faults" in warning and "it sees launches only" in warning
    assert not r.stats["uvm_bound"] and r.stats["active"]
    assert [c for c in r.named("ioctl") if c.line.startswith("ioctl SET_EXEC_ID")]


def test_callback_delivery_tells_the_module_in_stream_order(tmp_path):
    """A module without a launch page (API 1.1) hears of each launch by ioctl."""
    r = run_app(tmp_path, "symbol", "streams", fakedev=True,
                env={"DEEPUM_DELIVERY": "callback", "FAKEDEV_NO_LAUNCH_PAGE": "1"})
    assert r.returncode == 0 and r.warnings() == []
    ioctls = r.named("ioctl")
    api = hex(constant("DEEPUM_API_VERSION"))
    assert ioctls[0].args == {"api": api} and ioctls[1].args == {}  # API, then ATTACH
    assert r.calls.index(ioctls[1]) < r.calls.index(r.launches()[0])
    # CUDA's UVM file is bound to the context before the first exec ID is delivered
    (bind,) = [c for c in ioctls if c.line.startswith("ioctl BIND_UVM")]
    assert r.calls.index(bind) < r.calls.index(r.launches()[0]) and r.stats["uvm_bound"]
    assert not r.named("cuStreamWriteValue64_v2")
    assert_each_launch_follows_its_delivery(r, delivery="ioctl")
    ordered = [c for c in r.calls if c.name != "cuModuleGetFunction"]
    names = {"vec_add": name_hash("vec_add"), "scale": name_hash("scale")}
    for i, call in enumerate(ordered):
        if call in r.launches():
            host_func, ioctl = ordered[i - 2], ordered[i - 1]
            assert host_func.name == "cuLaunchHostFunc"
            stream = {"(nil)": "0x1"}.get(call.args["stream"], call.args["stream"])
            assert host_func.args["stream"] == stream
            assert int(ioctl.args["name_hash"], 16) == names[call.args["f"]]
    assert [int(c.args["exec_id"]) for c in r.named("ioctl") if "exec_id" in c.args] == [0, 1, 1, 0, 0, 2, 0]
    assert r.counter("set_exec_id_ioctls") == r.counter("launches") == 7
    assert r.stats["attached"] and r.stats["delivery"] == "callback"


def module_saw(r) -> list[tuple[int, int, int]]:
    """(slot, exec ID, name hash) of each launch the fake module read from its page."""
    return [(int(c.args["slot"]), int(c.args["exec"]), int(c.args["name_hash"], 16))
            for c in r.calls if c.line.startswith("fakedev launch")]


def test_the_modules_launch_page_carries_exec_ids_without_a_system_call(tmp_path):
    r = run_app(tmp_path, "symbol", "streams", fakedev=True)
    assert r.returncode == 0 and r.warnings() == []
    (mapped,) = r.named("mmap")
    (registered,) = r.named("cuMemHostRegister_v2")
    assert registered.args["flags"] == "3" and registered.result() == "0"  # portable, mapped for the GPU
    page, size = int(registered.args["ptr"], 16), int(registered.args["size"])
    assert size == int(mapped.args["length"]) and r.calls.index(mapped) < r.calls.index(r.launches()[0])
    # the GPU writes positions into the module's page; nothing goes by ioctl or host callback
    writes = r.named("cuStreamWriteValue64_v2")
    # (the fake logs where in the host allocation each write landed: the registered page's)
    assert writes and all(c.result() != "invalid" and int(c.args["offset"]) < size for c in writes)
    assert page
    assert not r.named("cuLaunchHostFunc") and not [c for c in r.named("ioctl") if "exec_id" in c.args]
    names = {0: name_hash("vec_add"), 1: name_hash("scale"), 2: name_hash("scale")}
    seen = module_saw(r)
    # each stream's launches, in its order: as the GPU wrote them, as the module read them
    written: dict[str, list[int]] = {}
    for c in writes:
        written.setdefault(c.args["stream"], []).append(int(c.args["value"], 16) & 0xFFFFFFFF)
    read: dict[int, list[int]] = {}
    for slot, exec_id, _ in seen:
        read.setdefault(slot, []).append(exec_id)
    assert sorted(read.values()) == sorted(written.values()) and len(seen) == 7
    assert all(h == names[e] for _, e, h in seen)
    assert r.stats["module_launch_page"] and r.stats["delivery"] == "write"
    assert r.counter("set_exec_id_ioctls") == 0


def test_iteration_marks_go_into_the_modules_page_in_stream_order(tmp_path):
    """cuda_app's loop marks each of its 3 iterations: the first mark comes
    before any launch (no stream to put it on), the others between launches."""
    r = run_app(tmp_path, "symbol", "loop", "3", fakedev=True)
    assert r.returncode == 0 and r.warnings() == []
    read = [c.line.split()[1] for c in r.calls if c.line.startswith("fakedev ")]
    assert read == ["launch"] * 3 + ["iteration"] + ["launch"] * 3 + ["iteration"] + ["launch"] * 3
    plain = run_app(tmp_path, "symbol", "loop", "3", fakedev=True, env={"FAKEDEV_NO_LAUNCH_PAGE": "1"})
    assert not [c for c in plain.calls if c.line.startswith("fakedev iteration")]


def test_deepumctl_run_says_when_exec_ids_go_into_the_modules_page(tmp_path):
    from pydeepum.cli.run import summary_lines
    from pydeepum.run import RunResult

    r = run_app(tmp_path, "symbol", "streams", fakedev=True)
    (first,) = summary_lines(RunResult(["cuda_app"], 0, [r.stats]))[:1]
    assert "delivery write into the module's launch page" in first
    r = run_app(tmp_path, "symbol", "streams", fakedev=True, env={"FAKEDEV_NO_LAUNCH_PAGE": "1"})
    (first,) = summary_lines(RunResult(["cuda_app"], 0, [r.stats]))[:1]
    assert "delivery callback," in first and "launch page" not in first


def test_without_cuda_taking_the_modules_page_exec_ids_go_by_callback(tmp_path):
    r = run_app(tmp_path, "symbol", "streams", fakedev=True, env={"FAKECUDA_FAIL": "cuMemHostRegister_v2"})
    assert r.returncode == 0
    (warning,) = r.warnings()
    assert "CUDA did not take the module's launch page" in warning and "host callback" in warning
    assert r.stats["delivery"] == "callback" and not r.stats["module_launch_page"]
    assert r.counter("set_exec_id_ioctls") == r.counter("launches") == 7
    assert module_saw(r) == []  # nothing was written into the module's page


def test_an_older_module_gets_exec_ids_by_callback(tmp_path):
    r = run_app(tmp_path, "symbol", "streams", fakedev=True, env={"FAKEDEV_NO_LAUNCH_PAGE": "1"})
    assert r.returncode == 0 and r.warnings() == []
    assert not r.named("mmap") and r.stats["delivery"] == "callback"
    assert r.counter("set_exec_id_ioctls") == r.counter("launches") == 7


def test_streams_being_captured_get_no_delivery(tmp_path):
    """Labels as in cuda_app.c's scenario_capture: a capture on s1, which s3 joins."""
    r = observe(tmp_path, "symbol", "capture")
    launches = [c for c in r.launches() if c.args["args"]]  # the failing legacy launch is logged by nobody
    assert [(c.args["stream"], c.args["captured"]) for c in launches] == [
        ("0x1010", "0"), ("0x1010", "1"), ("0x1020", "0"), ("0x1030", "1"),
        ("0x1010", "0"), ("0x1030", "0"), ("0x1020", "0"), ("(nil)", "0")]
    writes = r.named("cuStreamWriteValue64_v2")
    assert [w.args["stream"] for w in writes] == ["0x1010", "0x1020", "0x1010", "0x1030", "0x1020", "0x1"]
    assert {w.args["captured"] for w in writes} == {"0"}  # nothing was added to a graph
    # launches ask the driver only while a capture is open: 1, 2, 3, and the legacy launch, which it
    # refuses to answer for while a blocking stream captures (an end asks once, after the end)
    asked = [(c.args["stream"], c.result()) for i, c in enumerate(r.calls)
             if c.name == "cuStreamIsCapturing" and r.calls[i - 1].name != "cuStreamEndCapture"]
    assert asked == [("0x1010", "0"), ("0x1020", "0"), ("0x1030", "0"), ("0x1", "906")]
    assert r.counter("capture_queries") == 4 and r.counter("delivery_skipped_capture") == 3
    # the invalidated capture was the program's doing, and its end closed it for libdeepum too
    assert [c.result() for c in r.named("cuStreamEndCapture")] == ["0", "401", "901"]
    assert r.stats["active"]


def test_a_capture_before_the_first_launch_defers_the_launch_page(tmp_path):
    """Allocating pinned memory during a global-mode capture would invalidate it."""
    r = observe(tmp_path, "symbol", "capture-first")
    names = [c.name for c in r.calls]
    assert names.index("cuMemHostAlloc") > names.index("cuStreamEndCapture")
    assert r.named("cuStreamEndCapture")[0].result() == "0"
    assert [w.args["stream"] for w in r.named("cuStreamWriteValue64_v2")] == ["0x1020"]
    assert r.counter("delivered") == 1 and r.counter("delivery_skipped_capture") == 2


def test_an_allocation_a_capture_forbids_fails_as_it_would_have_and_deepum_stays_on(tmp_path):
    plain = baseline(tmp_path, "capture-alloc")
    r = observe(tmp_path, "symbol", "capture-alloc", env={"DEEPUM_MANAGED": "1"})
    assert [c.result() for c in r.named("cuStreamEndCapture")] == ["901"] == \
        [c.result() for c in plain.named("cuStreamEndCapture")]
    assert r.stats["active"] and r.counter("allocs_fallback") == 1 and r.counter("allocs_redirected") == 1
    assert r.counter("delivered") == 1


@pytest.mark.parametrize("resolve", ["symbol", "runtime-ptsz"])
def test_a_capture_on_the_per_thread_stream_ends_for_libdeepum_too(tmp_path, resolve):
    r = observe(tmp_path, resolve, "capture-own", app="cuda_app" if resolve == "symbol" else "cuda_app_dlopen")
    assert [c.args["captured"] for c in r.launches()] == ["1", "0"]
    assert [w.args["stream"] for w in r.named("cuStreamWriteValue64_v2")] == ["0x2"]
    assert r.counter("capture_queries") == 1  # the launch after the end asked nothing


# ---- allocations -------------------------------------------------------------------------


def test_device_allocations_become_managed_and_frees_are_reported_first(tmp_path):
    r = run_app(tmp_path, "symbol", "alloc", fakedev=True, env={"DEEPUM_MANAGED": "1"})
    assert r.returncode == 0 and r.warnings() == [], r.stderr
    managed = r.named("cuMemAllocManaged")
    assert [(c.args["size"], c.args["flags"]) for c in managed] == [("1000", "1"), (str(1024 * 10), "1")]
    assert not r.named("cuMemAlloc_v2")
    assert "pitch=1024" in r.stdout  # 1000 bytes rounded to the texture pitch alignment (32)
    # arguments the driver refuses reach the driver
    assert [c.args["element"] for c in r.named("cuMemAllocPitch_v2")] == ["3"]
    ordered = [c for c in r.calls if c.name in ("ioctl", "cuMemFree_v2")]
    frees = [c for c in ordered if c.name == "cuMemFree_v2"]
    assert len(frees) == 3
    for free, size in zip(frees[:2], ("1000", "10240")):
        invalidate = ordered[ordered.index(free) - 1]
        assert invalidate.args == {"addr": free.args["dptr"], "len": size}
    assert ordered[ordered.index(frees[2]) - 1].name == "cuMemFree_v2"  # an unknown address: not reported
    assert r.counter("allocs_redirected") == 2 and r.counter("bytes_redirected") == 1000 + 10240
    assert r.counter("frees_reported") == 2 and r.counter("frees_unknown") == 1


def test_allocations_stay_on_the_device_unless_managed_is_asked_for(tmp_path):
    r = observe(tmp_path, "symbol", "alloc")
    assert [c.args["size"] for c in r.named("cuMemAlloc_v2")] == ["1000"]
    assert not r.named("cuMemAllocManaged")
    assert "pitch=1024" in r.stdout  # the driver's own 512-byte alignment
    assert r.counter("frees_reported") == 2


def test_out_of_managed_memory_falls_back_to_device_memory(tmp_path):
    r = observe(tmp_path, "symbol", "alloc", env={"DEEPUM_MANAGED": "1", "FAKECUDA_FAIL": "cuMemAllocManaged=2"})
    assert [c.args["size"] for c in r.named("cuMemAlloc_v2")] == ["1000"]
    assert r.counter("allocs_fallback") == 2 and r.stats["active"]


# ---- never change the program ------------------------------------------------------------


def baseline(tmp_path: Path, *scenario: str) -> Run:
    r = run_app(tmp_path, "symbol", *scenario, lib=None)
    assert r.returncode == 0 and r.stderr == ""
    return r


def test_without_module_or_managed_memory_it_passes_through_with_one_warning(tmp_path):
    """With no module the engine would stand in, but it has no managed memory to work on."""
    plain = baseline(tmp_path, "loop", "3")
    r = run_app(tmp_path, "symbol", "loop", "3")
    assert r.returncode == 0 and r.stdout == plain.stdout
    assert r.calls == plain.calls  # the driver saw exactly what it sees without libdeepum
    assert len(r.warnings()) == 1 and r.stderr.count("\n") == 1
    assert "no-such-device" in r.warnings()[0] and "DEEPUM_MANAGED=0" in r.warnings()[0]
    assert r.stats["mode"] == "auto" and not r.stats["active"] and r.counter("launches") == 0


def test_mode_off_is_silent(tmp_path):
    plain = baseline(tmp_path, "loop", "2")
    r = run_app(tmp_path, "symbol", "loop", "2", env={"DEEPUM_MODE": "off"})
    assert r.returncode == 0 and r.stderr == "" and r.calls == plain.calls


@pytest.mark.parametrize("failure, env, fakedev, warning", [
    ("allocation", {"DEEPUM_TEST_FAIL": "alloc"}, False, "cannot allocate its tables"),
    ("delivery", {"FAKECUDA_FAIL": "cuStreamWriteValue64_v2"}, False, "delivery failed"),
    ("launch page", {"FAKECUDA_FAIL": "cuMemHostAlloc"}, False, "launch page"),
    ("managed allocation", {"FAKECUDA_FAIL": "cuMemAllocManaged", "DEEPUM_MANAGED": "1"}, False,
     "cuMemAllocManaged failed"),
    ("SET_EXEC_ID", {"FAKEDEV_FAIL": "SET_EXEC_ID", "DEEPUM_DELIVERY": "callback", "FAKEDEV_NO_LAUNCH_PAGE": "1"},
     True, "SET_EXEC_ID failed"),
    ("INVALIDATE", {"FAKEDEV_FAIL": "INVALIDATE"}, True, "INVALIDATE failed"),
    ("module handshake", {"FAKEDEV_FAIL": "API"}, True, "does not speak deepum API"),
    ("bad setting", {"DEEPUM_DELIVERY": "pigeon"}, False, "DEEPUM_DELIVERY=pigeon"),
])
def test_internal_failures_disable_deepum_and_the_program_runs_on(tmp_path, failure, env, fakedev, warning):
    plain = baseline(tmp_path, "loop", "3")
    mode = {} if fakedev else {"DEEPUM_MODE": "observe"}
    r = run_app(tmp_path, "symbol", "loop", "3", lib=LIB_FAULTS, fakedev=fakedev, env={**mode, **env})
    assert r.returncode == 0 and r.stdout == plain.stdout, r.stderr
    assert [(c.name, c.args) for c in r.launches()] == [(c.name, c.args) for c in plain.launches()]
    assert [(c.name, c.args) for c in r.named("cuMemFree_v2")] == [(c.name, c.args) for c in plain.named("cuMemFree_v2")]
    assert len(r.warnings()) == 1 and warning in r.warnings()[0], r.stderr
    assert not r.stats["active"] and warning in r.stats["disabled_reason"]


def test_an_injected_full_table_tracks_nothing_and_breaks_nothing(tmp_path):
    r = observe(tmp_path, "symbol", "loop", "2", lib=LIB_FAULTS, env={"DEEPUM_TEST_FAIL": "table-full"})
    assert r.delivered_ids() == [NONE] * 6 and len(r.launches()) == 6
    assert r.counter("exec_untracked") == 6


# ---- the tracer --------------------------------------------------------------------------

# cuda_app.c's scenario_train: a (3 MiB), b (1 MiB), c (4 MiB), d (2 MiB) in consecutive 2 MiB blocks
# from a's (a0 a1 b0 c0 c1 d0), and these launches every iteration
TRAIN_KERNELS = ["vec_add", "scale", "fill", "adam"]


def traced(tmp_path: Path, *scenario: str, iterations: int = 0, access_set: bool = True,
           env: dict[str, str] | None = None) -> tuple[Run, Path]:
    """Run cuda_app under the tracer (fake CUPTI); the run and its capture."""
    capture = tmp_path / f"capture{next(_runs)}.csv"
    settings = {"DEEPUM_TRACE": str(capture), "DEEPUM_MANAGED": "1", "DEEPUM_CUPTI": str(FAKE_CUPTI),
                "DEEPUM_TRACE_ITERATIONS": str(iterations), "DEEPUM_TRACE_ACCESS_SET": "1" if access_set else "0"}
    r = run_app(tmp_path, "symbol", *scenario, env={"DEEPUM_MODE": "observe", **settings, **(env or {})})
    assert r.returncode == 0, r.stderr
    return r, capture


def iterations_of(t: Trace) -> list[np.ndarray]:
    return [t.records[start:end] for _, start, end in t.iteration_bounds()]


def test_the_tracer_records_launches_faults_allocations_and_iterations(tmp_path):
    r, capture = traced(tmp_path, "train", "3")
    assert r.warnings() == []
    t = import_file(capture)
    t.write(tmp_path / "train.dut.gz")
    t = Trace.read(tmp_path / "train.dut.gz")
    assert t.access_set and t.meta["source"]["format"] == "deepum-tracer"
    marks = t.records[t.records["type"] == ITERATION]
    assert list(marks["aux"]) == [0, 1, 2, 3] and list(marks["flags"]) == [ITER_FLUSHED] * 3 + [ITER_FLUSHED | ITER_END]
    first = t.records[: t.iteration_bounds()[0][2]]
    base = int(t.records[t.records["type"] == ALLOC]["addr"].min())
    assert sorted((int(a) - base, int(n)) for a, n in first[first["type"] == ALLOC][["addr", "len"]]) == [
        (0, 3 * MIB), (4 * MIB, MIB), (6 * MIB, 4 * MIB), (10 * MIB, 2 * MIB)]

    delivered = r.delivered_ids()
    assert len(delivered) == 12 and len(set(delivered)) == 4  # the same 4 launches every iteration
    durations = None
    for i, records in enumerate(iterations_of(t)):
        launches = records[records["type"] == LAUNCH]
        # libdeepum's own exec IDs, name hashes and stream slots, in launch order
        assert list(launches["exec_id"]) == delivered[4 * i: 4 * i + 4]
        assert list(launches["addr"]) == [name_hash(k) for k in TRAIN_KERNELS]
        slots = list(launches["aux"])
        assert slots[0] == slots[2] == slots[3] != slots[1]  # scale ran on a stream of its own
        # kernel durations from CUPTI: vec_add moved 5 blocks, scale one, the others none
        durations = durations or list(launches["len"])
        assert list(launches["len"]) == durations and durations[0] > durations[1] > durations[2] > 0
        # every block each iteration, attributed to the launch that touched it first
        faults = records[records["type"] == FAULT]
        blocks = [(int(a) - base) >> 21 for a in faults["addr"]]
        by_kernel = dict(zip(launches["exec_id"].tolist(), TRAIN_KERNELS))
        assert sorted(zip(blocks, (by_kernel[e] for e in faults["exec_id"].tolist()))) == [
            (0, "vec_add"), (1, "vec_add"), (2, "vec_add"), (3, "vec_add"), (4, "vec_add"), (5, "scale")]
        moved = dict(zip(blocks, faults["len"].tolist()))
        assert moved == {0: 2 * MIB, 1: MIB, 2: MIB, 3: 2 * MIB, 4: 2 * MIB, 5: 2 * MIB}
        # the page fault of each pointer's first block gives it an access type
        access = dict(zip(blocks, faults["aux"].tolist()))
        assert access == {0: 1, 1: 0, 2: 1, 3: 1, 4: 0, 5: 1}
    source = t.meta["source"]
    assert source["launches"] == source["launches_matched"] == source["kernels"] == 12
    assert source["kernels_without_exec_id"] == 0


def uvm_queue(tmp_path: Path) -> dict[str, str]:
    """Settings that make the tracer read the fake driver's UVM tools queue (libfakedev.so)."""
    tools, uvm = tmp_path / "nvidia-uvm-tools", tmp_path / "nvidia-uvm"
    tools.touch()
    return {"DEEPUM_FAULTS": "uvm-tools", "FAKEUVM_TOOLS": str(tools), "DEEPUM_UVM_TOOLS": str(tools),
            "FAKECUDA_UVM_DEVICE": str(uvm), "DEEPUM_UVM_DEVICE": str(uvm),
            "LD_PRELOAD": preload(FAKE / "libfakedev.so", LIB)}


def test_the_tracer_takes_faults_from_the_uvm_queue_as_it_does_from_cupti(tmp_path):
    """DEEPUM_FAULTS=uvm-tools: the driver's event queue (the fake's, libfakedev.so) instead of
    CUPTI's UM counters, CUPTI stamping its kernel records with the queue's clock."""
    queue = uvm_queue(tmp_path)
    r_cupti, from_cupti = traced(tmp_path, "train", "3")
    r_queue, from_queue = traced(tmp_path, "train", "3", env=queue)
    assert r_queue.warnings() == [], r_queue.stderr
    capture = from_queue.read_text().splitlines()
    assert any(line.startswith("U,4,") for line in capture) and any(line.startswith("U,1,") for line in capture)
    assert not [line for line in capture if line.startswith("E,")]
    a, b = import_file(from_cupti), import_file(from_queue)
    # auto (the default): the queue where it can be read, else CUPTI's counters; the capture says which
    assert (a.meta["source"]["faults"], b.meta["source"]["faults"]) == ("cupti", "uvm-tools")
    _, from_auto = traced(tmp_path, "train", "3", env={k: v for k, v in queue.items() if k != "DEEPUM_FAULTS"})
    assert "O,faults=uvm-tools" in from_auto.read_text().splitlines()

    def per_iteration(t: Trace) -> list[list[tuple[int, int, int]]]:
        base = int(t.records[t.records["type"] == ALLOC]["addr"].min())
        out = []
        for records in iterations_of(t):
            launches = records[records["type"] == LAUNCH]
            order = {e: i for i, e in enumerate(launches["exec_id"].tolist())}
            faults = records[records["type"] == FAULT]
            out.append(sorted(((int(x["addr"]) - base) >> 21, order[int(x["exec_id"])], int(x["aux"]))
                              for x in faults))
        return out

    # the same blocks, attributed to the same launches, with the same access types
    assert per_iteration(b) == per_iteration(a) and len(per_iteration(b)) == 3 and per_iteration(b)[0]
    assert b.meta["source"]["launches_matched"] == 12


def blocks_by_launch(t: Trace) -> list[list[tuple[str, list[int]]]]:
    """Per iteration: each launch's kernel and the blocks faulted under it (relative to the first allocation)."""
    base = int(t.records[t.records["type"] == ALLOC]["addr"].min())
    by_hash = {name_hash(k): k for k in TRAIN_KERNELS}
    out = []
    for records in iterations_of(t):
        launches = records[records["type"] == LAUNCH]
        faults = records[records["type"] == FAULT]
        out.append([(by_hash[int(h)], sorted((int(a) - base) >> 21 for a in faults[faults["exec_id"] == e]["addr"]))
                    for h, e in zip(launches["addr"], launches["exec_id"])])
    return out


# The blocks each launch of scenario_train touches: a (0, 1), b (2), c (3, 4), d (5).
TRAIN_ACCESSES = [("vec_add", [0, 1, 2, 3, 4]), ("scale", [5]), ("fill", [2]), ("adam", [0, 1, 5])]


@pytest.mark.parametrize("source", ["uvm-tools", "cupti"])
def test_per_launch_access_sets_record_every_block_each_launch_touches(tmp_path, source):
    """DEEPUM_TRACE_ACCESS_SET=launch: after every launch the tracer waits for it and moves what it
    brought in back to the host, so the next launch faults in all it touches, not only its first touches."""
    env = {"DEEPUM_TRACE_ACCESS_SET": "launch", **(uvm_queue(tmp_path) if source == "uvm-tools" else {})}
    r, capture = traced(tmp_path, "train", "3", env=env)
    assert r.warnings() == [], r.stderr
    assert "O,per-launch" in capture.read_text().splitlines()
    t = import_file(capture)
    assert t.per_launch and t.access_set
    assert blocks_by_launch(t) == [TRAIN_ACCESSES] * 3
    _, first_touch = traced(tmp_path, "train", "3", env={k: v for k, v in env.items() if k != "DEEPUM_TRACE_ACCESS_SET"})
    plain = import_file(first_touch)
    assert not plain.per_launch
    assert blocks_by_launch(plain)[0] == [("vec_add", [0, 1, 2, 3, 4]), ("scale", [5]), ("fill", []), ("adam", [])]

    # After each traced launch: a synchronize, then the blocks back to the host and a synchronize.
    calls = [c for c in r.calls if c.name.startswith("cu")]
    launches = [i for i, c in enumerate(calls) if c.name == "cuLaunchKernel"] + [len(calls)]
    after = []  # each launch's calls up to its second synchronize (what follows may be a mark's)
    for i, j in zip(launches[:12], launches[1:13]):
        names = [c.name for c in calls[i + 1:j]]
        assert names[0] == "cuCtxSynchronize" and "cuCtxSynchronize" in names[1:]
        after.append(calls[i + 1:i + 2 + names.index("cuCtxSynchronize", 1)])
        assert "cuMemPrefetchAsync" in [c.name for c in after[-1]]
    if source == "uvm-tools":
        # only what the launch brought in, in runs clipped to the allocations: vec_add's blocks 0-4
        # are a, b and c (three calls), adam's a and d (two)
        base = int(t.records[t.records["type"] == ALLOC]["addr"].min())
        moved = [[((int(c.args["addr"], 16) - base) >> 20, int(c.args["size"]) >> 20)
                  for c in between if c.name == "cuMemPrefetchAsync"] for between in after[:4]]
        assert moved == [[(0, 3), (4, 1), (6, 4)], [(10, 2)], [(4, 1)], [(0, 3), (10, 2)]]


def test_per_launch_capture_has_one_line_per_block_and_kind_for_each_launch(tmp_path):
    """A real GPU reports every faulting 4 KiB page (GPT-2 XL's per-launch capture: 6.6 GB of lines
    for four iterations): the tracer merges each launch's UVM events per block and kind, keeping
    what the importer reads (first time and access type, bytes moved in)."""
    env = {"DEEPUM_TRACE_ACCESS_SET": "launch", **uvm_queue(tmp_path)}
    _, one = traced(tmp_path, "train", "3", env={**env, "FAKECUDA_FAULT_EVENTS": "1"})
    _, many = traced(tmp_path, "train", "3", env={**env, "FAKECUDA_FAULT_EVENTS": "16"})
    lines = many.read_text().splitlines()
    seen: set = set()
    for line in lines:
        if line.startswith(("L,", "M,")):  # each launch's events follow its L line
            seen = set()
        elif line.startswith("U,"):
            f = line.split(",")
            key = (f[1], int(f[5], 16) >> 21)
            assert key not in seen, f"two lines for one block and kind after one launch: {line}"
            seen.add(key)
    faults = [sum(line.startswith("U,4,") for line in path.read_text().splitlines()) for path in (one, many)]
    assert faults[0] == faults[1] > 0

    def accesses(t: Trace) -> list:
        f = t.records[t.records["type"] == FAULT]
        return sorted(zip(f["addr"] - t.records["addr"][t.records["type"] == ALLOC].min(),
                          f["len"], f["exec_id"], f["aux"], f["flags"]))
    a, b = import_file(one), import_file(many)
    assert accesses(a) == accesses(b) and blocks_by_launch(b) == [TRAIN_ACCESSES] * 3


def test_a_trace_asking_for_the_uvm_queue_without_one_fails_with_the_reason(tmp_path):
    r, capture = traced(tmp_path, "train", "2", env={"DEEPUM_FAULTS": "uvm-tools", "DEEPUM_UVM_TOOLS": "/no/such/tools"})
    assert r.stdout == "ok train\n"  # the program runs on
    with pytest.raises(TraceFormatError, match="the tracer failed: no UVM event queue: /no/such/tools"):
        import_file(capture)


def test_access_set_marks_move_every_managed_allocation_to_the_host_first(tmp_path):
    r, _ = traced(tmp_path, "train", "3")
    names = [c.name for c in r.calls]
    for mark in range(4):  # 3 iterations and the mark that closes the last
        prefetches = [i for i, n in enumerate(names) if n == "cuMemPrefetchAsync"][4 * mark: 4 * mark + 4]
        assert [r.calls[i].args["device"] for i in prefetches] == ["-1"] * 4
        assert names[prefetches[0] - 1] == "cuCtxSynchronize" and names[prefetches[-1] + 1] == "cuCtxSynchronize"
    assert names.count("cuMemPrefetchAsync") == 16


def test_without_access_set_only_first_touches_fault(tmp_path):
    r, capture = traced(tmp_path, "train", "3", access_set=False)
    t = import_file(capture)
    assert not t.access_set and not r.named("cuMemPrefetchAsync")
    assert [int((records["type"] == FAULT).sum()) for records in iterations_of(t)] == [6, 0, 0]
    assert not (t.records[t.records["type"] == ITERATION]["flags"] & ITER_FLUSHED).any()


def test_the_tracer_stops_after_the_iterations_asked_for_and_the_program_runs_on(tmp_path):
    plain = baseline(tmp_path, "train", "4")
    r, capture = traced(tmp_path, "train", "4", iterations=2)
    assert r.stdout == plain.stdout
    assert [(c.name, c.args) for c in r.launches()] == [(c.name, c.args) for c in plain.launches()]
    t = import_file(capture)
    assert len(t.iteration_bounds()) == 2 and t.counts()["launch"] == 8
    assert capture.read_text().count("\nL,") == 8  # nothing recorded after the closing mark
    # the mark that closed the trace flushed too; later ones did nothing
    assert [c.name for c in r.calls].count("cuMemPrefetchAsync") == 4 * 3


def test_a_forked_child_leaves_the_capture_alone(tmp_path):
    _, capture = traced(tmp_path, "train-fork", "2")
    lines = capture.read_text().splitlines()
    assert len(lines) == len(set(lines))  # the child did not flush the parent's buffer again
    assert import_file(capture).counts()["launch"] == 8


@pytest.mark.parametrize("env, message", [
    ({"DEEPUM_CUPTI": "/no/such/libcupti.so"}, "cannot load CUPTI"),
    ({"FAKECUPTI_DROP": "3"}, "CUPTI dropped 3 activity records"),
])
def test_a_failed_capture_says_why_and_changes_nothing_else(tmp_path, env, message):
    plain = baseline(tmp_path, "train", "2")
    r, capture = traced(tmp_path, "train", "2", env=env)
    assert r.stdout == plain.stdout and r.stats["active"]
    assert len(r.warnings()) == 1 and message in r.warnings()[0]
    with pytest.raises(TraceFormatError, match=f"the tracer failed: {message}"):
        import_file(capture)


def test_the_marker_module_reaches_libdeepum_when_it_is_loaded(tmp_path):
    program = "import pydeepum.torch as t; t.mark_iteration(); print(t.loaded())"
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "LD_"))}
    environ["PYTHONPATH"] = str(ROOT)
    alone = subprocess.run([sys.executable, "-c", program], env=environ, capture_output=True, text=True)
    under = subprocess.run([sys.executable, "-c", program], env={**environ, "LD_PRELOAD": preload(LIB)},
                           capture_output=True, text=True)
    assert (alone.stdout, under.stdout) == ("False\n", "True\n"), alone.stderr + under.stderr


# ---- deepumctl run -----------------------------------------------------------------------


def deepumctl(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """deepumctl ARGS in the fake driver's directory, with no /dev/deepum."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DEEPUM_", "FAKECUDA_", "LD_"))}
    environ.update(LD_LIBRARY_PATH=str(FAKE), DEEPUM_DEVICE=str(tmp_path / "no-such-device"), **(env or {}))
    return subprocess.run([sys.executable, "-c", "from pydeepum.cli import cli; cli()", *args],
                          env=environ, capture_output=True, text=True, timeout=60, cwd=FAKE)


def deepumctl_run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return deepumctl(tmp_path, "run", *args, env=env)


def test_deepumctl_run_summarises_every_cuda_process_and_exits_with_the_command_status(tmp_path):
    stats = tmp_path / "run.json"
    done = deepumctl_run(tmp_path, "--mode", "observe", "--stats", str(stats), "--",
                         "sh", "-c", "./cuda_app symbol loop 3 && ./cuda_app_dlopen runtime loop 2; exit 7")
    assert done.returncode == 7, done.stderr
    assert done.stdout == "ok loop\nok loop\n"
    assert "deepum: 2 CUDA processes; mode observe, delivery write, managed memory on" in done.stderr
    assert "launches 15, exec IDs 6" in done.stderr
    assert "iterations from the 2nd on: 3, launches 9, known-ID hits 100.00%" in done.stderr
    data = json.loads(stats.read_text())
    assert data["returncode"] == 7 and len(data["processes"]) == 2
    assert data["totals"]["launches"] == 15 and data["totals"]["allocs_redirected"] == 6
    assert data["steady_state"] == {"iterations": 3, "launches": 9, "exec_hits": 9, "exec_new": 0}


def test_deepumctl_run_options_reach_the_library(tmp_path):
    stats = tmp_path / "run.json"
    done = deepumctl_run(tmp_path, "--mode", "observe", "--delivery", "callback", "--no-managed",
                         "--stats", str(stats), "./cuda_app", "symbol", "alloc")
    assert done.returncode == 0, done.stderr
    (proc,) = json.loads(stats.read_text())["processes"]
    assert proc["delivery"] == "callback" and proc["managed"] is False
    assert proc["counters"]["allocs_redirected"] == 0


def test_deepumctl_run_without_a_module_runs_the_user_mode_engine(tmp_path):
    done = deepumctl_run(tmp_path, "./cuda_app", "symbol", "loop", "1")
    assert done.returncode == 0, done.stderr
    assert "mode user" in done.stderr and "engine: fault source cupti" in done.stderr
    assert "deepum:" not in done.stderr.replace("deepum: 1 CUDA process", "")  # no warning


@pytest.mark.parametrize("command, status, message", [
    (["no-such-command-deepum"], 127, "command not found"),
    (["sh", "-c", "kill -TERM $$"], 128 + 15, "no process made a CUDA driver call"),
])
def test_deepumctl_run_exit_status_is_the_shells(tmp_path, command, status, message):
    done = deepumctl_run(tmp_path, "--", *command)
    assert done.returncode == status and message in done.stderr


def test_deepumctl_run_without_a_built_library_is_an_input_error(tmp_path):
    done = deepumctl_run(tmp_path, "true", env={"DEEPUM_LIB": str(tmp_path / "missing.so")})
    assert done.returncode == 2 and "make -C userlib" in done.stderr


# ---- deepumctl trace record --------------------------------------------------------------


def test_deepumctl_trace_record_writes_a_trace_that_replays(tmp_path):
    out, raw = tmp_path / "train.dut.gz", tmp_path / "train.csv"
    done = deepumctl(tmp_path, "trace", "record", "--iterations", "2", "--cupti", str(FAKE_CUPTI),
                     "--keep-capture", str(raw), "--note", "gpu=fake", "-o", str(out), "--",
                     "./cuda_app", "symbol", "train", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok train\n"
    assert f"{out}: " in done.stderr and "2 iterations, first touches per iteration" in done.stderr
    assert "per iteration (median): 4 launches, 6 distinct blocks" in done.stderr
    assert "launches matched to CUPTI kernels: 8 of 8" in done.stderr
    t = Trace.read(out)
    assert len(t.iteration_bounds()) == 2 and t.access_set
    assert t.meta["provenance"]["gpu"] == "fake" and t.meta["provenance"]["command"][-2:] == ["train", "3"]
    assert import_file(raw).counts() == t.counts()  # the kept capture imports to the same trace
    replayed = deepumctl(tmp_path, "replay", "--json", str(out))
    assert replayed.returncode == 0, replayed.stderr
    assert [it["accesses"] for it in json.loads(replayed.stdout)["iterations"]] == [6, 6]
    info = deepumctl(tmp_path, "trace", "info", "--json", str(out))
    assert json.loads(info.stdout)["counts"]["fault"] == 12


def test_deepumctl_trace_record_per_launch_records_every_launchs_accesses(tmp_path):
    out = tmp_path / "train.dut"
    done = deepumctl(tmp_path, "trace", "record", "--per-launch", "--cupti", str(FAKE_CUPTI), "-o", str(out), "--",
                     "./cuda_app", "symbol", "train", "2")
    assert done.returncode == 0, done.stderr
    assert "2 iterations, every launch's accesses" in done.stderr
    t = Trace.read(out)
    assert t.per_launch and t.meta["provenance"]["per_launch_asked"] and blocks_by_launch(t) == [TRAIN_ACCESSES] * 2
    info = json.loads(deepumctl(tmp_path, "trace", "info", "--json", str(out)).stdout)
    assert info["per_launch"] and info["counts"]["fault"] == 2 * sum(len(blocks) for _, blocks in TRAIN_ACCESSES)
    refused = deepumctl(tmp_path, "trace", "record", "--per-launch", "--no-access-set", "-o", str(tmp_path / "x.dut"),
                        "--", "./cuda_app", "symbol", "train", "1")
    assert refused.returncode == 2 and "need the access set on" in refused.stderr and not (tmp_path / "x.dut").exists()


@pytest.mark.parametrize("command, status, message", [
    (["./cuda_app", "symbol", "variants"], 1, "no process marked an iteration"),
    (["sh", "-c", "./cuda_app symbol train 1 && ./cuda_app symbol train 1"], 1, "2 processes marked iterations"),
    (["sh", "-c", "./cuda_app symbol variants; exit 5"], 5, "no process marked an iteration"),
])
def test_deepumctl_trace_record_without_one_marked_process_makes_no_trace(tmp_path, command, status, message):
    out = tmp_path / "none.dut"
    done = deepumctl(tmp_path, "trace", "record", "--cupti", str(FAKE_CUPTI), "-o", str(out), "--", *command)
    assert done.returncode == status and message in done.stderr and not out.exists()


def test_deepumctl_trace_record_reports_a_failed_capture(tmp_path):
    done = deepumctl(tmp_path, "trace", "record", "--cupti", str(tmp_path / "missing.so"), "-o",
                     str(tmp_path / "t.dut"), "--", "./cuda_app", "symbol", "train", "1")
    assert done.returncode == 1 and "no trace: " in done.stderr and "cannot load CUPTI" in done.stderr


# ---- the GPU scripts' plumbing, without a GPU ----------------------------------------------

GPU_SCRIPTS = ROOT / "scripts/gpu"


def test_capture_traces_records_validates_and_keeps_provenance(tmp_path, monkeypatch):
    """capture_traces.py's capture(), with cuda_app standing in for the training process."""
    monkeypatch.syspath_prepend(str(GPU_SCRIPTS))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(FAKE))
    monkeypatch.setenv("DEEPUM_DEVICE", str(tmp_path / "no-such-device"))
    import capture_traces

    worker = ["sh", "-c", f"{FAKE}/cuda_app symbol train 6 >/dev/null && echo '{{\"workload\": \"fake\"}}'"]
    provenance = capture_traces.capture("gpt2", tmp_path, 6, 1, 60, worker=worker)
    assert "error" not in provenance, provenance
    trace = Trace.read(tmp_path / "h200-gpt2-124m-bs8x512-accessset-6it.dut.gz")
    assert trace.meta["provenance"]["run"] == {"workload": "fake"} and trace.meta["provenance"]["driver"]
    assert [i["blocks"] for i in provenance["per_iteration"]] == [6] * 6
    assert provenance["validation"]["ok"] is False  # four fake kernels are not GPT-2
    assert any("6 iterations, first touches per iteration" in line for line in provenance["tracer_summary"])
    # The fake loop's exec IDs are the same every iteration: settled.
    assert [i["new_exec_ids"] for i in provenance["per_iteration"]][1:] == [0] * 5
    assert capture_traces.unsettled_note(provenance["per_iteration"]) is None
    moving = [{"launches": 1047, "new_exec_ids": 1047}, {"launches": 1047, "new_exec_ids": 274}]
    assert "274 of the last iteration's 1,047 launches" in capture_traces.unsettled_note(moving)
    assert capture_traces.unsettled_note(moving[:1] + [{"launches": 1047, "new_exec_ids": 46}]) is None


def test_capture_traces_per_launch_names_and_flags_its_trace(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU_SCRIPTS))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(FAKE))
    monkeypatch.setenv("DEEPUM_DEVICE", str(tmp_path / "no-such-device"))
    import capture_traces

    worker = ["sh", "-c", f"{FAKE}/cuda_app symbol train 5 >/dev/null && echo '{{\"workload\": \"fake\"}}'"]
    provenance = capture_traces.capture("gpt2", tmp_path, 5, 1, 60, worker=worker, per_launch=True)
    assert "error" not in provenance and provenance["per_launch"], provenance
    trace = Trace.read(tmp_path / "h200-gpt2-124m-bs8x512-perlaunch-5it.dut.gz")
    assert trace.per_launch and blocks_by_launch(trace) == [TRAIN_ACCESSES] * 5
    # Traced from the first step, the trace says so in its name
    provenance = capture_traces.capture("gpt2", tmp_path, 5, 0, 60, worker=worker, per_launch=True)
    assert provenance["trace"] == "h200-gpt2-124m-bs8x512-cold-perlaunch-5it.dut.gz", provenance


def test_capture_traces_keeps_the_complete_iterations_of_a_capture_that_timed_out(tmp_path, monkeypatch):
    """A per-launch capture of a large model can outlast its call: the
    iterations completed before the timeout are kept, named for what they are."""
    monkeypatch.syspath_prepend(str(GPU_SCRIPTS))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(FAKE))
    monkeypatch.setenv("DEEPUM_DEVICE", str(tmp_path / "no-such-device"))
    import capture_traces

    rows = "".join(f'echo \'{{"iteration": {i}, "s": 0.5, "loss": {9 - i}}}\'; ' for i in range(6))
    # Six iterations closed, then the process never ends (the tracer asked for eight).
    worker = ["sh", "-c", f"{FAKE}/cuda_app symbol train 6 >/dev/null && {rows} exec sleep 60"]
    provenance = capture_traces.capture("gpt2", tmp_path, 8, 1, 8, worker=worker, per_launch=True)
    assert "error" not in provenance, provenance
    assert provenance["timed_out"] == "timed out after 8 s; kept the 6 complete iterations"
    assert provenance["trace"] == "h200-gpt2-124m-bs8x512-perlaunch-6it.dut.gz" and provenance["iterations"] == 6
    assert provenance["run"] == {"iteration_s": [0.5] * 6, "losses": [9, 8, 7, 6, 5, 4]}
    trace = Trace.read(tmp_path / provenance["trace"])
    assert trace.per_launch and blocks_by_launch(trace) == [TRAIN_ACCESSES] * 6
    assert trace.meta["provenance"]["timed_out"] == provenance["timed_out"]
    assert not list(tmp_path.glob(".capture-*")), "the raw capture's directory is left behind"


def test_capture_traces_cuts_a_killed_capture_after_its_last_complete_mark(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU_SCRIPTS))
    import capture_traces

    _, capture = traced(tmp_path, "train", "3")
    whole = capture.read_bytes()
    closing = whole.index(b"\n", whole.rindex(b"\nM,") + 1) + 1
    capture.write_bytes(whole + b"L,99,1,abc,0,123,7\nU,1,4,99")  # an iteration begun, a line half-written
    assert capture_traces.cut_at_last_mark(capture) == 4
    assert capture.read_bytes() == whole[:closing]
    assert len(import_file(capture).iteration_summary()) == 3


def test_validate_trace_accepts_the_reference_and_rejects_another_workload(tmp_path):
    _, capture = traced(tmp_path, "train", "3")
    import_file(capture).write(tmp_path / "fake.dut")
    script = [sys.executable, str(GPU_SCRIPTS / "validate_trace.py")]
    same = subprocess.run([*script, str(ROOT / "tests/data/h200-gpt2-124m-bs8x512-accessset-6it.dut.gz")],
                          capture_output=True, text=True)
    other = subprocess.run([*script, str(tmp_path / "fake.dut")], capture_output=True, text=True)
    assert same.returncode == 0 and "launches per iteration from iteration 1 on (median): ours 1107" in same.stdout
    assert other.returncode == 1 and "DIFFER" in other.stdout
