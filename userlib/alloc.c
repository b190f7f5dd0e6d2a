// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Device allocations: managed redirection, the table of live managed
 * allocations, and free reporting.
 *
 * With DEEPUM_MANAGED=1 (the default under `deepumctl run`), cuMemAlloc and
 * cuMemAllocPitch hand out managed memory (cuMemAllocManaged, attached
 * globally): the same kind of pointer to every kernel and copy, but pages the
 * driver can migrate, which is what lets deepum prefetch and evict it.  If
 * the managed allocation fails, the program gets the device allocation it
 * asked for.  Every allocation, managed or not, widens the address window
 * that tells pointer arguments from scalars (launch.c).  The managed ones are
 * kept in a table (the tracer's flushes to the host, the engine's ranges),
 * and every free is reported before the real free, so dead data is never
 * migrated again.  Stream-ordered allocations (cuMemAllocAsync) come from
 * managed segments too, through pool.c; cuMemCreate is left alone
 * (userlib/README.md says why).
 *
 * The GPU's safety rule: managed memory in use never exceeds
 * DEEPUM_MANAGED_LIMIT, by default 80% of the memory the GPU had free at the
 * first managed allocation, so that it can all be resident at once and the
 * driver never has to oversubscribe the GPU; allocations past it get the
 * device memory they asked for.
 */
#include <pthread.h>
#include <stdlib.h>

#include "deepum_user.h"

struct range {
	u64 base;
	u64 size;
	bool swept;	/* handed to the engine's sweep (managed_ranges_unswept) */
};

/* Allocations are rare (PyTorch's caching allocator asks for segments), so
 * a locked array is enough. */
static pthread_mutex_t managed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct range *managed;
static size_t managed_count, managed_room;
static u64 managed_bytes;		/* live, under managed_lock */
static u64 managed_limit;		/* 0 until the first managed allocation */

static void managed_add(u64 base, u64 size)
{
	pthread_mutex_lock(&managed_lock);
	if (managed_count == managed_room) {
		size_t room = managed_room ? 2 * managed_room : 256;
		struct range *grown = realloc(managed, room * sizeof(*grown));

		if (!grown) {
			pthread_mutex_unlock(&managed_lock);
			deepum_disable("cannot grow the table of managed allocations; "
				       "CUDA calls pass straight through");
			return;
		}
		managed = grown;
		managed_room = room;
	}
	managed[managed_count++] = (struct range){ base, size, false };
	managed_bytes += size;
	pthread_mutex_unlock(&managed_lock);
}

/* Whether @base started a live managed allocation (now forgotten). */
static bool managed_remove(u64 base)
{
	bool found = false;

	pthread_mutex_lock(&managed_lock);
	for (size_t i = 0; i < managed_count && !found; i++) {
		if (managed[i].base == base) {
			managed_bytes -= managed[i].size;
			managed[i] = managed[--managed_count];
			found = true;
		}
	}
	pthread_mutex_unlock(&managed_lock);
	return found;
}

u64 managed_clip(u64 addr, u64 len, range_fn fn, void *arg)
{
	u64 covered = 0;

	pthread_mutex_lock(&managed_lock);
	for (size_t i = 0; i < managed_count; i++) {
		u64 from = managed[i].base > addr ? managed[i].base : addr;
		u64 to = managed[i].base + managed[i].size < addr + len ? managed[i].base + managed[i].size : addr + len;

		if (from < to) {
			fn(from, to - from, arg);
			covered += to - from;
		}
	}
	pthread_mutex_unlock(&managed_lock);
	return len - covered;
}

/* Whether @size more bytes of managed memory keep within the limit, which
 * is set at the first managed allocation (a context is current then). */
static bool within_limit(size_t size)
{
	size_t free_bytes = 0, total = 0;
	bool known, fits;

	pthread_mutex_lock(&managed_lock);
	known = managed_limit != 0;
	pthread_mutex_unlock(&managed_lock);
	/* The driver is asked outside the lock, which the engine takes every round. */
	if (!known && !deepum.managed_limit && REAL(cuMemGetInfo_v2)(&free_bytes, &total) != CUDA_SUCCESS)
		return false;
	pthread_mutex_lock(&managed_lock);
	if (!managed_limit)
		managed_limit = deepum.managed_limit ? deepum.managed_limit : free_bytes / 5 * 4;
	fits = managed_bytes + size <= managed_limit;
	pthread_mutex_unlock(&managed_lock);
	return fits;
}

void managed_ranges_each(range_fn fn, void *arg)
{
	pthread_mutex_lock(&managed_lock);
	for (size_t i = 0; i < managed_count; i++)
		fn(managed[i].base, managed[i].size, arg);
	pthread_mutex_unlock(&managed_lock);
}

u32 managed_ranges_unswept(u64 *base, u64 *size, u32 n)
{
	u32 found = 0;

	pthread_mutex_lock(&managed_lock);
	for (size_t i = 0; i < managed_count && found < n; i++) {
		if (managed[i].swept)
			continue;
		managed[i].swept = true;
		base[found] = managed[i].base;
		size[found++] = managed[i].size;
	}
	pthread_mutex_unlock(&managed_lock);
	return found;
}

/* Failures the program's own allocation meets the same way: running out of
 * memory, or allocating while a graph capture forbids it. */
static bool programs_failure(CUresult rc)
{
	return rc == CUDA_ERROR_OUT_OF_MEMORY ||
	       (rc >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && rc <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

bool managed_alloc(CUdeviceptr *dptr, size_t size)
{
	CUresult rc;

	if (!within_limit(size)) {
		COUNT(allocs_over_limit, 1);
		COUNT(allocs_fallback, 1);
		return false;
	}
	rc = REAL(cuMemAllocManaged)(dptr, size, CU_MEM_ATTACH_GLOBAL);
	if (rc != CUDA_SUCCESS) {
		COUNT(allocs_fallback, 1);
		/* The program's failures are its business (the real allocation
		 * that follows fails as it would have); anything else is ours. */
		if (!programs_failure(rc))
			deepum_disable("cuMemAllocManaged failed; CUDA calls pass straight through");
		return false;
	}
	COUNT(allocs_redirected, 1);
	COUNT(bytes_redirected, size);
	launch_note_allocation(*dptr, size);
	managed_add(*dptr, size);
	tracer_alloc(*dptr, size);
	return true;
}

CUresult on_mem_alloc(enum deepum_entry which, cuMemAlloc_v2_fn real, CUdeviceptr *dptr, size_t size)
{
	CUresult rc;

	(void)which;
	if (deepum.managed && dptr && size && managed_alloc(dptr, size))
		return CUDA_SUCCESS;
	rc = real(dptr, size);
	if (rc == CUDA_SUCCESS)
		launch_note_allocation(*dptr, size);
	return rc;
}

/* Pitched rows are aligned for textures, the strictest use a pitch has;
 * 0 when the device cannot say (the driver then allocates as asked). */
static size_t pitch_alignment(void)
{
	CUdevice dev;
	int align = 0;

	if (REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS ||
	    REAL(cuDeviceGetAttribute)(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev) != CUDA_SUCCESS ||
	    align <= 0 || (align & (align - 1)))
		return 0;
	return (size_t)align;
}

static CUresult device_alloc_pitch(cuMemAllocPitch_v2_fn real, CUdeviceptr *dptr, size_t *pitch, size_t width,
				   size_t height, unsigned int element)
{
	CUresult rc = real(dptr, pitch, width, height, element);

	if (rc == CUDA_SUCCESS)
		launch_note_allocation(*dptr, *pitch * height);
	return rc;
}

CUresult on_mem_alloc_pitch(enum deepum_entry which, cuMemAllocPitch_v2_fn real, CUdeviceptr *dptr,
			    size_t *pitch, size_t width, size_t height, unsigned int element)
{
	size_t align, row;

	(void)which;
	/* Arguments the driver would refuse go to the driver, for its error. */
	if (!deepum.managed || !dptr || !pitch || !width || !height ||
	    (element != 4 && element != 8 && element != 16))
		return device_alloc_pitch(real, dptr, pitch, width, height, element);
	align = pitch_alignment();
	if (!align || width > SIZE_MAX - align)
		return device_alloc_pitch(real, dptr, pitch, width, height, element);
	row = (width + align - 1) & ~(align - 1);
	if (height > SIZE_MAX / row || !managed_alloc(dptr, row * height))
		return device_alloc_pitch(real, dptr, pitch, width, height, element);
	*pitch = row;
	return CUDA_SUCCESS;
}

/* [@base, @base + @size), an allocation, is about to be freed. */
static void forget(u64 base, u64 size)
{
	bool ours = managed_remove(base);

	/* Out of the table first: the engine plans nothing on it now. */
	if (ours)
		engine_release(base, size);
	delivery_report_free(base, size);
	if (ours)
		tracer_free(base, size);
}

void managed_free(CUdeviceptr base, size_t size)
{
	forget(base, size);
	REAL(cuMemFree_v2)(base);
}

/* Hooked even while deepum is off: pool.c's allocations are not the driver's. */
CUresult on_mem_free(enum deepum_entry which, cuMemFree_v2_fn real, CUdeviceptr dptr)
{
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult rc;

	(void)which;
	if (dptr && pool_free_now(dptr, &rc))
		return rc;
	if (!deepum_active() || !dptr)
		return real(dptr);
	/* The driver knows the allocation's extent; a pointer it does not know
	 * (or not an allocation's start) fails the real free too. */
	if (REAL(cuMemGetAddressRange_v2)(&base, &size, dptr) == CUDA_SUCCESS && base == dptr)
		forget(base, size);
	else
		COUNT(frees_unknown, 1);
	return real(dptr);
}

int report_free_ranges(const u64 *addr, const u64 *len, u32 n, CUstream stream)
{
	if (!deepum_active())
		return -1;
	if (engine_wanted())
		return engine_report_free(addr, len, n, stream);
	if (deepum.device_fd < 0)
		return -1;
	for (u32 i = 0; i < n; i++)
		delivery_report_free(addr[i], len[i]);
	return 0;
}

/*
 * Called by the program (pydeepum.torch.report_free(), or ctypes through the
 * global scope): [@addr, @addr + @len) holds dead data from this point of
 * @stream on (a tensor its allocator freed but keeps).  Returns 0, or -1
 * when nothing listens (no engine or module).
 */
DEEPUM_EXPORT int deepum_report_free(unsigned long long addr, unsigned long long len, void *stream)
{
	u64 a = addr, l = len;

	if (addr + len < addr)
		return -1;
	return report_free_ranges(&a, &l, 1, (CUstream)stream);
}
