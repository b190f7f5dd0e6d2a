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
 * Knobs: FAKECUDA_FAIL=name[=code],...   make those entry points fail
 *        FAKECUDA_CAPTURING=0x...        a stream that reports capture in progress
 * Device memory is fake (addresses from a counter, never dereferenced); host
 * allocations are real, and cuStreamWriteValue64 stores into them.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../userlib/cuda_abi.h"

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

/* CUDA_SUCCESS, or the failure FAKECUDA_FAIL asks of @name (logged). */
static CUresult injected(const char *name)
{
	const char *list = getenv("FAKECUDA_FAIL");
	size_t n = strlen(name);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (strncmp(p, name, n) != 0 || (p[n] != ',' && p[n] != '=' && p[n] != '\0'))
			continue;
		CUresult rc = p[n] == '=' ? (CUresult)atoi(p + n + 1) : CUDA_ERROR_UNKNOWN;

		log_line("%s -> fail %d", name, rc);
		return rc;
	}
	return CUDA_SUCCESS;
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
};

static struct CUfunc_st funcs[FUNCS_MAX];
static int nfuncs;

static void layout(struct CUfunc_st *fn, int nparams, const size_t *size)
{
	size_t at = 0;

	fn->nparams = nparams;
	for (int i = 0; i < nparams; i++) {
		at = (at + size[i] - 1) / size[i] * size[i];	/* natural alignment */
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

static CUresult launch(const char *entry, CUfunction f, const unsigned int *grid, const unsigned int *block,
		       unsigned int shared, CUstream stream, void **params, void **extra)
{
	char args[4096];
	CUresult rc = injected(entry);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	format_args(f, params, extra, args, sizeof(args));
	log_line("%s f=%s grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%p args=%s", entry, f->name,
		 grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, (void *)stream, args);
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

/* ---- streams ---------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	static unsigned int created;

	pthread_mutex_lock(&lock);
	*stream = (CUstream)(uintptr_t)(0x1000 + 0x10 * ++created);
	pthread_mutex_unlock(&lock);
	log_line("cuStreamCreate flags=%u -> %p", flags, (void *)*stream);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
	const char *capturing = getenv("FAKECUDA_CAPTURING");

	FAIL_IF_ASKED();
	*status = capturing && strtoull(capturing, NULL, 0) == (uintptr_t)stream ?
		CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data)
{
	FAIL_IF_ASKED();
	log_line("cuLaunchHostFunc stream=%p data=%p", (void *)stream, data);
	fn(data);	/* the stream is always idle here: run it now */
	return CUDA_SUCCESS;
}

/* ---- memory ----------------------------------------------------------- */

enum { ALLOCS_MAX = 4096 };

static struct {
	CUdeviceptr base;
	size_t size;
	int host;
} allocs[ALLOCS_MAX];
static int allocs_used;		/* slots at or above are all free */
static CUdeviceptr next_device_address = 0x7f0000000000ULL;

static CUresult track(CUdeviceptr base, size_t size, int host)
{
	for (int i = 0; i < ALLOCS_MAX; i++) {
		if (!allocs[i].base) {
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

static int find(CUdeviceptr addr)
{
	for (int i = 0; i < allocs_used; i++)
		if (allocs[i].base && addr >= allocs[i].base && addr < allocs[i].base + allocs[i].size)
			return i;
	return -1;
}

/* Fake device memory: 2 MiB aligned, never dereferenced. */
static CUresult device_alloc(CUdeviceptr *dptr, size_t size)
{
	CUresult rc;

	pthread_mutex_lock(&lock);
	*dptr = next_device_address;
	next_device_address += (size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	rc = track(*dptr, size, 0);
	pthread_mutex_unlock(&lock);
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
	FAIL_IF_ASKED();
	CUresult rc = device_alloc(dptr, size);

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
	CUresult rc = device_alloc(dptr, *pitch * height);

	log_line("cuMemAllocPitch_v2 width=%zu height=%zu element=%u -> 0x%llx pitch=%zu", width, height,
		 element, *dptr, *pitch);
	return rc;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
	FAIL_IF_ASKED();
	CUresult rc = device_alloc(dptr, size);

	log_line("cuMemAllocManaged size=%zu flags=%u -> 0x%llx", size, flags, *dptr);
	return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(dptr);
	if (i >= 0 && allocs[i].base == dptr && !allocs[i].host)
		allocs[i].base = 0;
	else
		i = -1;
	pthread_mutex_unlock(&lock);
	log_line("cuMemFree_v2 dptr=0x%llx%s", dptr, i < 0 ? " -> invalid" : "");
	return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
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
	FAIL_IF_ASKED();
	*ptr = malloc(size);
	if (!*ptr)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memset(*ptr, 0xa5, size);	/* like the driver, no promise of zeroes */
	pthread_mutex_lock(&lock);
	CUresult rc = track((CUdeviceptr)(uintptr_t)*ptr, size, 1);
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

EXPORT CUresult cuMemFreeHost(void *ptr)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find((CUdeviceptr)(uintptr_t)ptr);
	if (i >= 0)
		allocs[i].base = 0;
	pthread_mutex_unlock(&lock);
	log_line("cuMemFreeHost ptr=%p", ptr);
	free(ptr);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
	int i;

	FAIL_IF_ASKED();
	pthread_mutex_lock(&lock);
	i = find(addr);
	pthread_mutex_unlock(&lock);
	if (i < 0 || !allocs[i].host || addr + 8 > allocs[i].base + allocs[i].size || addr % 8)
		return CUDA_ERROR_INVALID_VALUE;
	*(volatile cuuint64_t *)(uintptr_t)addr = value;
	log_line("cuStreamWriteValue64_v2 stream=%p offset=%llu value=0x%llx flags=%u", (void *)stream,
		 addr - allocs[i].base, (unsigned long long)value, flags);
	return CUDA_SUCCESS;
}

/* ---- context ---------------------------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags)
{
	FAIL_IF_ASKED();
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

EXPORT CUresult cuCtxSynchronize(void)
{
	return CUDA_SUCCESS;
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
	{ "cuInit", 2000, (void *)cuInit, NULL },
	{ "cuDeviceGet", 2000, (void *)cuDeviceGet, NULL },
	{ "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain, NULL },
	{ "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent, NULL },
	{ "cuModuleLoadData", 2000, (void *)cuModuleLoadData, NULL },
	{ "cuModuleGetFunction", 2000, (void *)cuModuleGetFunction, NULL },
	{ "cuStreamCreate", 2000, (void *)cuStreamCreate, NULL },
	{ "cuCtxSynchronize", 2000, (void *)cuCtxSynchronize, NULL },
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
