/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Trace replay: drives the prefetch core with a trace's records the way a
 * deployment would, and measures what the GPU would have seen.
 *
 * The core's residency model stands in for the GPU (capacity, LRM eviction,
 * flushes at access-set iteration boundaries).  A FAULT record of the trace
 * is an access: it reaches the core when the block is not resident (feedback
 * DUM_REPLAY_FEEDBACK_FAULTS, what a driver or CUPTI reports) or always
 * (DUM_REPLAY_FEEDBACK_ACCESSES, an upper bound on what the tables can learn).
 *
 * Lateness: prefetches are copied back to back, in issue order, at
 * link_bytes_per_sec on the trace's own clock; an access before its block's
 * copy finished is late, and reaches the core as a fault, as on a GPU.  The
 * trace's clock comes from the captured run, so this is an estimate.
 *
 * Counters are kept per interval; an ITERATION record closes one.
 */
#ifndef _DEEPUM_REPLAY_H
#define _DEEPUM_REPLAY_H

#include "../../kmod/core/core.h"

#define DUM_REPLAY_FEEDBACK_FAULTS	0
#define DUM_REPLAY_FEEDBACK_ACCESSES	1

struct dum_replay_options {
	__u64 link_bytes_per_sec;	/* 0: no timing, nothing is late */
	__u32 feedback;			/* DUM_REPLAY_FEEDBACK_* */
	__u32 reserved;
};

struct dum_replay_interval {
	__u64 accesses;		/* FAULT records: blocks the kernels touched */
	__u64 faults;		/* ... that found the block absent: GPU faults */
	__u64 late;		/* ... that found its prefetch still copying */
	__u64 useful;		/* prefetched blocks touched before they left the GPU */
	__u64 wasted;		/* prefetched blocks evicted, discarded or flushed untouched */
	__u64 start_ts;		/* timestamp of the interval's first record */
	__u64 end_ts;		/* ... and of the record that closed it */
	struct deepum_stats core;	/* what the core counted during the interval */
};

struct dum_replay;

int dum_replay_create(const struct deepum_config *cfg, const struct dum_replay_options *opt,
		      struct dum_replay **ret);
void dum_replay_destroy(struct dum_replay *r);
/* Replay @n records.  Returns 0, or -EINVAL with *@bad_index naming the
 * first record the core rejected (records before it were replayed). */
int dum_replay_feed(struct dum_replay *r, const struct deepum_record *recs, __u64 n,
		    __u64 *bad_index);
/* Intervals so far, the open one last (its counters up to now). */
__u32 dum_replay_intervals(const struct dum_replay *r, struct dum_replay_interval *ret, __u32 n);
void dum_replay_stats(const struct dum_replay *r, struct deepum_stats *ret);



/*
 * Benchmark: a fresh core consumes @n records in one timed loop.  With
 * DUM_REPLAY_FEEDBACK_FAULTS, FAULT records whose block the core holds are
 * skipped (a GPU would not fault), with ACCESSES every record reaches the
 * core.  *@ns gets the elapsed time, the core's counters land in *@stats.
 * Returns 0 or a negative errno.
 */
int dum_bench_core(const struct deepum_config *cfg, const struct deepum_record *recs, __u64 n,
		   __u32 feedback, __u64 *ns, struct deepum_stats *stats);
#endif /* _DEEPUM_REPLAY_H */
