// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Device allocations: managed redirection and free reporting.
 *
 * With DEEPUM_MANAGED=1 (the default under `deepumctl run`), cuMemAlloc and
 * cuMemAllocPitch hand out managed memory (cuMemAllocManaged, attached
 * globally): the same kind of pointer to every kernel and copy, but pages the
 * driver can migrate, which is what lets deepum prefetch and evict it.  If
 * the managed allocation fails, the program gets the device allocation it
 * asked for.  Every free is reported before the real free, so dead data is
 * never migrated again.  Pools (cuMemAllocAsync) and cuMemCreate are left
 * alone: userlib/README.md says why.
 */
#include "deepum_user.h"

static bool allocate_managed(CUdeviceptr *dptr, size_t size)
{
	CUresult rc = REAL(cuMemAllocManaged)(dptr, size, CU_MEM_ATTACH_GLOBAL);

	if (rc != CUDA_SUCCESS) {
		COUNT(allocs_fallback, 1);
		/* Running out of memory is the program's business; anything else is ours. */
		if (rc != CUDA_ERROR_OUT_OF_MEMORY)
			deepum_disable("cuMemAllocManaged failed; CUDA calls pass straight through");
		return false;
	}
	COUNT(allocs_redirected, 1);
	COUNT(bytes_redirected, size);
	ring_push(DEEPUM_REC_ALLOC, *dptr, size, 0, 0);
	return true;
}

CUresult on_mem_alloc(enum deepum_entry which, cuMemAlloc_v2_fn real, CUdeviceptr *dptr, size_t size)
{
	(void)which;
	if (deepum.managed && dptr && size && allocate_managed(dptr, size))
		return CUDA_SUCCESS;
	return real(dptr, size);
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

CUresult on_mem_alloc_pitch(enum deepum_entry which, cuMemAllocPitch_v2_fn real, CUdeviceptr *dptr,
			    size_t *pitch, size_t width, size_t height, unsigned int element)
{
	size_t align, row;

	(void)which;
	/* Arguments the driver would refuse go to the driver, for its error. */
	if (!deepum.managed || !dptr || !pitch || !width || !height ||
	    (element != 4 && element != 8 && element != 16))
		return real(dptr, pitch, width, height, element);
	align = pitch_alignment();
	if (!align || width > SIZE_MAX - align)
		return real(dptr, pitch, width, height, element);
	row = (width + align - 1) & ~(align - 1);
	if (height > SIZE_MAX / row || !allocate_managed(dptr, row * height))
		return real(dptr, pitch, width, height, element);
	*pitch = row;
	return CUDA_SUCCESS;
}

CUresult on_mem_free(enum deepum_entry which, cuMemFree_v2_fn real, CUdeviceptr dptr)
{
	CUdeviceptr base = 0;
	size_t size = 0;

	(void)which;
	if (dptr) {
		/* The driver knows the allocation's extent; a pointer it does not
		 * know (or not an allocation's start) fails the real free too. */
		if (REAL(cuMemGetAddressRange_v2)(&base, &size, dptr) == CUDA_SUCCESS && base == dptr)
			delivery_report_free(base, size);
		else
			COUNT(frees_unknown, 1);
	}
	return real(dptr);
}
