/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Every CUDA driver entry point libdeepum touches, in ONE list.  The enum,
 * the function-pointer types, the table of real functions, the names looked
 * up in libcuda, the exported trampolines, the cuGetProcAddress substitution
 * and the rtld-audit redirection are all generated from it, so there is no
 * second table to keep in step.
 *
 * X(kind, name, handler, stream, params, args)
 *   kind     HOOK   intercepted: libdeepum exports a trampoline of this name
 *                   that calls on_<handler>(); cuGetProcAddress and dlsym on
 *                   libcuda hand the trampoline out instead of the driver's
 *            FREE   intercepted like HOOK, and still after deepum turns off:
 *                   frees of memory only libdeepum can free (pool.c)
 *            USE    called by libdeepum; without it deepum stays off
 *            MAYBE  called by libdeepum when the driver has it
 *   name     the symbol libcuda exports (the ABI, not the cuda.h macro)
 *   handler  shared by the variants of one API (legacy / per-thread stream)
 *   stream   what a NULL stream means for the entry point: LEGACY or
 *            PER_THREAD (the _ptsz variants), NONE when it takes no stream
 */
#ifndef _DEEPUM_ENTRY_POINTS_H
#define _DEEPUM_ENTRY_POINTS_H

#include "cuda_abi.h"

#define LAUNCH_KERNEL_PARAMS                                                                  \
	(CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
	 unsigned int block_x, unsigned int block_y, unsigned int block_z,                     \
	 unsigned int shared_bytes, CUstream stream, void **params, void **extra)
#define LAUNCH_KERNEL_ARGS \
	(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream, params, extra)
#define LAUNCH_KERNEL_EX_PARAMS (const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
#define LAUNCH_KERNEL_EX_ARGS (config, f, params, extra)
#define LAUNCH_COOPERATIVE_PARAMS                                                             \
	(CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,          \
	 unsigned int block_x, unsigned int block_y, unsigned int block_z,                     \
	 unsigned int shared_bytes, CUstream stream, void **params)
#define LAUNCH_COOPERATIVE_ARGS \
	(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream, params)
#define GET_PROC_ADDRESS_PARAMS (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags)
#define GET_PROC_ADDRESS_ARGS (symbol, pfn, cuda_version, flags)
#define GET_PROC_ADDRESS_V2_PARAMS                                                            \
	(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,                   \
	 CUdriverProcAddressQueryResult *status)
#define GET_PROC_ADDRESS_V2_ARGS (symbol, pfn, cuda_version, flags, status)
#define BEGIN_CAPTURE_TO_GRAPH_PARAMS                                                         \
	(CUstream stream, CUgraph graph, const CUgraphNode *dependencies,                      \
	 const CUgraphEdgeData *dependency_data, size_t ndependencies, CUstreamCaptureMode mode)
#define BEGIN_CAPTURE_TO_GRAPH_ARGS (stream, graph, dependencies, dependency_data, ndependencies, mode)

#define DEEPUM_ENTRY_POINTS(X)                                                                \
	X(HOOK, cuLaunchKernel, launch_kernel, LEGACY, LAUNCH_KERNEL_PARAMS, LAUNCH_KERNEL_ARGS) \
	X(HOOK, cuLaunchKernel_ptsz, launch_kernel, PER_THREAD, LAUNCH_KERNEL_PARAMS,          \
	  LAUNCH_KERNEL_ARGS)                                                                   \
	X(HOOK, cuLaunchKernelEx, launch_kernel_ex, LEGACY, LAUNCH_KERNEL_EX_PARAMS,           \
	  LAUNCH_KERNEL_EX_ARGS)                                                                \
	X(HOOK, cuLaunchKernelEx_ptsz, launch_kernel_ex, PER_THREAD, LAUNCH_KERNEL_EX_PARAMS,  \
	  LAUNCH_KERNEL_EX_ARGS)                                                                \
	X(HOOK, cuLaunchCooperativeKernel, launch_cooperative, LEGACY, LAUNCH_COOPERATIVE_PARAMS, \
	  LAUNCH_COOPERATIVE_ARGS)                                                              \
	X(HOOK, cuLaunchCooperativeKernel_ptsz, launch_cooperative, PER_THREAD,                \
	  LAUNCH_COOPERATIVE_PARAMS, LAUNCH_COOPERATIVE_ARGS)                                   \
	X(HOOK, cuMemAlloc_v2, mem_alloc, NONE, (CUdeviceptr *dptr, size_t size), (dptr, size)) \
	X(HOOK, cuMemAllocPitch_v2, mem_alloc_pitch, NONE,                                     \
	  (CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int element), \
	  (dptr, pitch, width, height, element))                                                \
	X(FREE, cuMemFree_v2, mem_free, NONE, (CUdeviceptr dptr), (dptr))                      \
	X(HOOK, cuMemAllocAsync, mem_alloc_async, LEGACY,                                      \
	  (CUdeviceptr *dptr, size_t size, CUstream stream), (dptr, size, stream))             \
	X(HOOK, cuMemAllocAsync_ptsz, mem_alloc_async, PER_THREAD,                             \
	  (CUdeviceptr *dptr, size_t size, CUstream stream), (dptr, size, stream))             \
	X(FREE, cuMemFreeAsync, mem_free_async, LEGACY, (CUdeviceptr dptr, CUstream stream),   \
	  (dptr, stream))                                                                       \
	X(FREE, cuMemFreeAsync_ptsz, mem_free_async, PER_THREAD,                               \
	  (CUdeviceptr dptr, CUstream stream), (dptr, stream))                                  \
	X(HOOK, cuGetProcAddress, get_proc_address, NONE, GET_PROC_ADDRESS_PARAMS,             \
	  GET_PROC_ADDRESS_ARGS)                                                                \
	X(HOOK, cuGetProcAddress_v2, get_proc_address_v2, NONE, GET_PROC_ADDRESS_V2_PARAMS,    \
	  GET_PROC_ADDRESS_V2_ARGS)                                                             \
	X(HOOK, cuStreamBeginCapture, begin_capture_v1, LEGACY, (CUstream stream), (stream))   \
	X(HOOK, cuStreamBeginCapture_ptsz, begin_capture_v1, PER_THREAD, (CUstream stream), (stream)) \
	X(HOOK, cuStreamBeginCapture_v2, begin_capture, LEGACY,                                \
	  (CUstream stream, CUstreamCaptureMode mode), (stream, mode))                         \
	X(HOOK, cuStreamBeginCapture_v2_ptsz, begin_capture, PER_THREAD,                       \
	  (CUstream stream, CUstreamCaptureMode mode), (stream, mode))                         \
	X(HOOK, cuStreamBeginCaptureToGraph, begin_capture_to_graph, LEGACY,                   \
	  BEGIN_CAPTURE_TO_GRAPH_PARAMS, BEGIN_CAPTURE_TO_GRAPH_ARGS)                           \
	X(HOOK, cuStreamBeginCaptureToGraph_ptsz, begin_capture_to_graph, PER_THREAD,          \
	  BEGIN_CAPTURE_TO_GRAPH_PARAMS, BEGIN_CAPTURE_TO_GRAPH_ARGS)                           \
	X(HOOK, cuStreamEndCapture, end_capture, LEGACY, (CUstream stream, CUgraph *graph),    \
	  (stream, graph))                                                                      \
	X(HOOK, cuStreamEndCapture_ptsz, end_capture, PER_THREAD,                              \
	  (CUstream stream, CUgraph *graph), (stream, graph))                                  \
	X(USE, cuFuncGetName, -, NONE, (const char **name, CUfunction f), ())                  \
	X(USE, cuFuncGetParamInfo, -, NONE,                                                    \
	  (CUfunction f, size_t index, size_t *offset, size_t *size), ())                      \
	X(MAYBE, cuKernelGetName, -, NONE, (const char **name, CUkernel k), ())                \
	X(MAYBE, cuKernelGetParamInfo, -, NONE,                                                \
	  (CUkernel k, size_t index, size_t *offset, size_t *size), ())                        \
	X(USE, cuStreamWriteValue64_v2, -, NONE,                                               \
	  (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), ())       \
	X(USE, cuLaunchHostFunc, -, NONE, (CUstream stream, CUhostFn fn, void *data), ())      \
	X(USE, cuStreamIsCapturing, -, NONE, (CUstream stream, CUstreamCaptureStatus *status), ()) \
	X(USE, cuMemAllocManaged, -, NONE, (CUdeviceptr *dptr, size_t size, unsigned int flags), ()) \
	X(USE, cuMemHostAlloc, -, NONE, (void **ptr, size_t size, unsigned int flags), ())     \
	X(USE, cuMemFreeHost, -, NONE, (void *ptr), ())                                       \
	X(MAYBE, cuMemHostRegister_v2, -, NONE, (void *ptr, size_t size, unsigned int flags), ()) \
	X(MAYBE, cuMemHostUnregister, -, NONE, (void *ptr), ())                               \
	X(USE, cuMemHostGetDevicePointer_v2, -, NONE,                                          \
	  (CUdeviceptr *dptr, void *ptr, unsigned int flags), ())                             \
	X(USE, cuMemGetAddressRange_v2, -, NONE,                                               \
	  (CUdeviceptr *base, size_t *size, CUdeviceptr dptr), ())                            \
	X(USE, cuCtxGetDevice, -, NONE, (CUdevice *dev), ())                                  \
	X(USE, cuCtxGetCurrent, -, NONE, (CUcontext *ctx), ())                                \
	X(USE, cuDeviceGetAttribute, -, NONE, (int *value, CUdevice_attribute attr, CUdevice dev), ()) \
	X(USE, cuCtxSynchronize, -, NONE, (void), ())                                          \
	X(USE, cuCtxSetCurrent, -, NONE, (CUcontext ctx), ())                                  \
	X(USE, cuMemGetInfo_v2, -, NONE, (size_t *free, size_t *total), ())                    \
	X(USE, cuCtxGetStreamPriorityRange, -, NONE, (int *least, int *greatest), ())          \
	X(USE, cuStreamCreateWithPriority, -, NONE,                                            \
	  (CUstream *stream, unsigned int flags, int priority), ())                            \
	X(USE, cuStreamSynchronize, -, NONE, (CUstream stream), ())                            \
	X(USE, cuEventCreate, -, NONE, (CUevent *event, unsigned int flags), ())              \
	X(USE, cuEventRecord, -, NONE, (CUevent event, CUstream stream), ())                  \
	X(USE, cuStreamWaitEvent, -, NONE, (CUstream stream, CUevent event, unsigned int flags), ()) \
	X(MAYBE, cuMemPrefetchAsync, -, NONE,                                                   \
	  (CUdeviceptr ptr, size_t size, CUdevice device, CUstream stream), ())                \
	X(MAYBE, cuMemPrefetchBatchAsync, -, NONE,                                              \
	  (CUdeviceptr *ptrs, size_t *sizes, size_t count, CUmemLocation *locations,           \
	   size_t *location_starts, size_t nlocations, unsigned long long flags, CUstream stream), ()) \
	X(MAYBE, cuMemDiscardBatchAsync, -, NONE,                                               \
	  (CUdeviceptr *ptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream stream), ())

enum deepum_entry {
#define ENTRY_ENUM(kind, name, handler, stream, params, args) ENTRY_##name,
	DEEPUM_ENTRY_POINTS(ENTRY_ENUM)
#undef ENTRY_ENUM
	ENTRY_COUNT
};

#define ENTRY_TYPEDEF(kind, name, handler, stream, params, args) typedef CUresult(*name##_fn) params;
DEEPUM_ENTRY_POINTS(ENTRY_TYPEDEF)
#undef ENTRY_TYPEDEF

enum entry_stream { STREAM_NONE, STREAM_LEGACY, STREAM_PER_THREAD };

/* The driver's functions, resolved once (intercept.c). */
extern void *deepum_real[ENTRY_COUNT];
extern const enum entry_stream deepum_entry_stream[ENTRY_COUNT];

/* The real @name, typed: REAL(cuMemFree_v2)(dptr). */
#define REAL(name) ((name##_fn)deepum_real[ENTRY_##name])

#endif /* _DEEPUM_ENTRY_POINTS_H */
