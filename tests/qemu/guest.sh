#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Runs inside the test VM, on the host's userland (see init): load deepum.ko,
# run the kernel tests (or the fuzzer alone, or the benchmark), unload it,
# and fail on any kernel splat.  The deepum_* variables come from the kernel
# command line that tests/qemu/run builds.
set -euo pipefail

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
cd "$deepum_root"

# The tests reload it with other parameters as they need, and put this back.
insmod kmod/deepum.ko enable_test_ioctls=1
[[ -c /dev/deepum ]] || { echo "guest: no /dev/deepum after insmod"; exit 1; }

# Only pytest-timeout (pyproject.toml configures it) and tests/kernel's own
# conftest.py are loaded: other plugins and the host tests' fixtures cost
# seconds to import over 9p under TCG.  Test modules that need pydeepum
# (and numpy) import it themselves.
run_pytest() {
	DEEPUM_KERNEL_TESTS=1 DEEPUM_FUZZ_CALLS="$deepum_fuzz_calls" DEEPUM_QEMU_OUT="$deepum_out" \
		DEEPUM_FUZZ_BIN="$deepum_out/fuzz_ioctl" \
		PYTHONPATH="$deepum_pypath:$deepum_root" PYTHONDONTWRITEBYTECODE=1 \
		PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
		"$deepum_python" -m pytest -p pytest_timeout -p no:cacheprovider \
		--confcutdir=tests/kernel --color=no -v -rP --durations=15 "$@"
}

pytest_args=()
while read -r arg; do
	[[ -n $arg ]] && pytest_args+=("$arg")
done <"$deepum_out/pytest-args"
case $deepum_mode in
test)	run_pytest "${pytest_args[@]:-tests/kernel}" ;;
fuzz)	run_pytest tests/kernel/test_fuzz.py ;;
bench)	PYTHONPATH="$deepum_pypath:$deepum_root" PYTHONDONTWRITEBYTECODE=1 \
		"$deepum_python" scripts/bench_kernel_replay ;;
esac

rmmod deepum
dmesg | grep 'deepum: ' | tail -20 || true

if dmesg | grep -E 'WARNING:|BUG:|Oops|general protection fault|UBSAN:|KASAN:|BUG \S+ \((Not t|T)ainted'; then
	echo "guest: kernel splat in dmesg"
	exit 1
fi
# Taints other than out-of-tree (O, 4096) and unsigned (E, 8192) modules: a bad page (SLUB's
# checks), a WARN, a lockup, a die...
tainted=$(cat /proc/sys/kernel/tainted)
if (( tainted & ~(4096 | 8192) )); then
	echo "guest: kernel tainted $tainted"
	exit 1
fi
