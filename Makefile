# deepum: top-level targets.  Two do all set-up on a fresh machine:
#   make demo   build, then replay the bundled real H200 traces and simulate GPT-2
#               on smaller GPUs (no GPU needed)
#   make test   every test that runs without a GPU
# Both create .venv and install what they need (pip; apt for the kernel tests).

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
DEEPUMCTL := $(VENV)/bin/deepumctl
DEMO_TRACES := tests/data/h200-gpt2-124m-bs8x512-accessset-6it.dut.gz $(wildcard tests/data/libdeepum/*.dut.gz)
CORE_SRC := $(filter-out kmod/core/port_user.c,$(wildcard kmod/core/*.c)) kmod/core/port_user.c
asan_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_FLAGS := -std=gnu11 -O1 -g $(asan_FLAGS) -Wall -Wextra -Werror
# The sanitizer runtime (lib$(2).so.N) that the shared object $(1) needs, as a path to preload.
sanitizer_runtime = $$($(CC) -print-file-name=$$(readelf -d $(1) | sed -n 's/.*(NEEDED).*\[\(lib$(2)\.so[^]]*\)\]/\1/p'))

.PHONY: all demo test test-unit test-sanitize test-tsan test-asan test-asan-native test-kernel test-nvidia test-dkms fuzz-kernel bench-kernel bench userlib fakecuda bench-launch test-gpu clean

all: $(VENV)/.installed userlib

# The package (and its cffi extension, which compiles the core) in a venv.
# Rebuilt when any C or Python source of it changes.
$(VENV)/.installed: pyproject.toml setup.py $(wildcard pydeepum/*.py pydeepum/_native_src/*) \
		$(wildcard kmod/core/*) kmod/include/uapi/deepum.h userlib/engine_defaults.h userlib/iteration_detector.[ch]
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	for t in $(DEMO_TRACES); do $(DEEPUMCTL) replay $$t || exit 1; echo; done
	$(DEEPUMCTL) simulate tests/data/libdeepum/h200-gpt2-124m-bs8x512-perlaunch-5it.dut.gz --keep-resident \
		--compute tests/data/h200/gpt2-resident-kernels.csv.gz --capacity 0,7G,4.75G --policy uvm,uvm-user,deepum,deepum-issuer,oracle

test: test-unit test-sanitize test-tsan test-asan test-kernel test-nvidia test-dkms

test-unit: $(VENV)/.installed userlib fakecuda
	$(VPY) -m pytest -q

# libdeepum (CUDA interception) and its test doubles: plain C, no CUDA toolkit.
userlib:
	$(MAKE) -C userlib

fakecuda: userlib
	$(MAKE) -C tests/fakecuda

# The core under AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer):
# allocation failures, then a randomized stream of 1M records.
build/fuzz_core: tests/core/fuzz_core.c $(CORE_SRC) $(wildcard kmod/core/*.h) kmod/include/uapi/deepum.h
	mkdir -p build
	$(CC) $(SAN_FLAGS) -Ikmod/core -o $@ tests/core/fuzz_core.c $(CORE_SRC)

test-sanitize: build/fuzz_core
	build/fuzz_core 1000000

# libdeepum under a sanitizer: its tests against the fake driver, each run failing on any report
# (tests/userlib_harness.py); those that need the plain build are skipped (its auditor cannot
# load a sanitizer's runtime).  test-tsan: its threads (engine, issuer, writer, observer, fault
# readers) under ThreadSanitizer; test-asan: AddressSanitizer, LeakSanitizer and UBSan.
tsan_FLAGS := -fsanitize=thread
tsan_OPTIONS := TSAN_OPTIONS="halt_on_error=1 exitcode=66"
asan_OPTIONS := UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fakecuda/lsan.supp
test-tsan test-asan: test-%: $(VENV)/.installed fakecuda
	$(MAKE) -C userlib BUILD=$(CURDIR)/build/$* CFLAGS="-O1 -g $($*_FLAGS)" \
		DEEPUM_LDFLAGS="-shared -pthread -Wl,-Bsymbolic -Wl,-z,now"
	DEEPUM_TEST_USERLIB=$(CURDIR)/build/$* DEEPUM_TEST_SANITIZER=$(call sanitizer_runtime,build/$*/libdeepum.so,$*) \
		$($*_OPTIONS) $(VPY) -m pytest -q tests/test_userlib.py tests/test_engine.py tests/test_pool.py

# The cffi extension (the core, replay, the simulator) under AddressSanitizer and UBSan, loaded
# in place of the installed one (tests/conftest.py) by the tests that do not run libdeepum;
# --capture=sys leaves the sanitizers' reports on stderr (a report ends the process); PYTEST_ARGS
# narrows the run.
test-asan: test-asan-native
test-asan-native: $(VENV)/.installed
	rm -rf build/asan-native && mkdir -p build/asan-native
	CFLAGS="-O1 -g $(asan_FLAGS)" LDFLAGS="$(asan_FLAGS)" $(VPY) pydeepum/_ffi_build.py build/asan-native
	DEEPUM_TEST_NATIVE=$$(echo build/asan-native/pydeepum/_native*.so) \
	LD_PRELOAD=$(call sanitizer_runtime,build/asan-native/pydeepum/_native*.so,asan) \
	ASAN_OPTIONS=detect_leaks=0 $(asan_OPTIONS) \
		$(VPY) -m pytest -q --capture=sys -p no:cacheprovider --ignore=tests/test_userlib.py \
		--ignore=tests/test_engine.py --ignore=tests/test_pool.py $(PYTEST_ARGS)

# deepum.ko in Debian's kernel under QEMU (TCG), fail-closed (tests/qemu/README.md); libdeepum
# and the fake libcuda too, for the test of the launch page end to end.
test-kernel: $(VENV)/.installed userlib fakecuda
	PYTHON=$(CURDIR)/$(VPY) tests/qemu/run

# nvidia-uvm hook patches (kmod/patches/README.md): Debian's 535.261.03 source patched and
# built with -Werror, exports and a linking module checked; 580 too when NVIDIA_SRC_580 names a
# tree (SKIPPED otherwise).  About 4 minutes on 2 cores; uses apt.
test-nvidia:
	tests/nvidia/run

# deepum.ko's DKMS packaging (docs/INSTALL.md, "DKMS"): make -C kmod dkms-install, a
# rebuild as on a kernel update, dkms-remove, with Debian's dkms against Debian 12's kernel
# headers, in private dkms trees under build/dkms-test.  About 30 s; uses apt.
test-dkms:
	tests/dkms/run

# The ioctl fuzzer alone in the QEMU guest, 1,000,000 calls.
fuzz-kernel: $(VENV)/.installed
	PYTHON=$(CURDIR)/$(VPY) tests/qemu/run fuzz

# Records/s through deepum.ko's pipeline against the userspace core, in the QEMU guest.
bench-kernel: $(VENV)/.installed
	PYTHON=$(CURDIR)/$(VPY) tests/qemu/run bench

bench: $(VENV)/.installed
	$(VPY) scripts/bench_core
	$(VPY) scripts/bench_simulate

# GPU machine only (userlib/README.md): never in CI.
bench-launch: $(VENV)/.installed userlib
	$(VPY) scripts/bench_launch

test-gpu: $(VENV)/.installed userlib
	$(VPY) -m pytest -m gpu tests/gpu -v

clean:
	rm -rf build $(VENV) pydeepum/_native*.so pydeepum/*.egg-info *.egg-info
