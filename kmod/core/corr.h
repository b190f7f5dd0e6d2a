/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Correlation tables.
 *
 * Exec-ID table: per exec ID, its most recent successor exec IDs (MRU first),
 * each with the exec ID that ran before it (its context), and its most recent
 * start blocks (first fault of an execution).  Indexed directly: exec IDs are
 * dense.  The context tells apart the places where one kernel runs with the
 * same arguments (a temporary reused at the same address in every layer):
 * first-order prediction missed 22% of the launches of a 2-layer GPT-2 on the
 * H200, second-order 7%.
 *
 * Block tables: per exec ID, for each UM block it faulted on, the blocks that
 * faulted after it in the same execution, kept for `levels` distances (level 0:
 * the next fault, level 1: the one after, ...) with `succs` MRU entries per
 * level: ULMT's "replicated" organisation.  All exec IDs share one
 * set-associative array tagged by (exec ID, block), so memory follows the
 * number of (exec, block) pairs, not exec_max times a worst-case kernel.
 * Ways are replaced least recently used; an entry is used when it learns or
 * when a walk visits it.
 *
 * Forgetting (dum_corr_forget()) starts a new epoch: entries and start lists
 * of earlier epochs read as free, so forgetting costs O(1) however large the
 * tables are, and the space is taken back as new entries claim it.
 *
 * Block number 0 never names a UM block (the first block of the address space
 * is never mapped), so 0 marks an empty successor or start slot.  Successor
 * exec IDs are stored plus one for the same reason.
 */
#ifndef _DEEPUM_CORR_H
#define _DEEPUM_CORR_H

#include "table.h"

/* Successor meaning "the iteration ended and memory was flushed": walks stop. */
#define DUM_EXEC_BOUNDARY 0xfffffffeU

struct dum_corr_way {
	u64 blk;
	u32 exec;
	u32 stamp;	/* LRU clock at last use; 0: the way is free */
	u32 walk_mark;	/* walk generation that last queued it */
	u32 epoch;	/* epoch it was learned in: any other and it is free */
};

struct dum_corr {
	struct dum_corr_way *ways;	/* sets * nways */
	u64 *succ;			/* per way: levels * succs block numbers */
	u32 *succ_way;			/* ... and the way each one's entry was last at */
	u32 set_shift;
	u32 nentries;			/* sets * nways */
	u32 nways;
	u32 levels;
	u32 succs;
	u32 clock;
	u32 walk_gen;
	u32 epoch;			/* bumped by dum_corr_forget() */

	u32 exec_slots;			/* exec_max + 1: the last one is "unknown kernel" */
	u32 exec_nsuccs;
	u32 exec_nstarts;
	u64 *exec_next;			/* exec_slots * exec_nsuccs: (context + 1) << 32 | (exec ID + 1), 0: empty */
	u64 *exec_start;		/* exec_slots * exec_nstarts */
	u32 *exec_start_epoch;		/* per exec slot: the epoch its start blocks are from */
};

int dum_corr_init(struct dum_corr *c, const struct deepum_config *cfg);
void dum_corr_destroy(struct dum_corr *c);
u64 dum_corr_mem_bytes(const struct deepum_config *cfg);

/* Forget every block-table entry and start block learned so far. */
static inline void dum_corr_forget(struct dum_corr *c)
{
	c->epoch++;
}

/* Does @way hold an entry of this epoch? */
static inline bool dum_corr_live(const struct dum_corr *c, u32 way)
{
	return c->ways[way].stamp && c->ways[way].epoch == c->epoch;
}

/* Way holding (@exec, @blk), or DUM_NIL. */
u32 dum_corr_find(const struct dum_corr *c, u32 exec, u64 blk);
enum dum_corr_get {
	DUM_CORR_FOUND,
	DUM_CORR_INSERTED,	/* into a free way */
	DUM_CORR_REPLACED,	/* over the set's least recently used entry */
};

/* Make sure (@exec, @blk) has a way, put in *@way, and mark it used. */
enum dum_corr_get dum_corr_get(struct dum_corr *c, u32 exec, u64 blk, u32 *way);
/* Mark a way used now (LRU). */
void dum_corr_use(struct dum_corr *c, u32 way);

static inline u64 *dum_corr_successors(const struct dum_corr *c, u32 way, u32 level)
{
	return &c->succ[((u64)way * c->levels + level) * c->succs];
}

/* Where the successors' own entries were last seen: hints, checked before use. */
static inline u32 *dum_corr_successor_ways(const struct dum_corr *c, u32 way, u32 level)
{
	return &c->succ_way[((u64)way * c->levels + level) * c->succs];
}

/* Way of (@exec, @blk), trying @hint first; the hint is refreshed. */
static inline u32 dum_corr_find_hinted(const struct dum_corr *c, u32 exec, u64 blk, u32 *hint)
{
	if (*hint < c->nentries) {
		const struct dum_corr_way *w = &c->ways[*hint];

		if (w->blk == blk && w->exec == exec && dum_corr_live(c, *hint))
			return *hint;
	}
	*hint = dum_corr_find(c, exec, blk);
	return *hint;
}

static inline u64 *dum_exec_successors(const struct dum_corr *c, u32 exec)
{
	return &c->exec_next[(u64)exec * c->exec_nsuccs];
}

/* No context: the predecessor is unknown (first launch, after a flush). */
#define DUM_EXEC_NO_CONTEXT DUM_NIL

static inline u64 dum_exec_entry(u32 next, u32 context)
{
	return (u64)(context + 1) << 32 | (u64)(next + 1);
}

static inline u32 dum_exec_entry_next(u64 entry)
{
	return (u32)entry - 1;
}

/* @next followed @exec, which @context preceded. */
static inline void dum_exec_add_successor(struct dum_corr *c, u32 exec, u32 next, u32 context)
{
	dum_mru_insert(dum_exec_successors(c, exec), NULL, c->exec_nsuccs, dum_exec_entry(next, context), 0);
}

/* The exec ID expected after @exec when @context ran before it: the most
 * recent successor seen in that context, else the most recent one; or
 * DEEPUM_EXEC_NONE. */
static inline u32 dum_exec_predict(const struct dum_corr *c, u32 exec, u32 context)
{
	const u64 *succ = dum_exec_successors(c, exec);
	u32 i;

	for (i = 0; i < c->exec_nsuccs && succ[i]; i++)
		if (succ[i] >> 32 == (u32)(context + 1))
			return dum_exec_entry_next(succ[i]);
	return dum_exec_entry_next(succ[0]);
}

/* @exec's start blocks, MRU first, 0-terminated unless full; NULL: none
 * learned in this epoch. */
static inline const u64 *dum_exec_starts(const struct dum_corr *c, u32 exec)
{
	if (c->exec_start_epoch[exec] != c->epoch)
		return NULL;
	return &c->exec_start[(u64)exec * c->exec_nstarts];
}

/* @exec's first start block, 0 if none. */
static inline u64 dum_exec_first_start(const struct dum_corr *c, u32 exec)
{
	const u64 *starts = dum_exec_starts(c, exec);

	return starts ? starts[0] : 0;
}

/* @blk is @exec's most recent start block. */
static inline void dum_exec_add_start(struct dum_corr *c, u32 exec, u64 blk)
{
	u64 *starts = &c->exec_start[(u64)exec * c->exec_nstarts];

	if (c->exec_start_epoch[exec] != c->epoch) {
		memset(starts, 0, c->exec_nstarts * sizeof(*starts));
		c->exec_start_epoch[exec] = c->epoch;
	}
	dum_mru_insert(starts, NULL, c->exec_nstarts, blk, 0);
}

#endif /* _DEEPUM_CORR_H */
