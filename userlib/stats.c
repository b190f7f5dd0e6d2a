// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Statistics: counters and per-iteration marks, written as JSON at exit to
 * the file DEEPUM_STATS names ("%p" becomes the process ID, so that every
 * CUDA process of a run gets its own file).  Only the process that made
 * CUDA calls writes: not a fork child, not the rtld-audit copy of the
 * library, not a process that never touched CUDA.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deepum_user.h"

enum { ITERATIONS_MAX = 1024 };

struct snapshot {
	u64 launches;
	u64 exec_hits;
	u64 exec_new;
};

static struct snapshot marks[ITERATIONS_MAX];
static _Atomic u32 nmarks;

static struct snapshot snapshot_now(void)
{
	return (struct snapshot){
		.launches = atomic_load(&deepum.counters.launches),
		.exec_hits = atomic_load(&deepum.counters.exec_hits),
		.exec_new = atomic_load(&deepum.counters.exec_new),
	};
}

/*
 * Called by the program (pydeepum.torch.mark_iteration(), or ctypes through
 * the global scope) as each training iteration begins.  Launches before the
 * first mark are "setup"; each mark opens an iteration that lasts until the
 * next.  The tracer starts, marks and stops here too, and the engine counts
 * its iterations from here (once the GPU gets to the mark).
 */
/* @inside: the launch the iteration begins with is counted already (as a
 * launch of a known exec ID): it belongs to the new iteration. */
static void mark_iteration(bool inside)
{
	u32 i;

	if (!deepum_active())
		return;
	i = atomic_fetch_add(&nmarks, 1);
	if (i < ITERATIONS_MAX) {
		marks[i] = snapshot_now();
		marks[i].launches -= inside;
		marks[i].exec_hits -= inside;
	}
	launch_new_iteration();
	tracer_mark();
	pool_report_dead();
	delivery_mark_iteration();
	engine_mark_iteration();
}

DEEPUM_EXPORT void deepum_mark_iteration(void)
{
	iterations_program_marks();
	mark_iteration(false);
}

/* Without the program's marks, iterations.c finds where its iterations
 * begin: called from inside the launch that begins one. */
void deepum_mark_detected_iteration(void)
{
	COUNT(iterations_detected, 1);
	mark_iteration(true);
}

static void write_interval(FILE *f, struct snapshot from, struct snapshot to)
{
	fprintf(f, "{\"launches\": %llu, \"exec_hits\": %llu, \"exec_new\": %llu}",
		(unsigned long long)(to.launches - from.launches),
		(unsigned long long)(to.exec_hits - from.exec_hits),
		(unsigned long long)(to.exec_new - from.exec_new));
}

static const char *const mode_names[] = { "off", "auto", "observe", "user", "demand" };
static const char *const delivery_names[] = { "write", "callback" };

static void write_json(FILE *f)
{
	const char *reason = atomic_load(&deepum.disabled_reason);
	struct snapshot end = snapshot_now(), start = { 0 };
	u32 n = atomic_load(&nmarks);
	const char *separator = "";

	if (n > ITERATIONS_MAX)
		n = ITERATIONS_MAX;
	fprintf(f, "{\n  \"pid\": %d,\n  \"mode\": \"%s\",\n  \"active\": %s,\n  \"attached\": %s,\n"
		   "  \"uvm_bound\": %s,\n",
		deepum.init_pid, mode_names[deepum.mode], deepum_active() ? "true" : "false",
		deepum.device_fd >= 0 ? "true" : "false", deepum.uvm_bound ? "true" : "false");
	fprintf(f, "  \"delivery\": \"%s\",\n  \"module_launch_page\": %s,\n  \"managed\": %s,\n"
		   "  \"disabled_reason\": ",
		delivery_names[deepum.delivery],
		deepum.device_fd >= 0 && deepum.module_launch_page ? "true" : "false",
		deepum.managed ? "true" : "false");
	if (reason) {
		fputc('"', f);
		for (const char *c = reason; *c; c++)
			fprintf(f, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
		fputs("\",\n", f);
	} else {
		fputs("null,\n", f);
	}
	fputs("  \"counters\": {", f);
#define COUNTER_JSON(name)                                                                    \
	fprintf(f, "%s\n    \"%s\": %llu", separator, #name,                                  \
		(unsigned long long)atomic_load(&deepum.counters.name));                       \
	separator = ",";
	DEEPUM_COUNTERS(COUNTER_JSON)
#undef COUNTER_JSON
	fputs("\n  },\n  \"setup\": ", f);
	write_interval(f, start, n ? marks[0] : end);
	fputs(",\n  \"iterations\": [", f);
	for (u32 i = 0; i < n; i++) {
		fputs(i ? ",\n    " : "\n    ", f);
		write_interval(f, marks[i], i + 1 < n ? marks[i + 1] : end);
	}
	fputs("\n  ]", f);
	engine_write_stats(f);
	fputs("\n}\n", f);
}

__attribute__((destructor)) static void stats_write_at_exit(void)
{
	char tmp[sizeof(deepum.stats_path) + 8];
	FILE *f;

	if (deepum.init_pid != getpid())
		return;
	engine_stop();
	if (!deepum.stats_path[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", deepum.stats_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	write_json(f);
	if (fclose(f) == 0)
		rename(tmp, deepum.stats_path);
	else
		unlink(tmp);
}
