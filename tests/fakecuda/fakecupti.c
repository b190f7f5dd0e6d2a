// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A test double of libcupti.so's activity API, for libdeepum's tracer: it
 * turns what the fake driver's pretend GPU reports (fakegpu.h) into
 * activity records, in buffers obtained from and handed back to the
 * registered callbacks, as CUPTI does:
 *
 *   CONCURRENT_KERNEL       one record per kernel that ran
 *   UNIFIED_MEMORY_COUNTER  transfers and page faults of the configured kinds
 *   EXTERNAL_CORRELATION    for a driver call made while an external ID was
 *                           pushed on the calling thread, and only while
 *                           DRIVER activity is enabled too (as CUPTI, which
 *                           emits them in front of API records)
 *   DRIVER                  one (empty) record per driver call
 *
 * Buffers go back when full or at cuptiActivityFlushAll, from the thread
 * that filled or flushed them.  Timestamps are the fake GPU's clock, or the
 * client's clock once it registers one (cuptiActivityRegisterTimestampCallback),
 * as CUPTI does: a kernel then starts when its launch call was made (the
 * fake runs it right there) and ends when it is done.
 *
 * Knob: FAKECUPTI_DROP=N  report N dropped records at the next buffer.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../userlib/cupti_abi.h"
#include "fakegpu.h"

#define EXPORT __attribute__((visibility("default")))

enum { KINDS = 64, STACK_MAX = 16, CUPTI_ERROR_INVALID_PARAMETER = 1, CUPTI_ERROR_QUEUE_EMPTY = 21 };

/* Records are stored back to back, each after its size: cuptiActivityGetNextRecord walks them. */
struct stored {
	uint64_t size;
	uint8_t record[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static int enabled[KINDS];
static int um_configured[16];
static uint8_t *buffer;
static size_t buffer_size, buffer_used;
static int drops_reported;
static CUpti_TimestampCallbackFunc client_clock;

static _Thread_local uint64_t external_ids[STACK_MAX];
static _Thread_local int external_depth;

/* Hand the current buffer back (called without the lock). */
static void deliver(uint8_t *full, size_t size, size_t used)
{
	if (full)
		completed(NULL, 0, full, size, used);
}

static void add_record(const void *record, size_t size)
{
	uint8_t *full = NULL;
	size_t full_size = 0, full_used = 0;
	size_t need = (sizeof(struct stored) + size + 7) & ~(size_t)7;

	pthread_mutex_lock(&lock);
	if (buffer && buffer_used + need > buffer_size) {
		full = buffer, full_size = buffer_size, full_used = buffer_used;
		buffer = NULL;
	}
	if (!buffer) {
		size_t max_records;

		requested(&buffer, &buffer_size, &max_records);
		buffer_used = 0;
	}
	if (buffer && buffer_used + need <= buffer_size) {
		struct stored *s = (struct stored *)(buffer + buffer_used);

		s->size = need;
		memcpy(s->record, record, size);
		buffer_used += need;
	}
	pthread_mutex_unlock(&lock);
	deliver(full, full_size, full_used);
}

/* The client's time of this thread's latest driver call: a kernel's start. */
static __thread uint64_t client_call_ts;

static void on_driver_call(uint32_t correlation)
{
	CUpti_Activity api = { CUPTI_ACTIVITY_KIND_DRIVER };

	if (client_clock)
		client_call_ts = client_clock();
	if (!enabled[CUPTI_ACTIVITY_KIND_DRIVER])
		return;
	if (enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] && external_depth) {
		CUpti_ActivityExternalCorrelation x = {
			.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
			.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
			.externalId = external_ids[external_depth - 1],
			.correlationId = correlation,
		};

		add_record(&x, sizeof(x));
	}
	add_record(&api, sizeof(api));
}

static void on_kernel(const char *name, const unsigned int grid[3], const unsigned int block[3], uint32_t stream,
		      uint32_t correlation, uint64_t start, uint64_t end)
{
	CUpti_ActivityKernel10 k = {
		.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
		.start = client_clock ? client_call_ts : start,
		.end = client_clock ? client_clock() : end,
		.streamId = stream,
		.gridX = (int32_t)grid[0], .gridY = (int32_t)grid[1], .gridZ = (int32_t)grid[2],
		.blockX = (int32_t)block[0], .blockY = (int32_t)block[1], .blockZ = (int32_t)block[2],
		.correlationId = correlation,
		.name = name,
	};

	if (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL])
		add_record(&k, sizeof(k));
}

static void on_unified_memory(uint32_t kind, uint64_t value, uint64_t start, uint64_t end, uint64_t address,
			      uint32_t flags)
{
	CUpti_ActivityUnifiedMemoryCounter3 u = {
		.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER,
		.counterKind = kind,
		.value = value,
		.start = client_clock ? client_clock() : start,
		.end = client_clock ? client_clock() : end,
		.address = address,
		.flags = flags,
	};

	if (enabled[CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER] && kind < 16 && um_configured[kind])
		add_record(&u, sizeof(u));
}

static const struct fakegpu_observer observer = { on_driver_call, on_kernel, on_unified_memory };

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
						  CUpti_BuffersCallbackCompleteFunc complete)
{
	if (!request || !complete)
		return (CUptiResult)CUPTI_ERROR_INVALID_PARAMETER;
	requested = request;
	completed = complete;
	fakecuda_observe(&observer);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig *config,
							      uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		if (config[i].kind >= 16 ||
		    config[i].scope != CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE)
			return (CUptiResult)CUPTI_ERROR_INVALID_PARAMETER;
		um_configured[config[i].kind] = config[i].enable != 0;
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if ((unsigned int)kind >= KINDS || !requested)
		return CUPTI_ERROR_UNKNOWN;
	enabled[kind] = 1;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if ((unsigned int)kind >= KINDS)
		return CUPTI_ERROR_UNKNOWN;
	enabled[kind] = 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **record)
{
	uint8_t *next = *record ? (uint8_t *)*record - sizeof(struct stored) +
					  ((struct stored *)((uint8_t *)*record - sizeof(struct stored)))->size
				: buf;

	if (next >= buf + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)((struct stored *)next)->record;
	return CUPTI_SUCCESS;
}

/* The same number the fake driver puts in its kernel records' streamId. */
EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread, uint32_t *id)
{
	(void)context, (void)per_thread;
	*id = (uint32_t)(uintptr_t)stream;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t *dropped)
{
	const char *drop = getenv("FAKECUPTI_DROP");

	(void)context, (void)stream;
	*dropped = drop && !drops_reported++ ? strtoull(drop, NULL, 0) : 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	uint8_t *full;
	size_t size, used;

	(void)flag;
	pthread_mutex_lock(&lock);
	full = buffer, size = buffer_size, used = buffer_used;
	buffer = NULL;
	pthread_mutex_unlock(&lock);
	deliver(full, size, used);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 || external_depth == STACK_MAX)
		return (CUptiResult)CUPTI_ERROR_INVALID_PARAMETER;
	external_ids[external_depth++] = id;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
	if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 || !external_depth)
		return (CUptiResult)CUPTI_ERROR_QUEUE_EMPTY;
	*last = external_ids[--external_depth];
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
	*timestamp = fakecuda_clock();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc timestamp)
{
	if (!timestamp)
		return (CUptiResult)CUPTI_ERROR_INVALID_PARAMETER;
	client_clock = timestamp;
	return CUPTI_SUCCESS;
}

/* Buffers come back when full or flushed here anyway. */
EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t milliseconds)
{
	(void)milliseconds;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **text)
{
	*text = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
	return CUPTI_SUCCESS;
}
