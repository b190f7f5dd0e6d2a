#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# Runs inside the test VM, on the host's userland (see init): load deepum.ko,
# run the kernel tests, unload it, and fail on any kernel splat.  The
# deepum_* variables come from the kernel command line that tests/qemu/run
# builds.
set -euo pipefail

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
cd "$deepum_root"

insmod kmod/deepum.ko
[[ -c /dev/deepum ]] || { echo "guest: no /dev/deepum after insmod"; exit 1; }

# Only pytest-timeout (pyproject.toml configures it) and tests/kernel's own
# conftest.py are loaded: other plugins and the host tests' fixtures (numpy,
# pydeepum) cost half a minute to import over 9p under TCG, and the kernel
# tests need none of them.
DEEPUM_KERNEL_TESTS=1 PYTHONPATH="$deepum_pypath" PYTHONDONTWRITEBYTECODE=1 \
	PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
	"$deepum_python" -m pytest -p pytest_timeout -p no:cacheprovider \
	--confcutdir=tests/kernel --color=no -v tests/kernel

rmmod deepum
dmesg | grep 'deepum: ' || true

if dmesg | grep -E 'WARNING:|BUG:|Oops|general protection fault|UBSAN:|KASAN:'; then
	echo "guest: kernel splat in dmesg"
	exit 1
fi
