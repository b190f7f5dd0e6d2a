// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A launch-bound loop on a real GPU, for scripts/bench_launch: LAUNCHES
 * launches of an empty kernel (one pointer argument) on the legacy default
 * stream, then one synchronize; prints {"launches": N, "seconds": S} for the
 * timed part.  With "write", each launch follows a cuStreamWriteValue64 into
 * mapped pinned memory, as libdeepum's default delivery does: the driver's
 * share of libdeepum's cost, measured without libdeepum.  The kernel is PTX
 * that the driver compiles, so this builds with no CUDA toolkit: only
 * userlib/cuda_abi.h and the driver's libcuda.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../userlib/cuda_abi.h"

static const char tiny_ptx[] =
	".version 7.0\n"
	".target sm_52\n"
	".address_size 64\n"
	".visible .entry tiny(.param .u64 tiny_arg)\n"
	"{\n"
	"	ret;\n"
	"}\n";

static void check(CUresult rc, const char *what)
{
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "launch_loop: %s failed: %d\n", what, rc);
		exit(1);
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static CUdeviceptr slot_on_gpu;

static void launch(CUfunction tiny, void **params, long i)
{
	if (slot_on_gpu)
		check(cuStreamWriteValue64_v2(NULL, slot_on_gpu, (cuuint64_t)i, CU_STREAM_WRITE_VALUE_DEFAULT),
		      "cuStreamWriteValue64");
	check(cuLaunchKernel(tiny, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
}

int main(int argc, char **argv)
{
	long launches = argc > 1 ? atol(argv[1]) : 100000;
	int write = argc > 2 && strcmp(argv[2], "write") == 0;
	CUdevice dev;
	CUcontext ctx;
	CUmodule module;
	CUfunction tiny;
	CUdeviceptr arg = 0;
	void *params[] = { &arg };
	void *slot;
	double t0;

	if (launches <= 0 || argc > 3 || (argc == 3 && !write)) {
		fprintf(stderr, "usage: launch_loop [LAUNCHES [write]]\n");
		return 2;
	}
	check(cuInit(0), "cuInit");
	check(cuDeviceGet(&dev, 0), "cuDeviceGet");
	check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	check(cuModuleLoadData(&module, tiny_ptx), "cuModuleLoadData");
	check(cuModuleGetFunction(&tiny, module, "tiny"), "cuModuleGetFunction");
	if (write) {
		check(cuMemHostAlloc(&slot, 8, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
		check(cuMemHostGetDevicePointer_v2(&slot_on_gpu, slot, 0), "cuMemHostGetDevicePointer");
	}
	/* Warm-up: module load, first-launch set-up, libdeepum's launch page. */
	for (int i = 0; i < 1000; i++)
		launch(tiny, params, i);
	check(cuCtxSynchronize(), "cuCtxSynchronize");
	t0 = now();
	for (long i = 0; i < launches; i++)
		launch(tiny, params, i);
	check(cuCtxSynchronize(), "cuCtxSynchronize");
	printf("{\"launches\": %ld, \"seconds\": %.6f}\n", launches, now() - t0);
	return 0;
}
