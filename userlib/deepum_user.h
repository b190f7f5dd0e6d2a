/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * libdeepum's internals, shared by its files.  Nothing here is exported: the
 * library's only public symbols are the CUDA trampolines, the rtld-audit
 * entry points and deepum_mark_iteration().
 *
 * Threading: hooks run on any application thread, host callbacks on a driver
 * thread, the tracer's buffer callbacks on a CUPTI thread.  Process state is
 * written once by deepum_init() (under pthread_once) before any hook uses
 * it; after that the launch path only shares atomics: counters, lock-free
 * tables (CAS to claim a slot, a release store to publish it), the pointer
 * window, the capture count and the one-way switch to pass-through.  Rare
 * paths (allocation table, tracer, the engine's intake) take mutexes.  The
 * user-mode engine (engine.c) runs on a thread of its own.
 */
#ifndef _DEEPUM_USER_H
#define _DEEPUM_USER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stdio.h>

#include "../kmod/core/port.h"
#include "cupti_abi.h"
#include "entry_points.h"
#include "../kmod/include/uapi/deepum.h"

#define DEEPUM_EXPORT __attribute__((visibility("default")))

enum deepum_mode {
	MODE_OFF,	/* DEEPUM_MODE=off: pure pass-through, silent */
	MODE_AUTO,	/* attach to /dev/deepum; without it, the user-mode engine
			 * (managed memory on) or pass-through (one warning) */
	MODE_OBSERVE,	/* intercept, identify and deliver without a prefetcher */
	MODE_USER,	/* the user-mode engine: prefetch, pre-evict, budget */
	MODE_DEMAND,	/* the engine's budget, reactive LRM eviction, no prediction */
};

enum fault_source_choice {
	FAULTS_AUTO,		/* the UVM tools queue, else CUPTI */
	FAULTS_UVM_TOOLS,	/* /dev/nvidia-uvm-tools */
	FAULTS_CUPTI,		/* CUPTI Unified Memory counters */
};

/* What the tracer moves to the host, so that the GPU faults in what runs next. */
enum access_set_choice {
	ACCESS_SET_NONE,	/* nothing: faults are what the GPU lacked */
	ACCESS_SET_ITERATION,	/* all managed memory at every mark: first touches per iteration */
	ACCESS_SET_LAUNCH,	/* also what each launch brought in, after it: every launch's accesses */
};

enum deepum_delivery {
	DELIVERY_WRITE,		/* cuStreamWriteValue64 into the launch page (default) */
	DELIVERY_CALLBACK,	/* cuLaunchHostFunc, then SET_EXEC_ID (DeepUM's way) */
};

/* Counters, one list: the struct and the JSON stats both come from it. */
#define DEEPUM_COUNTERS(X)                                                                    \
	X(launches)			/* launches seen while active */                       \
	X(exec_hits)			/* ... whose exec ID was already known */              \
	X(exec_by_place)		/* ... of those, known by their place in the iteration */ \
	X(exec_new)			/* exec IDs assigned */                                \
	X(exec_untracked)		/* launches given DEEPUM_EXEC_NONE: a table is full */ \
	X(launches_unidentified)	/* ... or the driver could not name the kernel */      \
	X(delivered)			/* exec IDs entered in a stream's ring */              \
	X(position_writes)		/* stream-ordered position deliveries enqueued */      \
	X(delivery_skipped_capture)	/* not delivered: stream capture in progress */        \
	X(capture_queries)		/* launches that asked the driver about capture */     \
	X(delivery_skipped_streams)	/* not delivered: no free stream slot */               \
	X(set_exec_id_ioctls)		/* SET_EXEC_ID issued by the host callback */          \
	X(getproc_hooked)		/* cuGetProcAddress answers replaced by a trampoline */ \
	X(getproc_unmatched)		/* ... left alone: a hooked name, an unknown address */ \
	X(allocs_redirected)		/* device allocations made managed */                  \
	X(bytes_redirected)                                                                    \
	X(allocs_fallback)		/* managed allocation failed: device memory instead */ \
	X(allocs_over_limit)		/* ... or would pass DEEPUM_MANAGED_LIMIT */           \
	X(frees_reported)		/* frees reported before the real free */              \
	X(frees_unknown)		/* frees of an address the driver did not know */ \
	X(iterations_detected)		/* marks made by iterations.c, not the program */ \
	X(pool_allocs)			/* stream-ordered allocations served from managed memory */ \
	X(pool_fallback)		/* ... left to the driver: no managed room */          \
	X(pool_segments)		/* managed segments the pool allocated */              \
	X(pool_segments_released)	/* ... and gave back (an allocation found no room) */  \
	X(pool_shrinks)			/* allocations that found no room and synchronized */  \
	X(pool_dead_blocks)		/* 2 MiB blocks reported dead: no allocation left in them */ \
	X(pool_frees_synchronized)	/* frees on another stream than the allocation's */    \
	X(pool_frees_kept)		/* frees inside a graph capture: memory kept */

struct deepum_counters {
#define COUNTER_FIELD(name) _Atomic u64 name;
	DEEPUM_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
};

#define COUNT(name, n) atomic_fetch_add_explicit(&deepum.counters.name, (n), memory_order_relaxed)

/* deepum.history_scan and .victim_runs when their variables are not set (no setting reaches it). */
#define SETTING_UNSET UINT32_MAX

struct deepum_state {
	/* Set by deepum_init(), read-only afterwards. */
	enum deepum_mode mode;
	enum deepum_delivery delivery;	/* forced to CALLBACK at page creation when the
					 * module cannot read positions from the page */
	bool managed;
	u32 exec_max;
	u32 write_every;		/* DEEPUM_WRITE_EVERY: a position write per this many launches */
	u64 capacity;			/* DEEPUM_CAPACITY: the engine's budget in bytes; 0: none */
	u64 managed_limit;		/* DEEPUM_MANAGED_LIMIT in bytes; 0: 80% of the GPU's free memory */
	u32 watermark_blocks;		/* DEEPUM_WATERMARK: the core's; 0: its default */
	u32 lookahead_blocks;		/* DEEPUM_LOOKAHEAD_BLOCKS: the core's; 0: its default */
	u32 corr_sets;			/* DEEPUM_CORR_SETS: the core's correlation table; 0: its default */
	u32 horizon_kernels;		/* DEEPUM_HORIZON_KERNELS: 0, or victims by predicted next use */
	u32 history_scan;		/* DEEPUM_HISTORY_SCAN: victims by the last iteration's uses among N
					 * blocks; 0: the oldest; SETTING_UNSET: the core's default */
	u32 observe_us;			/* DEEPUM_OBSERVE_US: 0, or how often a thread times positions */
	u32 exec_by_place;		/* DEEPUM_EXEC_BY_PLACE: 1, a new hash takes its place's ID */
	u32 positional;			/* DEEPUM_POSITIONAL (default 1): the core predicts kernels by position */
	u32 forget_unsettled;		/* DEEPUM_FORGET_UNSETTLED (default 1): the core forgets what iterations
					 * with many new IDs taught */
	u32 victim_runs;		/* DEEPUM_VICTIM_RUNS: victims in address runs where nearly as good;
					 * SETTING_UNSET: wherever victims weigh next uses */
	u32 issuer;			/* DEEPUM_ISSUER (default 1): driver calls from a thread of their own */
	u32 writer;			/* DEEPUM_WRITER: evictions from another, on a stream of their own */
	enum fault_source_choice faults;	/* DEEPUM_FAULTS */
	char uvm_tools_path[128];	/* DEEPUM_UVM_TOOLS */
	char uvm_device_path[128];	/* DEEPUM_UVM_DEVICE: the driver's UVM file, as CUDA opened it */
	char engine_log_path[4096];	/* DEEPUM_ENGINE_LOG: every command applied; "" for none */
	int device_fd;			/* attached /dev/deepum, or -1 */
	bool module_launch_page;	/* the launch page is the module's (DEEPUM_FEATURE_LAUNCH_PAGE):
					 * it reads the positions; cleared at page creation if
					 * mapping or registering it failed */
	bool uvm_bound;			/* DEEPUM_IOC_BIND_UVM took CUDA's VA space */
	int init_pid;			/* the process that ran deepum_init() (not a fork child) */
	char stats_path[4096];		/* DEEPUM_STATS with %p expanded; "" for none */
	char trace_path[4096];		/* DEEPUM_TRACE with %p expanded; "" for none */
	char cupti_path[4096];		/* DEEPUM_CUPTI; "" to search */
	u32 trace_iterations;		/* DEEPUM_TRACE_ITERATIONS; 0: as many as marked */
	enum access_set_choice trace_access_set;	/* DEEPUM_TRACE_ACCESS_SET */

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
#define HANDLER_FREE HANDLER_HOOK
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
/* One line on stderr, "deepum: " @message. */
void deepum_warn(const char *message);
/* The trampoline exported as @symbol, or NULL. */
void *deepum_hook_address(const char *symbol);
/* calloc that DEEPUM_TEST_FAIL=alloc makes fail (test builds). */
void *deepum_calloc(size_t n, size_t size);
/* pthread_create for libdeepum's own threads, which take none of the
 * program's signals: @main(@arg); 0 or an errno. */
int deepum_thread_start(pthread_t *thread, void *(*main)(void *), void *arg);
/* @template with "%p" replaced by the process ID, into @out; false if it
 * does not fit. */
bool deepum_expand_pid(const char *template, char *out, size_t size);
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
	/* The launch as the program made it. */
	CUfunction func;
	unsigned int shape[7];		/* grid x y z, block x y z, dynamic shared bytes */
	CUstream stream;
	bool per_thread_stream;		/* a NULL stream is the calling thread's own */
	void **params;
	void **extra;
	/* What libdeepum made of it. */
	u32 exec_id;
	u64 name_hash;
	u32 slot;			/* the stream's slot, DEEPUM_PAGE_STREAMS for none */
	bool captured;			/* it goes into a graph being captured, not to the GPU */
	u64 trace_ts;			/* when the tracer saw it (CUPTI clock) */
};

/* Tables sized for @exec_max exec IDs; false if they cannot be allocated. */
bool launch_tables_init(u32 exec_max);
/* The kernel-name hash of @exec_id (0 if unknown). */
u64 launch_name_hash(u32 exec_id);
/* An iteration begins: launches count their place in it from here. */
void launch_new_iteration(void);
/* [@base, @base + @size) is a device allocation: words of launch arguments
 * that point into it name data (launch.c's header comment). */
void launch_note_allocation(u64 base, u64 size);

/* delivery.c */
/* A point in a stream's order: after its @seq-th launch. */
struct stream_point {
	u32 slot;
	u32 seq;
};

bool delivery_tables_init(void);
/* Open and attach @device_path; on failure *@reason says why. */
bool delivery_attach(const char *device_path, const char **reason);
/* Enter @l's exec ID in its stream's ring, before its launch, and deliver
 * the position when due; sets l->slot (the "stream" of ioctls and trace
 * records) and l->captured. */
void delivery_enqueue(struct launch *l);
/* Deliver the position of the calling thread's latest launch again, so the
 * watcher knows when the GPU gets past it; false (*@at untouched or not
 * meaningful) when there is no such launch or its stream is capturing. */
bool delivery_here(struct stream_point *at);
/* The same on @stream, after its latest launch from any thread. */
bool delivery_on_stream(CUstream stream, struct stream_point *at);
/* An iteration begins after the calling thread's latest launch: position
 * writes on its stream count launches from here, and a mark goes in the
 * module's launch page, in stream order (when there is one). */
void delivery_mark_iteration(void);
/* A range is dead: tell the module (if attached), before the real free. */
void delivery_report_free(u64 addr, u64 len);

/* capture.c: whether a stream capture may be in progress, kept by hooking
 * its beginning and end so that launches need not ask the driver. */
bool capture_possible(void);
/* A capture begun through the hooks and not ended yet (not counting
 * capture_tracking_lost()). */
bool capture_in_progress(void);
/* The driver handed out an entry point libdeepum does not know: a capture
 * could begin unseen, so from now on every launch asks the driver. */
void capture_tracking_lost(void);
/* Whether @stream (a handle valid in any API variant) is capturing; a
 * stream the driver will not answer for counts as capturing. */
bool capture_stream_capturing(CUstream stream);

/* alloc.c: the live managed allocations libdeepum made. */
typedef void (*range_fn)(u64 base, u64 size, void *arg);
/* Call @fn on each, under the table's lock (so @fn must not allocate or
 * free through the hooks). */
void managed_ranges_each(range_fn fn, void *arg);
/* Call @fn on each part of [@addr, @addr + @len) that lies in a live
 * managed allocation; returns the bytes in none.  Under the table's lock,
 * as above. */
u64 managed_clip(u64 addr, u64 len, range_fn fn, void *arg);
/* Up to @n live ones not returned by this before, into @base and @size
 * (the engine's sweep, engine.c); how many. */
u32 managed_ranges_unswept(u64 *base, u64 *size, u32 n);
/* A managed segment of @size for libdeepum itself (pool.c), within
 * DEEPUM_MANAGED_LIMIT; false if there is none. */
bool managed_alloc(CUdeviceptr *dptr, size_t size);
/* Free one: forgotten, released by the engine, reported, then freed. */
void managed_free(CUdeviceptr base, size_t size);
/* [@addr[i], @addr[i] + @len[i]), i < @n, hold dead data from this point of
 * @stream on: to the engine or the module; 0, or -1 when nothing listens. */
int report_free_ranges(const u64 *addr, const u64 *len, u32 n, CUstream stream);

/* pool.c: stream-ordered allocations on managed memory. */
/* If @dptr is a live pool allocation: free it now (cuMemFree), *@rc the
 * result; false if it is not one. */
bool pool_free_now(CUdeviceptr dptr, CUresult *rc);
/* Report the blocks that died since the last report (an iteration ends). */
void pool_report_dead(void);

/* engine.c: the user-mode engine (DEEPUM_MODE=user or demand). */
/* Whether the mode asks for it. */
bool engine_wanted(void);
/* Start it on the first launch (a context is current); on failure deepum
 * is disabled with the reason. */
void engine_start(struct deepum_launch_page *page);
/* An iteration begins (deepum_mark_iteration). */
void engine_mark_iteration(void);
/* [@base, @base + @size), a managed allocation, is about to be freed:
 * returns once the engine has stopped using it. */
void engine_release(u64 base, u64 size);
/* [@addr[i], @addr[i] + @len[i]), i < @n, hold dead data from this point
 * of @stream on (deepum_report_free, pool.c): their whole blocks are
 * discarded in one call.  0, or -1 when the engine is not running. */
int engine_report_free(const u64 *addr, const u64 *len, u32 n, CUstream stream);
/* Stop the thread (at exit) and write the engine's statistics as a JSON
 * member ("engine": {...}) to @f; nothing if it never ran. */
void engine_stop(void);
void engine_write_stats(FILE *f);
#ifdef DEEPUM_FAULT_INJECTION
/* Test builds with DEEPUM_TEST_LOCKSTEP=1: the engine runs rounds only
 * when a program thread asks and waits for them (after each launch's
 * delivery, each record handed to it, each release), so that tests see one
 * deterministic order of launches, faults and commands. */
bool deepum_lockstep_enabled(void);
void engine_lockstep(void);
#else
static inline bool deepum_lockstep_enabled(void)
{
	return false;
}

static inline void engine_lockstep(void)
{
}
#endif

/* faults.c: the engine's fault source (DEEPUM_FAULTS). */
enum fault_kind {
	EV_FAULT,		/* the GPU touched a page it did not hold */
	EV_MIGRATED_IN,		/* bytes moved to the GPU */
	EV_MIGRATED_OUT,	/* bytes moved off the GPU */
	/* The driver's thrashing heuristics (the UVM queue only): */
	EV_THRASHING,		/* pages found moving back and forth */
	EV_THROTTLED,		/* a page's faults held back for a while */
	EV_MAPPED_REMOTE,	/* bytes mapped where they are instead of moved */
};

/* Migration causes, the same numbers in CUPTI and the driver's queue. */
enum migration_cause {
	CAUSE_USER = 1,		/* a prefetch: the engine's own */
	CAUSE_COHERENCE = 2,	/* a fault */
	CAUSE_PREFETCH = 3,	/* the driver's prefetcher, inside a faulting block */
	CAUSE_EVICTION = 4,	/* the driver needed the memory */
};

struct fault_event {
	u64 ts;			/* the engine's clock (engine_clock_ns); 0: unknown */
	u64 addr;
	u64 bytes;		/* migrations, thrashing and remote mappings */
	u64 copy_begin_ns;	/* migrations: the copy, on one clock of the source's; */
	u64 copy_end_ns;	/* ... both 0: unknown */
	u32 kind;		/* enum fault_kind */
	u32 detail;		/* EV_FAULT: access type (DEEPUM_ACCESS_*); else the cause */
};

/* CLOCK_MONOTONIC_RAW in ns: the UVM queue's CPU clock. */
u64 engine_clock_ns(void);
/* Call @accept on each of the process's descriptors of CUDA's UVM file
 * (DEEPUM_UVM_DEVICE) until it returns true; whether one did.  CUDA may hold
 * two, and only the initialised one (the VA space) is accepted anywhere. */
bool uvm_fd_find(bool (*accept)(int fd, void *arg), void *arg);

/* iterations.c: marks for programs that make none. */
void iterations_launch(u32 exec_id);
void iterations_program_marks(void);
/* stats.c: an iteration mark iterations.c detected. */
void deepum_mark_detected_iteration(void);
/* Start the source DEEPUM_FAULTS asks for on @device; on failure @why says why. */
bool faults_start(CUdevice device, enum fault_source_choice choice, char *why, size_t size);
/* "uvm-tools", "cupti": the one started; NULL if none was. */
const char *faults_source_name(void);
/* The events since the last call, at most @max (one reader at a time: the
 * engine's thread, or the tracer's when there is no engine). */
u32 faults_poll(struct fault_event *out, u32 max);
/* Make the UVM queue deliver the migrations it holds back (no-op for CUPTI). */
void faults_flush(void);
/* Events the source lost. */
u64 faults_dropped(void);
void faults_stop(void);

/* cupti.c: CUPTI, loaded once, for the tracer or the engine's fault source. */
extern struct deepum_cupti {
#define CUPTI_FIELD(kind, name, params) CUptiResult (*name) params;
	DEEPUM_CUPTI_FUNCTIONS(CUPTI_FIELD)
#undef CUPTI_FIELD
} cupti;
/* Load it (the copy the program loaded, else DEEPUM_CUPTI, else the
 * library path's); on failure @why says why. */
bool cupti_load(char *why, size_t size);

/* trace.c: the tracer (DEEPUM_TRACE), userlib/README.md. */
extern _Atomic bool tracer_recording;
/* Around each real launch while recording: the correlation scope that ties
 * the launch to CUPTI's kernel record, and its trace line. */
u64 tracer_launch_enter(struct launch *l);
void tracer_launch_exit(const struct launch *l, u64 token, CUresult rc);
void tracer_alloc(u64 base, u64 size);
void tracer_free(u64 base, u64 size);
/* An iteration begins (deepum_mark_iteration): flush, mark, start or stop. */
void tracer_mark(void);

static inline u64 trace_launch_enter(struct launch *l)
{
	return atomic_load_explicit(&tracer_recording, memory_order_acquire) ? tracer_launch_enter(l) : 0;
}

static inline void trace_launch_exit(const struct launch *l, u64 token, CUresult rc)
{
	if (token)
		tracer_launch_exit(l, token, rc);
}

#endif /* _DEEPUM_USER_H */
