/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The part of CUPTI's activity API that libdeepum's tracer (trace.c) and its
 * test double (tests/fakecuda/fakecupti.c) use, declared from NVIDIA's
 * documented ABI so that neither needs the CUDA toolkit to build.  libcupti
 * is dlopen()ed at run time, never linked.
 *
 * Activity records are versioned structs (CUpti_ActivityKernel4 ... 10 so
 * far); each version keeps the fields below at the same offsets and appends
 * its new ones, so only that common prefix is declared, and libdeepum never
 * needs a record's size (cuptiActivityGetNextRecord knows it).
 *
 * When cupti_activity.h was included first (tests/fakecuda/abi_check.c does
 * so), only the prototypes are declared and the compiler checks them against
 * NVIDIA's; the test compares the record offsets printed both ways.
 */
#ifndef _DEEPUM_CUPTI_ABI_H
#define _DEEPUM_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_abi.h"

#ifndef _CUPTI_ACTIVITY_H_

typedef enum {
	CUPTI_SUCCESS = 0,
	CUPTI_ERROR_MAX_LIMIT_REACHED = 12,	/* cuptiActivityGetNextRecord: no more records */
	CUPTI_ERROR_UNKNOWN = 999,
} CUptiResult;

typedef enum {
	CUPTI_ACTIVITY_KIND_DRIVER = 4,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL = 10,
	CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER = 25,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 39,
} CUpti_ActivityKind;

typedef enum {
	CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 3,
} CUpti_ExternalCorrelationKind;

typedef enum {
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE = 1,
} CUpti_ActivityUnifiedMemoryCounterScope;

typedef enum {
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD = 1,
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH = 2,
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT = 4,
} CUpti_ActivityUnifiedMemoryCounterKind;

#define CUPTI_ACTIVITY_FLAG_FLUSH_FORCED 1U

typedef struct {
	CUpti_ActivityUnifiedMemoryCounterScope scope;
	CUpti_ActivityUnifiedMemoryCounterKind kind;
	uint32_t deviceId;
	uint32_t enable;
} CUpti_ActivityUnifiedMemoryCounterConfig;

/* Every record starts with its kind. */
typedef struct {
	CUpti_ActivityKind kind;
} CUpti_Activity;

/* CONCURRENT_KERNEL: the prefix common to CUpti_ActivityKernel4 and later. */
typedef struct {
	CUpti_ActivityKind kind;
	uint8_t cacheConfig;
	uint8_t sharedMemoryConfig;
	uint16_t registersPerThread;
	uint32_t partitionedGlobalCacheRequested;
	uint32_t partitionedGlobalCacheExecuted;
	uint64_t start;
	uint64_t end;
	uint64_t completed;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	int32_t gridX;
	int32_t gridY;
	int32_t gridZ;
	int32_t blockX;
	int32_t blockY;
	int32_t blockZ;
	int32_t staticSharedMemory;
	int32_t dynamicSharedMemory;
	uint32_t localMemoryPerThread;
	uint32_t localMemoryTotal;
	uint32_t correlationId;
	int64_t gridId;
	const char *name;
} CUpti_ActivityKernel10;

/* UNIFIED_MEMORY_COUNTER: the prefix common to Counter2 and Counter3. */
typedef struct {
	CUpti_ActivityKind kind;
	CUpti_ActivityUnifiedMemoryCounterKind counterKind;
	uint64_t value;			/* bytes (transfers) or fault groups (faults) */
	uint64_t start;
	uint64_t end;
	uint64_t address;
	uint32_t srcId;
	uint32_t dstId;
	uint32_t streamId;
	uint32_t processId;
	uint32_t flags;			/* migration cause, or access type of a fault */
	uint32_t pad;
} CUpti_ActivityUnifiedMemoryCounter3;

typedef struct {
	CUpti_ActivityKind kind;
	CUpti_ExternalCorrelationKind externalKind;
	uint64_t externalId;
	uint32_t correlationId;
	uint32_t reserved;
} CUpti_ActivityExternalCorrelation;

typedef void (*CUpti_BuffersCallbackRequestFunc)(uint8_t **buffer, size_t *size, size_t *maxNumRecords);
typedef uint64_t (*CUpti_TimestampCallbackFunc)(void);
typedef void (*CUpti_BuffersCallbackCompleteFunc)(CUcontext context, uint32_t streamId, uint8_t *buffer,
						  size_t size, size_t validSize);

#endif /* !_CUPTI_ACTIVITY_H_ */

/* One list, as entry_points.h: the function table, the names looked up in
 * libcupti and the prototypes the ABI check compares.  X(kind, name, params):
 * USE must be there; MAYBE is used when there (newer CUPTIs). */
#define DEEPUM_CUPTI_FUNCTIONS(X)                                                             \
	X(USE, cuptiActivityRegisterCallbacks,                                                \
	  (CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed)) \
	X(USE, cuptiActivityConfigureUnifiedMemoryCounter,                                    \
	  (CUpti_ActivityUnifiedMemoryCounterConfig *config, uint32_t count))                   \
	X(USE, cuptiActivityEnable, (CUpti_ActivityKind kind))                                \
	X(USE, cuptiActivityDisable, (CUpti_ActivityKind kind))                               \
	X(USE, cuptiActivityGetNextRecord, (uint8_t *buffer, size_t valid, CUpti_Activity **record)) \
	X(USE, cuptiActivityGetNumDroppedRecords, (CUcontext context, uint32_t stream, size_t *dropped)) \
	X(USE, cuptiActivityFlushAll, (uint32_t flag))                                        \
	X(USE, cuptiActivityPushExternalCorrelationId, (CUpti_ExternalCorrelationKind kind, uint64_t id)) \
	X(USE, cuptiActivityPopExternalCorrelationId, (CUpti_ExternalCorrelationKind kind, uint64_t *last)) \
	X(USE, cuptiGetTimestamp, (uint64_t *timestamp))                                      \
	X(USE, cuptiGetStreamIdEx, (CUcontext context, CUstream stream, uint8_t perThreadStream, uint32_t *streamId)) \
	X(USE, cuptiGetResultString, (CUptiResult result, const char **text))                 \
	X(MAYBE, cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc timestamp)) \
	X(MAYBE, cuptiActivityFlushPeriod, (uint32_t milliseconds))

#define CUPTI_PROTOTYPE(kind, name, params) CUptiResult name params;
DEEPUM_CUPTI_FUNCTIONS(CUPTI_PROTOTYPE)
#undef CUPTI_PROTOTYPE

#endif /* _DEEPUM_CUPTI_ABI_H */
