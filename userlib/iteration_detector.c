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
 * pointers every step; at most 12% at a layer's: tests/test_iterations.py).
 * The smallest such distance wins (its multiples match as well).  The anchor
 * is then the exec ID launched first in the program among those that come
 * back at P (the loop's first kernel that is not shared with the rest of the
 * step, rather than setup work or a kernel from the middle of a step): every
 * later launch of the anchor marks an iteration, just before it, as
 * deepum_mark_iteration() would.  When the anchor stops coming (its tensors
 * moved, so its exec ID changed), the next exec ID seen at distance P takes
 * over.
 */
#include "iteration_detector.h"

enum {
	CONFIRMATIONS = 16,	/* recurrences at one distance before it is tested */
	MATCH_PERCENT = 60,	/* launches of the last period that repeat the one before */
	PERIOD_MIN = 8,		/* launches: shorter loops are not training steps */
	RECENT = 1 << 17,	/* launches remembered: periods below half of it */
};

int iteration_detector_init(struct iteration_detector *d, u32 exec_max)
{
	*d = (struct iteration_detector){ .exec_max = exec_max };
	d->last = dum_calloc(exec_max, sizeof(*d->last));
	d->first = dum_calloc(exec_max, sizeof(*d->first));
	d->gap = dum_calloc(exec_max, sizeof(*d->gap));
	d->recent = dum_calloc(RECENT, sizeof(*d->recent));
	if (!d->last || !d->first || !d->gap || !d->recent) {
		iteration_detector_destroy(d);
		return -ENOMEM;
	}
	return 0;
}

void iteration_detector_destroy(struct iteration_detector *d)
{
	dum_free(d->last);
	dum_free(d->first);
	dum_free(d->gap);
	dum_free(d->recent);
	*d = (struct iteration_detector){ 0 };
}

/* Whether launch @i repeats the launch @gap before it (false if unknown). */
static bool repeats(const struct iteration_detector *d, u64 i, u32 gap)
{
	return i >= gap && d->recent[i % RECENT] == d->recent[(i - gap) % RECENT];
}

/* Launch @i was recorded: slide the confirmed candidates' windows over it. */
static void slide(struct iteration_detector *d, u64 i)
{
	for (u32 c = 0; c < ITERATION_CANDIDATES; c++) {
		struct iteration_candidate *k = &d->candidates[c];

		if (k->count >= CONFIRMATIONS)
			k->matches += repeats(d, i, k->gap) - repeats(d, i - k->gap, k->gap);
	}
}

/* Count a confirmation of @gap at launch @now. */
static void confirm(struct iteration_detector *d, u32 gap, u64 now)
{
	u32 i, weakest = 0;

	if (gap < PERIOD_MIN || gap >= RECENT / 2)
		return;
	for (i = 0; i < ITERATION_CANDIDATES; i++) {
		if (d->candidates[i].gap == gap)
			break;
		if (d->candidates[i].count < d->candidates[weakest].count)
			weakest = i;
	}
	if (i == ITERATION_CANDIDATES) {
		i = weakest;
		d->candidates[i] = (struct iteration_candidate){ .gap = gap };
	}
	if (++d->candidates[i].count == CONFIRMATIONS)	/* its window, once; then slid */
		for (u64 j = now >= gap ? now - gap + 1 : 0; j <= now; j++)
			d->candidates[i].matches += repeats(d, j, gap);
}

/* The smallest confirmed distance at which the stream repeats, or 0. */
static u32 period_found(const struct iteration_detector *d)
{
	u32 best = 0;

	for (u32 c = 0; c < ITERATION_CANDIDATES; c++) {
		const struct iteration_candidate *k = &d->candidates[c];

		if (k->count >= CONFIRMATIONS && 100ULL * k->matches >= (u64)MATCH_PERCENT * k->gap &&
		    (!best || k->gap < best))
			best = k->gap;
	}
	return best;
}

/* The period is known: the anchor is the first-launched exec ID that comes back at it. */
static void settle(struct iteration_detector *d, u64 now)
{
	u64 earliest = ~(u64)0;

	for (u32 e = 0; e < d->ids; e++) {
		if (d->gap[e] == d->period && d->first[e] < earliest) {
			earliest = d->first[e];
			d->anchor = e;
		}
	}
	d->anchor_seen = now;
}

bool iteration_detector_observe(struct iteration_detector *d, u32 exec_id)
{
	u64 i = d->launches++;
	u32 gap, prev;

	d->recent[i % RECENT] = exec_id;
	if (!d->period)
		slide(d, i);
	if (exec_id >= d->exec_max)
		return false;
	if (exec_id >= d->ids)
		d->ids = exec_id + 1;
	gap = d->last[exec_id] && i + 1 - d->last[exec_id] < ~(u32)0 ? (u32)(i + 1 - d->last[exec_id]) : 0;
	if (!d->last[exec_id])
		d->first[exec_id] = i;
	d->last[exec_id] = i + 1;
	if (d->period) {
		if (exec_id == d->anchor) {
			d->anchor_seen = i;
			return true;
		}
		if (gap == d->period && i - d->anchor_seen > 2ULL * d->period) {
			d->anchor = exec_id;	/* the anchor is gone: this one comes at the period */
			d->anchor_seen = i;
			return true;
		}
		return false;
	}
	prev = d->gap[exec_id];
	d->gap[exec_id] = gap;
	if (gap && gap == prev)
		confirm(d, gap, i);
	d->period = period_found(d);
	if (d->period)
		settle(d, i);
	return false;
}
