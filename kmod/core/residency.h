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
#define DUM_BLOCK_PREV_USES	(1U << 2)	/* prev_first/prev_last hold an earlier iteration's uses */

struct dum_block {
	u64 blk;		/* block number: address >> block_shift */
	u64 window_seq;		/* protected from pre-eviction while >= the launch clock */
	u64 horizon_next;	/* earliest tick the horizon predicts it for (if >= the clock) */
	u64 horizon_last;	/* latest such tick */
	/* DEEPUM_CFG_F_HISTORY: when it was needed, in launches into an iteration. */
	u32 use_iteration;	/* iteration number + 1 of cur_*; 0: never needed */
	u32 cur_first, cur_last;	/* its first and last use in that iteration */
	u32 prev_first, prev_last;	/* the same in the iteration it was needed before */
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
