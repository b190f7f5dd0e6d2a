// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * userlib/cuda_abi.h against NVIDIA's cuda.h, where the toolkit is installed
 * (tests/test_userlib.py builds this three ways):
 *
 *   -DWITH_CUDA_H                 cuda.h first: every prototype of
 *                                 cuda_abi.h is checked by the compiler
 *                                 against NVIDIA's (a mismatch fails the
 *                                 build); prints NVIDIA's layouts and values
 *   -DWITH_CUDA_H -D__CUDA_API_VERSION_INTERNAL
 *                                 the same for the _ptsz variants and the
 *                                 CUDA 11.3 cuGetProcAddress, which cuda.h
 *                                 declares only in that mode
 *   (neither)                     prints cuda_abi.h's layouts and values
 *
 * The test compares the two printouts.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef WITH_CUDA_H
#include <cuda.h>
/* cuda.h maps the name to cuGetProcAddress_v2; the 11.3 ABI of the bare name
 * is checked in __CUDA_API_VERSION_INTERNAL mode. */
#ifndef __CUDA_API_VERSION_INTERNAL
#undef cuGetProcAddress
#endif
#endif
#include "../../userlib/cuda_abi.h"

#define SHOW(expr) printf("%s = %lld\n", #expr, (long long)(expr))

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
	return 0;
}
