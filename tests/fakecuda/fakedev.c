// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Test doubles of two devices' ioctls, for libdeepum's side of each
 * contract.  Preloaded ahead of libdeepum:
 *
 *   /dev/deepum          every ioctl of the deepum magic (on whatever file
 *                        libdeepum opened as DEEPUM_DEVICE), answered the way
 *                        the module documents;
 *   /dev/nvidia-uvm-tools the UVM tools event queue (uvm_tools_abi.h), on the
 *                        file FAKEUVM_TOOLS names, attached to the file the
 *                        fake driver opened as FAKECUDA_UVM_DEVICE: GPU fault
 *                        and migration events of the fake driver's pretend
 *                        GPU are queued as nvidia-uvm queues them.
 *
 * FAKEUVM_THRASHING=1: every fault-driven migration to the GPU is also
 * reported as the driver's thrashing heuristics would report a page they
 * pinned: thrashing detected, throttling started and the range mapped
 * remotely (each only if enabled on the queue).
 *
 * Each is logged to FAKECUDA_LOG next to the fake driver's lines, so tests
 * see all in one order.  Other ioctls go to libc.
 *
 * FAKEDEV_FAIL=API|ATTACH|SET_EXEC_ID|INVALIDATE makes that command fail
 * with EIO.
 *
 * The launch page: mmap() of the deepum file gives a page as the module
 * documents it (FAKEDEV_NO_LAUNCH_PAGE=1: a module from before API 1.2,
 * which neither announces nor maps one).  Like the module, at exit it reads
 * each stream's launches up to the position the "GPU" wrote, and logs them:
 * "fakedev launch slot=S exec=E name_hash=H", "fakedev iteration slot=S"
 * (a mark), or "fakedev lost slot=S".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <stdint.h>
#include <time.h>

#include "../../kmod/include/uapi/deepum.h"
#include "../../userlib/uvm_tools_abi.h"
#include "fakegpu.h"

static void log_line(const char *fmt, ...)
{
	const char *path = getenv("FAKECUDA_LOG");
	char line[512];
	va_list ap;
	int fd, n;

	if (!path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != n)
		abort();
	close(fd);
}

static int refuse_if_asked(const char *command)
{
	const char *fail = getenv("FAKEDEV_FAIL");

	if (fail && strcmp(fail, command) == 0) {
		log_line("ioctl %s -> EIO", command);
		errno = EIO;
		return -1;
	}
	return 0;
}

/* ---- the launch page ---------------------------------------------------- */

static struct deepum_launch_page *launch_page;	/* the fake module's view */
static int launch_page_fd = -1;

static int fd_is(int fd, const char *name);

static int launch_page_offered(void)
{
	const char *no = getenv("FAKEDEV_NO_LAUNCH_PAGE");

	return !no || strcmp(no, "1") != 0;
}

__attribute__((visibility("default"))) void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	static void *(*libc_mmap)(void *, size_t, int, int, int, off_t);
	size_t unit = (size_t)sysconf(_SC_PAGESIZE);

	if (!libc_mmap)
		libc_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	if (fd < 0 || !fd_is(fd, "DEEPUM_DEVICE"))
		return libc_mmap(addr, length, prot, flags, fd, offset);
	log_line("mmap deepum length=%zu offset=%lld", length, (long long)offset);
	if (!launch_page_offered()) {
		errno = ENODEV;
		return MAP_FAILED;
	}
	if (offset || !(flags & MAP_SHARED) || length != (sizeof(*launch_page) + unit - 1) / unit * unit) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (!launch_page) {
		/* The module's page outlives the program's mapping of it (which
		 * it may unmap): the fake keeps a view of its own. */
		launch_page_fd = memfd_create("deepum-launch-page", MFD_CLOEXEC);
		if (launch_page_fd < 0 || ftruncate(launch_page_fd, (off_t)length) < 0)
			return MAP_FAILED;
		launch_page = libc_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, launch_page_fd, 0);
		if (launch_page == MAP_FAILED) {
			launch_page = NULL;
			return MAP_FAILED;
		}
		launch_page->magic = DEEPUM_PAGE_MAGIC;
		launch_page->version = DEEPUM_PAGE_VERSION;
		launch_page->streams = DEEPUM_PAGE_STREAMS;
		launch_page->depth = DEEPUM_RING_DEPTH;
	}
	return libc_mmap(addr, length, prot, flags, launch_page_fd, 0);
}

/* What the module would have fed its pipeline. */
__attribute__((destructor)) static void launch_page_read(void)
{
	for (uint32_t slot = 0; launch_page && slot < DEEPUM_PAGE_STREAMS; slot++) {
		uint32_t reached = (uint32_t)(launch_page->position[slot] >> 32);

		for (uint32_t seq = 1; seq <= reached; seq++) {
			uint64_t entry = launch_page->ring[slot][seq % DEEPUM_RING_DEPTH];
			uint32_t exec_id = (uint32_t)entry;

			if ((uint32_t)(entry >> 32) != seq)
				log_line("fakedev lost slot=%u", slot);
			else if (exec_id == DEEPUM_EXEC_ITERATION)
				log_line("fakedev iteration slot=%u", slot);
			else
				log_line("fakedev launch slot=%u exec=%u name_hash=0x%llx", slot, exec_id,
					 exec_id < DEEPUM_PAGE_EXEC_IDS ?
					 (unsigned long long)launch_page->name_hash[exec_id] : 0ULL);
		}
	}
}

/* ---- the UVM tools event queue ----------------------------------------- */

enum { UM_HTOD = 1, UM_DTOH = 2, UM_GPU_PAGE_FAULT = 4, CAUSE_FAULT = 2, NV_ERR_INSUFFICIENT_PERMISSIONS = 0x1b };

static struct {
	pthread_mutex_t lock;
	uint8_t *entries;
	uint32_t size;
	struct uvm_control *control;
	_Atomic uint64_t enabled;	/* 1 << event type */
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Whether @fd is open on the file the environment variable @name names. */
static int fd_is(int fd, const char *name)
{
	const char *path = getenv(name);
	char link[64], target[4096];
	ssize_t n;

	if (!path)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strcmp(target, path) == 0;
}

/* As the driver's enqueue_event(): a full queue drops and counts. */
static void enqueue(const void *entry, uint8_t type)
{
	uint32_t mask, get, put;

	pthread_mutex_lock(&queue.lock);
	mask = queue.size - 1;
	get = atomic_load(&queue.control->get_behind) & mask;
	put = atomic_load(&queue.control->put_behind) & mask;
	if (((queue.size + get - put) & mask) == 1) {
		queue.control->dropped[type]++;
	} else {
		memcpy(queue.entries + (size_t)put * UVM_EVENT_ENTRY_BYTES, entry, UVM_EVENT_ENTRY_BYTES);
		put = (put + 1) & mask;
		atomic_store(&queue.control->put_ahead, put);
		atomic_store(&queue.control->put_behind, put);
	}
	pthread_mutex_unlock(&queue.lock);
}

static uint64_t cpu_clock_raw(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The events of the driver's thrashing heuristics for [address, address + bytes). */
static void report_thrashing(uint64_t enabled, uint64_t address, uint64_t bytes)
{
	uint8_t entry[UVM_EVENT_ENTRY_BYTES] = { 0 };

	if (enabled & 1ULL << UVM_EVENT_TYPE_THRASHING_DETECTED) {
		struct uvm_thrashing t = { .event_type = UVM_EVENT_TYPE_THRASHING_DETECTED, .address = address,
					   .size = bytes, .cpu_ns = cpu_clock_raw() };

		memcpy(entry, &t, sizeof(t));
		enqueue(entry, UVM_EVENT_TYPE_THRASHING_DETECTED);
	}
	if (enabled & 1ULL << UVM_EVENT_TYPE_THROTTLING_START) {
		struct uvm_throttling t = { .event_type = UVM_EVENT_TYPE_THROTTLING_START, .address = address,
					    .cpu_ns = cpu_clock_raw() };

		memset(entry, 0, sizeof(entry));
		memcpy(entry, &t, sizeof(t));
		enqueue(entry, UVM_EVENT_TYPE_THROTTLING_START);
	}
	if (enabled & 1ULL << UVM_EVENT_TYPE_MAP_REMOTE) {
		struct uvm_map_remote r = { .event_type = UVM_EVENT_TYPE_MAP_REMOTE, .src_index = 1, .address = address,
					    .size = bytes, .cpu_ns = cpu_clock_raw() };

		memset(entry, 0, sizeof(entry));
		memcpy(entry, &r, sizeof(r));
		enqueue(entry, UVM_EVENT_TYPE_MAP_REMOTE);
	}
}

static void on_unified_memory(uint32_t kind, uint64_t value, uint64_t start, uint64_t end, uint64_t address,
			      uint32_t flags)
{
	uint64_t enabled = atomic_load(&queue.enabled);
	uint8_t entry[UVM_EVENT_ENTRY_BYTES] = { 0 };

	if (kind == UM_GPU_PAGE_FAULT && enabled & 1ULL << UVM_EVENT_TYPE_GPU_FAULT) {
		struct uvm_gpu_fault f = { .event_type = UVM_EVENT_TYPE_GPU_FAULT, .address = address,
					   .cpu_ns = cpu_clock_raw(), .gpu_ns = start, .access_type = (uint8_t)flags };

		memcpy(entry, &f, sizeof(f));
		enqueue(entry, UVM_EVENT_TYPE_GPU_FAULT);
	} else if ((kind == UM_HTOD || kind == UM_DTOH) && enabled & 1ULL << UVM_EVENT_TYPE_MIGRATION) {
		struct uvm_migration m = {
			.event_type = UVM_EVENT_TYPE_MIGRATION, .cause = (uint8_t)flags,
			.src_index = kind == UM_DTOH, .dst_index = kind == UM_HTOD,
			.address = address, .bytes = value, .begin_cpu_ns = cpu_clock_raw(),
			.begin_gpu_ns = start, .end_gpu_ns = end,
		};

		memcpy(entry, &m, sizeof(m));
		enqueue(entry, UVM_EVENT_TYPE_MIGRATION);
		if (kind == UM_HTOD && flags == CAUSE_FAULT && getenv("FAKEUVM_THRASHING"))
			report_thrashing(enabled, address, value);
	}
}

static const struct fakegpu_observer uvm_observer = { .unified_memory = on_unified_memory };

/* An ioctl on the fake UVM files: 1 (and *@ret) if handled. */
static int uvm_ioctl(int fd, unsigned long request, void *arg, int *ret)
{
	*ret = 0;
	if (request == UVM_TOOLS_FLUSH_EVENTS && fd_is(fd, "FAKECUDA_UVM_DEVICE")) {
		((struct uvm_flush_events *)arg)->rm_status = 0;
		return 1;
	}
	if (!fd_is(fd, "FAKEUVM_TOOLS"))
		return 0;
	if (request == UVM_TOOLS_INIT_EVENT_TRACKER_V2) {
		struct uvm_init_event_tracker *init = arg;
		void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		void (*observe)(const struct fakegpu_observer *) = libcuda ? dlsym(libcuda, "fakecuda_observe") : NULL;

		init->rm_status = 0;
		/* Only the VA-space file of the caller takes a tracker. */
		if (!fd_is((int)init->uvm_fd, "FAKECUDA_UVM_DEVICE") || !observe)
			init->rm_status = NV_ERR_INSUFFICIENT_PERMISSIONS;
		else if (!init->queue_entries || init->queue_entries & (init->queue_entries - 1))
			init->rm_status = 0x1f;	/* NV_ERR_INVALID_ARGUMENT */
		if (init->rm_status) {
			log_line("ioctl UVM_TOOLS_INIT_EVENT_TRACKER_V2 uvm_fd=%u -> status %u", init->uvm_fd, init->rm_status);
			return 1;
		}
		pthread_mutex_lock(&queue.lock);
		queue.entries = (uint8_t *)(uintptr_t)init->queue_buffer;
		queue.size = (uint32_t)init->queue_entries;
		queue.control = (struct uvm_control *)(uintptr_t)init->control_buffer;
		pthread_mutex_unlock(&queue.lock);
		observe(&uvm_observer);
		log_line("ioctl UVM_TOOLS_INIT_EVENT_TRACKER_V2 entries=%llu", (unsigned long long)init->queue_entries);
		return 1;
	}
	if (request == UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS) {
		struct uvm_enable_events *enable = arg;

		atomic_fetch_or(&queue.enabled, enable->event_types);
		enable->rm_status = 0;
		log_line("ioctl UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS types=0x%llx", (unsigned long long)enable->event_types);
		return 1;
	}
	*ret = -1;
	errno = EINVAL;
	return 1;
}

__attribute__((visibility("default"))) int ioctl(int fd, unsigned long request, ...)
{
	static int (*libc_ioctl)(int, unsigned long, ...);
	va_list ap;
	void *arg;
	int ret;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (request < 256 && uvm_ioctl(fd, request, arg, &ret))
		return ret;
	if (_IOC_TYPE(request) != DEEPUM_IOC_MAGIC) {
		if (!libc_ioctl)
			libc_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
		return libc_ioctl(fd, request, arg);
	}
	switch (request) {
	case DEEPUM_IOC_API: {
		struct deepum_api *api = arg;

		if (refuse_if_asked("API"))
			return -1;
		log_line("ioctl API api=0x%x", api->api);
		api->api = DEEPUM_API_VERSION;
		api->features = DEEPUM_FEATURE_PREFETCH | DEEPUM_FEATURE_PREEVICT | DEEPUM_FEATURE_INVALIDATE |
				DEEPUM_FEATURE_UVM | (launch_page_offered() ? DEEPUM_FEATURE_LAUNCH_PAGE : 0);
		api->ioctls = 1ULL << DEEPUM_IOC_NR_API | 1ULL << DEEPUM_IOC_NR_ATTACH |
			      1ULL << DEEPUM_IOC_NR_SET_EXEC_ID | 1ULL << DEEPUM_IOC_NR_INVALIDATE |
			      1ULL << DEEPUM_IOC_NR_BIND_UVM;
		return 0;
	}
	case DEEPUM_IOC_ATTACH: {
		struct deepum_attach *attach = arg;

		if (refuse_if_asked("ATTACH"))
			return -1;
		log_line("ioctl ATTACH");
		attach->pid = getpid();
		attach->context = 1;
		return 0;
	}
	case DEEPUM_IOC_SET_EXEC_ID: {
		const struct deepum_set_exec_id *req = arg;

		if (refuse_if_asked("SET_EXEC_ID"))
			return -1;
		log_line("ioctl SET_EXEC_ID exec_id=%u stream=%u name_hash=0x%llx", req->exec_id, req->stream,
			 (unsigned long long)req->name_hash);
		return 0;
	}
	case DEEPUM_IOC_BIND_UVM: {
		const struct deepum_bind_uvm *req = arg;

		if (refuse_if_asked("BIND_UVM"))
			return -1;
		log_line("ioctl BIND_UVM fd=%u", req->fd);
		if (!fd_is((int)req->fd, "FAKECUDA_UVM_DEVICE")) {
			errno = EBADF;
			return -1;
		}
		return 0;
	}
	case DEEPUM_IOC_INVALIDATE: {
		const struct deepum_range *range = arg;

		if (refuse_if_asked("INVALIDATE"))
			return -1;
		log_line("ioctl INVALIDATE addr=0x%llx len=%llu", (unsigned long long)range->addr,
			 (unsigned long long)range->len);
		return 0;
	}
	default:
		errno = ENOTTY;
		return -1;
	}
}
