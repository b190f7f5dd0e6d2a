// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The tracer (DEEPUM_TRACE=FILE, run by `deepumctl trace record`): a capture
 * of the program's iterations, which pydeepum turns into a deepum trace.
 *
 * libdeepum knows what CUPTI cannot (the true exec ID of every launch, its
 * kernel-name hash and stream slot, the managed allocations), and CUPTI
 * knows what libdeepum cannot (when each kernel ran, and every Unified
 * Memory transfer and GPU page fault).  The tracer writes both, unjoined,
 * as lines of the CUPTI capture format that pydeepum/importers.py already
 * reads for the reference traces, plus two line types of its own; the join
 * (which kernel ran which launch, which launch each UM record belongs to,
 * one FAULT per launch and block) is done there, once, for both:
 *
 *   L,external id,exec ID,name hash (hex),stream slot,ts,CUPTI stream ID   a launch that ran
 *   X,external id,correlation ID           CUPTI: this launch is that kernel
 *   K,start,end,stream,correlation,grid xyz,block xyz,name  CUPTI kernel
 *   U,kind,value,start,end,address (hex),flags            CUPTI UM counter
 *   M,index,ts,flags                       an iteration begins (1: flushed)
 *   A|F,address (hex),size,ts              managed allocation / free
 *   E,message                              the capture failed: unusable
 *
 * Launch to kernel: around each real launch the tracer pushes an external
 * correlation ID (its own launch number) on CUPTI's per-thread stack, so
 * CUPTI ties that number to the correlation ID of the driver call.  On the
 * H200 (driver 580) a kernel launched through the runtime carries the
 * runtime call's correlation ID instead, so this matched 18 of 669 launches;
 * each L line therefore also names the kernel's CUPTI stream, and the
 * importer pairs the remaining launches with kernel records of the same
 * stream in order (a kernel never starts before its launch).  (CUPTI emits
 * external-correlation records only for API records, hence DRIVER activity
 * is enabled and then ignored.)
 *
 * UM records come from the driver's UVM tools event queue (faults.c) where
 * it can be read (DEEPUM_FAULTS=auto, the default, or uvm-tools), else from
 * CUPTI's Unified Memory counters (DEEPUM_FAULTS=cupti, or auto without the
 * queue), which on the H200 missed 5-10% of the blocks; the capture says
 * which ("O,faults=..."), and both are written as the same U lines: GPU
 * page faults (kind 4, value 1, flags the access type) and migrations (kind
 * 1 to the GPU, 2 to the host, value the bytes, flags the cause).  On the
 * H200 CUPTI delivered no UM record once cuDNN was loaded (ResNet-50); the
 * queue does not depend on it.
 * A thread of the tracer drains the queue while recording, and each mark
 * drains it before its M line.
 *
 * All timestamps are CUPTI's (cuptiGetTimestamp), the clock of its kernel
 * and UM records; with the UVM queue, CUPTI is asked to stamp its records
 * with the queue's clock (CLOCK_MONOTONIC_RAW), and the tracer uses it too.
 * Recording starts at the first deepum_mark_iteration() and stops at the
 * (DEEPUM_TRACE_ITERATIONS + 1)-th, which closes the last iteration; the
 * program runs on untraced.  At every mark the tracer waits
 * for the GPU, and with DEEPUM_TRACE_ACCESS_SET=1 (the default) first moves
 * every live managed allocation to the host, so that each iteration's UM
 * records are its complete first-touch stream.  With =launch it also waits
 * for every launch and moves back what came in while it ran (the blocks the
 * UVM queue saw fault or migrate in; everything, with CUPTI's counters), so
 * that each launch's records are all the blocks it touched: a block used by
 * ten kernels is in the trace ten times (line "O,per-launch").  Any failure
 * writes one E line and stops recording; the program itself is never
 * affected.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_abi.h"
#include "deepum_user.h"

enum { ACTIVITY_BUFFER_BYTES = 8 << 20 };

/* The UM counters first: with the UVM queue, the others only. */
static const CUpti_ActivityKind activity_kinds[] = {
	CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

static const CUpti_ActivityUnifiedMemoryCounterKind um_kinds[] = {
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
	CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
};

/* Marks are serialised by mark_lock (taken first when both are), file
 * writes by file_lock, which is never held across a CUDA or CUPTI call:
 * CUPTI delivers buffers from its own thread, and from inside FlushAll. */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;		/* under file_lock */
static bool started, finished;	/* under mark_lock */
static u32 marks;		/* under mark_lock */

_Atomic bool tracer_recording;
static _Atomic bool failed;
static bool from_uvm_queue;	/* DEEPUM_FAULTS=uvm-tools: UM records from the UVM queue */
static pthread_t queue_thread;
static _Atomic bool queue_draining;	/* the thread runs */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;	/* one reader of the queue */
static _Atomic u64 last_external_id;

/* Per-launch mode with the UVM queue: the events since the last launch went
 * back, one entry per block and kind: the first event's time and access type
 * or cause, the lowest address, the bytes summed.  That is all the importer
 * keeps of them (one FAULT per kernel and block: its first record's time,
 * address and access type, and the bytes moved in), and with a synchronize
 * after every launch an entry holds one kernel's events; so the capture gets
 * a line per entry, not one per 4 KiB fault and migrated chunk (GPT-2 XL:
 * 6.6 GB of lines for four iterations, more than Python could import in a
 * device call).  The entries moved in are also what goes back after the
 * launch.  Past EPOCH_MAX entries the events are written as they come and
 * all managed memory goes back instead. */
enum { EPOCH_SLOTS = 1 << 16, EPOCH_MAX = EPOCH_SLOTS / 2 };
struct epoch_entry {
	u64 block, ts, addr, bytes;
	u32 kind;	/* enum fault_kind + 1; 0: a free slot */
	u32 detail;
};
static struct epoch_entry epoch[EPOCH_SLOTS];	/* under queue_lock */
static u32 epoch_used[EPOCH_MAX];		/* under queue_lock: slots in use */
static u32 epoch_len;				/* under queue_lock */
static bool epoch_overflow;			/* under queue_lock */

static void trace_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pthread_mutex_lock(&file_lock);
	if (out) {
		vfprintf(out, fmt, ap);
		fputc('\n', out);
	}
	pthread_mutex_unlock(&file_lock);
	va_end(ap);
}

/* The capture is unusable: say why, once, in it and on stderr. */
static void trace_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace_fail(const char *fmt, ...)
{
	char message[512], line[sizeof(deepum.trace_path) + sizeof(message) + 16];
	va_list ap;

	atomic_store(&tracer_recording, false);
	if (atomic_exchange(&failed, true))
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	trace_line("E,%s", message);
	snprintf(line, sizeof(line), "trace %s: %s", deepum.trace_path, message);
	deepum_warn(line);
}

static bool cupti_ok(CUptiResult rc, const char *what)
{
	const char *text = "unknown error";

	if (rc == CUPTI_SUCCESS)
		return true;
	cupti.cuptiGetResultString(rc, &text);
	trace_fail("%s failed: %s (%d)", what, text, rc);
	return false;
}

static u64 timestamp(void)
{
	uint64_t ts = 0;

	if (from_uvm_queue)
		return engine_clock_ns();
	cupti.cuptiGetTimestamp(&ts);
	return ts;
}

static uint64_t queue_clock(void)
{
	return engine_clock_ns();
}

static void write_event(u32 kind, u64 ts, u64 addr, u64 bytes, u32 detail)
{
	if (kind == EV_FAULT)
		fprintf(out, "U,4,1,%llu,%llu,%llx,%u\n", (unsigned long long)ts, (unsigned long long)ts,
			(unsigned long long)addr, detail);
	else if (kind == EV_MIGRATED_IN || kind == EV_MIGRATED_OUT)
		fprintf(out, "U,%u,%llu,%llu,%llu,%llx,%u\n", kind == EV_MIGRATED_IN ? 1 : 2,
			(unsigned long long)bytes, (unsigned long long)ts, (unsigned long long)ts,
			(unsigned long long)addr, detail);
}

static struct epoch_entry *epoch_slot(u64 block, u32 kind)
{
	u32 i = (u32)(((block * 0x9e3779b97f4a7c15ull) ^ kind) >> 48) & (EPOCH_SLOTS - 1);

	while (epoch[i].kind && (epoch[i].block != block || epoch[i].kind != kind + 1))
		i = (i + 1) & (EPOCH_SLOTS - 1);
	if (!epoch[i].kind) {
		epoch[i] = (struct epoch_entry){ .block = block, .kind = kind + 1, .ts = UINT64_MAX, .addr = UINT64_MAX };
		epoch_used[epoch_len++] = i;
	}
	return &epoch[i];
}

/* Called with queue_lock held.  False: @e is to be written as it is. */
static bool epoch_add(const struct fault_event *e)
{
	u64 end = e->addr + (e->bytes ? e->bytes : 1);
	u64 first = e->addr >> DEEPUM_DEFAULT_BLOCK_SHIFT, last = (end - 1) >> DEEPUM_DEFAULT_BLOCK_SHIFT;

	if (e->kind != EV_FAULT && e->kind != EV_MIGRATED_IN && e->kind != EV_MIGRATED_OUT)
		return false;
	if (epoch_overflow || epoch_len + (last - first + 1) > EPOCH_MAX) {
		epoch_overflow = true;
		return false;
	}
	for (u64 block = first; block <= last; block++) {
		struct epoch_entry *entry = epoch_slot(block, e->kind);
		u64 lo = e->addr > block << DEEPUM_DEFAULT_BLOCK_SHIFT ? e->addr : block << DEEPUM_DEFAULT_BLOCK_SHIFT;
		u64 hi = (block + 1) << DEEPUM_DEFAULT_BLOCK_SHIFT;

		if (e->ts < entry->ts) {
			entry->ts = e->ts;
			entry->detail = e->detail;
		}
		if (lo < entry->addr)
			entry->addr = lo;
		if (e->bytes)
			entry->bytes += (end < hi ? end : hi) - lo;
	}
	return true;
}

/* Called with queue_lock held: the epoch's lines, and into @blocks (when not
 * NULL, room for EPOCH_MAX) the blocks it moved in.  False: it overflowed,
 * so those blocks are not all known. */
static bool epoch_close(u64 *blocks, u32 *n)
{
	bool complete = !epoch_overflow;

	pthread_mutex_lock(&file_lock);
	for (u32 i = 0; i < epoch_len; i++) {
		struct epoch_entry *e = &epoch[epoch_used[i]];
		u32 kind = e->kind - 1;

		if (out)
			write_event(kind, e->ts, e->addr, e->bytes, e->detail);
		if (blocks && kind != EV_MIGRATED_OUT)
			blocks[(*n)++] = e->block;
		e->kind = 0;
	}
	pthread_mutex_unlock(&file_lock);
	epoch_len = 0;
	epoch_overflow = false;
	return complete;
}

/* Everything the UVM queue holds now, as U lines (per-launch: into the epoch). */
static void drain_queue(void)
{
	static struct fault_event events[4096];
	bool per_launch = deepum.trace_access_set == ACCESS_SET_LAUNCH;
	u32 n;

	pthread_mutex_lock(&queue_lock);
	while ((n = faults_poll(events, sizeof(events) / sizeof(events[0])))) {
		pthread_mutex_lock(&file_lock);
		for (u32 i = 0; out && i < n; i++) {
			const struct fault_event *e = &events[i];

			if (!per_launch || !epoch_add(e))
				write_event(e->kind, e->ts, e->addr, e->bytes, e->detail);
		}
		pthread_mutex_unlock(&file_lock);
	}
	pthread_mutex_unlock(&queue_lock);
}

/* The UVM queue's last events, and the epoch they are in, as U lines; the
 * blocks it moved in as epoch_close() gives them. */
static bool drain_all(u64 *blocks, u32 *n)
{
	bool complete;

	faults_flush();
	drain_queue();
	pthread_mutex_lock(&queue_lock);
	complete = epoch_close(blocks, n);
	pthread_mutex_unlock(&queue_lock);
	return complete;
}

static void *queue_drainer(void *arg)
{
	const struct timespec pause = { .tv_nsec = 1000000 };

	(void)arg;
	while (atomic_load(&queue_draining)) {
		drain_queue();
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* The UVM queue instead of CUPTI's UM counters, on one clock with CUPTI's
 * kernel records; on failure @why says why, and nothing is left running. */
static bool queue_start(CUdevice device, char *why, size_t size)
{
	if (!faults_start(device, FAULTS_UVM_TOOLS, why, size))
		return false;
	if (!cupti.cuptiActivityRegisterTimestampCallback ||
	    cupti.cuptiActivityRegisterTimestampCallback(queue_clock) != CUPTI_SUCCESS) {
		faults_stop();
		snprintf(why, size, "CUPTI cannot stamp its records with the UVM queue's clock; "
			 "trace with DEEPUM_FAULTS=cupti");
		return false;
	}
	atomic_store(&queue_draining, true);
	if (deepum_thread_start(&queue_thread, queue_drainer, NULL) != 0) {
		atomic_store(&queue_draining, false);
		faults_stop();
		snprintf(why, size, "cannot start the thread that reads the UVM queue");
		return false;
	}
	return true;
}

static void queue_stop(void)
{
	if (!atomic_exchange(&queue_draining, false))
		return;
	pthread_join(queue_thread, NULL);
	drain_all(NULL, NULL);
	faults_stop();
}

static void write_activity(const CUpti_Activity *record)
{
	switch (record->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)record;

		fprintf(out, "K,%llu,%llu,%u,%u,%d,%d,%d,%d,%d,%d,%s\n", (unsigned long long)k->start,
			(unsigned long long)k->end, k->streamId, k->correlationId, k->gridX, k->gridY, k->gridZ,
			k->blockX, k->blockY, k->blockZ, k->name ? k->name : "?");
		break;
	}
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
		const CUpti_ActivityUnifiedMemoryCounter3 *u = (const void *)record;

		fprintf(out, "U,%u,%llu,%llu,%llu,%llx,%u\n", u->counterKind, (unsigned long long)u->value,
			(unsigned long long)u->start, (unsigned long long)u->end, (unsigned long long)u->address,
			u->flags);
		break;
	}
	case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
		const CUpti_ActivityExternalCorrelation *x = (const void *)record;

		if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
			fprintf(out, "X,%llu,%u\n", (unsigned long long)x->externalId, x->correlationId);
		break;
	}
	default:	/* DRIVER: enabled only so that CUPTI correlates */
		break;
	}
}

static void buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, ACTIVITY_BUFFER_BYTES);
	*size = *buffer ? ACTIVITY_BUFFER_BYTES : 0;	/* none: CUPTI counts the loss */
	*max_records = 0;
}

static void buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	CUpti_Activity *record = NULL;
	CUptiResult rc = CUPTI_ERROR_MAX_LIMIT_REACHED;
	size_t dropped = 0;

	(void)size;
	pthread_mutex_lock(&file_lock);
	if (out)
		while ((rc = cupti.cuptiActivityGetNextRecord(buffer, valid, &record)) == CUPTI_SUCCESS)
			write_activity(record);
	pthread_mutex_unlock(&file_lock);
	free(buffer);
	if (rc != CUPTI_ERROR_MAX_LIMIT_REACHED)
		cupti_ok(rc, "cuptiActivityGetNextRecord");
	if (cupti.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
		trace_fail("CUPTI dropped %zu activity records", dropped);
}

static bool recording_start(void)
{
	CUpti_ActivityUnifiedMemoryCounterConfig um[sizeof(um_kinds) / sizeof(um_kinds[0])];
	char why[512];
	CUdevice device;

	if (!cupti_load(why, sizeof(why))) {
		trace_fail("%s (deepumctl trace record --cupti)", why);
		return false;
	}
	if (REAL(cuCtxGetDevice)(&device) != CUDA_SUCCESS) {
		trace_fail("no current CUDA context at the first iteration mark");
		return false;
	}
	/* auto: the queue where it can be read (CUPTI's counters miss some faults). */
	from_uvm_queue = deepum.faults != FAULTS_CUPTI && queue_start(device, why, sizeof(why));
	if (!from_uvm_queue && deepum.faults == FAULTS_UVM_TOOLS) {
		trace_fail("%s", why);
		return false;
	}
	trace_line("O,faults=%s", from_uvm_queue ? "uvm-tools" : "cupti");
	for (size_t i = 0; i < sizeof(um) / sizeof(um[0]); i++)
		um[i] = (CUpti_ActivityUnifiedMemoryCounterConfig){
			.scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
			.kind = um_kinds[i],
			.deviceId = (uint32_t)device,
			.enable = 1,
		};
	if (!cupti_ok(cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
		      "cuptiActivityRegisterCallbacks") ||
	    (!from_uvm_queue &&
	     !cupti_ok(cupti.cuptiActivityConfigureUnifiedMemoryCounter(um, sizeof(um) / sizeof(um[0])),
		       "cuptiActivityConfigureUnifiedMemoryCounter")))
		return false;
	for (size_t i = from_uvm_queue; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]); i++)
		if (!cupti_ok(cupti.cuptiActivityEnable(activity_kinds[i]), "cuptiActivityEnable"))
			return false;
	started = true;
	return true;
}

static void recording_stop(void)
{
	atomic_store(&tracer_recording, false);
	queue_stop();
	if (started) {
		for (size_t i = from_uvm_queue; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]); i++)
			cupti.cuptiActivityDisable(activity_kinds[i]);
		cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	pthread_mutex_lock(&file_lock);
	if (out)
		fclose(out);
	out = NULL;
	pthread_mutex_unlock(&file_lock);
	finished = true;
}

static void prefetch_to_host(u64 base, u64 size, void *arg)
{
	CUresult *rc = arg;

	if (*rc == CUDA_SUCCESS)
		*rc = REAL(cuMemPrefetchAsync)(base, size, CU_DEVICE_CPU, NULL);
}

/* Every live managed allocation to the host, and wait for it. */
static bool flush_to_host(void)
{
	CUresult rc = CUDA_SUCCESS;

	if (!deepum_real[ENTRY_cuMemPrefetchAsync]) {
		trace_fail("the driver lacks cuMemPrefetchAsync, which access-set tracing needs");
		return false;
	}
	managed_ranges_each(prefetch_to_host, &rc);
	if (rc == CUDA_SUCCESS)
		rc = REAL(cuCtxSynchronize)();
	if (rc != CUDA_SUCCESS)
		trace_fail("moving managed memory to the host failed (CUDA error %d)", rc);
	return rc == CUDA_SUCCESS;
}

static int block_order(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return (x > y) - (x < y);
}

/* After a launch (ACCESS_SET_LAUNCH; mark_lock held): wait for it, then move
 * what it brought in back to the host, in runs of adjacent blocks. */
static bool launch_to_host(void)
{
	static u64 blocks[EPOCH_MAX];
	CUresult rc = CUDA_SUCCESS;
	u32 n = 0;

	if (REAL(cuCtxSynchronize)() != CUDA_SUCCESS) {
		trace_fail("cuCtxSynchronize failed after a launch");
		return false;
	}
	if (!from_uvm_queue)
		return flush_to_host();	/* CUPTI's counters are not read until flushed */
	if (!drain_all(blocks, &n))
		return flush_to_host();
	qsort(blocks, n, sizeof(*blocks), block_order);
	for (u32 i = 0, j; i < n && rc == CUDA_SUCCESS; i = j) {
		for (j = i + 1; j < n && blocks[j] <= blocks[j - 1] + 1; j++)
			;
		managed_clip(blocks[i] << DEEPUM_DEFAULT_BLOCK_SHIFT,
			     (blocks[j - 1] - blocks[i] + 1) << DEEPUM_DEFAULT_BLOCK_SHIFT, prefetch_to_host, &rc);
	}
	if (rc == CUDA_SUCCESS)
		rc = REAL(cuCtxSynchronize)();
	if (rc != CUDA_SUCCESS)
		trace_fail("moving a launch's blocks to the host failed (CUDA error %d)", rc);
	return rc == CUDA_SUCCESS;
}

static void write_alloc_line(u64 base, u64 size, void *ts)
{
	trace_line("A,%llx,%llu,%llu", (unsigned long long)base, (unsigned long long)size,
		   (unsigned long long)*(u64 *)ts);
}

/* A forked child (a data-loader worker) must not write, nor flush at its
 * exit what the parent had buffered: it lets go of the file unflushed. */
static void forget_file_in_child(void)
{
	atomic_store(&tracer_recording, false);
	finished = true;
	if (out) {
		__fpurge(out);
		fclose(out);
		out = NULL;
	}
}

static bool file_open(void)
{
	FILE *f = fopen(deepum.trace_path, "we");
	char line[sizeof(deepum.trace_path) + 32];

	if (!f) {
		snprintf(line, sizeof(line), "trace %s: cannot be created", deepum.trace_path);
		deepum_warn(line);
		return false;
	}
	pthread_mutex_lock(&file_lock);
	out = f;
	pthread_mutex_unlock(&file_lock);
	pthread_atfork(NULL, NULL, forget_file_in_child);
	return true;
}

static void mark(void)
{
	bool first = !started;
	u32 flags = 0;
	u64 ts;

	if (first && !file_open()) {
		finished = true;
		return;
	}
	if (capture_in_progress()) {
		/* Synchronizing now would invalidate the program's capture. */
		trace_fail("an iteration was marked while a CUDA graph was being captured");
		return;
	}
	if (REAL(cuCtxSynchronize)() != CUDA_SUCCESS) {
		trace_fail("cuCtxSynchronize failed at an iteration mark");
		return;
	}
	if (deepum.trace_access_set != ACCESS_SET_NONE) {
		if (!flush_to_host())
			return;
		flags |= DEEPUM_ITER_F_FLUSHED;
	}
	if (first ? !recording_start()
		  : !cupti_ok(cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll"))
		return;
	if (from_uvm_queue)
		drain_all(NULL, NULL);
	ts = timestamp();
	if (first && deepum.trace_access_set == ACCESS_SET_LAUNCH)
		trace_line("O,per-launch");
	trace_line("M,%u,%llu,%u", marks, (unsigned long long)ts, flags);
	if (first)
		managed_ranges_each(write_alloc_line, &ts);
	marks++;
	/* The last mark only closes the last iteration. */
	atomic_store(&tracer_recording, (!deepum.trace_iterations || marks <= deepum.trace_iterations) &&
					!atomic_load(&failed));
}

void tracer_mark(void)
{
	if (!deepum.trace_path[0])
		return;
	pthread_mutex_lock(&mark_lock);
	if (!finished) {
		mark();
		if (atomic_load(&failed) || !atomic_load(&tracer_recording))
			recording_stop();
	}
	pthread_mutex_unlock(&mark_lock);
}

u64 tracer_launch_enter(struct launch *l)
{
	u64 id = atomic_fetch_add(&last_external_id, 1) + 1;

	l->trace_ts = timestamp();
	cupti.cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
	return id;
}

void tracer_launch_exit(const struct launch *l, u64 id, CUresult rc)
{
	uint64_t popped;

	uint32_t stream_id = UINT32_MAX;
	CUcontext ctx = NULL;

	cupti.cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
	/* A failed launch never runs; a captured one runs later, as a graph. */
	if (rc != CUDA_SUCCESS || l->captured)
		return;
	/* The NULL stream is the current context's: CUPTI needs to be told which. */
	if (REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS ||
	    cupti.cuptiGetStreamIdEx(ctx, l->stream, l->per_thread_stream, &stream_id) != CUPTI_SUCCESS)
		stream_id = UINT32_MAX;	/* matched by correlation only */
	trace_line("L,%llu,%u,%llx,%u,%llu,%u", (unsigned long long)id, l->exec_id,
		   (unsigned long long)l->name_hash, l->slot, (unsigned long long)l->trace_ts, stream_id);
	if (deepum.trace_access_set != ACCESS_SET_LAUNCH)
		return;
	pthread_mutex_lock(&mark_lock);
	if (atomic_load(&tracer_recording) && !launch_to_host())
		recording_stop();
	pthread_mutex_unlock(&mark_lock);
}

void tracer_alloc(u64 base, u64 size)
{
	if (atomic_load_explicit(&tracer_recording, memory_order_acquire))
		trace_line("A,%llx,%llu,%llu", (unsigned long long)base, (unsigned long long)size,
			   (unsigned long long)timestamp());
}

void tracer_free(u64 base, u64 size)
{
	if (atomic_load_explicit(&tracer_recording, memory_order_acquire))
		trace_line("F,%llx,%llu,%llu", (unsigned long long)base, (unsigned long long)size,
			   (unsigned long long)timestamp());
}
