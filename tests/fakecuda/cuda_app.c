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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	__typeof__(&cuMemAllocAsync) mem_alloc_async;
	__typeof__(&cuMemFreeAsync) mem_free_async;
	__typeof__(&cuStreamBeginCapture_v2) begin_capture;
	__typeof__(&cuStreamEndCapture) end_capture;
	__typeof__(&cuEventCreate) event_create;
	__typeof__(&cuEventRecord) event_record;
	__typeof__(&cuStreamWaitEvent) stream_wait_event;
	__typeof__(&cuMemcpyHtoD_v2) memcpy_htod;
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
	api.mem_alloc_async = cuMemAllocAsync;
	api.mem_free_async = cuMemFreeAsync;
	api.begin_capture = cuStreamBeginCapture_v2;
	api.end_capture = cuStreamEndCapture;
	api.event_create = cuEventCreate;
	api.event_record = cuEventRecord;
	api.stream_wait_event = cuStreamWaitEvent;
	api.memcpy_htod = cuMemcpyHtoD_v2;
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
	FETCH(mem_alloc_async, "cuMemAllocAsync", CUDA_VERSION_CLAIMED);
	FETCH(mem_free_async, "cuMemFreeAsync", CUDA_VERSION_CLAIMED);
	FETCH(begin_capture, "cuStreamBeginCapture", CUDA_VERSION_CLAIMED);
	FETCH(end_capture, "cuStreamEndCapture", CUDA_VERSION_CLAIMED);
	FETCH(event_create, "cuEventCreate", CUDA_VERSION_CLAIMED);
	FETCH(event_record, "cuEventRecord", CUDA_VERSION_CLAIMED);
	FETCH(stream_wait_event, "cuStreamWaitEvent", CUDA_VERSION_CLAIMED);
	FETCH(memcpy_htod, "cuMemcpyHtoD", CUDA_VERSION_CLAIMED);
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

/* The per-thread default stream, as the way the driver was reached names it. */
static CUstream own_stream;

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

/* adam(float *param, float *moment, float lr, int step, u64 seed) */
static void adam(CUdeviceptr param, CUdeviceptr moment, float lr, int step, unsigned long long seed)
{
	void *params[] = { &param, &moment, &lr, &step, &seed };

	check(api.launch_kernel(function("adam"), 8, 1, 1, 256, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel adam");
}

struct gather_args {
	int n;
	CUdeviceptr src;
	unsigned long long seed;
	CUdeviceptr dst;
};

/* gather(struct gather_args by value, int flags), through kernelParams or the argument buffer. */
static void gather(struct gather_args g, int flags, int through_buffer)
{
	unsigned char buffer[40];
	size_t size = sizeof(buffer);
	void *params[] = { &g, &flags };
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };

	memset(buffer, 0x5a, sizeof(buffer));
	memcpy(buffer, &g, sizeof(g));
	memcpy(buffer + sizeof(g), &flags, sizeof(flags));
	check(api.launch_kernel(function("gather"), 2, 1, 1, 64, 1, 1, 0, NULL, through_buffer ? NULL : params,
				through_buffer ? extra : NULL), "cuLaunchKernel gather");
}

/* deepum_mark_iteration(), if libdeepum is loaded, unless the scenario is an
 * unmarked one (a program that knows nothing of deepum). */
static int unmarked;

static void mark_iteration(void)
{
	void (*mark)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "deepum_mark_iteration");

	if (mark && !unmarked)
		mark();
}

/* ---- scenarios -------------------------------------------------------- */

/* A training loop: the same three launches every iteration, on the same
 * data, with scalars that change every iteration. */
static void scenario_loop(int iterations)
{
	CUdeviceptr a = alloc(1 << 20), b = alloc(1 << 20), c = alloc(1 << 20);
	struct vec_args v = { a, b, c, 256 };

	for (int i = 0; i < iterations; i++) {
		mark_iteration();
		vec_add("vec_add", v, 4, 64, 0, NULL);
		scale(c, 2.0f + i, 256 + i, NULL);
		fill_through_buffer(c, (char)i, 256 + i, 0);
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
	adam(a, b, 1e-3f, 1, 0x1234);			/* 16 */
	adam(a, b, 2e-3f, 2, 0xdeadbeefcafe1234ULL);	/* 17 other scalars, a 64-bit one outside allocations */
	adam(a, b, 1e-3f, 3, (unsigned long long)(uintptr_t)&config);	/* 18 a host pointer: a scalar */
	adam(a, d, 1e-3f, 1, 0x1234);			/* 19 a pointer into another allocation */
	adam(a + 256, b, 1e-3f, 1, 0x1234);		/* 20 a pointer elsewhere in its allocation */
	adam(b, a, 1e-3f, 1, 0x1234);			/* 21 the two pointers swapped */
	gather((struct gather_args){ 10, a, 1, b }, 0, 0);	/* 22 pointers inside a struct */
	gather((struct gather_args){ 20, a, 99, b }, 1, 0);	/* 23 its scalars changed */
	gather((struct gather_args){ 10, a, 1, d }, 0, 0);	/* 24 a pointer in the struct moved */
	gather((struct gather_args){ 30, a, 7, b }, 2, 1);	/* 25 22 through the argument buffer */
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

/* Launches the test pairs up with deliveries; the numbers are the test's labels. */
static void scenario_capture(void)
{
	CUdeviceptr a = alloc(4096);
	float factor = 1.0f;
	int n = 64;
	void *scale_params[] = { &a, &factor, &n };
	CUstream s1, s2, s3;
	CUevent recorded;
	CUgraph graph;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.stream_create(&s2, 0), "cuStreamCreate");
	check(api.stream_create(&s3, 0), "cuStreamCreate");
	check(api.event_create(&recorded, 0), "cuEventCreate");
	scale(a, 1.0f, 64, s1);						/* 0 no capture anywhere */
	check(api.begin_capture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
	scale(a, 1.0f, 64, s1);						/* 1 captured */
	scale(a, 1.0f, 64, s2);						/* 2 another stream */
	check(api.event_record(recorded, s1), "cuEventRecord");
	check(api.stream_wait_event(s3, recorded, 0), "cuStreamWaitEvent");
	scale(a, 1.0f, 64, s3);						/* 3 joined the capture */
	check(api.end_capture(s1, &graph), "cuStreamEndCapture");
	scale(a, 1.0f, 64, s1);						/* 4 */
	scale(a, 1.0f, 64, s3);						/* 5 */
	expect_failure(api.end_capture(s2, &graph), "cuStreamEndCapture of a stream not capturing");
	scale(a, 1.0f, 64, s2);						/* 6 */
	check(api.begin_capture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
	/* The program's own mistake: the legacy stream synchronizes with s1. */
	expect_failure(api.launch_kernel(function("scale"), 4, 1, 1, 64, 1, 1, 0, NULL, scale_params, NULL),
		       "a launch on the legacy stream during a capture");
	if (api.end_capture(s1, &graph) != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
		fprintf(stderr, "cuda_app: the capture was not invalidated\n");
		exit(1);
	}
	scale(a, 1.0f, 64, NULL);					/* 7 */
}

/* A capture before the first launch of the process: the first launches
 * cannot have their launch page yet. */
static void scenario_capture_first(void)
{
	CUdeviceptr a = alloc(4096);
	CUstream s1, s2;
	CUgraph graph;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.stream_create(&s2, 0), "cuStreamCreate");
	check(api.begin_capture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
	scale(a, 1.0f, 64, s1);
	scale(a, 1.0f, 64, s2);
	check(api.end_capture(s1, &graph), "cuStreamEndCapture");
	scale(a, 1.0f, 64, s2);
}

/* An allocation during a global-mode capture: refused, and the capture with it. */
static void scenario_capture_alloc(void)
{
	CUdeviceptr p;
	CUstream s1;
	CUgraph graph;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.begin_capture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
	expect_failure(api.mem_alloc(&p, 4096), "cuMemAlloc during a global capture");
	if (api.end_capture(s1, &graph) != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
		fprintf(stderr, "cuda_app: the capture was not invalidated\n");
		exit(1);
	}
	scale(alloc(4096), 1.0f, 64, s1);
}

/* A capture on the thread's own per-thread default stream. */
static void scenario_capture_own(void)
{
	CUdeviceptr a = alloc(4096);
	CUgraph graph;

	check(api.begin_capture(own_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
	scale(a, 1.0f, 64, own_stream);
	check(api.end_capture(own_stream, &graph), "cuStreamEndCapture");
	scale(a, 1.0f, 64, own_stream);
}

/*
 * What the tracer records: @iterations marked iterations, then a mark that
 * closes the last.  Blocks (2 MiB) are touched from each pointer argument to
 * the end of its allocation: vec_add a0 a1 b0 c0 c1, scale d0, then fill and
 * adam only blocks already there.  With @fork_child, a child process that
 * makes no CUDA call (a data-loader worker) is forked in the first
 * iteration and exits normally.
 */
static void scenario_train(int iterations, int fork_child)
{
	CUdeviceptr a = alloc(3 << 20), b = alloc(1 << 20), c = alloc(4 << 20), d = alloc(2 << 20);
	CUstream s;

	check(api.stream_create(&s, 0), "cuStreamCreate");
	for (int i = 0; i < iterations; i++) {
		mark_iteration();
		vec_add("vec_add", (struct vec_args){ a, b, c, 256 }, 4, 64, 0, NULL);
		scale(d, 0.5f * i, 64, s);
		fill_through_buffer(b, (char)i, 256, 0);
		adam(a, d, 1e-3f, i + 1, 0x9e3779b97f4a7c15ULL * (i + 1));
		if (fork_child && i == 0) {
			pid_t child = fork();

			if (child == 0)
				exit(0);
			waitpid(child, NULL, 0);
		}
	}
	mark_iteration();
	check(api.mem_free(a), "cuMemFree");
	check(api.mem_free(b), "cuMemFree");
	check(api.mem_free(c), "cuMemFree");
	check(api.mem_free(d), "cuMemFree");
}

/*
 * A training loop for the user-mode engine: @layers layers, each with 4 MiB
 * of weights and 4 MiB of input activations (2 blocks each, allocated one
 * after another, layer by layer, then the output), a forward and a backward
 * pass on
 * stream s, @iterations marked iterations, then every allocation freed.
 * Each kernel touches three whole allocations (6 blocks).  With
 * LAYERS_FREES, each iteration also uses a scratch buffer and reports it
 * dead on s (deepum_report_free), as pydeepum.torch does for a tensor its
 * allocator freed.  With LAYERS_MOVING, each forward layer also scales a
 * mask allocated anew every iteration (at a new address, as PyTorch's
 * dropout masks often are), freed at the iteration's end.  With
 * LAYERS_COPIED, the weights are copied in from the host before the first
 * iteration, as a model is loaded.
 */
enum layers_extra { LAYERS_PLAIN, LAYERS_FREES, LAYERS_MOVING, LAYERS_COPIED };

static void scenario_layers(int iterations, int layers, enum layers_extra extra)
{
	int (*report_free)(unsigned long long, unsigned long long, void *) =
		(int (*)(unsigned long long, unsigned long long, void *))dlsym(RTLD_DEFAULT, "deepum_report_free");
	CUdeviceptr w[64], a[65], mask[64], scratch;
	CUstream s;

	if (layers > 64)
		layers = 64;
	check(api.stream_create(&s, 0), "cuStreamCreate");
	for (int l = 0; l < layers; l++) {
		w[l] = alloc(4 << 20);
		a[l] = alloc(4 << 20);
	}
	a[layers] = alloc(4 << 20);
	scratch = alloc(4 << 20);
	for (int l = 0; extra == LAYERS_COPIED && l < layers; l++) {
		static const char weights[4 << 20];

		check(api.memcpy_htod(w[l], weights, sizeof(weights)), "cuMemcpyHtoD");
	}
	for (int i = 0; i < iterations; i++) {
		mark_iteration();
		for (int l = 0; l < layers; l++) {
			vec_add("layer_fwd", (struct vec_args){ w[l], a[l], a[l + 1], l }, 8, 256, 0, s);
			if (extra == LAYERS_MOVING) {
				mask[l] = alloc(2 << 20);
				scale(mask[l], 1.0f, 64, s);
			}
		}
		if (extra == LAYERS_FREES) {
			scale(scratch, 1.0f, 64, s);
			if (!report_free || report_free(scratch, 4 << 20, s) != 0) {
				fprintf(stderr, "cuda_app: deepum_report_free is missing or refused\n");
				exit(1);
			}
		}
		for (int l = layers; l-- > 0;)
			vec_add("layer_bwd", (struct vec_args){ w[l], a[l + 1], a[l], l }, 8, 256, 0, s);
		for (int l = 0; extra == LAYERS_MOVING && l < layers; l++)
			check(api.mem_free(mask[l]), "cuMemFree");
	}
	mark_iteration();
	for (int l = 0; l < layers; l++) {
		check(api.mem_free(w[l]), "cuMemFree");
		check(api.mem_free(a[l]), "cuMemFree");
	}
	check(api.mem_free(a[layers]), "cuMemFree");
	check(api.mem_free(scratch), "cuMemFree");
}

static CUdeviceptr alloc_async(const char *name, size_t size, CUstream stream)
{
	CUdeviceptr p;

	check(api.mem_alloc_async(&p, size, stream), "cuMemAllocAsync");
	printf("%s 0x%llx\n", name, p);
	return p;
}

/*
 * Stream-ordered allocation, step by step; each result printed as
 * "NAME 0xADDRESS" for the test to relate.  s1 and s2 are two streams;
 * iteration marks where dead blocks are reported.
 */
static void scenario_pool(void)
{
	CUdeviceptr a, b, c, big1, big2, huge, other;
	CUstream s1, s2;

	check(api.stream_create(&s1, 0), "cuStreamCreate");
	check(api.stream_create(&s2, 0), "cuStreamCreate");
	a = alloc_async("a", 1000, s1);			/* small: rounded to 1024 */
	b = alloc_async("b", 1000, s1);
	check(api.mem_free_async(a, s1), "cuMemFreeAsync a");
	c = alloc_async("c", 512, s1);			/* best fit: a's place */
	big1 = alloc_async("big1", 3 << 20, s1);	/* medium: a 20 MiB segment */
	big2 = alloc_async("big2", 3 << 20, s1);
	scale(big1, 1.0f, 64, s1);
	check(api.mem_free_async(big1, s1), "cuMemFreeAsync big1");	/* its first block dies */
	check(api.mem_free_async(big2, s1), "cuMemFreeAsync big2");	/* and the two it shared */
	alloc_async("again", 3 << 20, s1);		/* the same place again: two live again */
	mark_iteration();				/* the third is reported */
	other = alloc_async("other", 1000, s2);		/* another stream: another segment */
	huge = alloc_async("huge", 33 << 20, s1);	/* large: a segment of its own, 34 MiB */
	check(api.mem_free_async(huge, s2), "cuMemFreeAsync huge on s2");	/* waits for s2 */
	check(api.mem_free(c), "cuMemFree c");		/* synchronous */
	check(api.mem_free_async(b, s1), "cuMemFreeAsync b");
	check(api.mem_free_async(other, s2), "cuMemFreeAsync other");
	mark_iteration();
	expect_failure(api.mem_free_async(0x1234, s1), "cuMemFreeAsync of an unknown address");
	check(api.mem_alloc_async(&a, 1000, CU_STREAM_PER_THREAD), "cuMemAllocAsync per-thread");
	printf("per_thread 0x%llx\n", a);
	check(api.mem_free_async(a, CU_STREAM_PER_THREAD), "cuMemFreeAsync per-thread");
}

/*
 * The layers loop with activations in stream order, as PyTorch's
 * cudaMallocAsync backend makes them: weights by cuMemAlloc (4 MiB each),
 * then every iteration a 12 MiB input and one 12 MiB activation per layer
 * from cuMemAllocAsync in the forward pass, each freed after the backward
 * pass used it for the last time; all on the legacy stream, as PyTorch
 * does by default.
 */
static void scenario_layers_async(int iterations, int layers)
{
	CUdeviceptr w[64], a[65];
	CUstream s = NULL;

	if (layers > 64)
		layers = 64;
	for (int l = 0; l < layers; l++)
		w[l] = alloc(4 << 20);
	for (int i = 0; i < iterations; i++) {
		mark_iteration();
		check(api.mem_alloc_async(&a[0], 12 << 20, s), "cuMemAllocAsync");
		for (int l = 0; l < layers; l++) {
			check(api.mem_alloc_async(&a[l + 1], 12 << 20, s), "cuMemAllocAsync");
			vec_add("layer_fwd", (struct vec_args){ w[l], a[l], a[l + 1], l }, 8, 256, 0, s);
		}
		for (int l = layers; l-- > 0;) {
			vec_add("layer_bwd", (struct vec_args){ w[l], a[l + 1], a[l], l }, 8, 256, 0, s);
			check(api.mem_free_async(a[l + 1], s), "cuMemFreeAsync");
		}
		check(api.mem_free_async(a[0], s), "cuMemFreeAsync");
	}
	mark_iteration();
	for (int l = 0; l < layers; l++)
		check(api.mem_free(w[l]), "cuMemFree");
}

static int usage(void)
{
	fprintf(stderr, "usage: cuda_app symbol|runtime|runtime-ptsz|runtime-v1|runtime-future SCENARIO\n"
			"  loop N | variants | alloc | streams | many N | threads T N | bench N | capture\n"
			"  | capture-first | capture-own | capture-alloc | train N | train-fork N\n"
			"  | layers N L | layers-frees N L | layers-copied N L | layers-unmarked N L\n"
			"  | layers-moving[-unmarked] N L\n"
			"  | layers-async N L | pool\n");
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
	own_stream = strcmp(argv[1], "runtime-ptsz") == 0 ? NULL : CU_STREAM_PER_THREAD;

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
	else if (strcmp(scenario, "capture-first") == 0)
		scenario_capture_first();
	else if (strcmp(scenario, "capture-own") == 0)
		scenario_capture_own();
	else if (strcmp(scenario, "capture-alloc") == 0)
		scenario_capture_alloc();
	else if (strcmp(scenario, "train") == 0)
		scenario_train(n, 0);
	else if (strcmp(scenario, "train-fork") == 0)
		scenario_train(n, 1);
	else if (strcmp(scenario, "layers") == 0)
		scenario_layers(n, m, LAYERS_PLAIN);
	else if (strcmp(scenario, "layers-frees") == 0)
		scenario_layers(n, m, LAYERS_FREES);
	else if (strcmp(scenario, "layers-copied") == 0)
		scenario_layers(n, m, LAYERS_COPIED);
	else if (strcmp(scenario, "layers-unmarked") == 0)
		unmarked = 1, scenario_layers(n, m, LAYERS_PLAIN);
	else if (strcmp(scenario, "layers-moving") == 0)
		scenario_layers(n, m, LAYERS_MOVING);
	else if (strcmp(scenario, "layers-moving-unmarked") == 0)
		unmarked = 1, scenario_layers(n, m, LAYERS_MOVING);
	else if (strcmp(scenario, "layers-async") == 0)
		scenario_layers_async(n, m);
	else if (strcmp(scenario, "pool") == 0)
		scenario_pool();
	else
		return usage();
	printf("ok %s\n", scenario);
	return 0;
}
