/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The part of the CUDA driver API that libdeepum, its test double of libcuda
 * (tests/fakecuda) and the launch benchmark use, declared from NVIDIA's
 * documented ABI so that none of them needs the CUDA toolkit to build.
 *
 * Names are the exported symbol names (cuMemAlloc_v2, not the cuMemAlloc
 * macro), because those are what the dynamic linker and cuGetProcAddress
 * hand out.  64-bit Linux only: CUdeviceptr is 64 bits, CUDAAPI is empty.
 *
 * When cuda.h was included first (tests/fakecuda/abi_check.c does so), only
 * the prototypes below are declared: the compiler then checks each one
 * against NVIDIA's, and a mismatch is a build error.
 */
#ifndef _DEEPUM_CUDA_ABI_H
#define _DEEPUM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifndef CUDA_VERSION

typedef uint64_t cuuint64_t;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphEdgeData_st CUgraphEdgeData;	/* passed through, never read */

typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
	CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
	CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
	CUDA_ERROR_UNKNOWN = 999,
} CUresult;

/* Special stream handles: the legacy default stream and the calling
 * thread's per-thread default stream. */
#define CU_STREAM_LEGACY	((CUstream)0x1)
#define CU_STREAM_PER_THREAD	((CUstream)0x2)

typedef enum CUstreamCaptureStatus_enum {
	CU_STREAM_CAPTURE_STATUS_NONE = 0,
	CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
	CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;

typedef enum CUstreamCaptureMode_enum {
	CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_STREAM_CAPTURE_MODE_RELAXED = 2,
} CUstreamCaptureMode;

/* The host, as the destination of a prefetch (CUDA 8 cuMemPrefetchAsync). */
#define CU_DEVICE_CPU ((CUdevice)-1)

/* Where memory is, or is to go (cuMemPrefetchBatchAsync, CUDA 13). */
typedef enum CUmemLocationType_enum {
	CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
	CU_MEM_LOCATION_TYPE_HOST = 0x2,
} CUmemLocationType;

typedef struct CUmemLocation_st {
	CUmemLocationType type;
	int id;
} CUmemLocation;

#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

typedef enum CUmemAttach_flags_enum {
	CU_MEM_ATTACH_GLOBAL = 0x1,
	CU_MEM_ATTACH_HOST = 0x2,
	CU_MEM_ATTACH_SINGLE = 0x4,
} CUmemAttach_flags;

#define CU_MEMHOSTALLOC_PORTABLE	0x01
#define CU_MEMHOSTALLOC_DEVICEMAP	0x02
#define CU_MEMHOSTREGISTER_PORTABLE	0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP	0x02

typedef enum CUstreamWriteValue_flags_enum {
	CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
} CUstreamWriteValue_flags;

typedef enum CUdevice_attribute_enum {
	CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT = 51,
} CUdevice_attribute;

/* The "extra" argument of cuLaunchKernel: key, value, ..., END. */
#define CU_LAUNCH_PARAM_END		((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER	((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE	((void *)0x02)

typedef enum CUdriverProcAddress_flags_enum {
	CU_GET_PROC_ADDRESS_DEFAULT = 0,
	CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
	CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1,
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
	CU_GET_PROC_ADDRESS_SUCCESS = 0,
	CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
	CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

typedef void (*CUhostFn)(void *userData);

/* Launch attributes are passed through untouched; only the layout matters
 * (an 8-aligned 64-byte union after a 4-byte ID and its padding). */
typedef enum CUlaunchAttributeID_enum {
	CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
} CUlaunchAttributeID;

typedef union CUlaunchAttributeValue_union {
	char pad[64];
	void *align_pointer;
	unsigned long long align_u64;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
	CUlaunchAttributeID id;
	char pad[8 - sizeof(CUlaunchAttributeID)];
	CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
	unsigned int gridDimX;
	unsigned int gridDimY;
	unsigned int gridDimZ;
	unsigned int blockDimX;
	unsigned int blockDimY;
	unsigned int blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

_Static_assert(sizeof(CUdeviceptr) == 8 && sizeof(void *) == 8, "64-bit ABI only");
_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute layout");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig layout");

#endif /* !CUDA_VERSION */

/* Launches: intercepted (the _ptsz variants use the per-thread default stream
 * for a NULL stream). */
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			void **kernelParams, void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			  void **extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			       void **extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX,
				   unsigned int blockDimY, unsigned int blockDimZ,
				   unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
					unsigned int gridDimY, unsigned int gridDimZ,
					unsigned int blockDimX, unsigned int blockDimY,
					unsigned int blockDimZ, unsigned int sharedMemBytes,
					CUstream hStream, void **kernelParams);

/* Device memory: intercepted. */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
/* Stream-ordered allocation (CUDA 11.2): intercepted (pool.c). */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

/* Stream capture into CUDA graphs: intercepted, to know when a capture may be
 * in progress.  cuStreamBeginCapture is the CUDA 10.0 ABI (no mode), _v2 adds
 * the mode, ToGraph (CUDA 12.3) captures into an existing graph. */
CUresult cuStreamBeginCapture(CUstream hStream);
CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
				     const CUgraphEdgeData *dependencyData, size_t numDependencies,
				     CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
					  const CUgraphEdgeData *dependencyData, size_t numDependencies,
					  CUstreamCaptureMode mode);
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);

/* Entry-point lookup: intercepted.  "cuGetProcAddress" is the CUDA 11.3 ABI,
 * "cuGetProcAddress_v2" (CUDA 12.0) adds the query result. */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *symbolStatus);

/* Called by libdeepum, not intercepted. */
CUresult cuFuncGetName(const char **name, CUfunction hfunc);
CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
			    size_t *paramSize);
CUresult cuKernelGetName(const char **name, CUkernel hfunc);
CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
			      size_t *paramSize);
CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
				 unsigned int flags);
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
CUresult cuMemHostUnregister(void *p);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
CUresult cuCtxGetDevice(CUdevice *device);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
CUresult cuCtxSynchronize(void);
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs,
				 size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags,
				 CUstream hStream);
CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags,
				CUstream hStream);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuCtxSetCurrent(CUcontext ctx);

/* Used by the test program and the launch benchmark only. */
CUresult cuInit(unsigned int Flags);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);

#endif /* _DEEPUM_CUDA_ABI_H */
