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

#define EXPAND(...) __VA_ARGS__
/* A parenthesised list as a bare one: UNPAREN(LAUNCH_KERNEL_PARAMS). */
#define UNPAREN(list) EXPAND list

/* The hooks' handlers: on_<handler>(which entry point, its real function,
 * its arguments), one per API, shared by its stream variants. */
#define HANDLER_HOOK(name, handler, params) \
	CUresult on_##handler(enum deepum_entry which, name##_fn real, EXPAND params);
#define HANDLER_USE(name, handler, params)
#define HANDLER_MAYBE(name, handler, params)
#define HANDLER(kind, name, handler, stream, params, args) HANDLER_##kind(name, handler, params)
DEEPUM_ENTRY_POINTS(HANDLER)
#undef HANDLER

/* intercept.c */
/* Resolve the real entry points and start deepum, once, on the first call. */
void deepum_init_once(void);
/* The one-way switch to pass-through, with the process's only warning.
 * @reason must outlive the process's use of it (a literal or static). */
void deepum_disable(const char *reason);
/* The trampoline exported as @symbol, or NULL. */
void *deepum_hook_address(const char *symbol);
/* calloc that DEEPUM_TEST_FAIL=alloc makes fail (test builds). */
void *deepum_calloc(size_t n, size_t size);
#ifdef DEEPUM_FAULT_INJECTION
/* Test builds only: whether DEEPUM_TEST_FAIL names @what. */
bool deepum_inject(const char *what);
#else
static inline bool deepum_inject(const char *what)
{
	(void)what;
	return false;
}
#endif

/* launch.c */
struct launch {
	CUfunction func;
	unsigned int shape[7];		/* grid x y z, block x y z, dynamic shared bytes */
	CUstream stream;
	bool per_thread_stream;		/* a NULL stream is the calling thread's own */
	void **params;
	void **extra;
};

/* Tables sized for @exec_max exec IDs; false if they cannot be allocated. */
bool launch_tables_init(u32 exec_max);
/* The kernel-name hash of @exec_id (0 if unknown). */
u64 launch_name_hash(u32 exec_id);

/* delivery.c */
bool delivery_tables_init(void);
/* Open and attach @device_path; on failure *@reason says why. */
bool delivery_attach(const char *device_path, const char **reason);
/* Enqueue @exec_id on @l's stream, before its launch.  Returns the stream's
 * slot (the "stream" of records and ioctls), DEEPUM_PAGE_STREAMS for none. */
u32 delivery_enqueue(const struct launch *l, u32 exec_id);
/* A range is dead: tell the module (if attached) and the ring, before the
 * real free. */
void delivery_report_free(u64 addr, u64 len);

/* ring.c: records for the engine and the tracer. */
bool ring_init(void);
void ring_push(u32 type, u64 addr, u64 len, u32 exec_id, u32 aux);
bool ring_pop(struct deepum_record *ret);
u32 ring_capacity(void);

/* stats.c: expand DEEPUM_STATS; the file is written at exit. */
void stats_init(void);

#endif /* _DEEPUM_USER_H */
