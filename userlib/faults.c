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
 * cause and access numbers (CUPTI's are the driver's).  Both fill one locked
 * ring of pending events that faults_poll() empties: CUPTI from a thread of
 * its own (or the engine's, inside a flush), the UVM queue from a reader
 * thread.  The engine's thread spends milliseconds at a time in the driver
 * (prefetch batches) and in the core, and a burst of faults (one event per
 * page touched) fills the driver's queue in a fraction of a second: read by
 * the engine itself, GPT-2 at a 50% budget on the H200 lost 7% of its
 * events.  Events that do not fit are counted as dropped.  Under test
 * lockstep the engine reads the UVM queue itself, so that rounds see the
 * same events every run.
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
	_Atomic u64 last_flush_ns;	/* the reader's, the engine's or the tracer's */
} source;

/* ---- events waiting for the engine -------------------------------------- */

enum {
	PENDING_EVENTS = 1 << 20,	/* 48 MiB, pageable: backlogs of 436k+ were seen */
};

static struct {
	pthread_mutex_t lock;
	struct fault_event *ring;	/* PENDING_EVENTS, mapped at the source's start */
	u64 head, tail;			/* under lock */
} pending = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool pending_map(void)
{
	void *ring = pending.ring ? (void *)pending.ring :
		     mmap(NULL, PENDING_EVENTS * sizeof(*pending.ring), PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	pending.ring = ring == MAP_FAILED ? NULL : ring;
	return pending.ring != NULL;
}

static void pending_push(const struct fault_event *ev, u32 n)
{
	pthread_mutex_lock(&pending.lock);
	for (u32 i = 0; i < n; i++) {
		if (pending.tail - pending.head < PENDING_EVENTS)
			pending.ring[pending.tail++ % PENDING_EVENTS] = ev[i];
		else
			atomic_fetch_add(&source.dropped, 1);
	}
	pthread_mutex_unlock(&pending.lock);
}

static u32 pending_take(struct fault_event *out, u32 max)
{
	u32 n = 0;

	pthread_mutex_lock(&pending.lock);
	while (pending.head != pending.tail && n < max)
		out[n++] = pending.ring[pending.head++ % PENDING_EVENTS];
	pthread_mutex_unlock(&pending.lock);
	return n;
}

/* ---- the UVM tools event queue ----------------------------------------- */

enum {
	UVM_QUEUE_ENTRIES = 1 << 18,	/* 18 MiB, pinned: ~1 s of GPT-2 124M's 270k events/s on the H200 */
	UVM_FLUSH_PERIOD_NS = 20000000,	/* Migration events wait for a flush or progress */
	UVM_READ_BATCH = 1024,
	UVM_READER_NAP_NS = 50000,	/* between reads that found the queue nearly empty */
};

static struct {
	int tools_fd;
	int uvm_fd;			/* CUDA's, never closed here */
	uint8_t *queue;
	struct uvm_control *control;
	pthread_t reader;
	bool reading;			/* the reader thread runs */
	_Atomic bool stop_reading;
	pthread_mutex_t read_lock;	/* a read of the queue and the push of what it got */
} uvm = { .tools_fd = -1, .uvm_fd = -1, .read_lock = PTHREAD_MUTEX_INITIALIZER };

static void uvm_reader_stop(void)
{
	if (!uvm.reading)
		return;
	atomic_store(&uvm.stop_reading, true);
	pthread_join(uvm.reader, NULL);
	uvm.reading = false;
}

static void uvm_stop(void)
{
	uvm_reader_stop();
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

/* What the engine takes from the queue: faults, migrations and the
 * thrashing heuristics' decisions. */
#define UVM_EVENTS_TAKEN                                                                              \
	(1ULL << UVM_EVENT_TYPE_MIGRATION | 1ULL << UVM_EVENT_TYPE_GPU_FAULT |                       \
	 1ULL << UVM_EVENT_TYPE_THRASHING_DETECTED | 1ULL << UVM_EVENT_TYPE_THROTTLING_START |         \
	 1ULL << UVM_EVENT_TYPE_MAP_REMOTE)

static void uvm_event(const uint8_t *entry, struct fault_event *ev)
{
	if (entry[0] == UVM_EVENT_TYPE_GPU_FAULT) {
		const struct uvm_gpu_fault *f = (const void *)entry;

		*ev = (struct fault_event){ .kind = EV_FAULT, .ts = f->cpu_ns, .addr = f->address,
					    .detail = f->access_type };
	} else if (entry[0] == UVM_EVENT_TYPE_THRASHING_DETECTED) {
		const struct uvm_thrashing *t = (const void *)entry;

		*ev = (struct fault_event){ .kind = EV_THRASHING, .ts = t->cpu_ns, .addr = t->address,
					    .bytes = t->size };
	} else if (entry[0] == UVM_EVENT_TYPE_THROTTLING_START) {
		const struct uvm_throttling *t = (const void *)entry;

		*ev = (struct fault_event){ .kind = EV_THROTTLED, .ts = t->cpu_ns, .addr = t->address };
	} else if (entry[0] == UVM_EVENT_TYPE_MAP_REMOTE) {
		const struct uvm_map_remote *r = (const void *)entry;

		*ev = (struct fault_event){ .kind = EV_MAPPED_REMOTE, .ts = r->cpu_ns, .addr = r->address,
					    .bytes = r->size, .detail = r->cause };
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

static u32 uvm_read(struct fault_event *out, u32 max)
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

		if (entry[0] < UVM_EVENT_TYPES_ALL && UVM_EVENTS_TAKEN & 1ULL << entry[0])
			uvm_event(entry, &out[n++]);
	}
	atomic_store_explicit(&uvm.control->get_ahead, get, memory_order_release);
	atomic_store_explicit(&uvm.control->get_behind, get, memory_order_release);
	return n;
}

static u64 uvm_dropped(void)
{
	u64 dropped = 0;

	for (u32 type = 0; type < UVM_EVENT_TYPES_ALL; type++)
		if (UVM_EVENTS_TAKEN & 1ULL << type)
			dropped += uvm.control->dropped[type];
	return dropped;
}

static void *uvm_reader_main(void *arg)
{
	static struct fault_event batch[UVM_READ_BATCH];
	const struct timespec nap = { .tv_nsec = UVM_READER_NAP_NS };

	(void)arg;
	while (!atomic_load(&uvm.stop_reading)) {
		u32 n;

		pthread_mutex_lock(&uvm.read_lock);
		n = uvm_read(batch, UVM_READ_BATCH);
		pending_push(batch, n);
		pthread_mutex_unlock(&uvm.read_lock);
		if (n < UVM_READ_BATCH / 2)
			nanosleep(&nap, NULL);
	}
	return NULL;
}

/* The reader thread, except under test lockstep (the engine reads then). */
static bool uvm_reader_start(char *why, size_t size)
{
	int err;

	if (deepum_lockstep_enabled())
		return true;
	if (!pending_map()) {
		snprintf(why, size, "cannot map the pending-event ring");
		return false;
	}
	atomic_store(&uvm.stop_reading, false);
	err = deepum_thread_start(&uvm.reader, uvm_reader_main, NULL);
	if (err) {
		snprintf(why, size, "cannot start the UVM queue's reader: %s", strerror(err));
		return false;
	}
	uvm.reading = true;
	return true;
}

/* What the reader moved, then what is still in the queue: all events up
 * to now, in order (the tracer's marks drain the queue this way). */
static u32 uvm_poll(struct fault_event *out, u32 max)
{
	u32 n;

	if (!uvm.reading)
		return uvm_read(out, max);
	pthread_mutex_lock(&uvm.read_lock);
	n = pending_take(out, max);
	if (n < max)
		n += uvm_read(out + n, max - n);
	pthread_mutex_unlock(&uvm.read_lock);
	return n;
}

static bool uvm_start(char *why, size_t size)
{
	struct uvm_enable_events enable = {
		.event_types = UVM_EVENTS_TAKEN,
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
	} else if (uvm_reader_start(why, size)) {
		return true;
	}
	uvm_stop();
	return false;
}

/* ---- CUPTI Unified Memory counters ------------------------------------- */

enum {
	CUPTI_BUFFER_BYTES = 1 << 20,	/* small, so that buffers fill and come back soon */
	CUPTI_FLUSH_PERIOD_NS = 2000000,
};

static int64_t cupti_clock_offset_ns;	/* added to CUPTI times to get the engine's clock */

static uint64_t cupti_timestamp(void)
{
	return engine_clock_ns();
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
			.ts = u->start + (u64)cupti_clock_offset_ns,
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
		pending_push(&ev, 1);
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
	if (!pending_map()) {
		snprintf(why, size, "cannot map the pending-event ring");
		return false;
	}
	if (!cupti_load(why, size))
		return false;
	/* Stamped with the engine's clock, or converted from CUPTI's default
	 * on Linux, CLOCK_REALTIME. */
	if (!cupti.cuptiActivityRegisterTimestampCallback ||
	    cupti.cuptiActivityRegisterTimestampCallback(cupti_timestamp) != CUPTI_SUCCESS) {
		clock_gettime(CLOCK_REALTIME, &real);
		cupti_clock_offset_ns = (int64_t)engine_clock_ns() -
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

	/* Partly filled buffers come back only when flushed by force. */
	if (now - source.last_flush_ns > CUPTI_FLUSH_PERIOD_NS || deepum_lockstep_enabled()) {
		source.last_flush_ns = now;
		cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	}
	return pending_take(out, max);
}

static void cupti_stop(void)
{
	cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	cupti.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* ---- the choice --------------------------------------------------------- */

bool faults_start(CUdevice device, enum fault_source_choice choice, char *why, size_t size)
{
	char uvm_why[384] = "", cupti_why[384] = "";

	if (choice != FAULTS_CUPTI) {
		if (uvm_start(uvm_why, sizeof(uvm_why))) {
			source.running = source.ran = SOURCE_UVM_TOOLS;
			return true;
		}
		if (choice == FAULTS_UVM_TOOLS) {
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
	pthread_mutex_lock(&pending.lock);
	pending.head = pending.tail;	/* a later start hears only its own events */
	pthread_mutex_unlock(&pending.lock);
}
