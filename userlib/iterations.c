// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Iteration marks for programs that make none.  A training loop launches the
 * same kernels with the same arguments every step, so the stream of exec IDs
 * repeats itself at one distance: the number of launches in a step.
 *
 * Candidate distances come from exec IDs that come back at the same distance
 * twice in a row.  That alone is not enough: kernels that touch only
 * temporaries reused by every layer come back at the layer's distance (50
 * launches in GPT-2), more often than anything comes back at the step's.
 * What tells the step apart is that the whole stream repeats at it: a
 * distance P becomes the period once CONFIRMATIONS launches confirmed it and
 * at least MATCH_PERCENT of the last P launches have the exec ID launched P
 * before (97-98% at the step in GPT-2's and BERT's H200 traces, 74% in
 * ResNet-50's live runs, whose BatchNorm and elementwise kernels get new
 * pointers every step; at most 12% at a layer's: tests/test_iterations.py).  The smallest such distance wins (its multiples
 * match as well).  The anchor is then the exec ID launched first in the
 * program among those that come back at P (the loop's first kernel that is
 * not shared with the rest of the step, rather than setup work or a kernel
 * from the middle of a step): every later launch of the anchor marks an
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
	CONFIRMATIONS = 16,	/* recurrences at one distance before it is tested */
	MATCH_PERCENT = 60,	/* launches of the last period that repeat the one before */
	PERIOD_MIN = 8,		/* launches: shorter loops are not training steps */
	CANDIDATES = 16,	/* distances tracked at once */
	RECENT = 1 << 17,	/* launches remembered: periods below half of it */
};

struct candidate {
	u32 gap, count;
	u32 matches;		/* once confirmed: of the last gap launches, those equal to the one gap before */
};

static struct {
	pthread_mutex_t lock;
	u64 *last;		/* per exec ID: launch number + 1 of its last launch; 0: none */
	u64 *first;		/* per exec ID: launch number of its first launch */
	u32 *gap;		/* per exec ID: the distance before that */
	u32 *recent;		/* exec ID of launch i at i % RECENT */
	u32 ids;		/* exec IDs below this were seen */
	u64 launches;
	struct candidate candidates[CANDIDATES];
	u32 period;		/* 0: not found yet */
	u32 anchor;		/* exec ID whose launches mark iterations */
	u64 anchor_seen;	/* launch number of the anchor's last launch */
	bool off;		/* the program marks, or no memory */
} det = { .lock = PTHREAD_MUTEX_INITIALIZER };

void iterations_program_marks(void)
{
	__atomic_store_n(&det.off, true, __ATOMIC_RELAXED);
}

/* Whether launch @i repeats the launch @gap before it (false if unknown). */
static bool repeats(u64 i, u32 gap)
{
	return i >= gap && det.recent[i % RECENT] == det.recent[(i - gap) % RECENT];
}

/* Launch @i was recorded: slide the confirmed candidates' windows over it. */
static void slide(u64 i)
{
	for (u32 c = 0; c < CANDIDATES; c++) {
		struct candidate *k = &det.candidates[c];

		if (k->count >= CONFIRMATIONS)
			k->matches += repeats(i, k->gap) - repeats(i - k->gap, k->gap);
	}
}

/* Count a confirmation of @gap at launch @now. */
static void confirm(u32 gap, u64 now)
{
	u32 i, weakest = 0;

	if (gap < PERIOD_MIN || gap >= RECENT / 2)
		return;
	for (i = 0; i < CANDIDATES; i++) {
		if (det.candidates[i].gap == gap)
			break;
		if (det.candidates[i].count < det.candidates[weakest].count)
			weakest = i;
	}
	if (i == CANDIDATES) {
		i = weakest;
		det.candidates[i] = (struct candidate){ .gap = gap };
	}
	if (++det.candidates[i].count == CONFIRMATIONS)	/* its window, once; then slid */
		for (u64 j = now >= gap ? now - gap + 1 : 0; j <= now; j++)
			det.candidates[i].matches += repeats(j, gap);
}

/* The smallest confirmed distance at which the stream repeats, or 0. */
static u32 period_found(void)
{
	u32 best = 0;

	for (u32 c = 0; c < CANDIDATES; c++) {
		const struct candidate *k = &det.candidates[c];

		if (k->count >= CONFIRMATIONS && 100ULL * k->matches >= (u64)MATCH_PERCENT * k->gap &&
		    (!best || k->gap < best))
			best = k->gap;
	}
	return best;
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
		det.recent = calloc(RECENT, sizeof(*det.recent));
		if (!det.last || !det.first || !det.gap || !det.recent) {
			det.off = true;
			return false;
		}
	}
	det.recent[i % RECENT] = exec_id;
	if (!det.period)
		slide(i);
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
	if (gap && gap == prev)
		confirm(gap, i);
	det.period = period_found();
	if (det.period)
		settle(i);
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
