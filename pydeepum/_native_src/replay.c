// SPDX-License-Identifier: GPL-2.0 OR MIT
#include <stdlib.h>
#include <time.h>

#include "replay.h"
#include "../../kmod/core/table.h"

/* What replay knows of a block beyond the core: is a prefetch of it untouched,
 * and when would its copy finish.  Open addressing, grown by doubling. */
struct prefetched {
	__u64 blk;		/* 0: empty */
	__u64 ready_ns;
	__u32 pending;		/* prefetched and not touched yet */
};

struct dum_replay {
	struct deepum_core *core;
	struct dum_replay_options opt;
	__u32 block_shift;
	struct deepum_cmd *cmds;
	__u32 max_cmds;

	struct prefetched *pf;
	__u64 pf_cap;		/* power of two */
	__u64 pf_used;
	__u64 link_free_ns;	/* when the link finishes the copies queued so far */

	struct dum_replay_interval *iv;
	__u32 iv_cap;
	__u32 iv_len;		/* the open interval is iv[iv_len - 1]; 0 before any record */
	struct deepum_stats iv_base;	/* core counters when it opened */
};

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

static struct prefetched *pf_slot(struct dum_replay *r, __u64 blk)
{
	__u64 mask = r->pf_cap - 1;
	__u64 i = dum_hash64(blk) >> (64 - dum_log2_ceil(r->pf_cap));

	while (r->pf[i].blk && r->pf[i].blk != blk)
		i = (i + 1) & mask;
	return &r->pf[i];
}

static int pf_grow(struct dum_replay *r)
{
	struct prefetched *old = r->pf;
	__u64 i, old_cap = r->pf_cap;

	r->pf = calloc(old_cap * 2, sizeof(*r->pf));
	if (!r->pf) {
		r->pf = old;
		return -ENOMEM;
	}
	r->pf_cap = old_cap * 2;
	for (i = 0; i < old_cap; i++)
		if (old[i].blk)
			*pf_slot(r, old[i].blk) = old[i];
	free(old);
	return 0;
}

/* The entry for @blk, created if needed; NULL only when memory runs out. */
static struct prefetched *pf_get(struct dum_replay *r, __u64 blk)
{
	struct prefetched *p;

	if (2 * (r->pf_used + 1) > r->pf_cap && pf_grow(r))
		return NULL;
	p = pf_slot(r, blk);
	if (!p->blk) {
		p->blk = blk;
		r->pf_used++;
	}
	return p;
}

static struct dum_replay_interval *open_interval(struct dum_replay *r)
{
	return &r->iv[r->iv_len - 1];
}

/* Core counters since @base: every field is a counter except the gauge. */
static void stats_delta(struct deepum_stats *now, const struct deepum_stats *base)
{
	__u64 *n = (__u64 *)now;
	const __u64 *b = (const __u64 *)base;
	size_t i;

	for (i = 0; i < sizeof(*now) / sizeof(__u64); i++)
		n[i] -= b[i];
	now->resident_blocks += base->resident_blocks;
}

static int new_interval(struct dum_replay *r, __u64 ts)
{
	if (r->iv_len == r->iv_cap) {
		struct dum_replay_interval *iv = realloc(r->iv, 2 * r->iv_cap * sizeof(*iv));

		if (!iv)
			return -ENOMEM;
		r->iv = iv;
		r->iv_cap *= 2;
	}
	memset(&r->iv[r->iv_len], 0, sizeof(r->iv[0]));
	r->iv[r->iv_len].start_ts = ts;
	r->iv_len++;
	deepum_core_get_stats(r->core, &r->iv_base);
	return 0;
}

static void close_interval(const struct dum_replay *r, struct dum_replay_interval *iv)
{
	deepum_core_get_stats(r->core, &iv->core);
	stats_delta(&iv->core, &r->iv_base);
}

int dum_replay_create(const struct deepum_config *cfg, const struct dum_replay_options *opt,
		      struct dum_replay **ret)
{
	struct deepum_config checked = *cfg;
	struct dum_replay *r;
	int err;

	*ret = NULL;
	if (opt->feedback > DUM_REPLAY_FEEDBACK_ACCESSES || opt->reserved)
		return -EINVAL;
	err = deepum_core_config_check(&checked);
	if (err)
		return err;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->opt = *opt;
	r->block_shift = checked.block_shift;
	r->pf_cap = 1024;
	r->iv_cap = 16;
	r->pf = calloc(r->pf_cap, sizeof(*r->pf));
	r->iv = calloc(r->iv_cap, sizeof(*r->iv));
	err = -ENOMEM;
	if (!r->pf || !r->iv)
		goto out_free;
	err = deepum_core_create(&checked, &r->core);
	if (err)
		goto out_free;
	r->max_cmds = deepum_core_max_cmds(r->core);
	r->cmds = calloc(r->max_cmds, sizeof(*r->cmds));
	if (!r->cmds) {
		err = -ENOMEM;
		goto out_free;
	}
	*ret = r;
	return 0;

out_free:
	dum_replay_destroy(r);
	return err;
}

void dum_replay_destroy(struct dum_replay *r)
{
	if (!r)
		return;
	deepum_core_destroy(r->core);
	free(r->cmds);
	free(r->pf);
	free(r->iv);
	free(r);
}

/* A prefetch that leaves the GPU untouched was wasted. */
static void drop_prefetch(struct dum_replay *r, __u64 blk)
{
	struct prefetched *p = pf_slot(r, blk);

	if (p->blk && p->pending) {
		p->pending = 0;
		open_interval(r)->wasted++;
	}
}

static int apply_commands(struct dum_replay *r, __u32 n, __u64 ts)
{
	__u64 bytes = 1ULL << r->block_shift;
	__u32 i;

	for (i = 0; i < n; i++) {
		const struct deepum_cmd *cmd = &r->cmds[i];
		__u64 blk = cmd->addr >> r->block_shift;
		struct prefetched *p;

		switch (cmd->op) {
		case DEEPUM_CMD_PREFETCH:
			p = pf_get(r, blk);
			if (!p)
				return -ENOMEM;
			p->pending = 1;
			if (r->opt.link_bytes_per_sec) {
				__u64 start = r->link_free_ns > ts ? r->link_free_ns : ts;

				r->link_free_ns = start + bytes * 1000000000ULL / r->opt.link_bytes_per_sec;
				p->ready_ns = r->link_free_ns;
			}
			break;
		case DEEPUM_CMD_EVICT:
		case DEEPUM_CMD_DISCARD:
			drop_prefetch(r, blk);
			break;
		}
	}
	return 0;
}

static int feed_core(struct dum_replay *r, const struct deepum_record *rec)
{
	__u64 t0 = now_ns(), dt;
	__u32 n;
	int err = deepum_core_process(r->core, rec, r->cmds, r->max_cmds, &n);

	dt = now_ns() - t0;
	deepum_core_add_time(r->core, dt);
	if (err)
		return err;
	return apply_commands(r, n, rec->ts);
}

/* A kernel touched a block: was it there, was it a prefetch, does the core hear of it? */
static int access_block(struct dum_replay *r, const struct deepum_record *rec)
{
	struct dum_replay_interval *iv = open_interval(r);
	__u64 blk = rec->addr >> r->block_shift;
	struct prefetched *p = pf_slot(r, blk);
	bool resident = deepum_core_is_resident(r->core, rec->addr);
	bool late = false;

	iv->accesses++;
	if (resident && p->blk && p->pending) {
		p->pending = 0;
		iv->useful++;
		late = r->opt.link_bytes_per_sec && p->ready_ns > rec->ts;
		iv->late += late;
	}
	if (!resident)
		iv->faults++;
	if (resident && !late && r->opt.feedback == DUM_REPLAY_FEEDBACK_FAULTS)
		return 0;
	return feed_core(r, rec);
}

static int end_interval(struct dum_replay *r, const struct deepum_record *rec)
{
	struct dum_replay_interval *iv = open_interval(r);
	__u64 i;
	int err;

	if (rec->flags & DEEPUM_ITER_F_FLUSHED) {
		/* Everything went back to the host, untouched prefetches too. */
		for (i = 0; i < r->pf_cap; i++) {
			if (r->pf[i].blk && r->pf[i].pending) {
				r->pf[i].pending = 0;
				iv->wasted++;
			}
		}
		r->link_free_ns = 0;
	}
	err = feed_core(r, rec);
	if (err)
		return err;
	iv->end_ts = rec->ts;
	close_interval(r, iv);
	return new_interval(r, rec->ts);
}

int dum_replay_feed(struct dum_replay *r, const struct deepum_record *recs, __u64 n,
		    __u64 *bad_index)
{
	__u64 i;
	int err = 0;

	for (i = 0; i < n && !err; i++) {
		const struct deepum_record *rec = &recs[i];

		if (!r->iv_len) {
			err = new_interval(r, rec->ts);
			if (err)
				break;
		}
		switch (rec->type) {
		case DEEPUM_REC_FAULT:
			err = access_block(r, rec);
			break;
		case DEEPUM_REC_ITERATION:
			err = end_interval(r, rec);
			break;
		default:
			err = feed_core(r, rec);
			break;
		}
		if (err)
			*bad_index = i;
	}
	return err;
}

__u32 dum_replay_intervals(const struct dum_replay *r, struct dum_replay_interval *ret, __u32 n)
{
	__u32 count = n < r->iv_len ? n : r->iv_len;

	memcpy(ret, r->iv, count * sizeof(*ret));
	if (count && count == r->iv_len)
		close_interval(r, &ret[count - 1]);
	return count;
}

void dum_replay_stats(const struct dum_replay *r, struct deepum_stats *ret)
{
	deepum_core_get_stats(r->core, ret);
}

int dum_bench_core(const struct deepum_config *cfg, const struct deepum_record *recs, __u64 n,
		   __u32 feedback, __u64 *ns, struct deepum_stats *stats)
{
	struct deepum_core *core;
	struct deepum_cmd *cmds;
	__u32 max_cmds, ncmds;
	__u64 i, t0;
	int err = deepum_core_create(cfg, &core);

	if (err)
		return err;
	max_cmds = deepum_core_max_cmds(core);
	cmds = calloc(max_cmds, sizeof(*cmds));
	if (!cmds) {
		deepum_core_destroy(core);
		return -ENOMEM;
	}
	t0 = now_ns();
	for (i = 0; i < n && !err; i++) {
		if (feedback == DUM_REPLAY_FEEDBACK_FAULTS && recs[i].type == DEEPUM_REC_FAULT &&
		    deepum_core_is_resident(core, recs[i].addr))
			continue;
		err = deepum_core_process(core, &recs[i], cmds, max_cmds, &ncmds);
	}
	*ns = now_ns() - t0;
	deepum_core_get_stats(core, stats);
	free(cmds);
	deepum_core_destroy(core);
	return err;
}
