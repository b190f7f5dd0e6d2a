// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A test double of libcuda.so.1: the entry points libdeepum hooks and calls,
 * plus the few a test program needs, each appending one line to the file
 * FAKECUDA_LOG names ("<entry point> key=value ...", one write(2) per line,
 * so lines of concurrent calls never interleave).  Tests assert on that log.
 *
 * Like the real driver it is built -Bsymbolic, so cuGetProcAddress hands out
 * its own functions even when libdeepum's trampolines of the same names are
 * preloaded, and it resolves a base name ("cuMemAlloc") to an ABI version
 * ("cuMemAlloc_v2") by the caller's CUDA version and stream flags.
 *
 * Kernels: cuModuleGetFunction makes one per name, with the parameter layout
 * of a small catalogue (any other name: a pointer and an int).  A name
 * prefixed "kernel:" gives a CUkernel-style handle, which cuFuncGetName
 * refuses and cuKernelGetName accepts, as the driver does.
 *
 * Stream capture follows the documented rules that matter to libdeepum:
 * work enqueued on a capturing stream is captured (logged "captured=1"),
 * not run; a stream joins a capture by waiting on an event recorded in it;
 * the legacy stream cannot be used while a blocking stream captures
 * (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and enqueuing there invalidates the
 * capture); allocating during a global-mode capture is refused and
 * invalidates it too.
 *
 * A pretend GPU runs each launch at once: every 8-aligned argument word
 * that points into a managed allocation touches the 2 MiB blocks from there
 * to the allocation's end; blocks not resident fault in (a GPU page-fault
 * record for the first, a host-to-device transfer for each).  Prefetches
 * (cuMemPrefetchAsync, cuMemPrefetchBatchAsync) move blocks either way, a
 * discard (cuMemDiscardBatchAsync) drops them; a copy in (cuMemcpyHtoD)
 * fills blocks never given memory on the GPU, unheard, as the driver does;
 * each range must lie in one
 * live managed allocation, as the driver requires ("-> invalid" in the log
 * otherwise).  The GPU counts its resident managed blocks and logs every
 * new peak ("fakegpu peak_resident_blocks=N"), so tests can check a budget.
 * Observers (the fake CUPTI, fakecupti.c, and the fake UVM tools queue,
 * fakedev.c) hear of calls, kernels and transfers through
 * fakecuda_observe() (fakegpu.h); times come from fakecuda_clock().
 *
 * Knobs: FAKECUDA_FAIL=name[=code],...   make those entry points fail
 *        FAKECUDA_SLOW=name=us,...       make those entry points take that long
 *                                        (cuMemPrefetchBatchAsync@host: to the host only)
 *        FAKECUDA_KERNEL_US=us           each kernel runs that long (the launch returns after)
 *        FAKECUDA_MEM_FREE=bytes         what cuMemGetInfo says is free (64 GiB)
 *        FAKECUDA_UVM_DEVICE=path        opened by cuInit, as the driver opens
 *                                        /dev/nvidia-uvm (for fakedev.c)
 * Device memory is fake (addresses from a counter, never dereferenced); host
 * allocations are real, and cuStreamWriteValue64 stores into them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../userlib/cuda_abi.h"
#include "fakegpu.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void log_line(const char *fmt, ...)
{
	static int fd = -2;
	char line[8192];
	va_list ap;
	int n;

	if (fd == -2) {
		const char *path = getenv("FAKECUDA_LOG");

		fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	}
	if (fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, n) != n)
		abort();
}

/* The entry of list @env ("name[=value],...") for @name: its value after
 * '=' (or "" without one), or NULL. */
static const char *listed(const char *env, const char *name)
{
	const char *list = getenv(env);
	size_t n = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '=' || p[n] == '\0'))
			return p[n] == '=' ? p + n + 1 : "";
	return NULL;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };

	while (us > 0 && nanosleep(&ts, &ts) != 0)
		;
}

/* CUDA_SUCCESS, or the failure FAKECUDA_FAIL asks of @name (logged); first
 * the time FAKECUDA_SLOW asks it to take. */
static CUresult injected(const char *name)
{
	const char *slow = listed("FAKECUDA_SLOW", name);
	const char *fail = listed("FAKECUDA_FAIL", name);
	CUresult rc;

	if (slow)
		sleep_us(atol(slow));
	if (!fail)
		return CUDA_SUCCESS;
	rc = *fail ? (CUresult)atoi(fail) : CUDA_ERROR_UNKNOWN;
	log_line("%s -> fail %d", name, rc);
	return rc;
}

#define FAIL_IF_ASKED()                                  \
	do {                                             \
		CUresult injected_rc = injected(__func__); \
		if (injected_rc != CUDA_SUCCESS)         \
			return injected_rc;              \
	} while (0)

/* ---- kernels ---------------------------------------------------------- */

enum { PARAMS_MAX = 8, FUNCS_MAX = 4096 };

struct CUfunc_st {
	char name[64];
	int is_kernel;			/* a CUkernel handle, launched as a CUfunction */
	int nparams;
	size_t offset[PARAMS_MAX];
	size_t size[PARAMS_MAX];
};

static const struct {
	const char *name;
	int nparams;
	size_t size[PARAMS_MAX];
} catalogue[] = {
	{ "vec_add", 4, { 8, 8, 8, 4 } },	/* float *a, float *b, float *out, int n */
	{ "vec_sub", 4, { 8, 8, 8, 4 } },	/* the same layout under another name */
	{ "scale", 3, { 8, 4, 4 } },		/* float *x, float factor, int n */
	{ "fill", 3, { 8, 1, 8 } },		/* char *p, char value, long n: 7 bytes of padding */
	{ "empty", 0, { 0 } },
	{ "tiny", 1, { 8 } },			/* tests/gpu/launch_loop.c's kernel */
	/* float *param, float *moment, float lr, int step, u64 seed */
	{ "adam", 5, { 8, 8, 4, 4, 8 } },
	/* struct { int n; float *src; u64 seed; float *dst; } by value, then int flags */
	{ "gather", 2, { 32, 4 } },
	/* float *weights, float *in, float *out, int layer: cuda_app's "layers" */
	{ "layer_fwd", 4, { 8, 8, 8, 4 } },
	{ "layer_bwd", 4, { 8, 8, 8, 4 } },
};

static struct CUfunc_st funcs[FUNCS_MAX];
static int nfuncs;

static void layout(struct CUfunc_st *fn, int nparams, const size_t *size)
{
	size_t at = 0;

	fn->nparams = nparams;
	for (int i = 0; i < nparams; i++) {
		size_t align = size[i] < 8 ? size[i] : 8;	/* natural; structs of pointers: 8 */

		at = (at + align - 1) / align * align;
		fn->offset[i] = at;
		fn->size[i] = size[i];
		at += size[i];
	}
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	(void)image;
	*module = (CUmodule)0x10000;
	log_line("cuModuleLoadData");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	static const size_t pointer_and_int[] = { 8, 4 };
	int is_kernel = strncmp(name, "kernel:", 7) == 0;
	const char *base = is_kernel ? name + 7 : name;
	struct CUfunc_st *fn = NULL;

	(void)hmod;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nfuncs && !fn; i++)
		if (strcmp(funcs[i].name, base) == 0 && funcs[i].is_kernel == is_kernel)
			fn = &funcs[i];
	if (!fn && nfuncs < FUNCS_MAX) {
		fn = &funcs[nfuncs++];
		snprintf(fn->name, sizeof(fn->name), "%s", base);
		fn->is_kernel = is_kernel;
		layout(fn, 2, pointer_and_int);
		for (size_t i = 0; i < sizeof(catalogue) / sizeof(catalogue[0]); i++)
			if (strcmp(catalogue[i].name, base) == 0)
				layout(fn, catalogue[i].nparams, catalogue[i].size);
	}
	pthread_mutex_unlock(&lock);
	if (!fn)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*hfunc = fn;
	log_line("cuModuleGetFunction name=%s", name);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction f)
{
	FAIL_IF_ASKED();
	if (!f || f->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->name;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset, size_t *size)
{
	if (!f || f->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	if (index >= (size_t)f->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*offset = f->offset[index];
	*size = f->size[index];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel k)
{
	CUfunction f = (CUfunction)k;

	if (!f || !f->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->name;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t *offset, size_t *size)
{
	CUfunction f = (CUfunction)k;

	if (!f || !f->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	if (index >= (size_t)f->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	*offset = f->offset[index];
	*size = f->size[index];
	return CUDA_SUCCESS;
}

/* ---- the GPU's clock and its observer --------------------------------- */

enum { OBSERVERS_MAX = 4 };

static _Atomic uint64_t gpu_clock = 1000000;
static const struct fakegpu_observer *_Atomic observers[OBSERVERS_MAX];
static _Atomic uint32_t last_correlation;

EXPORT uint64_t fakecuda_clock(void)
{
	return atomic_fetch_add(&gpu_clock, 100) + 100;
}

EXPORT void fakecuda_observe(const struct fakegpu_observer *o)
{
	for (int i = 0; i < OBSERVERS_MAX; i++) {
		const struct fakegpu_observer *none = NULL;

		if (atomic_load(&observers[i]) == o || atomic_compare_exchange_strong(&observers[i], &none, o))
			return;
	}
}

#define EACH_OBSERVER(o)                                                                  \
	for (int each_ = 0; each_ < OBSERVERS_MAX; each_++)                              \
		for (const struct fakegpu_observer *o = atomic_load(&observers[each_]); o; o = NULL)

/* A driver API call that may launch work: its correlation ID, announced. */
static uint32_t driver_call(void)
{
	uint32_t correlation = atomic_fetch_add(&last_correlation, 1) + 1;

	EACH_OBSERVER(o)
		if (o->driver_call)
			o->driver_call(correlation);
	return correlation;
}

static void unified_memory(uint32_t kind, uint64_t value, uint64_t address, uint32_t flags)
{
	uint64_t start = fakecuda_clock(), end = fakecuda_clock();

	EACH_OBSERVER(o)
		if (o->unified_memory)
			o->unified_memory(kind, value, start, end, address, flags);
}

/* ---- streams and capture ---------------------------------------------- */

/* What a stream handle means: NULL is the legacy stream for legacy entry
 * points and the per-thread stream for _ptsz ones (one thread's, here). */
static uintptr_t stream_id(CUstream stream, int per_thread)
{
	if (!stream)
		return per_thread ? (uintptr_t)CU_STREAM_PER_THREAD : (uintptr_t)CU_STREAM_LEGACY;
	return (uintptr_t)stream;
}

static int is_per_thread_entry(const char *entry)
{
	size_t n = strlen(entry);

	return n > 5 && strcmp(entry + n - 5, "_ptsz") == 0;
}

enum { CAPTURING_MAX = 16 };

/* Streams in a capture sequence (under lock): the origin and those that joined. */
static struct {
	uintptr_t stream;
	int capture;			/* 0: free entry */
	int origin;
	int invalidated;
	CUstreamCaptureMode mode;
} capturing[CAPTURING_MAX];
static int last_capture;

static int capture_of(uintptr_t stream)
{
	for (int i = 0; i < CAPTURING_MAX; i++)
		if (capturing[i].capture && capturing[i].stream == stream)
			return i;
	return -1;
}

static int any_capture(int global_only)
{
	for (int i = 0; i < CAPTURING_MAX; i++)
		if (capturing[i].capture && (!global_only || capturing[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL))
			return 1;
	return 0;
}

static void invalidate_captures(void)
{
	for (int i = 0; i < CAPTURING_MAX; i++)
		capturing[i].invalidated = capturing[i].capture != 0;
}

static CUresult join_capture(uintptr_t stream, int capture, int origin, CUstreamCaptureMode mode)
{
	for (int i = 0; i < CAPTURING_MAX; i++) {
		if (!capturing[i].capture) {
			capturing[i].stream = stream;
			capturing[i].capture = capture;
			capturing[i].origin = origin;
			capturing[i].invalidated = 0;
			capturing[i].mode = mode;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * Where work enqueued on @stream goes (under lock): 1 into a capture, 0 to
 * the GPU, or an error: the legacy stream while a blocking stream captures
 * (which invalidates that capture).
 */
static CUresult enqueue_target(uintptr_t stream, int *captured)
{
	*captured = capture_of(stream) >= 0;
	if (stream == (uintptr_t)CU_STREAM_LEGACY && any_capture(0)) {
		invalidate_captures();
		return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
	}
	return CUDA_SUCCESS;
}

/* An allocation during a global-mode capture is refused, and invalidates it. */
static CUresult allocation_allowed(void)
{
	if (!any_capture(1))
		return CUDA_SUCCESS;
	invalidate_captures();
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	static unsigned int created;

	pthread_mutex_lock(&lock);
	*stream = (CUstream)(uintptr_t)(0x1000 + 0x10 * ++created);
	pthread_mutex_unlock(&lock);
	log_line("cuStreamCreate flags=%u -> %p", flags, (void *)*stream);
	return CUDA_SUCCESS;
}

static CUresult begin_capture(const char *entry, CUstream stream, CUstreamCaptureMode mode)
{
	uintptr_t id = stream_id(stream, is_per_thread_entry(entry));
	CUresult rc;

	pthread_mutex_lock(&lock);
	if (id == (uintptr_t)CU_STREAM_LEGACY)
		rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	else if (capture_of(id) >= 0)
		rc = CUDA_ERROR_ILLEGAL_STATE;
	else
		rc = join_capture(id, ++last_capture, 1, mode);
	pthread_mutex_unlock(&lock);
	log_line("%s stream=%p mode=%d -> %d", entry, (void *)id, mode, rc);
	return rc;
}

EXPORT CUresult cuStreamBeginCapture(CUstream stream)
{
	return begin_capture(__func__, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream stream)
{
	return begin_capture(__func__, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode)
{
	return begin_capture(__func__, stream, mode);
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode)
{
	return begin_capture(__func__, stream, mode);
}

EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode *dependencies,
					    const CUgraphEdgeData *data, size_t ndependencies, CUstreamCaptureMode mode)
{
	(void)graph, (void)dependencies, (void)data, (void)ndependencies;
	return begin_capture(__func__, stream, mode);
}

EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode *dependencies,
						 const CUgraphEdgeData *data, size_t ndependencies,
						 CUstreamCaptureMode mode)
{
	(void)graph, (void)dependencies, (void)data, (void)ndependencies;
	return begin_capture(__func__, stream, mode);
}

static CUresult end_capture(const char *entry, CUstream stream, CUgraph *graph)
{
	uintptr_t id = stream_id(stream, is_per_thread_entry(entry));
	int i, invalidated = 0;
	CUresult rc;

	pthread_mutex_lock(&lock);
	i = capture_of(id);
	if (i < 0) {
		rc = CUDA_ERROR_ILLEGAL_STATE;
	} else if (!capturing[i].origin) {
		rc = CUDA_ERROR_INVALID_VALUE;	/* the driver's CUDA_ERROR_STREAM_CAPTURE_UNMATCHED */
	} else {
		int capture = capturing[i].capture;

		invalidated = capturing[i].invalidated;
		for (int j = 0; j < CAPTURING_MAX; j++)
			if (capturing[j].capture == capture)
				capturing[j].capture = 0;
		rc = invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	*graph = rc == CUDA_SUCCESS ? (CUgraph)(uintptr_t)0x30000 : NULL;
	log_line("%s stream=%p -> %d", entry, (void *)id, rc);
	return rc;
}

EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
	return end_capture(__func__, stream, graph);
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph *graph)
{
	return end_capture(__func__, stream, graph);
}

EXPORT CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
	uintptr_t id = stream_id(stream, 0);
	CUresult rc = CUDA_SUCCESS;
	int i;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	i = capture_of(id);
	if (id == (uintptr_t)CU_STREAM_LEGACY && any_capture(0))
		rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;	/* and the capture goes on */
	else
		*status = i < 0 ? CU_STREAM_CAPTURE_STATUS_NONE :
			  capturing[i].invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED :
			  CU_STREAM_CAPTURE_STATUS_ACTIVE;
	pthread_mutex_unlock(&lock);
	log_line("cuStreamIsCapturing stream=%p -> %d", (void *)id, rc);
	return rc;
}

struct CUevent_st {
	int capture;			/* recorded into this capture sequence; 0: none */
};

EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
	(void)flags;
	*event = calloc(1, sizeof(**event));
	return *event ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuEventRecord(CUevent event, CUstream stream)
{
	int i;

	pthread_mutex_lock(&lock);
	i = capture_of(stream_id(stream, 0));
	event->capture = i < 0 ? 0 : capturing[i].capture;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

/* Waiting on an event recorded in a capture joins the waiting stream to it. */
EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
	uintptr_t id = stream_id(stream, 0);
	CUresult rc = CUDA_SUCCESS;

	(void)flags;
	pthread_mutex_lock(&lock);
	if (event->capture && capture_of(id) < 0) {
		int origin = -1;

		for (int i = 0; i < CAPTURING_MAX && origin < 0; i++)
			if (capturing[i].capture == event->capture)
				origin = i;
		rc = join_capture(id, event->capture, 0, capturing[origin].mode);
	}
	pthread_mutex_unlock(&lock);
	log_line("cuStreamWaitEvent stream=%p capture=%d", (void *)id, event->capture);
	return rc;
}

/* ---- memory ----------------------------------------------------------- */

enum { ALLOCS_MAX = 4096 };
#define BLOCK (2ULL << 20)

static struct {
	CUdeviceptr base;
	size_t size;
	int host;
	unsigned char *resident;	/* managed: per 2 MiB block, on the GPU */
	unsigned char *populated;	/* ... ever given memory (on the GPU, then maybe the host) */
} allocs[ALLOCS_MAX];
static int allocs_used;		/* slots at or above are all free */
/* Below where Linux places mmap()s (top down from near 0x7fff_ffff_ffff, up
 * to 16 TiB lower with ASLR): host memory tracked at its own address
 * (cuMemHostAlloc) can never lie inside a device allocation. */
static CUdeviceptr next_device_address = 0x200000000000ULL;
static long resident_blocks, peak_resident_blocks;	/* managed, on the GPU */

/* Block @k of managed allocation @i moves on or off the GPU (under lock). */
static void set_resident(int i, size_t k, int on)
{
	if (allocs[i].resident[k] == on)
		return;
	allocs[i].resident[k] = (unsigned char)on;
	allocs[i].populated[k] = 1;
	resident_blocks += on ? 1 : -1;
	if (resident_blocks > peak_resident_blocks) {
		peak_resident_blocks = resident_blocks;
		log_line("fakegpu peak_resident_blocks=%ld", peak_resident_blocks);
	}
}

static int find(CUdeviceptr addr)
{
	for (int i = 0; i < allocs_used; i++)
		if (allocs[i].base && addr >= allocs[i].base && addr < allocs[i].base + allocs[i].size)
			return i;
	return -1;
}

static CUresult track(CUdeviceptr base, size_t size, int host, int managed)
{
	/* Two allocations in one range would make every lookup ambiguous. */
	for (int i = 0; i < allocs_used; i++)
		if (allocs[i].base && base < allocs[i].base + allocs[i].size && allocs[i].base < base + size) {
			log_line("fakegpu overlap base=0x%llx size=%zu with 0x%llx", base, size, allocs[i].base);
			return CUDA_ERROR_INVALID_VALUE;
		}
	for (int i = 0; i < ALLOCS_MAX; i++) {
		if (!allocs[i].base) {
			allocs[i].resident = managed ? calloc((size + BLOCK - 1) / BLOCK, 1) : NULL;
			allocs[i].populated = managed ? calloc((size + BLOCK - 1) / BLOCK, 1) : NULL;
			if (managed && (!allocs[i].resident || !allocs[i].populated)) {
				free(allocs[i].resident);
				free(allocs[i].populated);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			allocs[i].base = base;
			allocs[i].size = size;
			allocs[i].host = host;
			if (i >= allocs_used)
				allocs_used = i + 1;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void untrack(int i)
{
	for (size_t k = 0; allocs[i].resident && k * BLOCK < allocs[i].size; k++)
		set_resident(i, k, 0);
	free(allocs[i].resident);
	free(allocs[i].populated);
	allocs[i].resident = allocs[i].populated = NULL;
	allocs[i].base = 0;
}

/* Fake device memory: 2 MiB aligned, never dereferenced. */
static CUresult device_alloc(CUdeviceptr *dptr, size_t size, int managed)
{
	CUresult rc;

	pthread_mutex_lock(&lock);
	rc = allocation_allowed();
	if (rc == CUDA_SUCCESS) {
		*dptr = next_device_address;
		next_device_address += (size + BLOCK - 1) & ~(BLOCK - 1);
		rc = track(*dptr, size, 0, managed);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	FAIL_IF_ASKED();
	CUresult rc = device_alloc(dptr, size, 0);

	log_line("cuMemAlloc_v2 size=%zu -> 0x%llx", size, *dptr);
	return rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
				   unsigned int element)
{
	FAIL_IF_ASKED();
	if (element != 4 && element != 8 && element != 16) {
		log_line("cuMemAllocPitch_v2 width=%zu height=%zu element=%u -> invalid", width, height, element);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*pitch = (width + 511) & ~(size_t)511;
	CUresult rc = device_alloc(dptr, *pitch * height, 0);

	log_line("cuMemAllocPitch_v2 width=%zu height=%zu element=%u -> 0x%llx pitch=%zu", width, height,
		 element, *dptr, *pitch);
	return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	FAIL_IF_ASKED();
	CUresult rc = device_alloc(dptr, size, 1);

	log_line("cuMemAllocManaged size=%zu flags=%u -> 0x%llx", size, flags, *dptr);
	return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(dptr);
	if (i >= 0 && allocs[i].base == dptr && !allocs[i].host)
		untrack(i);
	else
		i = -1;
	pthread_mutex_unlock(&lock);
	log_line("cuMemFree_v2 dptr=0x%llx%s", dptr, i < 0 ? " -> invalid" : "");
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Stream-ordered allocations: device memory, like the default pool's. */
static CUresult alloc_async(const char *entry, CUdeviceptr *dptr, size_t size, CUstream stream)
{
	CUresult rc = device_alloc(dptr, size, 0);

	log_line("%s size=%zu stream=%p -> 0x%llx", entry, size, (void *)stream, *dptr);
	return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream)
{
	FAIL_IF_ASKED();
	return alloc_async(__func__, dptr, size, stream);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
	FAIL_IF_ASKED();
	return alloc_async(__func__, dptr, size, stream);
}

static CUresult free_async(const char *entry, CUdeviceptr dptr, CUstream stream)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(dptr);
	if (i >= 0 && allocs[i].base == dptr && !allocs[i].host && !allocs[i].resident)
		untrack(i);
	else
		i = -1;
	pthread_mutex_unlock(&lock);
	log_line("%s dptr=0x%llx stream=%p%s", entry, dptr, (void *)stream, i < 0 ? " -> invalid" : "");
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
	return free_async(__func__, dptr, stream);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
	return free_async(__func__, dptr, stream);
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(dptr);
	if (i >= 0) {
		*base = allocs[i].base;
		*size = allocs[i].size;
	}
	pthread_mutex_unlock(&lock);
	return i < 0 ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	CUresult rc;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	rc = allocation_allowed();
	pthread_mutex_unlock(&lock);
	if (rc != CUDA_SUCCESS) {
		log_line("cuMemHostAlloc size=%zu -> %d", size, rc);
		return rc;
	}
	*ptr = malloc(size);
	if (!*ptr)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(*ptr, 0xa5, size);	/* like the driver, no promise of zeroes */
	pthread_mutex_lock(&lock);
	rc = track((CUdeviceptr)(uintptr_t)*ptr, size, 1, 0);
	pthread_mutex_unlock(&lock);
	log_line("cuMemHostAlloc size=%zu flags=%u -> %p", size, flags, *ptr);
	return rc;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *ptr, unsigned int flags)
{
	FAIL_IF_ASKED();
	*dptr = (CUdeviceptr)(uintptr_t)ptr;	/* unified addressing */
	log_line("cuMemHostGetDevicePointer_v2 ptr=%p flags=%u -> 0x%llx", ptr, flags, *dptr);
	return CUDA_SUCCESS;
}

/* Forget the host memory at @ptr; whether it was known. */
static int host_untrack(void *ptr)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find((CUdeviceptr)(uintptr_t)ptr);
	if (i >= 0)
		untrack(i);
	pthread_mutex_unlock(&lock);
	return i >= 0;
}

EXPORT CUresult cuMemFreeHost(void *ptr)
{
	host_untrack(ptr);
	log_line("cuMemFreeHost ptr=%p", ptr);
	free(ptr);
	return CUDA_SUCCESS;
}

/* Page-locks host memory the caller owns: it becomes host memory the GPU maps. */
EXPORT CUresult cuMemHostRegister_v2(void *ptr, size_t size, unsigned int flags)
{
	CUresult rc;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	rc = find((CUdeviceptr)(uintptr_t)ptr) >= 0 ? CUDA_ERROR_INVALID_VALUE
						     : track((CUdeviceptr)(uintptr_t)ptr, size, 1, 0);
	pthread_mutex_unlock(&lock);
	log_line("cuMemHostRegister_v2 ptr=%p size=%zu flags=%u -> %d", ptr, size, flags, rc);
	return rc;
}

EXPORT CUresult cuMemHostUnregister(void *ptr)
{
	int known = host_untrack(ptr);

	log_line("cuMemHostUnregister ptr=%p", ptr);
	return known ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

enum { UM_HTOD = 1, UM_DTOH = 2, UM_GPU_PAGE_FAULT = 4, CAUSE_USER = 1, CAUSE_COHERENCE = 2, ACCESS_READ = 1 };

static int fault_events_per_touch(void)
{
	const char *n = getenv("FAKECUDA_FAULT_EVENTS");

	return n && atoi(n) > 0 ? atoi(n) : 1;
}

/* The blocks of managed allocation @i from @addr on, brought to the GPU
 * (under lock): a page fault for the first one missing, a transfer each. */
static void touch(int i, CUdeviceptr addr)
{
	CUdeviceptr end = allocs[i].base + allocs[i].size;
	int faulted = 0;

	for (CUdeviceptr b = addr & ~(BLOCK - 1); b < end; b += BLOCK) {
		size_t k = (b - allocs[i].base) / BLOCK;
		CUdeviceptr from = b > allocs[i].base ? b : allocs[i].base;

		if (allocs[i].resident[k])
			continue;
		/* A real GPU reports each faulting page: FAKECUDA_FAULT_EVENTS pages here. */
		if (!faulted++)
			for (int page = 0; page < fault_events_per_touch(); page++)
				unified_memory(UM_GPU_PAGE_FAULT, 1,
					       ((from > addr ? from : addr) & ~4095ULL) + page * 4096ULL, ACCESS_READ);
		unified_memory(UM_HTOD, (b + BLOCK < end ? b + BLOCK : end) - from, from, CAUSE_COHERENCE);
		set_resident(i, k, 1);
	}
}

/* The managed allocation [addr, addr + size) lies in, or -1 (under lock). */
static int managed_holding(CUdeviceptr addr, size_t size)
{
	int i = find(addr);

	return i >= 0 && allocs[i].resident && size && addr + size <= allocs[i].base + allocs[i].size ? i : -1;
}

/* COPY_IN: a copy writes the blocks (cuMemcpyHtoD). */
enum move { TO_GPU, TO_HOST, DISCARD, COPY_IN };

/* Every block of [addr, addr + size) in allocation @i moves (under lock);
 * prefetches report their transfers, as the driver does, cause "user".  A
 * copy fills a block never given memory on the GPU itself, with nothing to
 * report (no fault, no migration); one on the host migrates in first. */
static void move(int i, CUdeviceptr addr, size_t size, enum move how)
{
	int to_gpu = how == TO_GPU || how == COPY_IN;

	for (size_t k = (addr - allocs[i].base) / BLOCK; k * BLOCK < addr + size - allocs[i].base; k++) {
		CUdeviceptr b = allocs[i].base + k * BLOCK, end = allocs[i].base + allocs[i].size;
		size_t bytes = (b + BLOCK < end ? b + BLOCK : end) - b;

		if (allocs[i].resident[k] == to_gpu)
			continue;
		if (how == COPY_IN ? allocs[i].populated[k] : how != DISCARD)
			unified_memory(to_gpu ? UM_HTOD : UM_DTOH, bytes, b,
				       how == COPY_IN ? CAUSE_COHERENCE : CAUSE_USER);
		set_resident(i, k, to_gpu);
	}
}

/* Every managed block resident in [addr, addr + size) back to the host
 * (under lock): a prefetch to the CPU may span allocations. */
static void evict(CUdeviceptr addr, size_t size)
{
	for (int i = 0; i < allocs_used; i++) {
		CUdeviceptr from = allocs[i].base > addr ? allocs[i].base : addr;
		CUdeviceptr to = allocs[i].base + allocs[i].size < addr + size ? allocs[i].base + allocs[i].size : addr + size;

		if (allocs[i].resident && from < to)
			move(i, from, to - from, TO_HOST);
	}
}

/* A copy into managed memory moves it as move() says; into device memory
 * there is nothing to model. */
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t size)
{
	int i;

	FAIL_IF_ASKED();
	(void)src;
	pthread_mutex_lock(&lock);
	if ((i = managed_holding(dst, size)) >= 0)
		move(i, dst, size, COPY_IN);
	pthread_mutex_unlock(&lock);
	log_line("cuMemcpyHtoD dst=0x%llx size=%zu", dst, size);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr addr, size_t size, CUdevice device, CUstream stream)
{
	int i = 0;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	if (device == CU_DEVICE_CPU)
		evict(addr, size);
	else if ((i = managed_holding(addr, size)) >= 0)
		move(i, addr, size, TO_GPU);
	pthread_mutex_unlock(&lock);
	log_line("cuMemPrefetchAsync addr=0x%llx size=%zu device=%d stream=%p%s", addr, size, device, (void *)stream,
		 i < 0 ? " -> invalid" : "");
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* "0x..+N,0x..+N" */
static void format_ranges(CUdeviceptr *ptrs, size_t *sizes, size_t count, char *out, size_t room)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < count && used + 48 < room; i++)
		used += (size_t)snprintf(out + used, room - used, "%s0x%llx+%zu", i ? "," : "", ptrs[i], sizes[i]);
}

/* The checks the driver documents for the batch calls. */
static int batch_valid(CUdeviceptr *ptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream stream)
{
	if (!ptrs || !sizes || !count || flags || !stream || stream == CU_STREAM_LEGACY)
		return 0;
	for (size_t i = 0; i < count; i++)
		if (managed_holding(ptrs[i], sizes[i]) < 0)
			return 0;
	return 1;
}

EXPORT CUresult cuMemPrefetchBatchAsync(CUdeviceptr *ptrs, size_t *sizes, size_t count, CUmemLocation *locations,
					size_t *location_starts, size_t nlocations, unsigned long long flags,
					CUstream stream)
{
	const char *slow_to_host = listed("FAKECUDA_SLOW", "cuMemPrefetchBatchAsync@host");
	char ranges[6144];
	int ok;

	FAIL_IF_ASKED();
	if (slow_to_host && locations && locations[0].type == CU_MEM_LOCATION_TYPE_HOST)
		sleep_us(atol(slow_to_host));
	pthread_mutex_lock(&lock);
	ok = batch_valid(ptrs, sizes, count, flags, stream) && locations && location_starts && nlocations &&
	     nlocations <= count && location_starts[0] == 0;
	for (size_t l = 1; ok && l < nlocations; l++)
		ok = location_starts[l] > location_starts[l - 1] && location_starts[l] < count;
	for (size_t l = 0, i = 0; ok && i < count; i++) {
		if (l + 1 < nlocations && i == location_starts[l + 1])
			l++;
		move(find(ptrs[i]), ptrs[i], sizes[i], locations[l].type == CU_MEM_LOCATION_TYPE_HOST ? TO_HOST : TO_GPU);
	}
	pthread_mutex_unlock(&lock);
	format_ranges(ptrs, sizes, count, ranges, sizeof(ranges));
	log_line("cuMemPrefetchBatchAsync stream=%p count=%zu location=%s ranges=%s%s", (void *)stream, count,
		 ok && locations[0].type == CU_MEM_LOCATION_TYPE_HOST ? "host" : "device", ranges, ok ? "" : " -> invalid");
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemDiscardBatchAsync(CUdeviceptr *ptrs, size_t *sizes, size_t count, unsigned long long flags,
				       CUstream stream)
{
	char ranges[6144];
	int ok;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	ok = batch_valid(ptrs, sizes, count, flags, stream);
	for (size_t i = 0; ok && i < count; i++)
		move(find(ptrs[i]), ptrs[i], sizes[i], DISCARD);
	pthread_mutex_unlock(&lock);
	format_ranges(ptrs, sizes, count, ranges, sizeof(ranges));
	log_line("cuMemDiscardBatchAsync stream=%p count=%zu ranges=%s%s", (void *)stream, count, ranges,
		 ok ? "" : " -> invalid");
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	const char *free_env = getenv("FAKECUDA_MEM_FREE");

	FAIL_IF_ASKED();
	*total = 80ULL << 30;
	*free_bytes = free_env ? strtoull(free_env, NULL, 0) : 64ULL << 30;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	int i, captured;
	CUresult rc;

	FAIL_IF_ASKED();
	driver_call();
	pthread_mutex_lock(&lock);
	i = find(addr);
	rc = enqueue_target(stream_id(stream, 0), &captured);
	pthread_mutex_unlock(&lock);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (i < 0 || !allocs[i].host || addr + 8 > allocs[i].base + allocs[i].size || addr % 8)
		return CUDA_ERROR_INVALID_VALUE;
	if (!captured)
		*(volatile cuuint64_t *)(uintptr_t)addr = value;
	log_line("cuStreamWriteValue64_v2 stream=%p offset=%llu value=0x%llx flags=%u captured=%d", (void *)stream,
		 addr - allocs[i].base, (unsigned long long)value, flags, captured);
	return CUDA_SUCCESS;
}

/* ---- launches --------------------------------------------------------- */

/* The argument bytes as hex, parameter by parameter ("-" between them). */
static void format_args(const CUfunction f, void **params, void **extra, char *out, size_t room)
{
	const char *buffer = NULL;
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2)
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buffer = extra[i + 1];
	for (int i = 0; i < f->nparams && used + 2 * f->size[i] + 2 < room; i++) {
		const unsigned char *p = params ? params[i] : buffer ? (const unsigned char *)buffer + f->offset[i] : NULL;

		if (!p)
			break;
		if (i)
			out[used++] = '-';
		for (size_t b = 0; b < f->size[i]; b++)
			used += (size_t)snprintf(out + used, room - used, "%02x", p[b]);
	}
}

/* The pretend GPU runs @f: it touches what its pointer words point to. */
static void run_kernel(CUfunction f, void **params, void **extra, const unsigned int *grid,
		       const unsigned int *block, uintptr_t stream, uint32_t correlation)
{
	const char *buffer = NULL;
	uint64_t start = fakecuda_clock();

	for (int i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2)
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			buffer = extra[i + 1];
	pthread_mutex_lock(&lock);
	for (int p = 0; p < f->nparams; p++) {
		const char *arg = params ? params[p] : buffer ? buffer + f->offset[p] : NULL;

		for (size_t w = (8 - f->offset[p] % 8) % 8; arg && w + 8 <= f->size[p]; w += 8) {
			CUdeviceptr value;
			int i;

			memcpy(&value, arg + w, 8);
			i = find(value);
			if (i >= 0 && allocs[i].resident)
				touch(i, value);
		}
	}
	pthread_mutex_unlock(&lock);
	uint64_t end = fakecuda_clock();

	EACH_OBSERVER(o)
		if (o->kernel)
			o->kernel(f->name, grid, block, (uint32_t)stream, correlation, start, end);
}

static CUresult launch(const char *entry, CUfunction f, const unsigned int *grid, const unsigned int *block,
		       unsigned int shared, CUstream stream, void **params, void **extra)
{
	uintptr_t id = stream_id(stream, is_per_thread_entry(entry));
	char args[4096];
	CUresult rc = injected(entry);
	uint32_t correlation;
	int captured;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	correlation = driver_call();
	pthread_mutex_lock(&lock);
	rc = enqueue_target(id, &captured);
	pthread_mutex_unlock(&lock);
	if (rc != CUDA_SUCCESS)
		return rc;
	format_args(f, params, extra, args, sizeof(args));
	log_line("%s f=%s grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%p args=%s captured=%d", entry, f->name,
		 grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, (void *)stream, args, captured);
	if (!captured) {
		run_kernel(f, params, extra, grid, block, id, correlation);
		if (getenv("FAKECUDA_KERNEL_US"))
			sleep_us(atol(getenv("FAKECUDA_KERNEL_US")));
	}
	return CUDA_SUCCESS;
}

#define DEFINE_LAUNCH_KERNEL(name)                                                                  \
	EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,       \
			     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, \
			     CUstream stream, void **params, void **extra)                          \
	{                                                                                           \
		const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };           \
		return launch(#name, f, grid, block, shared, stream, params, extra);               \
	}
DEFINE_LAUNCH_KERNEL(cuLaunchKernel)
DEFINE_LAUNCH_KERNEL(cuLaunchKernel_ptsz)

#define DEFINE_LAUNCH_KERNEL_EX(name)                                                                 \
	EXPORT CUresult name(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)      \
	{                                                                                             \
		const unsigned int grid[3] = { c->gridDimX, c->gridDimY, c->gridDimZ };             \
		const unsigned int block[3] = { c->blockDimX, c->blockDimY, c->blockDimZ };         \
		return launch(#name, f, grid, block, c->sharedMemBytes, c->hStream, params, extra); \
	}
DEFINE_LAUNCH_KERNEL_EX(cuLaunchKernelEx)
DEFINE_LAUNCH_KERNEL_EX(cuLaunchKernelEx_ptsz)

#define DEFINE_LAUNCH_COOPERATIVE(name)                                                             \
	EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,       \
			     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, \
			     CUstream stream, void **params)                                        \
	{                                                                                           \
		const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };           \
		return launch(#name, f, grid, block, shared, stream, params, NULL);                \
	}
DEFINE_LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel)
DEFINE_LAUNCH_COOPERATIVE(cuLaunchCooperativeKernel_ptsz)

/* A launch entry point of a CUDA version libdeepum does not know: handed out
 * by cuGetProcAddress for version 99000 and above, never exported. */
static CUresult launch_kernel_future(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
				     CUstream stream, void **params, void **extra)
{
	const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };

	return launch("cuLaunchKernel_future", f, grid, block, shared, stream, params, extra);
}

EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data)
{
	FAIL_IF_ASKED();
	log_line("cuLaunchHostFunc stream=%p data=%p", (void *)stream, data);
	fn(data);	/* the stream is always idle here: run it now */
	return CUDA_SUCCESS;
}

/* ---- context ---------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags)
{
	const char *uvm = getenv("FAKECUDA_UVM_DEVICE");
	static int uvm_fd = -1;

	FAIL_IF_ASKED();
	if (uvm && uvm_fd < 0)
		uvm_fd = open(uvm, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	log_line("cuInit flags=%u", flags);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	*dev = ordinal;
	return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	(void)dev;
	*ctx = (CUcontext)0x20000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	(void)ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	*dev = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	*ctx = NULL;	/* one pretend context, whose streams need no naming */
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	log_line("cuCtxSynchronize");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
	log_line("cuStreamSynchronize stream=%p", (void *)stream);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	*least = 0;
	*greatest = -5;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned int flags, int priority)
{
	FAIL_IF_ASKED();
	CUresult rc = cuStreamCreate(stream, flags);

	log_line("cuStreamCreateWithPriority flags=%u priority=%d -> %p", flags, priority, (void *)*stream);
	return rc;
}

EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
	(void)dev;
	if (attr != CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)
		return CUDA_ERROR_INVALID_VALUE;
	*value = 32;
	return CUDA_SUCCESS;
}

/* ---- entry points ----------------------------------------------------- */

static const struct {
	const char *api;
	int since;			/* first CUDA version that gets @legacy */
	void *legacy;
	void *per_thread;		/* NULL: same as @legacy */
} procs[] = {
	{ "cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2, NULL },
	{ "cuGetProcAddress", 11030, (void *)cuGetProcAddress, NULL },
	{ "cuLaunchKernel", 99000, (void *)launch_kernel_future, NULL },
	{ "cuLaunchKernel", 4000, (void *)cuLaunchKernel, (void *)cuLaunchKernel_ptsz },
	{ "cuLaunchKernelEx", 11060, (void *)cuLaunchKernelEx, (void *)cuLaunchKernelEx_ptsz },
	{ "cuLaunchCooperativeKernel", 9000, (void *)cuLaunchCooperativeKernel,
	  (void *)cuLaunchCooperativeKernel_ptsz },
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc_v2, NULL },
	{ "cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2, NULL },
	{ "cuMemFree", 3020, (void *)cuMemFree_v2, NULL },
	{ "cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz },
	{ "cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz },
	{ "cuInit", 2000, (void *)cuInit, NULL },
	{ "cuDeviceGet", 2000, (void *)cuDeviceGet, NULL },
	{ "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain, NULL },
	{ "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent, NULL },
	{ "cuModuleLoadData", 2000, (void *)cuModuleLoadData, NULL },
	{ "cuModuleGetFunction", 2000, (void *)cuModuleGetFunction, NULL },
	{ "cuStreamCreate", 2000, (void *)cuStreamCreate, NULL },
	{ "cuCtxSynchronize", 2000, (void *)cuCtxSynchronize, NULL },
	{ "cuStreamBeginCapture", 10010, (void *)cuStreamBeginCapture_v2, (void *)cuStreamBeginCapture_v2_ptsz },
	{ "cuStreamBeginCapture", 10000, (void *)cuStreamBeginCapture, (void *)cuStreamBeginCapture_ptsz },
	{ "cuStreamBeginCaptureToGraph", 12030, (void *)cuStreamBeginCaptureToGraph,
	  (void *)cuStreamBeginCaptureToGraph_ptsz },
	{ "cuStreamEndCapture", 10000, (void *)cuStreamEndCapture, (void *)cuStreamEndCapture_ptsz },
	{ "cuEventCreate", 2000, (void *)cuEventCreate, NULL },
	{ "cuEventRecord", 2000, (void *)cuEventRecord, NULL },
	{ "cuStreamWaitEvent", 3020, (void *)cuStreamWaitEvent, NULL },
	{ "cuMemcpyHtoD", 3020, (void *)cuMemcpyHtoD_v2, NULL },
};

static CUresult get_proc(const char *entry, const char *symbol, void **pfn, int version, cuuint64_t flags,
			 CUdriverProcAddressQueryResult *status)
{
	CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

	log_line("%s symbol=%s version=%d flags=%llu", entry, symbol, version, (unsigned long long)flags);
	*pfn = NULL;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].api, symbol) != 0)
			continue;
		if (version < procs[i].since) {
			found = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
			continue;
		}
		*pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && procs[i].per_thread ?
			procs[i].per_thread : procs[i].legacy;
		found = CU_GET_PROC_ADDRESS_SUCCESS;
		break;
	}
	if (status)
		*status = found;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return get_proc("cuGetProcAddress", symbol, pfn, version, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	return get_proc("cuGetProcAddress_v2", symbol, pfn, version, flags, status);
}
