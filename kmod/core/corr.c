// SPDX-License-Identifier: GPL-2.0 OR MIT
#include "corr.h"

static u32 set_of(const struct dum_corr *c, u32 exec, u64 blk)
{
	return (u32)(dum_hash64(blk ^ ((u64)exec * 0xff51afd7ed558ccdULL)) >> c->set_shift);
}

u64 dum_corr_mem_bytes(const struct deepum_config *cfg)
{
	u64 ways = (u64)cfg->corr_sets * cfg->corr_ways;
	u64 execs = (u64)cfg->exec_max + 1;

	return ways * sizeof(struct dum_corr_way) +
	       ways * cfg->corr_levels * cfg->corr_succs * (sizeof(u64) + sizeof(u32)) +
	       execs * (cfg->exec_succs + cfg->exec_starts) * sizeof(u64) + execs * sizeof(u32);
}

int dum_corr_init(struct dum_corr *c, const struct deepum_config *cfg)
{
	u64 ways = (u64)cfg->corr_sets * cfg->corr_ways;

	memset(c, 0, sizeof(*c));
	c->set_shift = 64 - dum_log2_ceil(cfg->corr_sets);
	c->nentries = (u32)ways;
	c->nways = cfg->corr_ways;
	c->levels = cfg->corr_levels;
	c->succs = cfg->corr_succs;
	c->exec_slots = cfg->exec_max + 1;
	c->exec_nsuccs = cfg->exec_succs;
	c->exec_nstarts = cfg->exec_starts;

	c->ways = dum_calloc(ways, sizeof(*c->ways));
	c->succ = dum_calloc(ways * c->levels * c->succs, sizeof(*c->succ));
	c->succ_way = dum_calloc(ways * c->levels * c->succs, sizeof(*c->succ_way));
	c->exec_next = dum_calloc((u64)c->exec_slots * c->exec_nsuccs, sizeof(*c->exec_next));
	c->exec_start = dum_calloc((u64)c->exec_slots * c->exec_nstarts, sizeof(*c->exec_start));
	c->exec_start_epoch = dum_calloc(c->exec_slots, sizeof(*c->exec_start_epoch));
	if (!c->ways || !c->succ || !c->succ_way || !c->exec_next || !c->exec_start ||
	    !c->exec_start_epoch) {
		dum_corr_destroy(c);
		return -ENOMEM;
	}
	return 0;
}

void dum_corr_destroy(struct dum_corr *c)
{
	dum_free(c->ways);
	dum_free(c->succ);
	dum_free(c->succ_way);
	dum_free(c->exec_next);
	dum_free(c->exec_start);
	dum_free(c->exec_start_epoch);
	memset(c, 0, sizeof(*c));
}

u32 dum_corr_find(const struct dum_corr *c, u32 exec, u64 blk)
{
	u32 first = set_of(c, exec, blk) * c->nways;
	u32 w;

	for (w = first; w < first + c->nways; w++) {
		const struct dum_corr_way *way = &c->ways[w];

		if (way->blk == blk && way->exec == exec && dum_corr_live(c, w))
			return w;
	}
	return DUM_NIL;
}

void dum_corr_use(struct dum_corr *c, u32 way)
{
	/* 0 means "free"; the clock skips it when it wraps. */
	if (++c->clock == 0)
		c->clock = 1;
	c->ways[way].stamp = c->clock;
}

enum dum_corr_get dum_corr_get(struct dum_corr *c, u32 exec, u64 blk, u32 *ret)
{
	u32 first = set_of(c, exec, blk) * c->nways;
	u32 victim = first;
	bool replaced;
	u32 w;

	for (w = first; w < first + c->nways; w++) {
		struct dum_corr_way *way = &c->ways[w];
		bool live = dum_corr_live(c, w);

		if (live && way->blk == blk && way->exec == exec) {
			dum_corr_use(c, w);
			*ret = w;
			return DUM_CORR_FOUND;
		}
		if (!live) {
			victim = w;
			break;
		}
		/* Oldest by clock distance, which survives the clock wrapping. */
		if (c->clock - way->stamp > c->clock - c->ways[victim].stamp)
			victim = w;
	}
	replaced = dum_corr_live(c, victim);
	c->ways[victim].blk = blk;
	c->ways[victim].exec = exec;
	c->ways[victim].walk_mark = 0;
	c->ways[victim].epoch = c->epoch;
	memset(dum_corr_successors(c, victim, 0), 0, (u64)c->levels * c->succs * sizeof(u64));
	dum_corr_use(c, victim);
	*ret = victim;
	return replaced ? DUM_CORR_REPLACED : DUM_CORR_INSERTED;
}
