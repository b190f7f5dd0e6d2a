// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A small CUDA driver-API program for libdeepum's tests, run against the
 * fake libcuda.  It reaches the driver one of four ways:
 *
 *   symbol          direct calls, bound by the dynamic linker (cuda_app only,
 *                   which is linked against libcuda)
 *   runtime         as the CUDA runtime does: dlopen("libcuda.so.1"), dlsym on
 *                   that handle for cuGetProcAddress_v2, which then fetches
 *                   itself and every other entry point by base name
 *   runtime-ptsz    the same, asking for per-thread default stream variants
 *   runtime-v1      through the CUDA 11.3 cuGetProcAddress
 *   runtime-future  as "runtime", but claiming a CUDA version whose
 *                   cuLaunchKernel libdeepum does not know
 *
 * and runs one scenario (see usage()).  It checks every CUDA result and exits
 * 1 on an unexpected one, 0 otherwise, printing "ok <scenario>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../userlib/cuda_abi.h"

#define CUDA_VERSION_CLAIMED 13000
#define CUDA_VERSION_FUTURE 99000

static struct {
	__typeof__(&cuInit) init;
	__typeof__(&cuDeviceGet) device_get;
	__typeof__(&cuDevicePrimaryCtxRetain) primary_ctx_retain;
	__typeof__(&cuCtxSetCurrent) ctx_set_current;
	__typeof__(&cuModuleLoadData) module_load_data;
	__typeof__(&cuModuleGetFunction) module_get_function;
	__typeof__(&cuStreamCreate) stream_create;
	__typeof__(&cuLaunchKernel) launch_kernel;
	__typeof__(&cuLaunchKernelEx) launch_kernel_ex;
	__typeof__(&cuLaunchCooperativeKernel) launch_cooperative;
	__typeof__(&cuMemAlloc_v2) mem_alloc;
	__typeof__(&cuMemAllocPitch_v2) mem_alloc_pitch;
	__typeof__(&cuMemFree_v2) mem_free;
} api;

static void check(CUresult rc, const char *what)
{
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "cuda_app: %s failed: %d\n", what, rc);
		exit(1);
	}
}

static void expect_failure(CUresult rc, const char *what)
{
	if (rc == CUDA_SUCCESS) {
		fprintf(stderr, "cuda_app: %s succeeded, but must fail\n", what);
		exit(1);
	}
}

#ifdef LINKED
static void resolve_by_symbol(void)
{
	api.init = cuInit;
	api.device_get = cuDeviceGet;
	api.primary_ctx_retain = cuDevicePrimaryCtxRetain;
	api.ctx_set_current = cuCtxSetCurrent;
	api.module_load_data = cuModuleLoadData;
	api.module_get_function = cuModuleGetFunction;
	api.stream_create = cuStreamCreate;
	api.launch_kernel = cuLaunchKernel;
	api.launch_kernel_ex = cuLaunchKernelEx;
	api.launch_cooperative = cuLaunchCooperativeKernel;
	api.mem_alloc = cuMemAlloc_v2;
	api.mem_alloc_pitch = cuMemAllocPitch_v2;
	api.mem_free = cuMemFree_v2;
}
#endif

static void resolve_like_the_runtime(const char *how)
{
	void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cuuint64_t flags = strcmp(how, "runtime-ptsz") == 0 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
							    : CU_GET_PROC_ADDRESS_DEFAULT;
	int v1 = strcmp(how, "runtime-v1") == 0;
	__typeof__(&cuGetProcAddress) get_v1 = NULL;
	__typeof__(&cuGetProcAddress_v2) get_v2 = NULL;
	CUdriverProcAddressQueryResult status;

	if (!libcuda) {
		fprintf(stderr, "cuda_app: %s\n", dlerror());
		exit(1);
	}
	/* The runtime's bootstrap: the lookup function from the handle, then
	 * the lookup function again through itself, for the version it wants. */
	if (v1) {
		__typeof__(&cuGetProcAddress) boot = (__typeof__(boot))dlsym(libcuda, "cuGetProcAddress");

		check(boot ? boot("cuGetProcAddress", (void **)&get_v1, 11030, 0) : CUDA_ERROR_NOT_FOUND,
		      "cuGetProcAddress(cuGetProcAddress)");
	} else {
		__typeof__(&cuGetProcAddress_v2) boot = (__typeof__(boot))dlsym(libcuda, "cuGetProcAddress_v2");

		check(boot ? boot("cuGetProcAddress", (void **)&get_v2, 12000, 0, &status) : CUDA_ERROR_NOT_FOUND,
		      "cuGetProcAddress_v2(cuGetProcAddress)");
	}
#define FETCH(field, symbol, version)                                                                  \
	check(v1 ? get_v1(symbol, (void **)&api.field, version, flags)                                  \
		 : get_v2(symbol, (void **)&api.field, version, flags, &status), "cuGetProcAddress " symbol)
	FETCH(init, "cuInit", CUDA_VERSION_CLAIMED);
	FETCH(device_get, "cuDeviceGet", CUDA_VERSION_CLAIMED);
	FETCH(primary_ctx_retain, "cuDevicePrimaryCtxRetain", CUDA_VERSION_CLAIMED);
	FETCH(ctx_set_current, "cuCtxSetCurrent", CUDA_VERSION_CLAIMED);
	FETCH(module_load_data, "cuModuleLoadData", CUDA_VERSION_CLAIMED);
	FETCH(module_get_function, "cuModuleGetFunction", CUDA_VERSION_CLAIMED);
	FETCH(stream_create, "cuStreamCreate", CUDA_VERSION_CLAIMED);
	FETCH(launch_kernel, "cuLaunchKernel",
	      strcmp(how, "runtime-future") == 0 ? CUDA_VERSION_FUTURE : CUDA_VERSION_CLAIMED);
	FETCH(launch_kernel_ex, "cuLaunchKernelEx", CUDA_VERSION_CLAIMED);
	FETCH(launch_cooperative, "cuLaunchCooperativeKernel", CUDA_VERSION_CLAIMED);
	FETCH(mem_alloc, "cuMemAlloc", CUDA_VERSION_CLAIMED);
	FETCH(mem_alloc_pitch, "cuMemAllocPitch", CUDA_VERSION_CLAIMED);
	FETCH(mem_free, "cuMemFree", CUDA_VERSION_CLAIMED);
#undef FETCH
}

/* ---- helpers ---------------------------------------------------------- */

static CUmodule module;

static CUfunction function(const char *name)
{
	CUfunction f;

	check(api.module_get_function(&f, module, name), name);
	return f;
}

static CUdeviceptr alloc(size_t size)
{
	CUdeviceptr p;

	check(api.mem_alloc(&p, size), "cuMemAlloc");
	return p;
}

struct vec_args {
	CUdeviceptr a, b, out;
	int n;
};

static void vec_add(const char *kernel, struct vec_args v, unsigned grid, unsigned block, unsigned shared,
		    CUstream stream)
{
	void *params[] = { &v.a, &v.b, &v.out, &v.n };

	check(api.launch_kernel(function(kernel), grid, 1, 1, block, 1, 1, shared, stream, params, NULL),
	      "cuLaunchKernel");
}

static void scale(CUdeviceptr x, float factor, int n, CUstream stream)
{
	void *params[] = { &x, &factor, &n };

	check(api.launch_kernel(function("scale"), 4, 1, 1, 64, 1, 1, 0, stream, params, NULL),
	      "cuLaunchKernel scale");
}

/* fill(char *p, char value, long n) through the "extra" argument buffer,
 * whose 7 bytes of padding after @value are set to @padding. */
static void fill_through_buffer(CUdeviceptr p, char value, long n, unsigned char padding)
{
	unsigned char buffer[24];
	size_t size = sizeof(buffer);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };

	memset(buffer, padding, sizeof(buffer));
	memcpy(buffer, &p, 8);
	buffer[8] = (unsigned char)value;
	memcpy(buffer + 16, &n, 8);
	check(api.launch_kernel(function("fill"), 2, 1, 1, 128, 1, 1, 0, NULL, NULL, extra),
	      "cuLaunchKernel fill");
}

static void fill(CUdeviceptr p, char value, long n)
{
	void *params[] = { &p, &value, &n };

	check(api.launch_kernel(function("fill"), 2, 1, 1, 128, 1, 1, 0, NULL, params, NULL),
	      "cuLaunchKernel fill");
}

/* deepum_mark_iteration(), if libdeepum is loaded. */
static void mark_iteration(void)
{
	void (*mark)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "deepum_mark_iteration");

	if (mark)
		mark();
}

/* ---- scenarios -------------------------------------------------------- */

/* A training loop: the same three launches every iteration. */
static void scenario_loop(int iterations)
{
	CUdeviceptr a = alloc(1 << 20), b = alloc(1 << 20), c = alloc(1 << 20);
	struct vec_args v = { a, b, c, 256 };

	for (int i = 0; i < iterations; i++) {
		mark_iteration();
		vec_add("vec_add", v, 4, 64, 0, NULL);
		scale(c, 2.0f, 256, NULL);
		fill_through_buffer(c, 7, 256, 0);
	}
	check(api.mem_free(a), "cuMemFree");
	check(api.mem_free(b), "cuMemFree");
	check(api.mem_free(c), "cuMemFree");
}

/* Launches the test pairs up by exec ID; the numbers are the test's labels. */
static void scenario_variants(void)
{
	CUdeviceptr a = alloc(4096), b = alloc(4096), c = alloc(4096), d = alloc(4096);
	struct vec_args base = { a, b, c, 256 }, other = base;
	void *params[] = { &base.a, &base.b, &base.out, &base.n };
	unsigned char buffer[32];
	size_t size = 28;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };
	CUlaunchConfig config = { 4, 1, 1, 64, 1, 1, 0, NULL, NULL, 0 };
	CUstream s1;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	vec_add("vec_add", base, 4, 64, 0, NULL);	/* 0 the base launch */
	vec_add("vec_add", base, 4, 64, 0, NULL);	/* 1 the same again */
	other.n = 512;
	vec_add("vec_add", other, 4, 64, 0, NULL);	/* 2 another scalar */
	vec_add("vec_add", base, 8, 64, 0, NULL);	/* 3 another grid */
	vec_add("vec_add", base, 4, 128, 0, NULL);	/* 4 another block */
	vec_add("vec_add", base, 4, 64, 64, NULL);	/* 5 dynamic shared memory */
	other = base;
	other.out = d;
	vec_add("vec_add", other, 4, 64, 0, NULL);	/* 6 another pointer */
	vec_add("vec_sub", base, 4, 64, 0, NULL);	/* 7 another kernel, same bytes */
	check(api.launch_kernel_ex(&config, function("vec_add"), params, NULL), "cuLaunchKernelEx");	/* 8 */
	memset(buffer, 0xee, sizeof(buffer));
	memcpy(buffer, &base.a, 8);
	memcpy(buffer + 8, &base.b, 8);
	memcpy(buffer + 16, &base.out, 8);
	memcpy(buffer + 24, &base.n, 4);
	check(api.launch_kernel(function("vec_add"), 4, 1, 1, 64, 1, 1, 0, NULL, NULL, extra),
	      "cuLaunchKernel extra");	/* 9 the argument buffer form */
	check(api.launch_cooperative(function("vec_add"), 4, 1, 1, 64, 1, 1, 0, NULL, params),
	      "cuLaunchCooperativeKernel");	/* 10 */
	vec_add("kernel:vec_add", base, 4, 64, 0, NULL);	/* 11 as a CUkernel handle */
	vec_add("vec_add", base, 4, 64, 0, s1);		/* 12 on another stream */
	fill_through_buffer(a, 7, 100, 0x00);		/* 13 */
	fill_through_buffer(a, 7, 100, 0xff);		/* 14 other padding bytes */
	fill(a, 7, 100);				/* 15 the same through kernelParams */
}

static void scenario_alloc(void)
{
	CUdeviceptr a = alloc(1000), p;
	size_t pitch;

	check(api.mem_alloc_pitch(&p, &pitch, 1000, 10, 4), "cuMemAllocPitch");
	printf("pitch=%zu\n", pitch);
	expect_failure(api.mem_alloc_pitch(&p, &pitch, 1000, 10, 3), "cuMemAllocPitch element 3");
	check(api.mem_free(a), "cuMemFree");
	check(api.mem_free(p), "cuMemFree pitched");
	expect_failure(api.mem_free(0x1234), "cuMemFree of an unknown address");
}

static void scenario_streams(void)
{
	CUdeviceptr a = alloc(4096), b = alloc(4096), c = alloc(4096);
	struct vec_args v = { a, b, c, 64 };
	CUstream s1, s2;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.stream_create(&s2, 0), "cuStreamCreate");
	vec_add("vec_add", v, 1, 64, 0, s1);
	scale(a, 1.0f, 64, s2);
	scale(a, 1.0f, 64, s1);
	vec_add("vec_add", v, 1, 64, 0, NULL);
	vec_add("vec_add", v, 1, 64, 0, s2);
	scale(b, 3.0f, 64, CU_STREAM_PER_THREAD);
	vec_add("vec_add", v, 1, 64, 0, s1);
}

/* @n kernels of different names, then the first three again. */
static void scenario_many(int n)
{
	CUdeviceptr a = alloc(4096);
	int len = 16;
	void *params[] = { &a, &len };
	char name[32];

	for (int i = 0; i < n + 3; i++) {
		snprintf(name, sizeof(name), "k%d", i < n ? i : i - n);
		check(api.launch_kernel(function(name), 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
		      "cuLaunchKernel");
	}
}

struct thread_work {
	int index;
	int launches;
	CUdeviceptr base;
};

static void *thread_body(void *arg)
{
	struct thread_work *w = arg;
	struct vec_args v = { w->base, w->base + 4096, w->base + 8192, 1024 };
	CUstream s;

	check(api.stream_create(&s, 0), "cuStreamCreate");
	for (int i = 0; i < w->launches; i++) {
		vec_add("vec_add", v, 4, 256, 0, s);
		scale(v.out, 0.5f, 1024, s);
	}
	return NULL;
}

/* @threads threads, each with its own stream and buffers. */
static void scenario_threads(int threads, int launches)
{
	pthread_t tid[64];
	struct thread_work work[64];

	for (int t = 0; t < threads && t < 64; t++) {
		work[t] = (struct thread_work){ t, launches, alloc(1 << 16) };
		pthread_create(&tid[t], NULL, thread_body, &work[t]);
	}
	for (int t = 0; t < threads && t < 64; t++)
		pthread_join(tid[t], NULL);
}

/* Host-side cost of a launch: @n launches of an empty kernel. */
static void scenario_bench(int n)
{
	CUfunction f = function("empty");
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		check(api.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("ns_per_launch=%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
}

static void scenario_capture(void)
{
	CUdeviceptr a = alloc(4096);
	CUstream s1, s2;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.stream_create(&s2, 0), "cuStreamCreate");
	scale(a, 1.0f, 64, s1);
	scale(a, 1.0f, 64, s2);
}

static int usage(void)
{
	fprintf(stderr, "usage: cuda_app symbol|runtime|runtime-ptsz|runtime-v1|runtime-future SCENARIO\n"
			"  loop N | variants | alloc | streams | many N | threads T N | bench N | capture\n");
	return 2;
}

int main(int argc, char **argv)
{
	CUdevice dev;
	CUcontext ctx;
	const char *scenario = argc > 2 ? argv[2] : "";
	int n = argc > 3 ? atoi(argv[3]) : 0, m = argc > 4 ? atoi(argv[4]) : 0;

	if (argc < 3)
		return usage();
	if (strcmp(argv[1], "symbol") == 0) {
#ifdef LINKED
		resolve_by_symbol();
#else
		return usage();
#endif
	} else if (strncmp(argv[1], "runtime", 7) == 0) {
		resolve_like_the_runtime(argv[1]);
	} else {
		return usage();
	}
	check(api.init(0), "cuInit");
	check(api.device_get(&dev, 0), "cuDeviceGet");
	check(api.primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(api.ctx_set_current(ctx), "cuCtxSetCurrent");
	check(api.module_load_data(&module, "fake module"), "cuModuleLoadData");

	if (strcmp(scenario, "loop") == 0)
		scenario_loop(n);
	else if (strcmp(scenario, "variants") == 0)
		scenario_variants();
	else if (strcmp(scenario, "alloc") == 0)
		scenario_alloc();
	else if (strcmp(scenario, "streams") == 0)
		scenario_streams();
	else if (strcmp(scenario, "many") == 0)
		scenario_many(n);
	else if (strcmp(scenario, "threads") == 0)
		scenario_threads(n, m);
	else if (strcmp(scenario, "bench") == 0)
		scenario_bench(n);
	else if (strcmp(scenario, "capture") == 0)
		scenario_capture();
	else
		return usage();
	printf("ok %s\n", scenario);
	return 0;
}
