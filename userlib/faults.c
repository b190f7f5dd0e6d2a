// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Where the engine hears what the GPU did: page faults (what to learn) and
 * migrations (what is resident, whose copy took how long).  Two sources,
 * chosen by DEEPUM_FAULTS:
 *
 *   uvm-tools  the driver's own event queue on /dev/nvidia-uvm-tools, read
 *              in this process (no driver change; uvm_tools_abi.h).
 *              GpuFault events are queued while the fault is serviced, with
 *              the CPU time (CLOCK_MONOTONIC_RAW); Migration events when the
 *              copy is done, or at a flush (every UVM_FLUSH_PERIOD_NS).
 *   cupti      CUPTI's Unified Memory counters.  On the H200 CUPTI delivered
 *              none at all once cuDNN was loaded (ResNet-50), hence the
 *              queue is the first choice.  CUPTI is asked to stamp records
 *              with the engine's clock when it can.
 *
 * Both give the same events (struct fault_event) and both use the same
 * cause and access numbers (CUPTI's are the driver's).  The UVM queue is
 * read by the engine's thread; CUPTI hands its buffers to a thread of its
 * own (or to the engine's, inside a flush), so its events go through a
 * locked ring.  Events that do not fit are counted as dropped.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "deepum_user.h"
#include "uvm_tools_abi.h"

u64 engine_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

enum source_kind { SOURCE_NONE, SOURCE_UVM_TOOLS, SOURCE_CUPTI };

static const char *const source_names[] = { NULL, "uvm-tools", "cupti" };

static struct {
	enum source_kind running;
	enum source_kind ran;		/* the one started, for the statistics */
	_Atomic u64 dropped;		/* events lost (the UVM queue's added at its stop) */
	u64 last_flush_ns;
} source;

/* ---- the UVM tools event queue ----------------------------------------- */

enum {
	UVM_QUEUE_ENTRIES = 1 << 19,	/* 36 MiB: GPT-2 124M at a 75% budget made 270k events/s on the H200 */
	UVM_FLUSH_PERIOD_NS = 20000000,	/* Migration events wait for a flush or progress */
};

static struct {
	int tools_fd;
	int uvm_fd;			/* CUDA's, never closed here */
	uint8_t *queue;
	struct uvm_control *control;
} uvm = { .tools_fd = -1, .uvm_fd = -1 };

static void uvm_stop(void)
{
	if (uvm.tools_fd >= 0)
		close(uvm.tools_fd);	/* the driver lets go of the queue's pages */
	if (uvm.queue)
		munmap(uvm.queue, (size_t)UVM_QUEUE_ENTRIES * UVM_EVENT_ENTRY_BYTES);
	if (uvm.control)
		munmap(uvm.control, sizeof(*uvm.control));
	uvm.tools_fd = -1;
	uvm.queue = NULL;
	uvm.control = NULL;
}

bool uvm_fd_find(bool (*accept)(int fd, void *arg), void *arg)
{
	DIR *fds = opendir("/proc/self/fd");
	struct dirent *d;
	bool found = false;

	if (!fds)
		return false;
	while (!found && (d = readdir(fds))) {
		char link[32 + sizeof(d->d_name)], target[sizeof(deepum.uvm_device_path)];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", d->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, deepum.uvm_device_path) == 0)
			found = accept(atoi(d->d_name), arg);
	}
	closedir(fds);
	return found;
}

static bool uvm_tracker_on(int fd, void *arg __attribute__((unused)))
{
	struct uvm_init_event_tracker init = {
		.queue_buffer = (u64)(uintptr_t)uvm.queue,
		.queue_entries = UVM_QUEUE_ENTRIES,
		.control_buffer = (u64)(uintptr_t)uvm.control,
		.uvm_fd = (u32)fd,
	};

	if (fd == uvm.tools_fd || ioctl(uvm.tools_fd, UVM_TOOLS_INIT_EVENT_TRACKER_V2, &init) != 0 ||
	    init.rm_status != 0)
		return false;
	uvm.uvm_fd = fd;
	return true;
}

/* A tracker on the first of the process's UVM files that takes one. */
static bool uvm_attach_tracker(void)
{
	return uvm_fd_find(uvm_tracker_on, NULL);
}

static bool uvm_start(char *why, size_t size)
{
	struct uvm_enable_events enable = {
		.event_types = 1ULL << UVM_EVENT_TYPE_MIGRATION | 1ULL << UVM_EVENT_TYPE_GPU_FAULT,
	};

	uvm.tools_fd = open(deepum.uvm_tools_path, O_RDWR | O_CLOEXEC);
	if (uvm.tools_fd < 0) {
		snprintf(why, size, "%s: %s", deepum.uvm_tools_path, strerror(errno));
		return false;
	}
	/* Anonymous memory: the driver pins it, and it must not be a UVM mapping. */
	uvm.queue = mmap(NULL, (size_t)UVM_QUEUE_ENTRIES * UVM_EVENT_ENTRY_BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uvm.control = mmap(NULL, sizeof(*uvm.control), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (uvm.queue == MAP_FAILED || uvm.control == MAP_FAILED) {
		uvm.queue = uvm.queue == MAP_FAILED ? NULL : uvm.queue;
		uvm.control = uvm.control == MAP_FAILED ? NULL : uvm.control;
		snprintf(why, size, "cannot map the UVM event queue");
	} else if (!uvm_attach_tracker()) {
		snprintf(why, size, "no file of this process open on %s takes a UVM event tracker",
			 deepum.uvm_device_path);
	} else if (ioctl(uvm.tools_fd, UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS, &enable) != 0 || enable.rm_status) {
		snprintf(why, size, "%s refuses to enable fault and migration events (status %u)",
			 deepum.uvm_tools_path, enable.rm_status);
	} else {
		return true;
	}
	uvm_stop();
	return false;
}

static void uvm_event(const uint8_t *entry, struct fault_event *ev)
{
	if (entry[0] == UVM_EVENT_TYPE_GPU_FAULT) {
		const struct uvm_gpu_fault *f = (const void *)entry;

		*ev = (struct fault_event){ .kind = EV_FAULT, .ts = f->cpu_ns, .addr = f->address,
					    .detail = f->access_type };
	} else {
		const struct uvm_migration *m = (const void *)entry;

		*ev = (struct fault_event){
			.kind = m->dst_index ? EV_MIGRATED_IN : EV_MIGRATED_OUT,
			.ts = m->begin_cpu_ns,
			.addr = m->address,
			.bytes = m->bytes,
			.copy_begin_ns = m->begin_gpu_ns,
			.copy_end_ns = m->end_gpu_ns,
			.detail = m->cause,
		};
	}
}

static void uvm_flush(u64 now)
{
	struct uvm_flush_events flush = { 0 };

	source.last_flush_ns = now;
	ioctl(uvm.uvm_fd, UVM_TOOLS_FLUSH_EVENTS, &flush);	/* best effort */
}

static u32 uvm_poll(struct fault_event *out, u32 max)
{
	const u32 mask = UVM_QUEUE_ENTRIES - 1;
	u32 get = atomic_load_explicit(&uvm.control->get_behind, memory_order_relaxed) & mask;
	u32 put = atomic_load_explicit(&uvm.control->put_behind, memory_order_acquire) & mask;
	u32 n = 0;
	u64 now = engine_clock_ns();

	if (now - source.last_flush_ns > UVM_FLUSH_PERIOD_NS)
		uvm_flush(now);
	for (; get != put && n < max; get = (get + 1) & mask) {
		const uint8_t *entry = uvm.queue + (size_t)get * UVM_EVENT_ENTRY_BYTES;

		if (entry[0] == UVM_EVENT_TYPE_GPU_FAULT || entry[0] == UVM_EVENT_TYPE_MIGRATION)
			uvm_event(entry, &out[n++]);
	}
	atomic_store_explicit(&uvm.control->get_ahead, get, memory_order_release);
	atomic_store_explicit(&uvm.control->get_behind, get, memory_order_release);
	return n;
}

static u64 uvm_dropped(void)
{
	return uvm.control->dropped[UVM_EVENT_TYPE_GPU_FAULT] + uvm.control->dropped[UVM_EVENT_TYPE_MIGRATION];
}

/* ---- CUPTI Unified Memory counters ------------------------------------- */

enum {
	CUPTI_BUFFER_BYTES = 1 << 20,	/* small, so that buffers fill and come back soon */
	CUPTI_FLUSH_PERIOD_NS = 2000000,
	CUPTI_RING = 1 << 16,
};

static struct {
	pthread_mutex_t lock;
	struct fault_event ring[CUPTI_RING];
	u32 head, tail;			/* under lock */
	int64_t clock_offset_ns;	/* added to CUPTI times to get the engine's clock */
} cu = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t cupti_timestamp(void)
{
	return engine_clock_ns();
}

static void cupti_push(const struct fault_event *ev)
{
	pthread_mutex_lock(&cu.lock);
	if (cu.tail - cu.head < CUPTI_RING)
		cu.ring[cu.tail++ % CUPTI_RING] = *ev;
	else
		atomic_fetch_add(&source.dropped, 1);
	pthread_mutex_unlock(&cu.lock);
}

static void cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, CUPTI_BUFFER_BYTES);
	*size = *buffer ? CUPTI_BUFFER_BYTES : 0;	/* none: CUPTI counts the loss */
	*max_records = 0;
}

static void cupti_buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	CUpti_Activity *record = NULL;
	size_t dropped = 0;

	(void)size;
	while (cupti.cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
		const CUpti_ActivityUnifiedMemoryCounter3 *u = (const void *)record;
		struct fault_event ev = {
			.ts = u->start + (u64)cu.clock_offset_ns,
			.addr = u->address,
			.detail = u->flags,
		};

		if (record->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
			continue;
		switch (u->counterKind) {
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
			ev.kind = EV_FAULT;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
			ev.kind = u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD ?
				  EV_MIGRATED_IN : EV_MIGRATED_OUT;
			ev.bytes = u->value;
			ev.copy_begin_ns = u->start;
			ev.copy_end_ns = u->end;
			break;
		default:
			continue;
		}
		cupti_push(&ev);
	}
	free(buffer);
	if (cupti.cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS)
		atomic_fetch_add(&source.dropped, dropped);
}

static bool cupti_ok(CUptiResult rc, const char *what, char *why, size_t size)
{
	const char *text = "unknown error";

	if (rc == CUPTI_SUCCESS)
		return true;
	cupti.cuptiGetResultString(rc, &text);
	snprintf(why, size, "%s failed: %s (%d)", what, text, rc);
	return false;
}

static bool cupti_start(CUdevice device, char *why, size_t size)
{
	static const CUpti_ActivityUnifiedMemoryCounterKind kinds[] = {
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
		CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
	};
	CUpti_ActivityUnifiedMemoryCounterConfig um[sizeof(kinds) / sizeof(kinds[0])];
	struct timespec real;

	if (deepum.trace_path[0]) {
		snprintf(why, size, "the tracer (DEEPUM_TRACE) has CUPTI's activity callbacks");
		return false;
	}
	if (!cupti_load(why, size))
		return false;
	/* Stamped with the engine's clock, or converted from CUPTI's default
	 * on Linux, CLOCK_REALTIME. */
	if (!cupti.cuptiActivityRegisterTimestampCallback ||
	    cupti.cuptiActivityRegisterTimestampCallback(cupti_timestamp) != CUPTI_SUCCESS) {
		clock_gettime(CLOCK_REALTIME, &real);
		cu.clock_offset_ns = (int64_t)engine_clock_ns() -
				     (int64_t)((u64)real.tv_sec * 1000000000ULL + (u64)real.tv_nsec);
	}
	for (size_t i = 0; i < sizeof(um) / sizeof(um[0]); i++)
		um[i] = (CUpti_ActivityUnifiedMemoryCounterConfig){
			.scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
			.kind = kinds[i],
			.deviceId = (uint32_t)device,
			.enable = 1,
		};
	if (!cupti_ok(cupti.cuptiActivityRegisterCallbacks(cupti_buffer_requested, cupti_buffer_completed),
		      "cuptiActivityRegisterCallbacks", why, size) ||
	    !cupti_ok(cupti.cuptiActivityConfigureUnifiedMemoryCounter(um, sizeof(um) / sizeof(um[0])),
		      "cuptiActivityConfigureUnifiedMemoryCounter", why, size) ||
	    !cupti_ok(cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER), "cuptiActivityEnable",
		      why, size))
		return false;
	if (cupti.cuptiActivityFlushPeriod)
		cupti.cuptiActivityFlushPeriod(1);
	return true;
}

static u32 cupti_poll(struct fault_event *out, u32 max)
{
	u64 now = engine_clock_ns();
	u32 n = 0;

	/* Partly filled buffers come back only when flushed by force. */
	if (now - source.last_flush_ns > CUPTI_FLUSH_PERIOD_NS || deepum_lockstep_enabled()) {
		source.last_flush_ns = now;
		cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	pthread_mutex_lock(&cu.lock);
	while (cu.head != cu.tail && n < max)
		out[n++] = cu.ring[cu.head++ % CUPTI_RING];
	pthread_mutex_unlock(&cu.lock);
	return n;
}

static void cupti_stop(void)
{
	cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* ---- the choice --------------------------------------------------------- */

bool faults_start(CUdevice device, char *why, size_t size)
{
	char uvm_why[384] = "", cupti_why[384] = "";

	if (deepum.faults != FAULTS_CUPTI) {
		if (uvm_start(uvm_why, sizeof(uvm_why))) {
			source.running = source.ran = SOURCE_UVM_TOOLS;
			return true;
		}
		if (deepum.faults == FAULTS_UVM_TOOLS) {
			snprintf(why, size, "no UVM event queue: %s", uvm_why);
			return false;
		}
	}
	if (cupti_start(device, cupti_why, sizeof(cupti_why))) {
		source.running = source.ran = SOURCE_CUPTI;
		return true;
	}
	snprintf(why, size, "no fault source: %s%s%s", uvm_why, uvm_why[0] ? "; " : "", cupti_why);
	return false;
}

const char *faults_source_name(void)
{
	return source_names[source.ran];
}

u32 faults_poll(struct fault_event *out, u32 max)
{
	switch (source.running) {
	case SOURCE_UVM_TOOLS:
		return uvm_poll(out, max);
	case SOURCE_CUPTI:
		return cupti_poll(out, max);
	default:
		return 0;
	}
}

void faults_flush(void)
{
	if (source.running == SOURCE_UVM_TOOLS)
		uvm_flush(engine_clock_ns());
}

u64 faults_dropped(void)
{
	return atomic_load(&source.dropped) + (source.running == SOURCE_UVM_TOOLS ? uvm_dropped() : 0);
}

void faults_stop(void)
{
	if (source.running == SOURCE_UVM_TOOLS) {
		atomic_fetch_add(&source.dropped, uvm_dropped());
		uvm_stop();
	} else if (source.running == SOURCE_CUPTI) {
		cupti_stop();
	}
	source.running = SOURCE_NONE;
}
