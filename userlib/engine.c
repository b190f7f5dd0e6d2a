// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The user-mode engine (DEEPUM_MODE=user, and demand for the baseline): the
 * prefetch core (kmod/core, unchanged) driven from a thread of its own, its
 * commands applied with the driver's public API.  No driver patch, no root.
 *
 * One thread owns the core (the core has no locks: one caller).  Each round
 * it
 *   1. reads every stream's position in the launch page and feeds the core a
 *      LAUNCH record for each launch the GPU got to, from the ring;
 *   2. takes the fault source's events (faults.c) and feeds a FAULT record
 *      for each block the core did not hold, attributed by time to the
 *      launch the engine had seen last when it happened (the position is
 *      seen a little late, so a fault may go to an earlier launch, which
 *      only makes its block's prefetch earlier).  A round can take
 *      milliseconds of driver calls; with DEEPUM_OBSERVE_US an observer
 *      thread, which makes none, reads the positions that often and
 *      launches are timed by when it saw them instead;
 *   3. feeds iteration marks and reported frees once the GPU has passed the
 *      point in stream order where the program made them;
 *   4. applies the round's commands on a stream of its own, of the lowest
 *      priority, as kmod/core/plan.h says: evictions first, prefetches per
 *      predicted kernel, each sorted and coalesced into ranges, issued with
 *      cuMemPrefetchBatchAsync (at most RANGES_PER_CALL per call), falling
 *      back to cuMemPrefetchAsync per range where the driver lacks it.  An issuer
 *      thread makes those calls (see "The issuer"; DEEPUM_ISSUER=0: the
 *      engine's own thread).
 *
 * The budget (DEEPUM_CAPACITY) is the core's capacity, and the core's
 * residency model decides what moves: the core pre-evicts to keep its
 * watermark free and prefetches only into room it has; a fault that finds
 * the model full is charged a DEMAND eviction, which here the engine
 * executes too (the real GPU has room and would not evict).  Evictions are
 * issued before the prefetches that need their room, on the same stream, so
 * prefetched data never pushes residency over the budget.  What the budget
 * cannot guarantee: blocks that faulted in but were not yet reported, or
 * whose eviction has not landed, count on the GPU meanwhile (bounded by the
 * fault rate times the engine's reaction time, and by the watermark's
 * slack), and a fault the source never reports is not known at all.  The
 * engine counts what it sees of the GPU's real residency from migration
 * events and reports every round it found it over the budget.
 *
 * Discards.  A dead block may be reused by the program at any moment (the
 * caching allocator hands freed memory out again at once), and a discard
 * that overlaps a use is undefined behaviour; so the engine never discards
 * on its own stream.  Memory the program frees (cuMemFree) is released
 * synchronously: the freeing thread waits until the engine has forgotten
 * the range and its stream has drained.  Frees the program reports inside
 * live memory (deepum_report_free) are discarded on the program's own
 * stream, in order, by the reporting thread; the core's DISCARD commands
 * are then carried out as evictions, which copy nothing for discarded
 * pages (the driver skips them) and give the GPU memory back for real.
 *
 * Any failure disables deepum for the process (deepum_disable): the program
 * runs on, unprefetched.  No CUDA call is made while a graph capture is
 * known to be in progress (it could invalidate the capture).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kmod/core/core.h"
#include "../kmod/core/plan.h"
#include "../kmod/core/residency.h"
#include "engine_defaults.h"
#include "deepum_user.h"

enum {
	HISTORY = 8192,			/* launches remembered to attribute faults */
	ROUND_EVENTS = 16384,		/* fault events taken per round */
	INTAKE = 1 << 14,		/* marks and reported frees waiting for the GPU */
	ROUND_CMDS_FACTOR = 4,		/* a round's command buffer, in core outputs */
	RANGES_PER_CALL = 128,		/* issue cost is lowest at 64-256 per call (h200.json) */
	BATCH_ROOM = 4096,		/* pieces gathered before they are issued */
	PIECES_PER_REPORT = 256,	/* ranges per discard call */
	ITERATIONS_MAX = 1024,
	OBSERVED = 256,			/* position changes the observer keeps per stream */
	IDLE_FIRST_NS = 20000,
	IDLE_MAX_NS = 500000,
	RELEASE_TIMEOUT_S = 60,
	RECENT_FAULTS = 4096,		/* (block, exec ID) pairs fed lately, direct-mapped */
	ISSUE_JOBS = 4,			/* batches handed to an issuer and not yet issued */
	ISSUE_EVENTS = 64,		/* the writer's events, reused in turn */
};

#define BLOCK_SHIFT DEEPUM_DEFAULT_BLOCK_SHIFT

/* Additive counters, one list: the struct, per-iteration snapshots and JSON. */
#define ENGINE_COUNTERS(X)                                                                    \
	X(rounds)                                                                             \
	X(paused_rounds)		/* a graph capture was in progress: no CUDA call */   \
	X(launches_fed)                                                                       \
	X(launches_lost)		/* ring entries reused before they were read */       \
	X(launches_observed)		/* launches timed by the observer thread */           \
	X(observed_lead_ns)		/* ... how much earlier than the round they began */  \
	X(fault_events)			/* GPU fault events the source delivered */           \
	X(faults_fed)			/* ... on blocks the core did not hold */             \
	X(faults_on_resident)		/* ... on blocks it held: a prefetch in flight, or a repeat */ \
	X(late_faults_fed)		/* ... of those, fed once per block and kernel: late prefetches */ \
	X(transfer_faults_fed)		/* blocks migrating in by a fault, with no fault event */ \
	X(iterations)                                                                         \
	X(frees_fed)			/* reported frees fed to the core */                  \
	X(releases)			/* managed allocations freed by the program */        \
	X(releases_unwaited)		/* ... during a graph capture: not waited for */      \
	X(released_commands_dropped)	/* commands on memory being freed: not executed */    \
	X(prefetch_blocks)                                                                    \
	X(prefetch_bytes)		/* issued, after clipping to managed memory */        \
	X(prefetch_ranges)                                                                    \
	X(prefetch_calls)                                                                     \
	X(evict_blocks)			/* pre-evictions */                                   \
	X(demand_evictions)		/* evictions a fault found necessary */               \
	X(discard_blocks)		/* dead blocks let go (evicted; discarded pages are not copied) */ \
	X(evict_bytes)                                                                        \
	X(evict_ranges)                                                                       \
	X(evict_calls)                                                                        \
	X(sweep_ranges)			/* ranges of blocks the budget had not seen, sent to the host */ \
	X(sweep_bytes)                                                                        \
	X(thrashing_events)		/* the driver found pages moving back and forth ...  */ \
	X(thrashing_bytes)                                                                    \
	X(throttled_pages)		/* ... held a page's faults back */                    \
	X(mapped_remote_bytes)		/* ... mapped pages where they are, not moved */      \
	X(issuer_waits)			/* batches that waited for room at an issuer */       \
	X(issuer_joins)			/* ... that joined the newest waiting job instead */  \
	X(write_waits)			/* prefetch batches that waited for the writer */     \
	X(fallback_calls)		/* per-range cuMemPrefetchAsync: no batch entry point */ \
	X(bytes_outside_managed)	/* parts of planned ranges in no live managed allocation */ \
	X(h2d_prefetch_bytes)		/* migrated to the GPU by prefetches, as the source saw */ \
	X(h2d_prefetch_busy_ns)		/* ... and the time some such copy was running */     \
	X(h2d_fault_bytes)		/* migrated to the GPU by faults (and the driver's prefetcher) */ \
	X(d2h_bytes)                                                                          \
	X(driver_evictions)		/* migrations off the GPU the driver made to evict */ \
	X(budget_violation_rounds)	/* rounds that saw the GPU over the budget */         \
	X(watched_ns)			/* time between the first and the last round */       \
	X(resident_block_ns)		/* ... the GPU's blocks as observed at each round, times the time since the last */ \
	X(intake_drops)			/* marks or frees lost to a full intake */            \
	X(free_reports)                                                                       \
	X(free_discard_calls)		/* stream-ordered discards for reported frees */      \
	X(free_discards_skipped)	/* ... not possible (per-thread stream, no batch discard) */

struct engine_counters {
#define ENGINE_COUNTER_FIELD(name) _Atomic u64 name;
	ENGINE_COUNTERS(ENGINE_COUNTER_FIELD)
#undef ENGINE_COUNTER_FIELD
};

struct counter_snapshot {
#define ENGINE_SNAPSHOT_FIELD(name) u64 name;
	ENGINE_COUNTERS(ENGINE_SNAPSHOT_FIELD)
#undef ENGINE_SNAPSHOT_FIELD
};

#define ADD(name, n) atomic_fetch_add_explicit(&engine.counters.name, (n), memory_order_relaxed)

/* A record from a program thread, fed once the GPU passes @at. */
struct intake_entry {
	struct deepum_record rec;
	struct stream_point at;
	bool wait;			/* false: feed at once */
};

/* The observer thread's record of a stream's position: @seq was reached
 * after @after (when the one before was still there). */
struct observed_position {
	u32 seq;
	u64 after;
};

/* Ranges gathered for one destination, issued RANGES_PER_CALL at a time. */
struct batch {
	bool to_gpu;
	u32 n;
	u64 handed_ns;			/* a job's: when the engine handed it over (the log's) */
	CUdeviceptr ptr[BATCH_ROOM];
	size_t size[BATCH_ROOM];
};

static struct {
	/* Set by engine_start(), read-only afterwards (stop: set once). */
	struct deepum_launch_page *page;
	CUcontext context;
	CUdevice device;
	CUstream stream;
	CUstream legacy_discards;	/* blocking: ordered with the legacy stream */
	struct deepum_core *core;
	u64 capacity_blocks;
	u32 max_cmds;
	pthread_t thread;
	FILE *log;			/* DEEPUM_ENGINE_LOG */

	/* The engine thread's own. */
	struct deepum_cmd *cmds, *scratch;
	u32 ncmds, room;
	u32 fed[DEEPUM_PAGE_STREAMS];	/* last launch fed, per slot */
	struct { u64 ts; u32 exec_id; } history[HISTORY];
	u64 history_len;		/* launches ever recorded (index = len % HISTORY) */
	struct fault_event events[ROUND_EVENTS];
	struct { u64 blk; u32 exec_id; } recent[RECENT_FAULTS];	/* what feed_fault() fed lately */
	struct dum_residency observed;	/* the GPU as the migration events show it */
	struct batch host, gpu;
	atomic_bool batch_api;		/* cuMemPrefetchBatchAsync works; the issuing thread may find it does not */
	struct { u64 base, end; } dropping;	/* a range being released: commands on it go */
	u32 positions_read[DEEPUM_PAGE_STREAMS];	/* per stream, observer entries taken */
	u64 last_look_ns;		/* when take_launches() last read the positions */
	u64 idle_ns;
	u64 cpu_ns;
	u64 prefetch_copies_until;	/* end of the latest prefetch copy counted */

	/* Shared with program threads, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t changed;		/* rounds, release done, stopped */
	pthread_cond_t wake;		/* the engine thread: work or a waiter */
	struct intake_entry intake[INTAKE];
	u32 intake_head, intake_tail;
	_Atomic bool intake_waiting;	/* entries are queued: the engine looks without the lock */
	struct { u64 base, size; bool pending, done; } release;
	u64 round_count;
	pthread_t observer;
	_Atomic bool observing;		/* the observer thread runs (DEEPUM_OBSERVE_US) */
	_Atomic u64 observer_scanned_ns;	/* when its latest whole scan began */
	struct {
		_Atomic u32 count;	/* entries written; entry i at i % OBSERVED */
		struct observed_position at[OBSERVED];
	} *positions;			/* per stream, written by the observer only */
	bool lockstep;			/* DEEPUM_TEST_LOCKSTEP: rounds only when asked */
	u64 lockstep_rounds;		/* ... until round_count reaches this */
	bool running;			/* the thread runs (false again once it stopped) */
	bool started;			/* engine_start() succeeded once */
	_Atomic bool stop;		/* set once: the engine makes no more CUDA calls */
	pthread_mutex_t release_lock;	/* one release at a time */

	u32 marks_before_start;		/* iterations marked before the first launch */

	struct engine_counters counters;
	struct counter_snapshot marks[ITERATIONS_MAX];
	u32 nmarks;
	u64 observed_peak_blocks, model_peak_blocks;
	u64 watched_at;			/* when watch_budget() last ran; 0: never */
	u32 iteration_index;
} engine = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.changed = PTHREAD_COND_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.release_lock = PTHREAD_MUTEX_INITIALIZER,
};

static char failure[1280];

bool engine_wanted(void)
{
	return deepum.mode == MODE_USER || deepum.mode == MODE_DEMAND;
}

/* The engine can do nothing more: off for the whole process, with why. */
static void engine_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void engine_fail(const char *fmt, ...)
{
	va_list ap;

	if (!failure[0]) {
		va_start(ap, fmt);
		vsnprintf(failure, sizeof(failure), fmt, ap);
		va_end(ap);
		deepum_disable(failure);
	}
	pthread_mutex_lock(&engine.lock);
	engine.stop = true;
	pthread_mutex_unlock(&engine.lock);
}

static bool cuda_ok(CUresult rc, const char *what)
{
	if (rc == CUDA_SUCCESS)
		return true;
	engine_fail("the user-mode engine's %s failed (CUDA error %d); prefetching is off and "
		    "CUDA calls pass straight through", what, rc);
	return false;
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
	va_list ap;

	if (!engine.log)
		return;
	flockfile(engine.log);	/* the issuers log too: one line at a time */
	va_start(ap, fmt);
	vfprintf(engine.log, fmt, ap);
	va_end(ap);
	/* When the engine acted, on the fault source's clock (offline timing analysis). */
	fprintf(engine.log, " t=%llu\n", (unsigned long long)engine_clock_ns());
	funlockfile(engine.log);
}

/* struct deepum_config's fields, for the log's first line and the statistics. */
#define CONFIG_FIELDS(X)                                                                       \
	X(block_shift) X(corr_sets) X(corr_ways) X(corr_levels) X(corr_succs) X(exec_max)      \
	X(exec_succs) X(exec_starts) X(block_max) X(lookahead_kernels) X(lookahead_blocks)     \
	X(walk_max) X(evict_scan) X(watermark_blocks) X(flags) X(capacity_blocks)

/* The core's configuration as "name<sep>value" pairs joined by @join into @buf. */
static void format_config(char *buf, size_t size, const char *sep, const char *join)
{
	struct deepum_config c;
	size_t at = 0;

	deepum_core_get_config(engine.core, &c);
	buf[0] = 0;
#define FORMAT_FIELD(name)                                                                     \
	if (at < size)                                                                         \
		at += (size_t)snprintf(buf + at, size - at, "%s" #name "%s%llu", at ? join : "", sep, \
				       (unsigned long long)c.name);
	CONFIG_FIELDS(FORMAT_FIELD)
#undef FORMAT_FIELD
}

/* The log's first line: the core's configuration, so that replaying the log
 * through a core (scripts/engine_log_report --core) can take the run's. */
static void log_config(void)
{
	char fields[512];

	format_config(fields, sizeof(fields), "=", " ");
	log_line("config %s", fields);
}

/* ---- applying commands --------------------------------------------------- */

/* The driver calls for @b's ranges, on @stream; empties @b. */
static void issue_calls(struct batch *b, CUstream stream)
{
	CUmemLocation where = { b->to_gpu ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
				b->to_gpu ? engine.device : 0 };

	for (u32 at = 0; at < b->n && !engine.stop;) {
		u32 k = b->n - at < RANGES_PER_CALL ? b->n - at : RANGES_PER_CALL;

		if (engine.batch_api) {
			size_t first_index = 0;
			CUresult rc = REAL(cuMemPrefetchBatchAsync)(&b->ptr[at], &b->size[at], k, &where, &first_index,
								    1, 0, stream);

			if (rc == CUDA_SUCCESS) {
				if (b->to_gpu)
					ADD(prefetch_calls, 1);
				else
					ADD(evict_calls, 1);
				at += k;
				continue;
			}
			/* A driver without it: per range from now on. */
			if ((rc != CUDA_ERROR_NOT_FOUND && rc != CUDA_ERROR_NOT_SUPPORTED) ||
			    !deepum_real[ENTRY_cuMemPrefetchAsync]) {
				cuda_ok(rc, "cuMemPrefetchBatchAsync");
				return;
			}
			engine.batch_api = false;
		}
		if (!deepum_real[ENTRY_cuMemPrefetchAsync]) {
			engine_fail("the driver has neither cuMemPrefetchBatchAsync nor cuMemPrefetchAsync; "
				    "CUDA calls pass straight through");
			return;
		}
		for (u32 i = at; i < at + k; i++) {
			if (!cuda_ok(REAL(cuMemPrefetchAsync)(b->ptr[i], b->size[i], b->to_gpu ? engine.device : CU_DEVICE_CPU,
							      stream), "cuMemPrefetchAsync"))
				return;
			ADD(fallback_calls, 1);
		}
		at += k;
	}
	b->n = 0;
}

/*
 * The issuer (default; DEEPUM_ISSUER=0 turns it off): a thread of its own
 * for the driver calls.  A batch of evictions keeps its caller in the driver until the data is
 * written back: on the H200 (BERT, 50% budget) single calls took up to
 * 215 ms and the engine spent 64% of its time there, so the faults of
 * those moments reached the core 200 ms late (p50).  The engine hands each
 * gathered batch over and goes on; the issuer makes the calls in order on
 * the engine's stream, so evictions still go before the prefetches that use
 * their room.  At most ISSUE_JOBS batches wait, so commands are at most that
 * far behind the core's plan; beyond, a batch joins the newest waiting one
 * if that goes the same way (the engine waited there before, deaf to faults
 * for as long as a write-back took), else the engine waits.  On the H200
 * (2026-11-30, same calls): GPT-2, BERT and ResNet-50 at 50% and 75% budgets
 * ran 10-47% faster with it in five cells of six, 7% slower in one.
 *
 * The writer (DEEPUM_WRITER=1, with the issuer): a second such thread, with
 * a stream of its own, for the eviction batches.  On one stream a prefetch
 * waits behind every write-back issued before it, and the copies from the
 * host wait while the link's other direction writes back.  Here a prefetch
 * batch waits only for the eviction batches of its round and the ones
 * before (their room): on the host until the writer made their calls, on
 * the GPU for the event the writer records after each.
 */
struct issuer {
	const char *name;
	CUstream stream;
	pthread_mutex_t lock;
	pthread_cond_t changed;		/* a job came or went, or stop */
	struct batch jobs[ISSUE_JOBS];
	u64 after_writes[ISSUE_JOBS];	/* the writer's jobs that must be issued first */
	u64 handed, issued;		/* jobs; jobs[issued % ISSUE_JOBS] is next */
	CUevent written[ISSUE_EVENTS];	/* the writer's: recorded after job k at k % ISSUE_EVENTS */
	pthread_t thread;
	bool running;			/* the thread was started (the engine's own) */
	bool thread_ran;		/* ... at some time, for the statistics */
	bool stop;
};

static struct issuer issuer = {
	.name = "issuer", .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER,
};
static struct issuer writer = {
	.name = "writer", .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER,
};

/* Before a prefetch job: the writer's first @n jobs issued, and the stream
 * to wait for their copies.  A later job's event in the slot only waits
 * longer; the writer never waits for the issuer, so this ends. */
static void wait_for_writes(u64 n)
{
	CUevent written;

	if (!n)
		return;
	pthread_mutex_lock(&writer.lock);
	if (writer.issued < n)
		ADD(write_waits, 1);
	while (writer.issued < n && writer.running && !engine.stop)
		pthread_cond_wait(&writer.changed, &writer.lock);
	written = writer.written[(n - 1) % ISSUE_EVENTS];
	pthread_mutex_unlock(&writer.lock);
	if (!engine.stop)
		cuda_ok(REAL(cuStreamWaitEvent)(issuer.stream, written, 0), "cuStreamWaitEvent");
}

/* A logged job's copies are done: the stream reached what followed them. */
static void log_landed(void *job)
{
	if (!engine.stop)
		log_line("landed job=%llu", (unsigned long long)(uintptr_t)job);
}

static void *issuer_main(void *arg)
{
	struct issuer *is = arg;

	pthread_mutex_lock(&is->lock);
	if (!cuda_ok(REAL(cuCtxSetCurrent)(engine.context), "cuCtxSetCurrent")) {
		pthread_cond_broadcast(&is->changed);	/* the engine stops: wake its waits */
		pthread_mutex_unlock(&is->lock);
		return NULL;
	}
	for (;;) {
		u64 job;

		while (is->issued == is->handed && !is->stop)
			pthread_cond_wait(&is->changed, &is->lock);
		if (is->issued == is->handed)
			break;
		struct batch *b;
		u64 started, bytes = 0;
		u32 ranges;

		job = is->issued;
		b = &is->jobs[job % ISSUE_JOBS];
		pthread_mutex_unlock(&is->lock);
		wait_for_writes(is->after_writes[job % ISSUE_JOBS]);
		started = engine.log ? engine_clock_ns() : 0;
		ranges = b->n;
		for (u32 i = 0; engine.log && i < ranges; i++)
			bytes += b->size[i];
		issue_calls(b, is->stream);
		/*
		 * How far the driver calls lag behind the plan, and when their
		 * copies are done (scripts/engine_log_report).  Jobs are numbered
		 * per thread; the writer's by (1 << 32) on.
		 */
		if (engine.log && !engine.stop) {
			u64 id = job + (is == &writer ? 1ULL << 32 : 0);

			log_line("issued %s 0x%llx ranges=%u bytes=%llu job=%llu handed=%llu started=%llu",
				 b->to_gpu ? "prefetch" : "evict", (unsigned long long)b->ptr[0], ranges,
				 (unsigned long long)bytes, (unsigned long long)id, (unsigned long long)b->handed_ns,
				 (unsigned long long)started);
			cuda_ok(REAL(cuLaunchHostFunc)(is->stream, log_landed, (void *)(uintptr_t)id), "cuLaunchHostFunc");
		}
		if (is == &writer && !engine.stop)
			cuda_ok(REAL(cuEventRecord)(is->written[job % ISSUE_EVENTS], is->stream), "cuEventRecord");
		pthread_mutex_lock(&is->lock);
		is->issued++;
		pthread_cond_broadcast(&is->changed);
	}
	pthread_mutex_unlock(&is->lock);
	return NULL;
}

static bool issuer_start(struct issuer *is, char *why, size_t size)
{
	int err;

	is->stop = false;
	err = deepum_thread_start(&is->thread, issuer_main, is);
	if (err)
		snprintf(why, size, "cannot start its %s thread: %s", is->name, strerror(err));
	is->running = is->thread_ran = !err;
	return !err;
}

/* Until every batch handed over was issued (or the engine stopped). */
static void issuer_drain(struct issuer *is)
{
	pthread_mutex_lock(&is->lock);
	while (is->running && is->issued != is->handed && !engine.stop)
		pthread_cond_wait(&is->changed, &is->lock);
	pthread_mutex_unlock(&is->lock);
}

/* From the engine's thread, at its end.  The issuer first: it may be
 * waiting for the writer. */
static void issuer_stop(struct issuer *is)
{
	if (!is->running)
		return;
	pthread_mutex_lock(&is->lock);
	is->stop = true;
	pthread_cond_broadcast(&is->changed);
	pthread_mutex_unlock(&is->lock);
	pthread_join(is->thread, NULL);
	is->running = false;
	/* No landed line after the log is closed. */
	if (engine.log)
		REAL(cuStreamSynchronize)(is->stream);
}

/* Every batch handed over issued, and the streams' work done. */
static void issued_and_done(void)
{
	issuer_drain(&issuer);
	issuer_drain(&writer);
	if (!engine.stop)
		cuda_ok(REAL(cuStreamSynchronize)(engine.stream), "cuStreamSynchronize");
	if (!engine.stop && writer.running)
		cuda_ok(REAL(cuStreamSynchronize)(writer.stream), "cuStreamSynchronize");
}

/* @b's ranges to the driver: evictions by the writer if there is one,
 * everything else by the issuer if there is one; empties @b. */
static void issue(struct batch *b)
{
	struct issuer *is = !b->to_gpu && writer.running ? &writer : &issuer;
	struct batch *job;
	u64 after_writes;

	if (!b->n)
		return;
	if (!is->running) {
		issue_calls(b, engine.stream);
		return;
	}
	/* Only the engine's thread hands jobs over: writer.handed is its own. */
	after_writes = is == &issuer && writer.running ? writer.handed : 0;
	pthread_mutex_lock(&is->lock);
	if (is->handed - is->issued == ISSUE_JOBS) {
		/* Full: the newest job is not taken yet (ISSUE_JOBS > 1).  Joining
		 * it keeps the engine listening, which waiting here would not. */
		u64 newest = (is->handed - 1) % ISSUE_JOBS;

		job = &is->jobs[newest];
		if (job->to_gpu == b->to_gpu && job->n + b->n <= BATCH_ROOM) {
			memcpy(&job->ptr[job->n], b->ptr, b->n * sizeof(b->ptr[0]));
			memcpy(&job->size[job->n], b->size, b->n * sizeof(b->size[0]));
			job->n += b->n;
			is->after_writes[newest] = after_writes;
			ADD(issuer_joins, 1);
			goto out;
		}
		ADD(issuer_waits, 1);
	}
	while (is->handed - is->issued == ISSUE_JOBS && !engine.stop)
		pthread_cond_wait(&is->changed, &is->lock);
	if (!engine.stop) {
		job = &is->jobs[is->handed % ISSUE_JOBS];
		job->to_gpu = b->to_gpu;
		job->n = b->n;
		job->handed_ns = engine.log ? engine_clock_ns() : 0;
		memcpy(job->ptr, b->ptr, b->n * sizeof(b->ptr[0]));
		memcpy(job->size, b->size, b->n * sizeof(b->size[0]));
		is->after_writes[is->handed % ISSUE_JOBS] = after_writes;
		is->handed++;
		pthread_cond_broadcast(&is->changed);
	}
out:
	pthread_mutex_unlock(&is->lock);
	b->n = 0;
}

static void batch_push(struct batch *b, u64 base, u64 size)
{
	if (b->n == BATCH_ROOM)
		issue(b);
	b->ptr[b->n] = base;
	b->size[b->n++] = size;
}

static void add_piece(u64 base, u64 size, void *arg)
{
	struct batch *b = arg;

	batch_push(b, base, size);
	if (b->to_gpu) {
		ADD(prefetch_ranges, 1);
		ADD(prefetch_bytes, size);
	} else {
		ADD(evict_ranges, 1);
		ADD(evict_bytes, size);
	}
}

/* Only the parts inside live managed allocations: a block may hold the end
 * of one allocation and a gap, or memory freed since it was planned. */
static void add_range(struct batch *b, u64 addr, u64 len)
{
	ADD(bytes_outside_managed, managed_clip(addr, len, add_piece, b));
}

static bool being_released(const struct deepum_cmd *cmd)
{
	return cmd->addr < engine.dropping.end && cmd->addr + (1ULL << BLOCK_SHIFT) > engine.dropping.base;
}

static void count_evictions(const struct deepum_cmd *cmd, u32 n)
{
	for (u32 i = 0; i < n; i++) {
		if (cmd[i].op == DEEPUM_CMD_DISCARD)
			ADD(discard_blocks, 1);
		else if (cmd[i].flags & DEEPUM_CMD_F_DEMAND)
			ADD(demand_evictions, 1);
		else
			ADD(evict_blocks, 1);
	}
}

/* The round's commands, as kmod/core/plan.h says, on the engine's stream. */
static void apply_commands(void)
{
	u32 n = engine.ncmds, first, run;

	engine.ncmds = 0;
	if (!n || engine.stop)
		return;
	first = deepum_plan_order(engine.cmds, n, engine.scratch);
	/* Evictions all go before any prefetch: their order does not matter,
	 * their ranges do. */
	deepum_plan_sort(engine.cmds, first);
	for (u32 i = 0; i < first; i += run) {
		run = deepum_plan_run(&engine.cmds[i], first - i, BLOCK_SHIFT);
		count_evictions(&engine.cmds[i], run);
		log_line("evict 0x%llx blocks=%u%s", (unsigned long long)engine.cmds[i].addr, run,
			 engine.cmds[i].op == DEEPUM_CMD_DISCARD ? " dead" : "");
		add_range(&engine.host, engine.cmds[i].addr, (u64)run << BLOCK_SHIFT);
	}
	issue(&engine.host);
	for (u32 i = first; i < n; i += run) {
		run = deepum_plan_run(&engine.cmds[i], n - i, BLOCK_SHIFT);
		ADD(prefetch_blocks, run);
		log_line("prefetch exec=%u 0x%llx blocks=%u", engine.cmds[i].exec_id,
			 (unsigned long long)engine.cmds[i].addr, run);
		add_range(&engine.gpu, engine.cmds[i].addr, (u64)run << BLOCK_SHIFT);
	}
	issue(&engine.gpu);
}

/* ---- feeding the core ----------------------------------------------------- */

static void snapshot(struct counter_snapshot *s)
{
#define ENGINE_SNAPSHOT(name) s->name = atomic_load_explicit(&engine.counters.name, memory_order_relaxed);
	ENGINE_COUNTERS(ENGINE_SNAPSHOT)
#undef ENGINE_SNAPSHOT
}

static void feed(const struct deepum_record *rec)
{
	u64 t0 = engine_clock_ns();
	u32 n = 0, kept;

	if (engine.room - engine.ncmds < engine.max_cmds)
		apply_commands();
	if (deepum_core_process(engine.core, rec, engine.cmds + engine.ncmds, engine.max_cmds, &n) != 0)
		return;	/* malformed: the core changed nothing (a bad reported range) */
	deepum_core_add_time(engine.core, engine_clock_ns() - t0);
	if (engine.dropping.end) {
		kept = 0;
		for (u32 i = 0; i < n; i++) {
			const struct deepum_cmd *cmd = &engine.cmds[engine.ncmds + i];

			if (cmd->op != DEEPUM_CMD_PREFETCH && being_released(cmd))
				ADD(released_commands_dropped, 1);
			else
				engine.cmds[engine.ncmds + kept++] = *cmd;
		}
		n = kept;
	}
	engine.ncmds += n;
}

/* The exec ID of the launch seen last when @ts happened. */
static u32 exec_at(u64 ts)
{
	u64 lo, hi, oldest = engine.history_len > HISTORY ? engine.history_len - HISTORY : 0;

	if (!ts || engine.history_len == oldest)
		return DEEPUM_EXEC_NONE;	/* the core takes the running one */
	if (engine.history[oldest % HISTORY].ts > ts)
		return engine.history[oldest % HISTORY].exec_id;
	for (lo = oldest, hi = engine.history_len - 1; lo < hi;) {
		u64 mid = lo + (hi - lo + 1) / 2;

		if (engine.history[mid % HISTORY].ts <= ts)
			lo = mid;
		else
			hi = mid - 1;
	}
	return engine.history[lo % HISTORY].exec_id;
}

/*
 * When launch @seq of stream @slot began.  Without the observer: @now, when
 * the round saw it (late by the round's driver calls).  With it: the last
 * look that did not see it yet, the observer's or the engine's own (@since):
 * the earliest it can have begun, so that a fault the kernel made soon after
 * it began does not go to the kernel before.
 */
static u64 launch_time(u32 slot, u32 seq, u64 since, u64 now)
{
	u32 count, *read = &engine.positions_read[slot];
	u64 scanned, after;

	if (!atomic_load_explicit(&engine.observing, memory_order_acquire))
		return now;
	scanned = atomic_load_explicit(&engine.observer_scanned_ns, memory_order_acquire);
	count = atomic_load_explicit(&engine.positions[slot].count, memory_order_acquire);
	if (count - *read > OBSERVED)
		*read = count - OBSERVED;	/* the oldest were overwritten */
	for (; *read != count; (*read)++) {
		struct observed_position at = engine.positions[slot].at[*read % OBSERVED];

		if (atomic_load_explicit(&engine.positions[slot].count, memory_order_acquire) - *read > OBSERVED)
			continue;	/* overwritten while it was read */
		if ((int32_t)(at.seq - seq) >= 0) {
			ADD(launches_observed, 1);
			after = at.after > since ? at.after : since;
			ADD(observed_lead_ns, now > after ? now - after : 0);
			return after < now ? after : now;
		}
	}
	/* Not seen by the scan that began at @scanned: it began after. */
	after = scanned > since ? scanned : since;
	return after < now ? after : now;
}

/* Positions as they change, each timed by the scan before the one that saw
 * it: the launch began after that.  No driver call, so no delay but @period. */
static void *observer_main(void *arg)
{
	const struct timespec period = { 0, (long)deepum.observe_us * 1000 };
	u32 seen[DEEPUM_PAGE_STREAMS] = { 0 };
	u64 before = engine_clock_ns();

	(void)arg;
	while (!atomic_load(&engine.stop) && deepum_active()) {
		u64 now = engine_clock_ns();

		for (u32 slot = 0; slot < DEEPUM_PAGE_STREAMS; slot++) {
			u32 seq = (u32)(__atomic_load_n(&engine.page->position[slot], __ATOMIC_ACQUIRE) >> 32);
			u32 i = atomic_load_explicit(&engine.positions[slot].count, memory_order_relaxed);

			if (seq == seen[slot])
				continue;
			seen[slot] = seq;
			engine.positions[slot].at[i % OBSERVED] = (struct observed_position){ .seq = seq, .after = before };
			atomic_store_explicit(&engine.positions[slot].count, i + 1, memory_order_release);
		}
		before = now;
		atomic_store_explicit(&engine.observer_scanned_ns, now, memory_order_release);
		nanosleep(&period, NULL);
	}
	return NULL;
}

static void feed_launch(u32 slot, u32 exec_id, u64 now)
{
	struct deepum_record rec = {
		.ts = now, .type = DEEPUM_REC_LAUNCH, .exec_id = exec_id, .aux = slot,
		.addr = launch_name_hash(exec_id),
	};

	/* Attribution searches the history by time: it must not go back. */
	if (engine.history_len && now < engine.history[(engine.history_len - 1) % HISTORY].ts)
		now = engine.history[(engine.history_len - 1) % HISTORY].ts;
	engine.history[engine.history_len % HISTORY].ts = now;
	engine.history[engine.history_len % HISTORY].exec_id = exec_id;
	engine.history_len++;
	ADD(launches_fed, 1);
	log_line("launch slot=%u exec=%u at=%llu", slot, exec_id, (unsigned long long)now);
	feed(&rec);
}

static bool point_passed(const struct intake_entry *e)
{
	return !e->wait || (int32_t)(engine.fed[e->at.slot] - e->at.seq) >= 0;
}

/* [@from, @to) of a managed allocation to the host, unaccounted: see sweep_unseen(). */
static void sweep_run(u64 from, u64 to)
{
	if (from >= to)
		return;
	log_line("sweep 0x%llx bytes=%llu", (unsigned long long)from, (unsigned long long)(to - from));
	ADD(sweep_ranges, 1);
	ADD(sweep_bytes, to - from);
	batch_push(&engine.host, from, to - from);
}

/* A copy or memset into managed memory the GPU never touched fills it on
 * the GPU with no fault and no migration, so neither the core nor the
 * source hears of it: a model's weights, copied in when it is loaded, would
 * stay on the GPU on top of the budget for good.  So at each iteration
 * mark, the blocks the core does not hold of every allocation made since
 * the last mark go to the host, once (they are on the host already, or
 * unseen); from there, every way back in is a fault or a migration. */
static void sweep_unseen(void)
{
	u64 base[64], size[64];
	u32 n;

	while ((n = managed_ranges_unswept(base, size, 64))) {
		for (u32 i = 0; i < n; i++) {
			u64 end = base[i] + size[i], from = base[i], at = base[i];

			while (at < end) {
				u64 next = ((at >> BLOCK_SHIFT) + 1) << BLOCK_SHIFT;

				if (deepum_core_is_resident(engine.core, at)) {
					sweep_run(from, at);
					from = next;
				}
				at = next;
			}
			sweep_run(from, end);
		}
	}
	issue(&engine.host);
}

static void feed_mark(struct deepum_record *rec)
{
	log_line("iteration %u", rec->aux);
	if (engine.nmarks < ITERATIONS_MAX)
		snapshot(&engine.marks[engine.nmarks++]);
	ADD(iterations, 1);
	feed(rec);
	if (engine.capacity_blocks)
		sweep_unseen();
}

/* FREE records no larger than the core can answer in one output, so that
 * it discards every resident block of the range at once. */
static void feed_free(u64 addr, u64 len)
{
	u64 chunk = (u64)(engine.max_cmds / 2) << BLOCK_SHIFT;

	for (u64 off = 0; off < len; off += chunk) {
		struct deepum_record rec = { .type = DEEPUM_REC_FREE, .addr = addr + off,
					     .len = len - off < chunk ? len - off : chunk };

		feed(&rec);
	}
}

/* Marks and reported frees the GPU has got past, each right after the
 * launch it follows in stream order. */
static bool take_intake(void)
{
	struct intake_entry ready[64];
	u32 n = 0;

	if (!atomic_load_explicit(&engine.intake_waiting, memory_order_acquire))
		return false;
	pthread_mutex_lock(&engine.lock);
	while (n < 64 && engine.intake_head != engine.intake_tail &&
	       point_passed(&engine.intake[engine.intake_head % INTAKE]))
		ready[n++] = engine.intake[engine.intake_head++ % INTAKE];
	atomic_store_explicit(&engine.intake_waiting, engine.intake_head != engine.intake_tail, memory_order_release);
	pthread_mutex_unlock(&engine.lock);
	for (u32 i = 0; i < n; i++) {
		if (ready[i].rec.type == DEEPUM_REC_ITERATION) {
			feed_mark(&ready[i].rec);
		} else {
			ADD(frees_fed, 1);
			feed_free(ready[i].rec.addr, ready[i].rec.len);
		}
	}
	return n != 0;
}

/* Step 1: the launches every stream got to since the last round (step 3,
 * marks and reported frees, is interleaved). */
static bool take_launches(u64 now)
{
	u64 since = engine.last_look_ns;
	bool any = false;

	engine.last_look_ns = now;
	for (u32 slot = 0; slot < DEEPUM_PAGE_STREAMS; slot++) {
		u32 reached = (u32)(__atomic_load_n(&engine.page->position[slot], __ATOMIC_ACQUIRE) >> 32);
		u32 behind = reached - engine.fed[slot];

		if (!behind || behind > (1U << 31))
			continue;	/* nothing new (or an older position: racing launchers) */
		any = true;
		if (behind > DEEPUM_RING_DEPTH) {
			ADD(launches_lost, behind - DEEPUM_RING_DEPTH);
			engine.fed[slot] = reached - DEEPUM_RING_DEPTH;
		}
		while (engine.fed[slot] != reached) {
			u32 seq = ++engine.fed[slot];
			u64 entry = __atomic_load_n(&engine.page->ring[slot][seq % DEEPUM_RING_DEPTH], __ATOMIC_ACQUIRE);

			if ((u32)(entry >> 32) == seq)
				feed_launch(slot, (u32)entry, launch_time(slot, seq, since, now));
			else
				ADD(launches_lost, 1);
			take_intake();
		}
	}
	return any;
}

static void observe_residency(const struct fault_event *ev)
{
	u64 first = ev->addr >> BLOCK_SHIFT, last = (ev->addr + (ev->bytes ? ev->bytes : 1) - 1) >> BLOCK_SHIFT;

	for (u64 blk = first; blk <= last; blk++) {
		u32 slot = dum_residency_get(&engine.observed, blk);

		if (slot == DUM_NIL)
			return;
		if (ev->kind == EV_MIGRATED_IN)
			dum_residency_touch(&engine.observed, slot);
		else
			dum_residency_remove(&engine.observed, slot);
	}
}

/* The union of the prefetch copies' intervals (copies may overlap; the
 * source reports them about in order). */
static void count_prefetch_copy(const struct fault_event *ev)
{
	u64 from = ev->copy_begin_ns > engine.prefetch_copies_until ? ev->copy_begin_ns : engine.prefetch_copies_until;

	if (ev->copy_end_ns > from)
		ADD(h2d_prefetch_busy_ns, ev->copy_end_ns - from);
	if (ev->copy_end_ns > engine.prefetch_copies_until)
		engine.prefetch_copies_until = ev->copy_end_ns;
}

/* Feed a fault of @ev's block; with @once, not if it was fed for the same
 * kernel lately (a block faults page by page: many events for one miss).
 * False if not fed. */
static bool feed_fault(const struct fault_event *ev, u32 flags, bool once)
{
	struct deepum_record rec = {
		.ts = ev->ts, .type = DEEPUM_REC_FAULT, .addr = ev->addr & ~((1ULL << BLOCK_SHIFT) - 1),
		.exec_id = exec_at(ev->ts), .flags = flags,
		.aux = flags ? 0 : ev->detail <= DEEPUM_ACCESS_PREFETCH ? ev->detail : 0,
	};
	u64 blk = rec.addr >> BLOCK_SHIFT;
	u32 slot = (u32)(dum_hash64(blk) % RECENT_FAULTS);

	if (!blk || (once && engine.recent[slot].blk == blk && engine.recent[slot].exec_id == rec.exec_id))
		return false;
	engine.recent[slot].blk = blk;
	engine.recent[slot].exec_id = rec.exec_id;
	log_line("fault exec=%u 0x%llx at=%llu", rec.exec_id, (unsigned long long)rec.addr, (unsigned long long)ev->ts);
	feed(&rec);
	return true;
}

/* Step 2: what the GPU did.  A fault on a block the core holds is a
 * prefetch still in flight, or another fault of a block already counted.
 * The first, once per kernel, is fed too: the kernel needs that block, and
 * the core learns it (DeepUM's correlator sees every fault the driver
 * does) and protects it while the kernel runs. */
static bool take_faults(void)
{
	u32 n = faults_poll(engine.events, ROUND_EVENTS);

	for (u32 i = 0; i < n; i++) {
		const struct fault_event *ev = &engine.events[i];
		bool held = deepum_core_is_resident(engine.core, ev->addr);

		switch (ev->kind) {
		case EV_FAULT:
			ADD(fault_events, 1);
			if (held) {
				ADD(faults_on_resident, 1);
				if (feed_fault(ev, 0, true))
					ADD(late_faults_fed, 1);
			} else if (feed_fault(ev, 0, false)) {
				ADD(faults_fed, 1);
			}
			break;
		case EV_MIGRATED_IN:
			observe_residency(ev);
			if (ev->detail == CAUSE_USER) {
				ADD(h2d_prefetch_bytes, ev->bytes);
				count_prefetch_copy(ev);
			} else {
				ADD(h2d_fault_bytes, ev->bytes);
				if (!held) {
					ADD(transfer_faults_fed, 1);
					feed_fault(ev, DEEPUM_FAULT_F_FROM_TRANSFER, false);
				}
			}
			break;
		case EV_MIGRATED_OUT:
			observe_residency(ev);
			ADD(d2h_bytes, ev->bytes);
			if (ev->detail == CAUSE_EVICTION)
				ADD(driver_evictions, 1);
			break;
		case EV_THRASHING:
			ADD(thrashing_events, 1);
			ADD(thrashing_bytes, ev->bytes);
			break;
		case EV_THROTTLED:
			ADD(throttled_pages, 1);
			break;
		case EV_MAPPED_REMOTE:
			ADD(mapped_remote_bytes, ev->bytes);
			break;
		}
	}
	return n != 0;
}

/* The program frees [base, base + size): forget it, finish what is in
 * flight on it, then let the free go ahead. */
static void take_release(void)
{
	u64 base, size;

	pthread_mutex_lock(&engine.lock);
	base = engine.release.base;
	size = engine.release.size;
	if (!engine.release.pending) {
		pthread_mutex_unlock(&engine.lock);
		return;
	}
	pthread_mutex_unlock(&engine.lock);
	ADD(releases, 1);
	engine.dropping.base = base;
	engine.dropping.end = base + size;
	feed_free(base, size);
	engine.dropping.base = engine.dropping.end = 0;
	apply_commands();
	issued_and_done();
	pthread_mutex_lock(&engine.lock);
	engine.release.pending = false;
	engine.release.done = true;
	pthread_cond_broadcast(&engine.changed);
	pthread_mutex_unlock(&engine.lock);
}

/* The peak, the mean (time-weighted: a peak may be brief) and the rounds
 * over the budget of the GPU's residency as the migration events show it. */
static void watch_budget(void)
{
	struct deepum_stats stats;
	u64 now = engine_clock_ns();

	if (engine.watched_at) {
		ADD(watched_ns, now - engine.watched_at);
		ADD(resident_block_ns, engine.observed.resident * (now - engine.watched_at));
	}
	engine.watched_at = now;
	deepum_core_get_stats(engine.core, &stats);
	if (stats.resident_blocks > engine.model_peak_blocks)
		engine.model_peak_blocks = stats.resident_blocks;
	if (engine.observed.resident > engine.observed_peak_blocks)
		engine.observed_peak_blocks = engine.observed.resident;
	if (engine.capacity_blocks && engine.observed.resident > engine.capacity_blocks)
		ADD(budget_violation_rounds, 1);
}

/* One round; whether it found anything to do. */
static bool round_once(void)
{
	u64 now = engine_clock_ns();
	bool busy;

	ADD(rounds, 1);
	/* A CUDA call now could invalidate the program's graph capture. */
	if (capture_possible()) {
		ADD(paused_rounds, 1);
		return false;
	}
	busy = take_intake();
	busy |= take_launches(now);
	busy |= take_faults();
	apply_commands();
	take_release();
	watch_budget();
	return busy;
}

static void idle(void)
{
	struct timespec until;

	engine.idle_ns = engine.idle_ns ? engine.idle_ns * 2 : IDLE_FIRST_NS;
	if (engine.idle_ns > IDLE_MAX_NS)
		engine.idle_ns = IDLE_MAX_NS;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)engine.idle_ns;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&engine.lock);
	if (!engine.stop && !engine.release.pending)
		pthread_cond_timedwait(&engine.wake, &engine.lock, &until);
	pthread_mutex_unlock(&engine.lock);
}

/* Under test lockstep, the next round waits for a program thread to ask:
 * rounds then fall at the same points of the program every run. */
static void lockstep_wait(void)
{
	pthread_mutex_lock(&engine.lock);
	while (engine.round_count >= engine.lockstep_rounds && !engine.stop && !engine.release.pending)
		pthread_cond_wait(&engine.wake, &engine.lock);
	pthread_mutex_unlock(&engine.lock);
}

static void *engine_main(void *arg)
{
	struct timespec cpu;

	(void)arg;
	if (cuda_ok(REAL(cuCtxSetCurrent)(engine.context), "cuCtxSetCurrent")) {
		for (;;) {
			bool busy;

			pthread_mutex_lock(&engine.lock);
			busy = engine.stop;
			pthread_mutex_unlock(&engine.lock);
			if (busy || !deepum_active())
				break;
			busy = round_once();
			pthread_mutex_lock(&engine.lock);
			engine.round_count++;
			pthread_cond_broadcast(&engine.changed);
			pthread_mutex_unlock(&engine.lock);
			if (engine.lockstep)
				lockstep_wait();
			else if (busy)
				engine.idle_ns = 0;
			else
				idle();
		}
	}
	issuer_stop(&issuer);
	issuer_stop(&writer);
	faults_stop();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	engine.cpu_ns = (u64)cpu.tv_sec * 1000000000ULL + (u64)cpu.tv_nsec;
	pthread_mutex_lock(&engine.lock);
	engine.running = false;
	pthread_cond_broadcast(&engine.changed);
	pthread_mutex_unlock(&engine.lock);
	return NULL;
}

/* ---- starting and stopping -------------------------------------------------- */

static void push_early_marks(void);

/* The child of a fork has no engine thread: nothing may wait for it. */
static void forget_in_child(void)
{
	engine.running = false;
	engine.started = false;
	engine.observing = false;
}

static bool core_create(char *why, size_t size)
{
	/* By default wherever victims weigh next uses: not the oldest's */
	bool victim_runs = deepum.victim_runs == SETTING_UNSET ?
				   deepum.history_scan != 0 && DEEPUM_ENGINE_FLAGS_DEFAULT & DEEPUM_CFG_F_VICTIM_RUNS :
				   deepum.victim_runs;
	struct deepum_config cfg = {
		.exec_max = deepum.exec_max,
		.capacity_blocks = deepum.capacity >> BLOCK_SHIFT,
		.watermark_blocks = deepum.watermark_blocks ? deepum.watermark_blocks :
				    deepum_engine_watermark(deepum.capacity >> BLOCK_SHIFT),
		.lookahead_blocks = deepum.lookahead_blocks,
		.corr_sets = deepum.corr_sets,
		/* A horizon of N kernels: victims by predicted next use, looked
		 * for among as many blocks; else victims by next use as the last
		 * iteration had it (the core's default), among N blocks if
		 * DEEPUM_HISTORY_SCAN=N, or the oldest if it is 0 (docs/CORE.md). */
		.lookahead_kernels = deepum.horizon_kernels,
		.evict_scan = deepum.horizon_kernels ? deepum.horizon_kernels :
			      deepum.history_scan == SETTING_UNSET ? 0 : deepum.history_scan,
		/* The baseline: residency and LRM eviction when a fault finds
		 * memory full, nothing predicted. */
		.flags = deepum.mode == MODE_DEMAND ?
				 DEEPUM_CFG_F_NO_PREFETCH | DEEPUM_CFG_F_NO_PREEVICT | DEEPUM_CFG_F_LRM_VICTIMS :
			 (deepum.horizon_kernels ? DEEPUM_CFG_F_HORIZON : 0) |
			 (deepum.history_scan ? 0 : DEEPUM_CFG_F_LRM_VICTIMS) |
			 (deepum.positional ? 0 : DEEPUM_CFG_F_NO_POSITIONAL) |
			 (deepum.forget_unsettled ? DEEPUM_CFG_F_FORGET_UNSETTLED : 0) |
			 (victim_runs ? DEEPUM_CFG_F_VICTIM_RUNS : 0),
	};
	int err;

	if (deepum.horizon_kernels && deepum.history_scan != SETTING_UNSET) {
		snprintf(why, size, "DEEPUM_HORIZON_KERNELS and DEEPUM_HISTORY_SCAN exclude each other");
		return false;
	}
	if (victim_runs && deepum.mode != MODE_DEMAND && cfg.flags & DEEPUM_CFG_F_LRM_VICTIMS) {
		snprintf(why, size, "DEEPUM_VICTIM_RUNS weighs victims by next use: not with DEEPUM_HISTORY_SCAN=0");
		return false;
	}
	if (deepum_core_config_check(&cfg) != 0) {
		snprintf(why, size, "DEEPUM_WATERMARK, DEEPUM_LOOKAHEAD_BLOCKS, DEEPUM_CORR_SETS (a power of two), "
			 "DEEPUM_HORIZON_KERNELS or DEEPUM_HISTORY_SCAN is outside the core's limits");
		return false;
	}
	err = deepum_inject("engine-alloc") ? -ENOMEM : deepum_core_create(&cfg, &engine.core);
	engine.max_cmds = engine.core ? deepum_core_max_cmds(engine.core) : 0;
	engine.room = ROUND_CMDS_FACTOR * engine.max_cmds;
	engine.cmds = engine.core ? deepum_calloc(engine.room, sizeof(*engine.cmds)) : NULL;
	engine.scratch = engine.core ? deepum_calloc(engine.room, sizeof(*engine.scratch)) : NULL;
	if (err || !engine.cmds || !engine.scratch || dum_residency_init(&engine.observed, cfg.block_max) != 0) {
		snprintf(why, size, "cannot allocate the prefetch core (%llu MiB)",
			 (unsigned long long)(deepum_core_mem_bytes(&cfg) >> 20));
		return false;
	}
	engine.capacity_blocks = cfg.capacity_blocks;
	return true;
}

static bool stream_create(char *why, size_t size)
{
	int least = 0, greatest = 0;
	CUresult rc = REAL(cuCtxGetStreamPriorityRange)(&least, &greatest);

	/* The lowest priority: the program's kernels go first. */
	if (rc == CUDA_SUCCESS)
		rc = REAL(cuStreamCreateWithPriority)(&engine.stream, CU_STREAM_NON_BLOCKING, least);
	/* The batch calls refuse the legacy stream; a blocking stream runs
	 * after the legacy stream's earlier work and before its later work,
	 * which is the order a discard of its frees needs. */
	if (rc == CUDA_SUCCESS)
		rc = REAL(cuStreamCreateWithPriority)(&engine.legacy_discards, 0, least);
	if (rc == CUDA_SUCCESS && deepum.writer)
		rc = REAL(cuStreamCreateWithPriority)(&writer.stream, CU_STREAM_NON_BLOCKING, least);
	for (u32 i = 0; i < ISSUE_EVENTS && rc == CUDA_SUCCESS && deepum.writer; i++)
		rc = REAL(cuEventCreate)(&writer.written[i], CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		snprintf(why, size, "cannot create its streams (CUDA error %d)", rc);
	issuer.stream = engine.stream;
	return rc == CUDA_SUCCESS;
}

static bool budget_fits(char *why, size_t size)
{
	size_t free_bytes = 0, total = 0;
	CUresult rc = REAL(cuMemGetInfo_v2)(&free_bytes, &total);

	if (rc != CUDA_SUCCESS) {
		snprintf(why, size, "cuMemGetInfo failed (CUDA error %d)", rc);
		return false;
	}
	/* The budget emulates a smaller GPU; it must fit in the real one, or
	 * keeping to it would mean oversubscribing. */
	if (deepum.capacity > free_bytes) {
		snprintf(why, size, "DEEPUM_CAPACITY=%llu is more than the GPU's %llu free bytes",
			 (unsigned long long)deepum.capacity, (unsigned long long)free_bytes);
		return false;
	}
	return true;
}

/* DEEPUM_OBSERVE_US: without it, the engine runs as well, timing launches by its rounds. */
static void observer_start(void)
{
	char message[256];
	int err;

	engine.positions = deepum_calloc(DEEPUM_PAGE_STREAMS, sizeof(*engine.positions));
	err = engine.positions ? deepum_thread_start(&engine.observer, observer_main, NULL) : ENOMEM;
	if (!err) {
		atomic_store_explicit(&engine.observing, true, memory_order_release);
		return;
	}
	snprintf(message, sizeof(message),
		 "DEEPUM_OBSERVE_US: no observer thread (%s); launches are timed by the engine's rounds", strerror(err));
	deepum_warn(message);
}

/* The issuer, then the writer (DEEPUM_WRITER), unless under test lockstep. */
static bool issuers_start(char *why, size_t size)
{
	if (!deepum.issuer || engine.lockstep)
		return true;
	if (!issuer_start(&issuer, why, size))
		return false;
	if (deepum.writer && !issuer_start(&writer, why, size)) {
		issuer_stop(&issuer);
		return false;
	}
	return true;
}

static bool thread_start(char *why, size_t size)
{
	int err;

	engine.running = true;
	engine.lockstep = deepum_lockstep_enabled();
	if (!issuers_start(why, size)) {
		engine.running = false;
		return false;
	}
	err = deepum_inject("engine-thread") ? EAGAIN : deepum_thread_start(&engine.thread, engine_main, NULL);
	if (!err && deepum.observe_us)
		observer_start();
	if (err) {
		engine.running = false;
		issuer_stop(&issuer);
		issuer_stop(&writer);
		snprintf(why, size, "cannot start its thread: %s", strerror(err));
	}
	return !err;
}

void engine_start(struct deepum_launch_page *page)
{
	char why[1024] = "";

	engine.page = page;
	engine.host.to_gpu = false;
	engine.gpu.to_gpu = true;
	engine.batch_api = deepum_real[ENTRY_cuMemPrefetchBatchAsync] != NULL;
	if (REAL(cuCtxGetCurrent)(&engine.context) != CUDA_SUCCESS ||
	    REAL(cuCtxGetDevice)(&engine.device) != CUDA_SUCCESS)
		snprintf(why, sizeof(why), "no current CUDA context at the first launch");
	else if (budget_fits(why, sizeof(why)) && core_create(why, sizeof(why)) && stream_create(why, sizeof(why)) &&
		 faults_start(engine.device, deepum.faults, why, sizeof(why))) {
		if (deepum.engine_log_path[0])
			engine.log = fopen(deepum.engine_log_path, "we");
		log_config();
		if (thread_start(why, sizeof(why))) {
			engine.started = true;
			push_early_marks();
			pthread_atfork(NULL, NULL, forget_in_child);
			/* Registered after the CUDA runtime's own exit handler, so
			 * it runs first, while the context still exists. */
			atexit(engine_stop);
			return;
		}
		faults_stop();
	}
	engine_fail("the user-mode engine cannot start: %s; CUDA calls pass straight through", why);
}

void engine_stop(void)
{
	bool joinable;

	pthread_mutex_lock(&engine.lock);
	engine.stop = true;
	joinable = engine.started && deepum.init_pid == getpid();
	engine.started = false;
	pthread_cond_broadcast(&engine.wake);
	pthread_mutex_unlock(&engine.lock);
	if (joinable)
		pthread_join(engine.thread, NULL);
	if (joinable && atomic_load(&engine.observing))
		pthread_join(engine.observer, NULL);
	if (engine.log) {
		fclose(engine.log);
		engine.log = NULL;
	}
}

/* ---- program threads ----------------------------------------------------- */

/* @at only matters if @wait. */
static void intake_push(const struct deepum_record *rec, const struct stream_point *at, bool wait)
{
	pthread_mutex_lock(&engine.lock);
	if (engine.intake_tail - engine.intake_head < INTAKE) {
		engine.intake[engine.intake_tail++ % INTAKE] =
			(struct intake_entry){ .rec = *rec, .at = wait ? *at : (struct stream_point){ 0 }, .wait = wait };
		atomic_store_explicit(&engine.intake_waiting, true, memory_order_release);
		pthread_cond_signal(&engine.wake);
	} else {
		ADD(intake_drops, 1);
	}
	pthread_mutex_unlock(&engine.lock);
	engine_lockstep();
}

static bool engine_running(void)
{
	bool running;

	pthread_mutex_lock(&engine.lock);
	running = engine.running && !engine.stop;
	pthread_mutex_unlock(&engine.lock);
	return running;
}

static void mark_now(bool wait, const struct stream_point *at)
{
	struct deepum_record rec = {
		.type = DEEPUM_REC_ITERATION, .ts = engine_clock_ns(),
		.aux = __atomic_fetch_add(&engine.iteration_index, 1, __ATOMIC_RELAXED),
	};

	intake_push(&rec, at, wait);
}

/* A program marks its first iteration before its first launch, which is
 * when the engine starts. */
static void push_early_marks(void)
{
	for (u32 i = 0; i < engine.marks_before_start; i++)
		mark_now(false, NULL);
}

void engine_mark_iteration(void)
{
	struct stream_point at;

	pthread_mutex_lock(&engine.lock);
	if (!engine.started && !engine.stop && engine_wanted()) {
		engine.marks_before_start++;
		pthread_mutex_unlock(&engine.lock);
		return;
	}
	pthread_mutex_unlock(&engine.lock);
	if (engine_running())
		mark_now(delivery_here(&at), &at);
}

void engine_release(u64 base, u64 size)
{
	struct timespec until;
	bool done;

	if (!engine_running())
		return;
	/* The engine makes no CUDA call during a capture, so it could not
	 * answer; the range is out of the table already, so nothing new is
	 * planned on it (what is in flight is not waited for: counted). */
	if (capture_possible()) {
		ADD(releases_unwaited, 1);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += RELEASE_TIMEOUT_S;
	pthread_mutex_lock(&engine.release_lock);
	pthread_mutex_lock(&engine.lock);
	engine.release.base = base;
	engine.release.size = size;
	engine.release.pending = true;
	engine.release.done = false;
	pthread_cond_signal(&engine.wake);
	while (!engine.release.done && engine.running && !engine.stop)
		if (pthread_cond_timedwait(&engine.changed, &engine.lock, &until) == ETIMEDOUT)
			break;
	engine.release.pending = false;
	done = engine.release.done;
	pthread_mutex_unlock(&engine.lock);
	pthread_mutex_unlock(&engine.release_lock);
	if (!done && engine_running())
		engine_fail("the user-mode engine did not let go of memory being freed within %d s; "
			    "CUDA calls pass straight through", RELEASE_TIMEOUT_S);
}

/* The whole blocks of reported frees that lie in managed memory. */
struct report_pieces {
	u32 n;
	CUdeviceptr ptr[PIECES_PER_REPORT];
	size_t size[PIECES_PER_REPORT];
	CUstream stream;
	bool failed;
};

static void discard_pieces(struct report_pieces *pieces)
{
	if (!pieces->n)
		return;
	if (!pieces->failed && deepum_real[ENTRY_cuMemDiscardBatchAsync] && pieces->stream != CU_STREAM_PER_THREAD &&
	    REAL(cuMemDiscardBatchAsync)(pieces->ptr, pieces->size, pieces->n, 0, pieces->stream) == CUDA_SUCCESS) {
		ADD(free_discard_calls, 1);
	} else {
		pieces->failed = true;
		ADD(free_discards_skipped, 1);
	}
	pieces->n = 0;
}

static void add_report_piece(u64 base, u64 size, void *arg)
{
	struct report_pieces *pieces = arg;

	if (pieces->n == PIECES_PER_REPORT)
		discard_pieces(pieces);
	pieces->ptr[pieces->n] = base;
	pieces->size[pieces->n++] = size;
}

int engine_report_free(const u64 *addr, const u64 *len, u32 n, CUstream stream)
{
	struct report_pieces pieces = { 0 };
	struct stream_point at;
	bool wait;

	if (!engine_running())
		return -1;
	/* Only whole blocks are dead.  Discarded on the program's stream, in
	 * order: after the last use it made, before any reuse.  The legacy
	 * stream's go to a blocking stream (the same order); a per-thread
	 * default stream cannot take them. */
	pieces.stream = !stream || stream == CU_STREAM_LEGACY ? engine.legacy_discards : stream;
	for (u32 i = 0; i < n; i++) {
		u64 first = (addr[i] + (1ULL << BLOCK_SHIFT) - 1) & ~((1ULL << BLOCK_SHIFT) - 1);
		u64 end = (addr[i] + len[i]) & ~((1ULL << BLOCK_SHIFT) - 1);

		if (end > first)
			managed_clip(first, end - first, add_report_piece, &pieces);
	}
	discard_pieces(&pieces);
	wait = delivery_on_stream(stream, &at);
	for (u32 i = 0; i < n; i++) {
		struct deepum_record rec = { .type = DEEPUM_REC_FREE, .ts = engine_clock_ns(), .addr = addr[i],
					     .len = len[i] };

		ADD(free_reports, 1);
		intake_push(&rec, &at, wait);
	}
	return 0;
}

#ifdef DEEPUM_FAULT_INJECTION
bool deepum_lockstep_enabled(void)
{
	const char *lockstep = getenv("DEEPUM_TEST_LOCKSTEP");

	return lockstep && strcmp(lockstep, "1") == 0;
}

void engine_lockstep(void)
{
	u64 target;

	if (!engine.lockstep)
		return;
	pthread_mutex_lock(&engine.lock);
	target = engine.lockstep_rounds = engine.round_count + 2;
	pthread_cond_signal(&engine.wake);
	while (engine.round_count < target && engine.running && !engine.stop)
		pthread_cond_wait(&engine.changed, &engine.lock);
	pthread_mutex_unlock(&engine.lock);
}
#endif

/* ---- statistics ----------------------------------------------------------- */

static void write_counters(FILE *f, const struct counter_snapshot *from, const struct counter_snapshot *to)
{
	const char *separator = "";

#define ENGINE_JSON(name)                                                                        \
	fprintf(f, "%s\"%s\": %llu", separator, #name,                                           \
		(unsigned long long)(to->name - (from ? from->name : 0)));                        \
	separator = ", ";
	ENGINE_COUNTERS(ENGINE_JSON)
#undef ENGINE_JSON
}

void engine_write_stats(FILE *f)
{
	struct counter_snapshot now;
	struct deepum_stats core;
	char config[768];

	if (!engine.core)
		return;
	format_config(config, sizeof(config), "\": ", ", \"");
	snapshot(&now);
	deepum_core_get_stats(engine.core, &core);
	fprintf(f, ",\n  \"engine\": {\n    \"fault_source\": \"%s\", \"capacity_bytes\": %llu, \"block_bytes\": %llu,\n"
		   "    \"batch_api\": %s, \"issuer\": %s, \"writer\": %s, \"cpu_ns\": %llu, \"core_ns\": %llu, \"source_drops\": %llu,\n"
		   "    \"observed_peak_blocks\": %llu, \"model_peak_blocks\": %llu,\n"
		   "    \"core\": {\"prefetches\": %llu, \"evictions\": %llu, \"demand_evictions\": %llu, "
		   "\"discards\": %llu, \"faults\": %llu, \"faults_resident\": %llu, \"window_resets\": %llu, "
		   "\"window_skips\": %llu, \"window_waits\": %llu, \"exec_stand_ins\": %llu, \"resident_blocks\": %llu},\n"
		   "    \"config\": {\"%s},\n    \"counters\": {",
		faults_source_name() ? faults_source_name() : "none", (unsigned long long)deepum.capacity,
		1ULL << BLOCK_SHIFT, engine.batch_api ? "true" : "false", issuer.thread_ran ? "true" : "false",
		writer.thread_ran ? "true" : "false", (unsigned long long)engine.cpu_ns,
		(unsigned long long)core.core_ns, (unsigned long long)faults_dropped(),
		(unsigned long long)engine.observed_peak_blocks, (unsigned long long)engine.model_peak_blocks,
		(unsigned long long)core.prefetches, (unsigned long long)core.evictions,
		(unsigned long long)core.demand_evictions, (unsigned long long)core.discards,
		(unsigned long long)core.faults, (unsigned long long)core.faults_resident,
		(unsigned long long)core.window_resets, (unsigned long long)core.window_skips,
		(unsigned long long)core.window_waits, (unsigned long long)core.exec_stand_ins,
		(unsigned long long)core.resident_blocks, config);
	write_counters(f, NULL, &now);
	fputs("},\n    \"iterations\": [", f);
	for (u32 i = 0; i < engine.nmarks; i++) {
		fputs(i ? ",\n      {" : "\n      {", f);
		write_counters(f, &engine.marks[i], i + 1 < engine.nmarks ? &engine.marks[i + 1] : &now);
		fputc('}', f);
	}
	fputs("\n    ]\n  }", f);
}
