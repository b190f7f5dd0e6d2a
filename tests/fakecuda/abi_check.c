// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * userlib/cuda_abi.h and cupti_abi.h against NVIDIA's cuda.h and CUPTI's
 * headers, where the toolkit is installed (tests/test_userlib.py builds
 * this three ways):
 *
 *   -DWITH_CUDA_H                 NVIDIA's headers first: every prototype of
 *                                 ours is checked by the compiler against
 *                                 NVIDIA's (a mismatch fails the build);
 *                                 prints NVIDIA's layouts and values
 *   -DWITH_CUDA_H -D__CUDA_API_VERSION_INTERNAL
 *                                 the same for the _ptsz variants and the
 *                                 older ABIs (CUDA 11.3 cuGetProcAddress,
 *                                 10.0 cuStreamBeginCapture, 8.0
 *                                 cuMemPrefetchAsync), which cuda.h
 *                                 declares only in that mode
 *   (neither)                     prints our layouts and values
 *
 * The test compares the two printouts.  CUPTI's activity records are
 * declared by us only as far as libdeepum reads them, so their field
 * offsets are compared, not their sizes.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef WITH_CUDA_H
#include <cuda.h>
#include <cupti_activity.h>
/* cuda.h maps these names to newer ABIs (cuGetProcAddress_v2, ...); the
 * older ABIs of the bare names are checked in __CUDA_API_VERSION_INTERNAL
 * mode. */
#ifndef __CUDA_API_VERSION_INTERNAL
#undef cuGetProcAddress
#undef cuStreamBeginCapture
#undef cuMemPrefetchAsync
#endif
#endif
#include "../../userlib/cupti_abi.h"

#define SHOW(expr) printf("%s = %lld\n", #expr, (long long)(expr))
#define SHOW_OFFSET(type, field) SHOW(offsetof(type, field))

int main(void)
{
	SHOW(sizeof(CUresult));
	SHOW(sizeof(CUdeviceptr));
	SHOW(sizeof(CUdevice));
	SHOW(sizeof(cuuint64_t));
	SHOW(sizeof(CUlaunchAttribute));
	SHOW(_Alignof(CUlaunchAttribute));
	SHOW(offsetof(CUlaunchAttribute, value));
	SHOW(sizeof(CUlaunchConfig));
	SHOW(offsetof(CUlaunchConfig, sharedMemBytes));
	SHOW(offsetof(CUlaunchConfig, hStream));
	SHOW(offsetof(CUlaunchConfig, attrs));
	SHOW(offsetof(CUlaunchConfig, numAttrs));
	SHOW(CUDA_SUCCESS);
	SHOW(CUDA_ERROR_INVALID_VALUE);
	SHOW(CUDA_ERROR_OUT_OF_MEMORY);
	SHOW(CUDA_ERROR_NOT_INITIALIZED);
	SHOW(CUDA_ERROR_INVALID_HANDLE);
	SHOW(CUDA_ERROR_NOT_FOUND);
	SHOW(CUDA_ERROR_NOT_SUPPORTED);
	SHOW(CUDA_ERROR_UNKNOWN);
	SHOW((long long)CU_STREAM_LEGACY);
	SHOW((long long)CU_STREAM_PER_THREAD);
	SHOW(CU_STREAM_CAPTURE_STATUS_NONE);
	SHOW(CU_STREAM_CAPTURE_STATUS_ACTIVE);
	SHOW(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	SHOW(CU_MEM_ATTACH_GLOBAL);
	SHOW(CU_MEM_ATTACH_HOST);
	SHOW(CU_MEM_ATTACH_SINGLE);
	SHOW(CU_MEMHOSTALLOC_PORTABLE);
	SHOW(CU_MEMHOSTALLOC_DEVICEMAP);
	SHOW(CU_STREAM_WRITE_VALUE_DEFAULT);
	SHOW(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
	SHOW((long long)CU_LAUNCH_PARAM_END);
	SHOW((long long)CU_LAUNCH_PARAM_BUFFER_POINTER);
	SHOW((long long)CU_LAUNCH_PARAM_BUFFER_SIZE);
	SHOW(CU_GET_PROC_ADDRESS_DEFAULT);
	SHOW(CU_GET_PROC_ADDRESS_LEGACY_STREAM);
	SHOW(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	SHOW(CU_GET_PROC_ADDRESS_SUCCESS);
	SHOW(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	SHOW(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	SHOW(CUDA_ERROR_INVALID_CONTEXT);
	SHOW(CUDA_ERROR_ILLEGAL_STATE);
	SHOW(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	SHOW(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	SHOW(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
	SHOW(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
	SHOW(CU_STREAM_CAPTURE_MODE_GLOBAL);
	SHOW(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
	SHOW(CU_STREAM_CAPTURE_MODE_RELAXED);
	SHOW(CU_DEVICE_CPU);
	SHOW(CU_MEM_LOCATION_TYPE_DEVICE);
	SHOW(CU_MEM_LOCATION_TYPE_HOST);
	SHOW(sizeof(CUmemLocation));
	SHOW(offsetof(CUmemLocation, id));
	SHOW(CU_STREAM_NON_BLOCKING);

	SHOW(CUPTI_SUCCESS);
	SHOW(CUPTI_ERROR_MAX_LIMIT_REACHED);
	SHOW(CUPTI_ERROR_UNKNOWN);
	SHOW(CUPTI_ACTIVITY_KIND_DRIVER);
	SHOW(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	SHOW(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	SHOW(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
	SHOW(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
	SHOW(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE);
	SHOW(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD);
	SHOW(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH);
	SHOW(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT);
	SHOW(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	SHOW(sizeof(CUpti_ActivityUnifiedMemoryCounterConfig));
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounterConfig, kind);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounterConfig, deviceId);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounterConfig, enable);
	SHOW_OFFSET(CUpti_ActivityKernel10, start);
	SHOW_OFFSET(CUpti_ActivityKernel10, end);
	SHOW_OFFSET(CUpti_ActivityKernel10, streamId);
	SHOW_OFFSET(CUpti_ActivityKernel10, gridX);
	SHOW_OFFSET(CUpti_ActivityKernel10, gridY);
	SHOW_OFFSET(CUpti_ActivityKernel10, gridZ);
	SHOW_OFFSET(CUpti_ActivityKernel10, blockX);
	SHOW_OFFSET(CUpti_ActivityKernel10, blockY);
	SHOW_OFFSET(CUpti_ActivityKernel10, blockZ);
	SHOW_OFFSET(CUpti_ActivityKernel10, correlationId);
	SHOW_OFFSET(CUpti_ActivityKernel10, name);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, counterKind);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, value);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, start);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, end);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, address);
	SHOW_OFFSET(CUpti_ActivityUnifiedMemoryCounter3, flags);
	SHOW(sizeof(CUpti_ActivityExternalCorrelation));
	SHOW_OFFSET(CUpti_ActivityExternalCorrelation, externalKind);
	SHOW_OFFSET(CUpti_ActivityExternalCorrelation, externalId);
	SHOW_OFFSET(CUpti_ActivityExternalCorrelation, correlationId);
	return 0;
}
