/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libdeepum's internals, shared by its files.  Nothing here is exported: the
 * library's only public symbols are the CUDA trampolines, the rtld-audit
 * entry points and deepum_mark_iteration().
 *
 * Threading: hooks run on any application thread, host callbacks on a driver
 * thread.  Process state is written once by deepum_init() (under
 * pthread_once) before any hook uses it; after that the only shared writes
 * are atomics: counters, lock-free tables (CAS to claim a slot, a release
 * store to publish it), the ring, and the one-way switch to pass-through.
 */
#ifndef _DEEPUM_USER_H
#define _DEEPUM_USER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../kmod/core/port.h"
#include "entry_points.h"
#include "launch_page.h"

#define DEEPUM_EXPORT __attribute__((visibility("default")))

enum deepum_mode {
	MODE_OFF,	/* DEEPUM_MODE=off: pure pass-through, silent */
	MODE_AUTO,	/* attach to /dev/deepum; without it, pass-through (one warning) */
	MODE_OBSERVE,	/* intercept, identify and deliver without a prefetcher */
};

enum deepum_delivery {
	DELIVERY_WRITE,		/* cuStreamWriteValue64 into the launch page (default) */
	DELIVERY_CALLBACK,	/* cuLaunchHostFunc, then SET_EXEC_ID (DeepUM's way) */
};

/* Counters, one list: the struct and the JSON stats both come from it. */
#define DEEPUM_COUNTERS(X)                                                                    \
	X(launches)			/* launches seen while active */                       \
	X(exec_hits)			/* ... whose exec ID was already known */              \
	X(exec_new)			/* exec IDs assigned */                                \
	X(exec_untracked)		/* launches given DEEPUM_EXEC_NONE: a table is full */ \
	X(launches_unidentified)	/* ... or the driver could not name the kernel */      \
	X(delivered)			/* exec IDs enqueued for stream-ordered delivery */    \
	X(delivery_skipped_capture)	/* not delivered: stream capture in progress */        \
	X(delivery_skipped_streams)	/* not delivered: no free stream slot */               \
	X(set_exec_id_ioctls)		/* SET_EXEC_ID issued by the host callback */          \
	X(getproc_hooked)		/* cuGetProcAddress answers replaced by a trampoline */ \
	X(getproc_unmatched)		/* ... left alone: a hooked name, an unknown address */ \
	X(allocs_redirected)		/* device allocations made managed */                  \
	X(bytes_redirected)                                                                    \
	X(allocs_fallback)		/* managed allocation failed: device memory instead */ \
	X(frees_reported)		/* frees reported before the real free */              \
	X(frees_unknown)		/* frees of an address the driver did not know */      \
	X(ring_pushed)			/* records entered into the ring */                    \
	X(ring_dropped)			/* records lost to a full ring */

struct deepum_counters {
#define COUNTER_FIELD(name) _Atomic u64 name;
	DEEPUM_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
};

#define COUNT(name, n) atomic_fetch_add_explicit(&deepum.counters.name, (n), memory_order_relaxed)

struct deepum_state {
	/* Set by deepum_init(), read-only afterwards. */
	enum deepum_mode mode;
	enum deepum_delivery delivery;
	bool managed;
	u32 exec_max;
	int device_fd;			/* attached /dev/deepum, or -1 */
	int init_pid;			/* the process that ran deepum_init() (not a fork child) */
	char stats_path[4096];		/* DEEPUM_STATS with %p expanded; "" for none */

	_Atomic bool active;		/* false: every hook passes straight through */
	_Atomic(const char *) disabled_reason;
	struct deepum_counters counters;
};

extern struct deepum_state deepum;

static inline bool deepum_active(void)
{
	return atomic_load_explicit(&deepum.active, memory_order_acquire);
}

/* intercept.c: the one-way switch to pass-through, with the process's only
 * warning.  @reason must be a string literal or otherwise static. */
void deepum_disable(const char *reason);
/* Resolve the real entry points and read the configuration, once. */
void deepum_init_once(void);

/* launch.c: tables sized from the configuration; false on allocation failure. */
bool launch_tables_init(u32 exec_max);

struct launch {
	CUfunction func;
	unsigned int shape[7];		/* grid x y z, block x y z, shared bytes */
	CUstream stream;
	bool per_thread_stream;		/* a NULL stream means the thread's own */
	void **params;
	void **extra;
};
/* Identify the launch, record it, deliver its exec ID in stream order. */
void launch_before(const struct launch *l);


/* delivery.c */
bool delivery_attach(const char *device_path, const char **reason);
bool delivery_tables_init(void);
/* Enqueue @exec_id on @l's stream before its launch; returns the stream's
 * slot (the "stream" of records and ioctls), or DEEPUM_PAGE_STREAMS. */
u32 delivery_enqueue(const struct launch *l, u32 exec_id, u64 name_hash);
void delivery_report_free(u64 addr, u64 len);

/* ring.c: records for the engine and the tracer, lock-free, never blocking. */
bool ring_init(void);
void ring_push(u32 type, u64 addr, u64 len, u32 exec_id, u32 aux);
bool ring_pop(struct deepum_record *ret);
u32 ring_capacity(void);
u64 deepum_now_ns(void);

/* stats.c */
bool stats_init(void);
void stats_write(void);

/* calloc that DEEPUM_TEST_FAIL=alloc can make fail (test builds). */
void *deepum_calloc(size_t n, size_t size);

/* Test builds only: DEEPUM_TEST_FAIL names a failure to simulate. */
#ifdef DEEPUM_FAULT_INJECTION
bool deepum_inject(const char *what);
#else
static inline bool deepum_inject(const char *what)
{
	(void)what;
	return false;
}
#endif

#endif /* _DEEPUM_USER_H */
