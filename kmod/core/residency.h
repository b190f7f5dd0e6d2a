/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Residency model: which UM blocks the GPU holds, in least-recently-migrated
 * (LRM) order, which is how nvidia-uvm picks eviction victims (a block goes
 * to the tail when it migrates in or takes a new fault, the head goes first).
 *
 * Blocks live in a fixed-capacity map (block number -> slot).  Slots are never
 * freed: a block seen once keeps its flags, so a dead block stays dead until
 * it is touched or predicted again.  When the map is full new blocks are simply untracked.
 */
#ifndef _DEEPUM_RESIDENCY_H
#define _DEEPUM_RESIDENCY_H

#include "table.h"

#define DUM_BLOCK_RESIDENT	(1U << 0)
#define DUM_BLOCK_DEAD		(1U << 1)	/* freed: discard, never write back */
#define DUM_BLOCK_PREV_USES	(1U << 2)	/* prev holds an earlier iteration's uses */

/*
 * DEEPUM_CFG_F_HISTORY: when a block was needed in one iteration, in launches
 * into it, as runs of uses at most DUM_USE_GAP apart.  With more runs than
 * DUM_USE_RUNS the two closest together merge, so what is kept are the
 * longest gaps: where evicting the block is worth it.  First and last use
 * alone made a block needed at 12, 80 and 688 look free until 688 (ResNet-50
 * on the H200, sixteenth session: 23% faster per iteration with the runs).
 */
#define DUM_USE_RUNS	4
#define DUM_USE_GAP	32

struct dum_use_run {
	u32 start, end;
};

struct dum_block {
	u64 blk;		/* block number: address >> block_shift */
	u64 window_seq;		/* protected from pre-eviction while >= the launch clock */
	union {			/* one victim choice at a time (DEEPUM_CFG_F_VICTIMS) */
		struct {	/* DEEPUM_CFG_F_HORIZON */
			u64 horizon_next;	/* earliest tick the horizon predicts it for (if >= the clock) */
			u64 horizon_last;	/* latest such tick */
		};
		struct {	/* DEEPUM_CFG_F_HISTORY: when it was needed, in launches into an iteration */
			u32 use_iteration;	/* iteration number + 1 of cur; 0: never needed */
			u32 cur_runs, prev_runs;
			struct dum_use_run cur[DUM_USE_RUNS];	/* its uses in that iteration, in order */
			struct dum_use_run prev[DUM_USE_RUNS];	/* the same in the iteration it was needed before */
		};
	};
	u32 evict_cmd;		/* index of its latest eviction in a record's output */
	u32 hash_next;
	u32 lrm_prev;
	u32 lrm_next;
	u32 flags;
};

struct dum_residency {
	struct dum_block *blocks;
	u32 *buckets;
	u32 bucket_shift;	/* 64 - log2(number of buckets) */
	u32 capacity;		/* slots */
	u32 used;
	u32 lrm_head;		/* least recently migrated */
	u32 lrm_tail;
	u64 resident;		/* blocks on the LRM list */
};

int dum_residency_init(struct dum_residency *r, u32 capacity);
void dum_residency_destroy(struct dum_residency *r);
u64 dum_residency_mem_bytes(u32 capacity);

/* Slot of @blk, or DUM_NIL. */
u32 dum_residency_find(const struct dum_residency *r, u64 blk);
/* Slot of @blk, created if needed; DUM_NIL when the map is full. */
u32 dum_residency_get(struct dum_residency *r, u64 blk);

/* Append to the LRM tail (migrated in), or move there if already resident. */
void dum_residency_touch(struct dum_residency *r, u32 slot);
void dum_residency_remove(struct dum_residency *r, u32 slot);
/* Forget all residency (everything was moved to the host). */
void dum_residency_clear(struct dum_residency *r);

static inline struct dum_block *dum_block_at(const struct dum_residency *r, u32 slot)
{
	return &r->blocks[slot];
}

static inline bool dum_block_resident(const struct dum_block *b)
{
	return b->flags & DUM_BLOCK_RESIDENT;
}

#endif /* _DEEPUM_RESIDENCY_H */
