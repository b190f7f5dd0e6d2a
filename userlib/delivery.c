// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stream-ordered delivery of the exec ID about to run, and the link to
 * /dev/deepum.
 *
 * A prefetcher must know which kernel runs now, not which one the host
 * enqueued last (the host runs far ahead of the GPU).  The launching thread
 * writes each launch's exec ID into its stream's ring in the launch page
 * (struct deepum_launch_page, kmod/include/uapi/deepum.h), a plain store; how far the stream has got travels in the
 * stream itself and lands in the page's position word when the GPU gets
 * there:
 *   write     cuStreamWriteValue64 of (seq << 32 | exec_id) before every
 *             DEEPUM_WRITE_EVERY-th launch (default 8) since the last
 *             iteration mark: the GPU stores it.  Counted from the mark, the
 *             writes fall on the same launches every iteration, and so do
 *             the launches the engine ties faults to (GPT-2 XL's 4,580
 *             launches per iteration, counted from the start, took turns
 *             between two sets, and the engine learned every table twice).
 *             The driver's call costs +0.81 us on the H200, so one per
 *             launch missed the 1 us target; the engine's window looks
 *             hundreds of launches ahead and needs the position only to
 *             within a few launches (the default);
 *   callback  cuLaunchHostFunc before every launch, a host function that
 *             stores the position and issues DEEPUM_IOC_SET_EXEC_ID:
 *             DeepUM's method, +18 us per launch on the H200, because every
 *             launch then waits for a driver thread.
 * With the module attached, the page is the module's (mmap() of the
 * device, registered with CUDA) when it offers one: the module reads the
 * positions itself, and "write" needs no system call.  With an older module,
 * or memory CUDA will not register, exec IDs reach it by "callback".
 * Streams being captured into a CUDA graph get nothing: an extra node could
 * change the graph, and a failed call would invalidate the capture.  Whether
 * one may be is known without a driver call (capture.c); only then is the
 * driver asked, for the launch's own stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "deepum_user.h"

struct stream_slot {
	_Atomic uintptr_t key;		/* stream identity; 0: free */
	_Atomic u32 seq;		/* last sequence number given out */
	_Atomic u32 marked_seq;		/* ... when the last iteration mark came */
};

static struct stream_slot *streams;
static struct deepum_launch_page *page;	/* host view */
static CUdeviceptr page_device;		/* the same memory, as the GPU sees it */
static char attach_reason[256];

/* Each thread's per-thread default stream is a stream of its own, though
 * all are named CU_STREAM_PER_THREAD: the address of this marker tells
 * them apart. */
static _Thread_local char per_thread_stream_marker;

/* The calling thread's latest delivered launch: where its marks and
 * reported frees fall in stream order. */
static _Thread_local struct {
	CUstream stream;
	u32 slot;
	u32 seq;
} last_launch = { .slot = DEEPUM_PAGE_STREAMS };

bool delivery_tables_init(void)
{
	streams = deepum_calloc(DEEPUM_PAGE_STREAMS, sizeof(*streams));
	return streams != NULL;
}

bool delivery_attach(const char *device_path, const char **reason)
{
	struct deepum_api api = { .api = DEEPUM_API_VERSION };
	struct deepum_attach attach = { 0 };
	int fd = open(device_path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		snprintf(attach_reason, sizeof(attach_reason), "%s: %s", device_path, strerror(errno));
	} else if (ioctl(fd, DEEPUM_IOC_API, &api) != 0 || ioctl(fd, DEEPUM_IOC_ATTACH, &attach) != 0) {
		snprintf(attach_reason, sizeof(attach_reason), "%s does not speak deepum API %u.%u with ATTACH (%s)",
			 device_path, DEEPUM_API_MAJOR, DEEPUM_API_MINOR, strerror(errno));
		close(fd);
	} else {
		deepum.device_fd = fd;
		deepum.module_launch_page = api.features & DEEPUM_FEATURE_LAUNCH_PAGE;
		return true;
	}
	*reason = attach_reason;
	return false;
}

/*
 * The module learns this process's GPU faults once its context is bound to
 * CUDA's nvidia-uvm VA space (DEEPUM_IOC_BIND_UVM).  CUDA opens that file
 * with its first context, so this runs at the first launch.  Failing costs
 * prefetching only: the program runs on, with one warning.
 */
static bool bind_uvm_fd(int fd, void *arg)
{
	struct deepum_bind_uvm req = { .fd = (u32)fd };
	int *err = arg;

	if (*err == ENODEV)
		return false;	/* the module has no nvidia-uvm backend */
	if (ioctl(deepum.device_fd, DEEPUM_IOC_BIND_UVM, &req) == 0)
		return true;
	*err = errno;
	return false;
}

static void bind_uvm(void)
{
	int err = ENOENT;

	deepum.uvm_bound = uvm_fd_find(bind_uvm_fd, &err);
	if (!deepum.uvm_bound) {
		char message[256];

		snprintf(message, sizeof(message), "the module did not take this process's GPU faults "
			 "(DEEPUM_IOC_BIND_UVM: %s); it sees launches only", strerror(err));
		deepum_warn(message);
	}
}

static size_t page_bytes(void)
{
	size_t unit = (size_t)sysconf(_SC_PAGESIZE);

	return (sizeof(*page) + unit - 1) / unit * unit;
}

/* The module's page, mapped for the GPU too; NULL (with one warning) if
 * either refuses, and exec IDs then reach the module by host callback. */
static struct deepum_launch_page *module_page(CUdeviceptr *device)
{
	void *host = mmap(NULL, page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, deepum.device_fd, 0);
	char message[256];
	CUresult rc = CUDA_ERROR_NOT_FOUND;

	if (host == MAP_FAILED) {
		snprintf(message, sizeof(message), "cannot map the module's launch page (%s); exec IDs reach "
			 "the module by host callback, tens of us per launch", strerror(errno));
		deepum_warn(message);
		return NULL;
	}
	if (deepum_real[ENTRY_cuMemHostRegister_v2])
		rc = REAL(cuMemHostRegister_v2)(host, page_bytes(),
						CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
	if (rc == CUDA_SUCCESS && (rc = REAL(cuMemHostGetDevicePointer_v2)(device, host, 0)) != CUDA_SUCCESS &&
	    deepum_real[ENTRY_cuMemHostUnregister])
		REAL(cuMemHostUnregister)(host);
	if (rc != CUDA_SUCCESS) {
		munmap(host, page_bytes());
		snprintf(message, sizeof(message), "CUDA did not take the module's launch page (error %d); exec "
			 "IDs reach the module by host callback, tens of us per launch", rc);
		deepum_warn(message);
		return NULL;
	}
	return host;
}

/* A page of libdeepum's own, in mapped pinned memory; NULL if there is none. */
static struct deepum_launch_page *own_page(CUdeviceptr *device)
{
	struct deepum_launch_page *host = NULL;

	if (REAL(cuMemHostAlloc)((void **)&host, sizeof(*page),
				 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
		deepum_disable("cannot allocate the launch page (mapped pinned memory); "
			       "CUDA calls pass straight through");
		return NULL;
	}
	if (REAL(cuMemHostGetDevicePointer_v2)(device, host, 0) != CUDA_SUCCESS) {
		REAL(cuMemFreeHost)(host);
		deepum_disable("cannot map the launch page into the GPU; "
			       "CUDA calls pass straight through");
		return NULL;
	}
	memset(host, 0, sizeof(*page));
	host->magic = DEEPUM_PAGE_MAGIC;
	host->version = DEEPUM_PAGE_VERSION;
	host->streams = DEEPUM_PAGE_STREAMS;
	host->depth = DEEPUM_RING_DEPTH;
	return host;
}

/* The page needs a CUDA context, so it is made at the first launch; so is
 * the engine, which needs the page.  Before any delivery reads
 * deepum.delivery (page_ready() orders them). */
static void page_create(void)
{
	struct deepum_launch_page *host = NULL;
	CUdeviceptr device = 0;

	if (deepum.device_fd >= 0 && deepum.module_launch_page)
		host = module_page(&device);
	if (!host) {
		/* The module would not see positions in a page of ours. */
		deepum.module_launch_page = false;
		if (deepum.device_fd >= 0)
			deepum.delivery = DELIVERY_CALLBACK;
		host = own_page(&device);
	}
	if (!host)
		return;
	page_device = device;
	__atomic_store_n(&page, host, __ATOMIC_RELEASE);
	if (deepum.device_fd >= 0)
		bind_uvm();
	if (engine_wanted())
		engine_start(host);
}

/*
 * Allocating pinned memory is one of the calls a capture in global mode
 * forbids to every thread (and the refusal invalidates that capture), so
 * the page is not made while a capture is known to be in progress: those
 * first launches go undelivered instead.  (Once capture tracking is lost,
 * only the launch's own stream is known not to capture.)
 */
static bool page_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (__atomic_load_n(&page, __ATOMIC_ACQUIRE))
		return true;
	if (capture_in_progress()) {
		COUNT(delivery_skipped_capture, 1);
		return false;
	}
	pthread_once(&once, page_create);
	return __atomic_load_n(&page, __ATOMIC_ACQUIRE) != NULL && deepum_active();
}

/* The stream a launch really goes to, as a handle valid in any API variant,
 * and the key that tells it from every other stream. */
static CUstream resolve_stream(CUstream s, bool per_thread_stream, uintptr_t *key)
{
	if (s == CU_STREAM_PER_THREAD || (s == NULL && per_thread_stream)) {
		*key = (uintptr_t)&per_thread_stream_marker;
		return CU_STREAM_PER_THREAD;
	}
	if (s == NULL)
		s = CU_STREAM_LEGACY;
	*key = (uintptr_t)s;
	return s;
}

static u32 stream_slot(uintptr_t key, CUstream handle)
{
	u32 i = (u32)((key * 0x9e3779b97f4a7c15ULL) >> 40) % DEEPUM_PAGE_STREAMS;

	for (u32 probe = 0; probe < DEEPUM_PAGE_STREAMS; probe++, i = (i + 1) % DEEPUM_PAGE_STREAMS) {
		uintptr_t found = atomic_load_explicit(&streams[i].key, memory_order_acquire);

		if (found == 0) {
			if (atomic_compare_exchange_strong(&streams[i].key, &found, key)) {
				__atomic_store_n(&page->stream[i], (u64)(uintptr_t)handle, __ATOMIC_RELEASE);
				return i;
			}
			/* Lost the race: @found is the winner's key. */
		}
		if (found == key)
			return i;
	}
	return DEEPUM_PAGE_STREAMS;
}

/* The ring's word for launch @seq of @slot: its exec ID, or NONE if the
 * launching thread has already reused the entry. */
static u32 ring_exec_id(u32 slot, u32 seq)
{
	u64 entry = __atomic_load_n(&page->ring[slot][seq % DEEPUM_RING_DEPTH], __ATOMIC_ACQUIRE);

	return (u32)(entry >> 32) == seq ? (u32)entry : DEEPUM_EXEC_NONE;
}

/* Runs on a driver thread, in stream order, once the work before it is done. */
static void deliver_on_host(void *data)
{
	u32 slot = (u32)((uintptr_t)data >> 32);
	u32 seq = (u32)(uintptr_t)data;
	u32 exec_id = ring_exec_id(slot, seq);

	__atomic_store_n(&page->position[slot], (u64)seq << 32 | exec_id, __ATOMIC_RELEASE);
	/* A module that reads its page has just been told. */
	if (deepum.device_fd >= 0 && !deepum.module_launch_page && deepum_active()) {
		struct deepum_set_exec_id req = {
			.exec_id = exec_id,
			.stream = slot,
			.name_hash = launch_name_hash(exec_id),
		};

		if (ioctl(deepum.device_fd, DEEPUM_IOC_SET_EXEC_ID, &req) != 0)
			deepum_disable("DEEPUM_IOC_SET_EXEC_ID failed; CUDA calls pass straight through");
		else
			COUNT(set_exec_id_ioctls, 1);
	}
}

/* Enqueue on @stream: "@slot has reached launch @seq". */
static CUresult publish_position(CUstream stream, u32 slot, u32 seq, u32 exec_id)
{
	u64 *word = &page->position[slot];

	COUNT(position_writes, 1);
	if (deepum.delivery == DELIVERY_CALLBACK)
		return REAL(cuLaunchHostFunc)(stream, deliver_on_host, (void *)((uintptr_t)slot << 32 | seq));
	return REAL(cuStreamWriteValue64_v2)(stream, page_device + (CUdeviceptr)((char *)word - (char *)page),
					     (u64)seq << 32 | exec_id, CU_STREAM_WRITE_VALUE_DEFAULT);
}

void delivery_enqueue(struct launch *l)
{
	uintptr_t key;
	CUstream stream = resolve_stream(l->stream, l->per_thread_stream, &key);
	u32 slot, seq;

	l->slot = DEEPUM_PAGE_STREAMS;
	if (capture_possible()) {
		COUNT(capture_queries, 1);
		l->captured = capture_stream_capturing(stream);
	}
	if (l->captured) {
		COUNT(delivery_skipped_capture, 1);
		return;
	}
	if (!page_ready())
		return;
	slot = stream_slot(key, stream);
	if (slot == DEEPUM_PAGE_STREAMS) {
		COUNT(delivery_skipped_streams, 1);
		return;
	}
	l->slot = slot;
	/* The kernel's name for the module, before the first entry that names it. */
	if (l->exec_id < DEEPUM_PAGE_EXEC_IDS && !__atomic_load_n(&page->name_hash[l->exec_id], __ATOMIC_RELAXED))
		__atomic_store_n(&page->name_hash[l->exec_id], l->name_hash, __ATOMIC_RELAXED);
	/* Enqueue order is stream order when one thread at a time launches
	 * on the stream (the common case); threads racing on one stream may
	 * land their entries out of sequence order. */
	seq = atomic_fetch_add_explicit(&streams[slot].seq, 1, memory_order_relaxed) + 1;
	__atomic_store_n(&page->ring[slot][seq % DEEPUM_RING_DEPTH], (u64)seq << 32 | l->exec_id,
			 __ATOMIC_RELEASE);
	last_launch.stream = stream;
	last_launch.slot = slot;
	last_launch.seq = seq;
	COUNT(delivered, 1);
	if ((deepum.delivery == DELIVERY_CALLBACK ||
	     (seq - atomic_load_explicit(&streams[slot].marked_seq, memory_order_relaxed)) % deepum.write_every == 0) &&
	    publish_position(stream, slot, seq, l->exec_id) != CUDA_SUCCESS)
		deepum_disable("a stream-ordered exec-ID delivery failed; CUDA calls pass straight through");
}

bool delivery_here(struct stream_point *at)
{
	at->slot = last_launch.slot;
	at->seq = last_launch.seq;
	if (at->slot == DEEPUM_PAGE_STREAMS || !deepum_active())
		return false;
	if (capture_possible() && capture_stream_capturing(last_launch.stream))
		return false;
	return publish_position(last_launch.stream, at->slot, at->seq, ring_exec_id(at->slot, at->seq)) ==
	       CUDA_SUCCESS;
}

void delivery_mark_iteration(void)
{
	u32 slot = last_launch.slot, seq;

	if (slot != DEEPUM_PAGE_STREAMS)
		atomic_store_explicit(&streams[slot].marked_seq, last_launch.seq, memory_order_relaxed);
	/* Only the module reads marks from the page (the engine takes them
	 * through its intake), after the calling thread's latest launch. */
	if (!deepum.module_launch_page || slot == DEEPUM_PAGE_STREAMS || !deepum_active() ||
	    (capture_possible() && capture_stream_capturing(last_launch.stream)))
		return;
	seq = atomic_fetch_add_explicit(&streams[slot].seq, 1, memory_order_relaxed) + 1;
	atomic_store_explicit(&streams[slot].marked_seq, seq, memory_order_relaxed);
	__atomic_store_n(&page->ring[slot][seq % DEEPUM_RING_DEPTH], (u64)seq << 32 | DEEPUM_EXEC_ITERATION,
			 __ATOMIC_RELEASE);
	last_launch.seq = seq;
	if (publish_position(last_launch.stream, slot, seq, DEEPUM_EXEC_ITERATION) != CUDA_SUCCESS)
		deepum_disable("a stream-ordered iteration mark failed; CUDA calls pass straight through");
}

bool delivery_on_stream(CUstream stream, struct stream_point *at)
{
	uintptr_t key;
	CUstream handle = resolve_stream(stream, false, &key);

	at->slot = DEEPUM_PAGE_STREAMS;
	if (!__atomic_load_n(&page, __ATOMIC_ACQUIRE) || (capture_possible() && capture_stream_capturing(handle)))
		return false;
	at->slot = stream_slot(key, handle);
	if (at->slot == DEEPUM_PAGE_STREAMS)
		return false;
	at->seq = atomic_load_explicit(&streams[at->slot].seq, memory_order_relaxed);
	return at->seq && publish_position(handle, at->slot, at->seq, ring_exec_id(at->slot, at->seq)) == CUDA_SUCCESS;
}

void delivery_report_free(u64 addr, u64 len)
{
	struct deepum_range range = { .addr = addr, .len = len };

	if (deepum.device_fd >= 0 && ioctl(deepum.device_fd, DEEPUM_IOC_INVALIDATE, &range) != 0) {
		deepum_disable("DEEPUM_IOC_INVALIDATE failed; CUDA calls pass straight through");
		return;
	}
	COUNT(frees_reported, 1);
}
