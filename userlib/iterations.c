// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Iteration marks for programs that make none.  A training loop launches the
 * same kernels with the same arguments every step, so many exec IDs come
 * back at one and the same distance: the number of launches in a step.
 * Kernels repeated within a step (a temporary reused by every layer) come
 * back sooner, and the step's own distance is the largest that many exec IDs
 * agree on.
 *
 * Each launch of exec ID e at launch number i whose distance from e's last
 * launch equals the distance before that confirms that distance.  Once
 * CONFIRMATIONS launches confirmed one distance P >= PERIOD_MIN and no
 * larger distance is close behind, P is the period, and the anchor is the
 * exec ID launched first in the program among those that come back at P
 * (the first kernel of the loop, rather than setup work or a kernel from
 * the middle of a step): every later launch of the anchor marks an
 * iteration, just before it, as deepum_mark_iteration() would.  When the
 * anchor stops coming (its tensors moved, so its exec ID changed), the next
 * exec ID seen at distance P takes over.  A mark the program makes itself
 * turns detection off for good: it knows better.
 *
 * Launches race from any thread; a launch that finds the detector busy is
 * not observed (it only delays detection), so the launch path never waits.
 */
#include <pthread.h>
#include <stdlib.h>

#include "deepum_user.h"

enum {
	CONFIRMATIONS = 16,	/* recurrences at one distance that make it the period */
	PERIOD_MIN = 8,		/* launches: shorter loops are not training steps */
	CANDIDATES = 16,	/* distances tracked at once */
};

static struct {
	pthread_mutex_t lock;
	u64 *last;		/* per exec ID: launch number + 1 of its last launch; 0: none */
	u64 *first;		/* per exec ID: launch number of its first launch */
	u32 *gap;		/* per exec ID: the distance before that */
	u32 ids;		/* exec IDs below this were seen */
	u64 launches;
	struct { u32 gap, count; } candidates[CANDIDATES];
	u32 period;		/* 0: not found yet */
	u32 anchor;		/* exec ID whose launches mark iterations */
	u64 anchor_seen;	/* launch number of the anchor's last launch */
	bool off;		/* the program marks, or no memory */
} det = { .lock = PTHREAD_MUTEX_INITIALIZER };

void iterations_program_marks(void)
{
	__atomic_store_n(&det.off, true, __ATOMIC_RELAXED);
}

/* Count a confirmation of @gap; the period once one has enough. */
static u32 confirm(u32 gap)
{
	u32 i, weakest = 0;

	for (i = 0; i < CANDIDATES; i++) {
		if (det.candidates[i].gap == gap)
			break;
		if (det.candidates[i].count < det.candidates[weakest].count)
			weakest = i;
	}
	if (i == CANDIDATES) {
		i = weakest;
		det.candidates[i].gap = gap;
		det.candidates[i].count = 0;
	}
	if (++det.candidates[i].count < CONFIRMATIONS || gap < PERIOD_MIN)
		return 0;
	/* A larger distance half-way there may be the step, this one a part of it. */
	for (u32 j = 0; j < CANDIDATES; j++)
		if (det.candidates[j].gap > gap && 2 * det.candidates[j].count >= CONFIRMATIONS)
			return 0;
	return gap;
}

/* The period is known: the anchor is the first-launched exec ID that comes back at it. */
static void settle(u64 now)
{
	u64 earliest = UINT64_MAX;

	for (u32 e = 0; e < det.ids; e++) {
		if (det.gap[e] == det.period && det.first[e] < earliest) {
			earliest = det.first[e];
			det.anchor = e;
		}
	}
	det.anchor_seen = now;
}

/* Whether the launch of @exec_id about to happen begins an iteration. */
static bool observe(u32 exec_id)
{
	u64 i = det.launches++;
	u32 gap, prev;

	if (!det.last) {
		det.last = calloc(deepum.exec_max, sizeof(*det.last));
		det.first = calloc(deepum.exec_max, sizeof(*det.first));
		det.gap = calloc(deepum.exec_max, sizeof(*det.gap));
		if (!det.last || !det.first || !det.gap) {
			det.off = true;
			return false;
		}
	}
	if (exec_id >= deepum.exec_max)
		return false;
	if (exec_id >= det.ids)
		det.ids = exec_id + 1;
	gap = det.last[exec_id] && i + 1 - det.last[exec_id] < UINT32_MAX ? (u32)(i + 1 - det.last[exec_id]) : 0;
	if (!det.last[exec_id])
		det.first[exec_id] = i;
	det.last[exec_id] = i + 1;
	if (det.period) {
		if (exec_id == det.anchor) {
			det.anchor_seen = i;
			return true;
		}
		if (gap == det.period && i - det.anchor_seen > 2ULL * det.period) {
			det.anchor = exec_id;	/* the anchor is gone: this one comes at the period */
			det.anchor_seen = i;
			return true;
		}
		return false;
	}
	prev = det.gap[exec_id];
	det.gap[exec_id] = gap;
	if (gap && gap == prev) {
		det.period = confirm(gap);
		if (det.period)
			settle(i);
	}
	return false;
}

void iterations_launch(u32 exec_id)
{
	bool mark;

	if (__atomic_load_n(&det.off, __ATOMIC_RELAXED) || exec_id == DEEPUM_EXEC_NONE)
		return;
	if (pthread_mutex_trylock(&det.lock) != 0)
		return;
	mark = !det.off && observe(exec_id);
	pthread_mutex_unlock(&det.lock);
	if (mark)
		deepum_mark_detected_iteration();
}
