// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The DeepUM prefetch core.
 *
 * Learning.  Every FAULT updates the tables of the exec ID that was running:
 * the faulted block becomes a successor of the previous `levels` faults of
 * the same execution, and the first fault of an execution a start block.
 * Every LAUNCH records the exec-ID succession.
 *
 * Prediction.  The core keeps a window of kernels it expects to run next:
 * those the last iteration ran at the positions ahead, when iterations are
 * marked and the launches follow the last one's order (a known kernel in
 * another's place takes it), else chained through the exec-ID table from
 * the running one.  Each window kernel is walked breadth-first through its
 * block table from its start blocks, to where the table ends (DeepUM's end
 * pointer: see docs/CORE.md).  Predicted blocks that are not resident become
 * PREFETCH commands, in the order the kernels are expected.  A LAUNCH that
 * matches the head of the window slides it.  One that matches a kernel a
 * little further on skips to it; one that is not in the window at all
 * counts as an extra kernel and the window waits for it, up to
 * RESYNC_EXTRA in a row, after which the window is reset.  Resetting
 * on every surprise threw away the whole window (and the protection of what
 * it had prefetched) at each of them.  A FAULT walks the running kernel's
 * table again from the faulted block, since the blocks after it are the ones
 * still to come.
 *
 * Walking on launches as well as on faults matters: a prefetcher that only
 * wakes on faults goes quiet exactly when it works, since its hits do not
 * fault.
 *
 * Residency.  The core mirrors what nvidia-uvm holds on the GPU, in least
 * recently migrated order, against a capacity.  Pre-eviction keeps
 * watermark_blocks free by evicting, of the blocks no window kernel needs,
 * those the last iteration needed latest from this point (DEEPUM_CFG_F_HISTORY,
 * the default; with DEEPUM_CFG_F_HORIZON those the kernels beyond the window
 * need last, with DEEPUM_CFG_F_LRM_VICTIMS the oldest: find_victim()); a
 * fault that still finds memory full is charged a demand eviction of the
 * oldest block, as the driver would do.
 * The window is measured in "launch clock" ticks: a block predicted for the
 * kernel expected at tick t is protected while the clock is <= t.  A reset
 * jumps the clock past every outstanding protection.
 *
 * Invalidation.  A FREE marks the blocks it covers entirely as dead: resident
 * ones are discarded (no write-back).  A dead block the tables predict
 * again is alive: allocators hand freed memory out anew (a training loop's
 * activations, every iteration), and the kernel predicted to touch it
 * writes it first.
 */
#include "core.h"
#include "corr.h"
#include "residency.h"

enum {
	RESYNC_SKIP = 8,	/* window kernels a launch may skip to match */
	RESYNC_EXTRA = 4,	/* unexpected launches in a row the window waits through */
	VICTIM_CACHE = 64,	/* next-use victims one scan keeps for the calls after it */
	VICTIM_RUN_SLACK = 2,	/* a run's neighbour may be needed 1/N sooner than the best victim */
	CMD_TAKEN_BACK = 0,	/* an output slot whose eviction was taken back (no DEEPUM_CMD_*) */
	ITER_SEQ_MAX = 1 << 16,	/* launches of an iteration whose exec IDs the core remembers */
	FORGET_ITERATIONS = 4,	/* the marks of the program's first iterations, the only ones that forget */
	TIGHT_NUM = 2,		/* memory is tight below TIGHT_NUM / TIGHT_DEN of the blocks used */
	TIGHT_DEN = 3,
};

/* A victim candidate, the next use it was chosen by (0: none known) and its
 * place in the scan. */
struct dum_victim {
	u32 slot;
	u32 scanned;
	u64 use;
};

struct dum_window_slot {
	u64 seq;	/* launch clock tick the kernel is expected at */
	u32 exec;
	u32 blocks;	/* blocks its walk added to the window */
	u32 walk_gen;	/* generation of its latest walk */
	bool complete;	/* its walk ran to the end */
	bool horizon;	/* walked to mark its blocks' next use, not to prefetch them */
	bool startless;	/* walked while its kernel had no start blocks */
};

struct deepum_core {
	struct deepum_config cfg;
	struct dum_residency res;
	struct dum_corr corr;

	/* Prefetch window: a ring of kernels expected next, oldest first; the
	 * first win_prefetch prefetch, the rest only mark (the horizon). */
	struct dum_window_slot *window;
	u32 win_head;
	u32 win_count;
	u32 win_prefetch;
	u64 win_blocks;		/* blocks predicted by the prefetching kernels */
	bool marking;		/* the walk in progress is a horizon kernel's */
	u64 launch_clock;
	u32 iter_pos;		/* launches since the iteration began (DEEPUM_CFG_F_HISTORY) */
	u32 iter_len;		/* launches in the last whole iteration; 0: none yet */
	u32 iter_number;
	u32 iter_new_execs;	/* launches of this iteration whose exec ID was new */
	bool iter_settled;	/* an iteration has had few new exec IDs */
	/* Exec slot of each launch of the latest iteration that reached its
	 * position; DUM_NIL: none.  Iterations repeat, so it predicts the
	 * kernels to come by position (see positional_exec()). */
	u32 *iter_seq;
	u32 pos_misses;		/* launches in a row that iter_seq did not predict */
	bool iter_flushed;	/* the last iteration ended with everything on the host */

	/* The best next-use victims of the last scan, best last (a heap, worst
	 * first, while a scan fills it: keep_victim()); they stand
	 * while the clock and the iteration position do (see find_victim). */
	struct dum_victim victims[VICTIM_CACHE];
	u32 victims_len;
	u64 victims_clock;
	u32 victims_pos;
	u32 victims_iteration;
	/* Blocks [run_lo, run_hi]: the latest victims' address run
	 * (DEEPUM_CFG_F_VICTIM_RUNS); run_hi < run_lo: none yet. */
	u64 run_lo, run_hi;

	u32 cur_exec;		/* exec slot of the running kernel, DUM_NIL: ignored */
	u32 cur_walk_gen;	/* the walk that predicted it; 0: none */
	bool in_sync;		/* the last launch was not mispredicted */
	u32 off_track;		/* unexpected launches in a row the window waited through */
	u32 prev_exec;		/* exec slot whose successor the next launch is */
	u32 prev_context;	/* exec slot that ran before prev_exec */

	/* The running execution's latest faults, most recent first: their
	 * blocks and the table ways that held them when they were learned. */
	u64 *hist;
	u32 *hist_way;
	u32 hist_len;
	u32 hist_exec;

	u32 *walk_queue;	/* walk_max ways */
	u32 walk_left;		/* entries walks may still visit for this record */

	struct deepum_cmd *out;	/* this record's command buffer */
	u32 out_len;
	u32 out_max;

	struct deepum_stats stats;
};

/* Outcome of predicting one block. */
enum dum_predict {
	DUM_PREDICT_NEW,	/* newly part of the window */
	DUM_PREDICT_KNOWN,	/* already in the window, dead or untracked */
	DUM_PREDICT_STOP,	/* no room on the GPU or in the command buffer */
};

#define CFG_FIELD(field, name)                                              \
	{ offsetof(struct deepum_config, field), DEEPUM_CFG_##name##_MIN,   \
	  DEEPUM_CFG_##name##_MAX, DEEPUM_CFG_##name##_DEFAULT }

static const struct {
	size_t offset;
	u32 min, max, def;
} cfg_fields[] = {
	CFG_FIELD(block_shift, BLOCK_SHIFT),
	CFG_FIELD(corr_sets, CORR_SETS),
	CFG_FIELD(corr_ways, CORR_WAYS),
	CFG_FIELD(corr_levels, CORR_LEVELS),
	CFG_FIELD(corr_succs, CORR_SUCCS),
	CFG_FIELD(exec_max, EXEC_MAX),
	CFG_FIELD(exec_succs, EXEC_SUCCS),
	CFG_FIELD(exec_starts, EXEC_STARTS),
	CFG_FIELD(block_max, BLOCK_MAX),
	CFG_FIELD(lookahead_kernels, LOOKAHEAD_KERNELS),
	CFG_FIELD(lookahead_blocks, LOOKAHEAD_BLOCKS),
	CFG_FIELD(walk_max, WALK_MAX),
	CFG_FIELD(evict_scan, EVICT_SCAN),
	CFG_FIELD(watermark_blocks, WATERMARK_BLOCKS),
};

int deepum_core_config_check(struct deepum_config *cfg)
{
	struct deepum_config out = *cfg;
	u32 victims = cfg->flags & DEEPUM_CFG_F_VICTIMS, i;

	if (victims & (victims - 1))
		return -EINVAL;
	/* Runs of victims weigh next uses: the oldest have none to weigh. */
	if (cfg->flags & DEEPUM_CFG_F_VICTIM_RUNS && victims == DEEPUM_CFG_F_LRM_VICTIMS)
		return -EINVAL;
	if (!victims)
		out.flags |= DEEPUM_CFG_F_HISTORY;
	/* Unset, the history's scan reaches every block the capacity holds: the
	 * oldest 4096 of GPT-2 XL's 18,663 at three quarters of its working set
	 * gave victims that evicted twice what Belady's choice does, measured
	 * and simulated alike (docs/BENCHMARKS.md, twelfth session). */
	if (!out.evict_scan && out.flags & DEEPUM_CFG_F_HISTORY) {
		out.evict_scan = DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT;
		if (out.capacity_blocks > out.evict_scan)
			out.evict_scan = out.capacity_blocks < DEEPUM_CFG_EVICT_SCAN_MAX ?
					 (u32)out.capacity_blocks : DEEPUM_CFG_EVICT_SCAN_MAX;
	}
	/* Unset, the window takes at most a quarter of the capacity (set, up to
	 * half: window_block_budget()).  Simulated on the H200's per-launch
	 * traces, a quarter was 10% faster than half on average over three
	 * models at two budgets, and on the H200 ResNet-50 at half its working
	 * set took 18% less time (docs/BENCHMARKS.md). */
	if (!out.lookahead_blocks && out.capacity_blocks) {
		u64 quarter = out.capacity_blocks / 4;

		out.lookahead_blocks = quarter >= DEEPUM_CFG_LOOKAHEAD_BLOCKS_DEFAULT ?
				       DEEPUM_CFG_LOOKAHEAD_BLOCKS_DEFAULT : quarter ? (u32)quarter : 1;
	}
	for (i = 0; i < sizeof(cfg_fields) / sizeof(cfg_fields[0]); i++) {
		u32 *v = (u32 *)((char *)&out + cfg_fields[i].offset);

		if (!*v)
			*v = cfg_fields[i].def;
		if (*v < cfg_fields[i].min || *v > cfg_fields[i].max)
			return -EINVAL;
	}
	if (out.corr_sets & (out.corr_sets - 1))
		return -EINVAL;
	if (out.flags & ~DEEPUM_CFG_F_ALL || out.reserved0 ||
	    out.reserved[0] || out.reserved[1] || out.reserved[2] || out.reserved[3])
		return -EINVAL;
	if (out.capacity_blocks > DEEPUM_CFG_CAPACITY_BLOCKS_MAX)
		return -EINVAL;
	*cfg = out;
	return 0;
}

u64 deepum_core_mem_bytes(const struct deepum_config *cfg)
{
	return sizeof(struct deepum_core) + dum_corr_mem_bytes(cfg) +
	       dum_residency_mem_bytes(cfg->block_max) +
	       (u64)cfg->lookahead_kernels * sizeof(struct dum_window_slot) +
	       (u64)cfg->corr_levels * (sizeof(u64) + sizeof(u32)) +
	       (u64)cfg->walk_max * sizeof(u32) + (u64)ITER_SEQ_MAX * sizeof(u32);
}

int deepum_core_create(const struct deepum_config *cfg, struct deepum_core **ret)
{
	struct deepum_core *core;
	int err;

	*ret = NULL;
	core = dum_calloc(1, sizeof(*core));
	if (!core)
		return -ENOMEM;
	core->cfg = *cfg;
	err = deepum_core_config_check(&core->cfg);
	if (err)
		goto out_free_core;
	err = dum_residency_init(&core->res, core->cfg.block_max);
	if (err)
		goto out_free_core;
	err = dum_corr_init(&core->corr, &core->cfg);
	if (err)
		goto out_destroy_residency;
	err = -ENOMEM;
	core->window = dum_calloc(core->cfg.lookahead_kernels, sizeof(*core->window));
	core->hist = dum_calloc(core->cfg.corr_levels, sizeof(*core->hist));
	core->hist_way = dum_calloc(core->cfg.corr_levels, sizeof(*core->hist_way));
	core->walk_queue = dum_calloc(core->cfg.walk_max, sizeof(*core->walk_queue));
	core->iter_seq = dum_calloc(ITER_SEQ_MAX, sizeof(*core->iter_seq));
	if (!core->window || !core->hist || !core->hist_way || !core->walk_queue || !core->iter_seq)
		goto out_free_arrays;
	memset(core->iter_seq, 0xff, ITER_SEQ_MAX * sizeof(*core->iter_seq));

	core->cur_exec = core->cfg.exec_max;	/* faults before any launch */
	core->prev_exec = DUM_NIL;
	core->prev_context = DUM_EXEC_NO_CONTEXT;
	core->hist_exec = DUM_NIL;
	core->run_lo = 1;			/* no victims' run yet */
	*ret = core;
	return 0;

out_free_arrays:
	dum_free(core->iter_seq);
	dum_free(core->window);
	dum_free(core->hist);
	dum_free(core->hist_way);
	dum_free(core->walk_queue);
	dum_corr_destroy(&core->corr);
out_destroy_residency:
	dum_residency_destroy(&core->res);
out_free_core:
	dum_free(core);
	return err;
}

void deepum_core_destroy(struct deepum_core *core)
{
	if (!core)
		return;
	dum_free(core->iter_seq);
	dum_free(core->window);
	dum_free(core->hist);
	dum_free(core->hist_way);
	dum_free(core->walk_queue);
	dum_corr_destroy(&core->corr);
	dum_residency_destroy(&core->res);
	dum_free(core);
}

void deepum_core_get_config(const struct deepum_core *core, struct deepum_config *ret)
{
	*ret = core->cfg;
}

u32 deepum_core_max_cmds(const struct deepum_core *core)
{
	/* A full window of evict + prefetch pairs, the watermark, a demand eviction. */
	return 2 * core->cfg.lookahead_blocks + core->cfg.watermark_blocks + 1;
}

void deepum_core_get_stats(const struct deepum_core *core, struct deepum_stats *ret)
{
	*ret = core->stats;
	ret->resident_blocks = core->res.resident;
}

void deepum_core_add_time(struct deepum_core *core, u64 ns)
{
	core->stats.core_ns += ns;
}

/* ---- commands and residency ------------------------------------------ */

static u64 block_bytes(const struct deepum_core *core)
{
	return (u64)1 << core->cfg.block_shift;
}

static bool out_room(const struct deepum_core *core, u32 n)
{
	return core->out_max - core->out_len >= n;
}

static void emit(struct deepum_core *core, u32 op, u64 blk, u32 exec_id, u32 flags)
{
	struct deepum_cmd *cmd;

	if (!out_room(core, 1))
		return;
	cmd = &core->out[core->out_len++];
	cmd->addr = blk << core->cfg.block_shift;
	cmd->exec_id = exec_id;
	cmd->op = op;
	cmd->flags = flags;
	cmd->reserved = 0;
}

static bool in_window(const struct deepum_core *core, const struct dum_block *b)
{
	return b->window_seq >= core->launch_clock;
}

static void protect(struct dum_block *b, u64 seq)
{
	if (b->window_seq < seq)
		b->window_seq = seq;
}

static u64 free_blocks(const struct deepum_core *core)
{
	return core->cfg.capacity_blocks - core->res.resident;
}

/* Evict @slot: discard if its data is dead, otherwise write it back. */
static void evict(struct deepum_core *core, u32 slot, u32 flags)
{
	struct dum_block *b = dum_block_at(&core->res, slot);
	u32 at = core->out_len;

	if (b->flags & DUM_BLOCK_DEAD) {
		emit(core, DEEPUM_CMD_DISCARD, b->blk, DEEPUM_EXEC_NONE, flags);
		core->stats.discards++;
	} else {
		emit(core, DEEPUM_CMD_EVICT, b->blk, DEEPUM_EXEC_NONE, flags);
		if (flags & DEEPUM_CMD_F_DEMAND)
			core->stats.demand_evictions++;
		else
			core->stats.evictions++;
	}
	dum_residency_remove(&core->res, slot);
	if (core->out_len > at)
		b->evict_cmd = at;
}

/* Was @b evicted by the record in progress?  Its latest eviction's slot
 * holds it only then: an eviction later in the record would have moved
 * evict_cmd, and a slot of an earlier record's output holds anything. */
static bool evicted_in_this_record(const struct deepum_core *core, const struct dum_block *b)
{
	const struct deepum_cmd *cmd;

	if (b->evict_cmd >= core->out_len)
		return false;
	cmd = &core->out[b->evict_cmd];
	return (cmd->op == DEEPUM_CMD_EVICT || cmd->op == DEEPUM_CMD_DISCARD) &&
	       cmd->addr >> core->cfg.block_shift == b->blk;
}

/*
 * @b was evicted earlier in this record's processing (a victim for room, or
 * a fault's demand eviction) and is predicted now, before its command has
 * left the core: the command is dropped and the block stays, instead of
 * being written back and copied straight in again.  On GPT-2's H200 engine
 * log, 8% of all prefetches were such round trips within one record.
 */
static void take_back_eviction(struct deepum_core *core, struct dum_block *b)
{
	struct deepum_cmd *cmd = &core->out[b->evict_cmd];

	if (cmd->op == DEEPUM_CMD_DISCARD)
		core->stats.discards--;
	else if (cmd->flags & DEEPUM_CMD_F_DEMAND)
		core->stats.demand_evictions--;
	else
		core->stats.evictions--;
	cmd->op = CMD_TAKEN_BACK;
}

/* Close the record's output: drop taken-back commands. */
static void finish_output(struct deepum_core *core)
{
	u32 i, n = 0;

	for (i = 0; i < core->out_len; i++)
		if (core->out[i].op != CMD_TAKEN_BACK)
			core->out[n++] = core->out[i];
	core->out_len = n;
}

/* Add a use at @pos to @runs (sorted, disjoint, at most DUM_USE_RUNS). */
static void add_use(struct dum_use_run *runs, u32 *n, u32 pos)
{
	u32 i, at, closest;

	for (at = 0; at < *n && runs[at].end + DUM_USE_GAP < pos; at++)
		;
	if (at < *n && runs[at].start <= pos + DUM_USE_GAP) {
		/* Within the gap of run @at: it grows, and may reach the next one. */
		if (pos < runs[at].start)
			runs[at].start = pos;
		if (pos > runs[at].end)
			runs[at].end = pos;
		if (at + 1 < *n && runs[at + 1].start <= runs[at].end + DUM_USE_GAP) {
			runs[at].end = runs[at + 1].end;
			for (i = at + 1; i + 1 < *n; i++)
				runs[i] = runs[i + 1];
			(*n)--;
		}
		return;
	}
	if (*n == DUM_USE_RUNS) {
		/* Full: the new run goes in and the two runs closest together merge. */
		struct dum_use_run all[DUM_USE_RUNS + 1];

		for (i = 0; i < at; i++)
			all[i] = runs[i];
		all[at] = (struct dum_use_run){ pos, pos };
		for (i = at; i < DUM_USE_RUNS; i++)
			all[i + 1] = runs[i];
		for (closest = 0, i = 1; i < DUM_USE_RUNS; i++)
			if (all[i + 1].start - all[i].end < all[closest + 1].start - all[closest].end)
				closest = i;
		all[closest].end = all[closest + 1].end;
		for (i = 0; i < DUM_USE_RUNS; i++)
			runs[i] = all[i < closest + 1 ? i : i + 1];
		return;
	}
	for (i = *n; i > at; i--)
		runs[i] = runs[i - 1];
	runs[at] = (struct dum_use_run){ pos, pos };
	(*n)++;
}

/* @b is needed @pos launches into the current iteration (DEEPUM_CFG_F_HISTORY). */
static void note_use(const struct deepum_core *core, struct dum_block *b, u32 pos)
{
	if (!(core->cfg.flags & DEEPUM_CFG_F_HISTORY))
		return;	/* the horizon's fields share the block's room */
	if (b->use_iteration != core->iter_number + 1) {
		if (b->use_iteration) {
			memcpy(b->prev, b->cur, sizeof(b->prev));
			b->prev_runs = b->cur_runs;
			b->flags |= DUM_BLOCK_PREV_USES;
		}
		b->use_iteration = core->iter_number + 1;
		b->cur_runs = 0;
	}
	add_use(b->cur, &b->cur_runs, pos);
}

/*
 * Launches until @b is needed again if iterations repeat, 0 if nothing is
 * known: its next recorded use in this iteration (inside a run of uses, at
 * most DUM_USE_GAP away), else its first one in the next.  Once it has been
 * used in this iteration, the iteration before says what comes.
 */
static u64 history_next_use(const struct deepum_core *core, const struct dum_block *b)
{
	const struct dum_use_run *runs = b->cur;
	u32 p = core->iter_pos, n = b->cur_runs, i;

	if (!core->iter_len || !b->use_iteration || !n)
		return 0;
	if (b->use_iteration == core->iter_number + 1 && b->flags & DUM_BLOCK_PREV_USES) {
		runs = b->prev;
		n = b->prev_runs;
	}
	for (i = 0; i < n; i++) {
		if (runs[i].start > p)
			return runs[i].start - p;
		if (runs[i].end > p)
			return runs[i].end - p < DUM_USE_GAP ? runs[i].end - p : DUM_USE_GAP;
	}
	/* This iteration may already be longer than the last one was. */
	return (u64)runs[0].start + (core->iter_len > p ? core->iter_len - p : 1);
}

/* The tick the horizon expects @b to be used at next, or 0 if none ahead. */
static u64 horizon_next_use(const struct deepum_core *core, const struct dum_block *b)
{
	if (b->horizon_next >= core->launch_clock)
		return b->horizon_next;
	return b->horizon_last >= core->launch_clock ? b->horizon_last : 0;
}

static u64 next_use(const struct deepum_core *core, const struct dum_block *b)
{
	return core->cfg.flags & DEEPUM_CFG_F_HORIZON ? horizon_next_use(core, b) : history_next_use(core, b);
}

/*
 * Whether @a is a worse victim than @b: a nearer next use (a block with none
 * known is the best), and of equals the one further from the least recently
 * migrated end (scanned later).
 */
static bool worse_victim(const struct dum_victim *a, const struct dum_victim *b)
{
	u64 ka = a->use ? a->use : ~0ULL, kb = b->use ? b->use : ~0ULL;

	return ka != kb ? ka < kb : a->scanned > b->scanned;
}

/* Restore the heap below @at: every entry no worse than its parent. */
static void victims_sift_down(struct dum_victim *h, u32 n, u32 at)
{
	for (;;) {
		u32 worst = at, l = 2 * at + 1, r = l + 1;
		struct dum_victim t;

		if (l < n && worse_victim(&h[l], &h[worst]))
			worst = l;
		if (r < n && worse_victim(&h[r], &h[worst]))
			worst = r;
		if (worst == at)
			return;
		t = h[at];
		h[at] = h[worst];
		h[worst] = t;
		at = worst;
	}
}

/* A neighbour of the latest victims' run that is nearly as good a victim
 * as @best (next use at least 1 - 1/VICTIM_RUN_SLACK as far), grown into
 * the run; DUM_NIL if neither is. */
static u32 run_neighbour(struct deepum_core *core, const struct dum_victim *best)
{
	u64 best_key = best->use ? best->use : ~0ULL, side[2] = { core->run_hi + 1, core->run_lo - 1 };
	u32 i;

	if (core->run_hi < core->run_lo)
		return DUM_NIL;
	for (i = 0; i < 2; i++) {
		u32 slot = dum_residency_find(&core->res, side[i]);
		const struct dum_block *b;
		u64 use;

		if (slot == DUM_NIL)
			continue;
		b = dum_block_at(&core->res, slot);
		if (!dum_block_resident(b) || in_window(core, b))
			continue;
		use = next_use(core, b);
		if ((use ? use : ~0ULL) < best_key - best_key / VICTIM_RUN_SLACK)
			continue;
		if (i == 0)
			core->run_hi = side[0];
		else
			core->run_lo = side[1];
		return slot;
	}
	return DUM_NIL;
}

/*
 * The victim to evict, @best being the best of the scan still standing (the
 * cache's last entry).  With DEEPUM_CFG_F_VICTIM_RUNS a neighbour of the
 * latest victims comes first when it is nearly as good, so victims come in
 * address runs: the driver charges a write-back per range as well as per
 * byte (on the H200 through the user API, 2 MiB ranges 8.8 GB/s, 32 MiB
 * 14.9), and the engine's scattered victims made ranges of 2-3 blocks.
 */
static u32 take_victim(struct deepum_core *core, struct dum_victim best)
{
	if (core->cfg.flags & DEEPUM_CFG_F_VICTIM_RUNS) {
		u32 slot = run_neighbour(core, &best);

		if (slot != DUM_NIL)
			return slot;
		core->run_lo = core->run_hi = dum_block_at(&core->res, best.slot)->blk;
	}
	core->victims_len--;
	return best.slot;
}

/*
 * Keep @v among the scan's VICTIM_CACHE best, in a heap with the worst of
 * them first (victims[0]), so that a candidate is judged against one entry
 * and taken in O(log VICTIM_CACHE).
 */
static void keep_victim(struct deepum_core *core, struct dum_victim v)
{
	struct dum_victim *h = core->victims;
	u32 at;

	if (core->victims_len == VICTIM_CACHE) {
		if (!worse_victim(h, &v))
			return;
		h[0] = v;
		victims_sift_down(h, VICTIM_CACHE, 0);
		return;
	}
	for (at = core->victims_len++; at && worse_victim(&v, &h[(at - 1) / 2]); at = (at - 1) / 2)
		h[at] = h[(at - 1) / 2];
	h[at] = v;
}

/* The kept victims in order, worst first, best last (taken from the end). */
static void sort_victims(struct deepum_core *core)
{
	struct dum_victim *h = core->victims, t;
	u32 n, i;

	/* Heapsort leaves the worst last; then reverse. */
	for (n = core->victims_len; n > 1; n--) {
		t = h[0];
		h[0] = h[n - 1];
		h[n - 1] = t;
		victims_sift_down(h, n - 1, 0);
	}
	for (i = 0; i < core->victims_len / 2; i++) {
		t = h[i];
		h[i] = h[core->victims_len - 1 - i];
		h[core->victims_len - 1 - i] = t;
	}
}

/*
 * By next use (DEEPUM_CFG_F_HORIZON or _HISTORY): the block needed last of
 * those no prefetching kernel needs within evict_scan of the least recently
 * migrated end, one with no known use first (Belady's choice, as far as the
 * tables or the last iteration say).  A full scan costs evict_scan blocks
 * (thousands: all of the GPU is worth looking at), and pre-eviction asks
 * for many victims in a row, so one scan keeps the VICTIM_CACHE best.  They
 * are taken while the clock and the iteration position stand still and
 * each still holds its use, which is what a new scan would mostly return:
 * it could differ only by blocks that migrated or changed use since.
 */
static u32 find_victim_by_use(struct deepum_core *core)
{
	u32 slot = core->res.lrm_tail, reach, scanned;
	u64 skip;

	if (core->victims_clock != core->launch_clock || core->victims_pos != core->iter_pos ||
	    core->victims_iteration != core->iter_number)
		core->victims_len = 0;
	while (core->victims_len) {
		struct dum_victim v = core->victims[core->victims_len - 1];
		const struct dum_block *b = dum_block_at(&core->res, v.slot);

		if (dum_block_resident(b) && !in_window(core, b) && next_use(core, b) == v.use)
			return take_victim(core, v);
		core->victims_len--;
	}
	core->victims_clock = core->launch_clock;
	core->victims_pos = core->iter_pos;
	core->victims_iteration = core->iter_number;
	/*
	 * The evict_scan blocks nearest the least recently migrated end, visited
	 * from the newest of them back (scanned: the place from that end, as
	 * before).  Which are kept does not depend on the order; the time does:
	 * in a loop the blocks that migrated last are mostly needed last, so
	 * once the cache is full a candidate rarely beats its worst, where
	 * oldest first each one did and took a heap's depth (under pressure,
	 * scripts/bench_core: 956 -> 293 ns per record, the same victims).
	 */
	reach = core->res.resident < core->cfg.evict_scan ? (u32)core->res.resident : core->cfg.evict_scan;
	for (skip = core->res.resident - reach; skip && slot != DUM_NIL; skip--)
		slot = dum_block_at(&core->res, slot)->lrm_prev;
	for (scanned = reach; scanned && slot != DUM_NIL; slot = dum_block_at(&core->res, slot)->lrm_prev) {
		const struct dum_block *b = dum_block_at(&core->res, slot);

		scanned--;
		if (!in_window(core, b))
			keep_victim(core, (struct dum_victim){ .slot = slot, .scanned = scanned,
							       .use = next_use(core, b) });
	}
	sort_victims(core);
	return core->victims_len ? take_victim(core, core->victims[core->victims_len - 1]) : DUM_NIL;
}

/*
 * A victim no prefetching kernel needs, within evict_scan of the least
 * recently migrated end: the oldest, or with a horizon or the history, the
 * one needed last.  Least recently migrated alone evicts, in an
 * iteration-periodic loop, the blocks that come back first.
 */
static u32 find_victim(struct deepum_core *core)
{
	u32 slot = core->res.lrm_head, scanned;

	if (core->cfg.flags & (DEEPUM_CFG_F_HORIZON | DEEPUM_CFG_F_HISTORY))
		return find_victim_by_use(core);
	for (scanned = 0; slot != DUM_NIL && scanned < core->cfg.evict_scan; scanned++) {
		const struct dum_block *b = dum_block_at(&core->res, slot);

		if (!in_window(core, b))
			return slot;
		slot = b->lrm_next;
	}
	return DUM_NIL;
}

/* Pre-evict until watermark_blocks are free, or nothing can go. */
static void preevict(struct deepum_core *core)
{
	if (!core->cfg.capacity_blocks || core->cfg.flags & DEEPUM_CFG_F_NO_PREEVICT)
		return;
	while (free_blocks(core) < core->cfg.watermark_blocks && out_room(core, 1)) {
		u32 victim = find_victim(core);

		if (victim == DUM_NIL)
			return;
		evict(core, victim, 0);
	}
}

/* Make room for one prefetched block without touching the fault reserve. */
static bool room_for_prefetch(struct deepum_core *core)
{
	u32 victim;

	if (!core->cfg.capacity_blocks)
		return true;
	if (core->cfg.flags & DEEPUM_CFG_F_NO_PREEVICT)
		return free_blocks(core) > 0;
	if (free_blocks(core) > core->cfg.watermark_blocks)
		return true;
	victim = find_victim(core);
	if (victim == DUM_NIL)
		return false;
	evict(core, victim, 0);
	return true;
}

static enum dum_predict predict_block(struct deepum_core *core, u64 blk, u32 exec_id, u64 seq)
{
	u32 slot = dum_residency_get(&core->res, blk);
	struct dum_block *b;
	bool fresh;

	if (slot == DUM_NIL) {
		core->stats.blocks_untracked++;
		return DUM_PREDICT_KNOWN;
	}
	b = dum_block_at(&core->res, slot);
	if (core->marking) {
		if (b->horizon_next < core->launch_clock || seq < b->horizon_next)
			b->horizon_next = seq;
		if (b->horizon_last < seq)
			b->horizon_last = seq;
		return DUM_PREDICT_KNOWN;
	}
	if (b->flags & DUM_BLOCK_DEAD) {
		/* Freed, and predicted again: its memory was handed out anew.
		 * Kept or fetched like any block (its old data was discarded,
		 * so there is nothing to copy), and alive from here on. */
		b->flags &= ~DUM_BLOCK_DEAD;
		core->stats.revived_dead++;
	}
	fresh = !in_window(core, b);
	if (!dum_block_resident(b)) {
		if (core->cfg.flags & DEEPUM_CFG_F_NO_PREFETCH)
			return DUM_PREDICT_KNOWN;
		if (!out_room(core, 2)) {
			core->stats.walk_truncated++;
			return DUM_PREDICT_STOP;
		}
		if (!room_for_prefetch(core)) {
			core->stats.window_full++;
			return DUM_PREDICT_STOP;
		}
		if (evicted_in_this_record(core, b)) {
			take_back_eviction(core, b);
		} else {
			emit(core, DEEPUM_CMD_PREFETCH, blk, exec_id, 0);
			core->stats.prefetches++;
			core->stats.prefetch_bytes += block_bytes(core);
		}
		dum_residency_touch(&core->res, slot);
	}
	protect(b, seq);
	note_use(core, b, core->iter_pos + (u32)(seq - core->launch_clock));
	return fresh ? DUM_PREDICT_NEW : DUM_PREDICT_KNOWN;
}

/* ---- walking the tables ---------------------------------------------- */

static struct dum_window_slot *window_slot(struct deepum_core *core, u32 i)
{
	return &core->window[(core->win_head + i) % core->cfg.lookahead_kernels];
}


static u32 exec_id_of(const struct deepum_core *core, u32 exec)
{
	return exec == core->cfg.exec_max ? DEEPUM_EXEC_NONE : exec;
}

enum dum_enqueue {
	DUM_ENQUEUE_QUEUED,
	DUM_ENQUEUE_SEEN,	/* this walk queued it before: its block is predicted */
	DUM_ENQUEUE_NO_ENTRY,	/* the block has no entry of its own to follow */
};

/* Queue (@exec, @blk)'s table entry for expansion in walk generation @gen;
 * @hint is where the entry was last seen. */
static enum dum_enqueue walk_enqueue(struct deepum_core *core, u32 exec, u64 blk, u32 *hint,
				     u32 gen, u32 *tail)
{
	struct dum_corr *c = &core->corr;
	u32 way = dum_corr_find_hinted(c, exec, blk, hint);

	if (way == DUM_NIL)
		return DUM_ENQUEUE_NO_ENTRY;
	if (c->ways[way].walk_mark == gen)
		return DUM_ENQUEUE_SEEN;
	c->ways[way].walk_mark = gen;
	if (*tail < core->cfg.walk_max)
		core->walk_queue[(*tail)++] = way;
	return DUM_ENQUEUE_QUEUED;
}

/* Start a walk generation: entries marked with it count as expanded. */
static u32 walk_begin(struct deepum_core *core)
{
	struct dum_corr *c = &core->corr;

	if (++c->walk_gen == 0) {
		u32 w;

		for (w = 0; w < c->nentries; w++)
			c->ways[w].walk_mark = 0;
		c->walk_gen = 1;
		/* Generations handed out before are gone. */
		core->cur_walk_gen = 0;
		for (w = 0; w < core->win_count; w++)
			window_slot(core, w)->walk_gen = 0;
	}
	return c->walk_gen;
}

/* Predict one block of a walk; false when the walk must stop. */
static bool walk_predict(struct deepum_core *core, u64 blk, u32 exec_id, u64 seq, u64 *added)
{
	switch (predict_block(core, blk, exec_id, seq)) {
	case DUM_PREDICT_STOP:
		return false;
	case DUM_PREDICT_NEW:
		(*added)++;
		break;
	case DUM_PREDICT_KNOWN:
		break;
	}
	return true;
}

/* Give @heir a copy of @way's entry (successors included), as its own. */
static void adopt_entry(struct dum_corr *c, u32 heir, u32 way)
{
	u64 blk = c->ways[way].blk;
	u32 copy;

	dum_corr_get(c, heir, blk, &copy);
	if (copy != way)
		memcpy(dum_corr_successors(c, copy, 0), dum_corr_successors(c, way, 0),
		       (u64)c->levels * c->succs * sizeof(u64));
	/* The hints point at @way's exec's entries: they will miss and heal. */
}

/*
 * Predict @exec's blocks for launch clock tick @seq, breadth-first through its
 * table, in walk generation @gen: entries an earlier walk of the same
 * generation expanded are not expanded again.  From @from, or from the exec
 * ID's start blocks when @from is 0.  The walk ends where the exec ID's table
 * does: histories restart at every launch, so no successor leads out of the
 * kernel.  Adds the blocks that newly joined the window to *@added.  Returns
 * false if it stopped early.
 *
 * With @heir other than DUM_NIL, every entry expanded is also copied into
 * @heir's table: the walk predicts for a new exec ID standing in for @exec.
 */
static bool walk(struct deepum_core *core, u32 exec, u64 from, u64 seq, u32 gen,
		 u32 heir, u64 *added)
{
	struct dum_corr *c = &core->corr;
	u32 exec_id = exec_id_of(core, heir == DUM_NIL ? exec : heir);
	u32 head = 0, tail = 0;
	u32 i, level;
	bool broken;

	core->stats.walks++;

	if (from) {
		u32 hint = DUM_NIL;

		walk_enqueue(core, exec, from, &hint, gen, &tail);
	} else {
		const u64 *starts = dum_exec_starts(c, exec);

		for (i = 0; starts && i < c->exec_nstarts && starts[i]; i++) {
			u32 hint = DUM_NIL;

			if (walk_enqueue(core, exec, starts[i], &hint, gen, &tail) != DUM_ENQUEUE_SEEN &&
			    !walk_predict(core, starts[i], exec_id, seq, added))
				return false;
		}
	}

	while (head < tail) {
		u32 way = core->walk_queue[head++];

		if (!core->walk_left) {
			core->stats.walk_truncated++;
			return false;
		}
		core->walk_left--;
		core->stats.walk_entries++;
		dum_corr_use(c, way);
		if (heir != DUM_NIL)
			adopt_entry(c, heir, way);
		/* Deeper levels bridge links that broke: a successor whose
		 * entry was replaced, or a fault order never seen before. */
		for (level = 0, broken = true; level < c->levels && broken; level++) {
			const u64 *succ = dum_corr_successors(c, way, level);
			u32 *hints = dum_corr_successor_ways(c, way, level);

			broken = !succ[0];
			for (i = 0; i < c->succs && succ[i]; i++) {
				enum dum_enqueue q = walk_enqueue(core, exec, succ[i], &hints[i], gen, &tail);

				broken |= q == DUM_ENQUEUE_NO_ENTRY;
				if (q != DUM_ENQUEUE_SEEN && !walk_predict(core, succ[i], exec_id, seq, added))
					return false;
			}
		}
	}
	return true;
}

/* ---- the prefetch window --------------------------------------------- */

/* The head kernel is running: it leaves the window. */
static void window_pop(struct deepum_core *core)
{
	core->win_blocks -= window_slot(core, 0)->blocks;
	core->win_head = (core->win_head + 1) % core->cfg.lookahead_kernels;
	core->win_count--;
	if (core->win_prefetch)
		core->win_prefetch--;
}

static void window_reset(struct deepum_core *core)
{
	core->win_head = 0;
	core->win_count = 0;
	core->win_prefetch = 0;
	core->win_blocks = 0;
	/* Every outstanding protection is for a tick at most this far ahead. */
	core->launch_clock += core->cfg.lookahead_kernels + 1;
}

/*
 * Blocks the window may hold.  With a capacity, at most half of it: the rest
 * holds the running kernel and blocks reused past the window.  A window that
 * claimed all of memory would leave faults only protected blocks to evict.
 */
static u64 window_block_budget(const struct deepum_core *core)
{
	u64 half = core->cfg.capacity_blocks / 2;

	if (core->cfg.capacity_blocks && half < core->cfg.lookahead_blocks)
		return half;
	return core->cfg.lookahead_blocks;
}

/*
 * The kernel the latest iteration ran @ahead launches after the current one,
 * or DUM_NIL: without iterations, past what iter_seq holds, or while the
 * launches stray from the last iteration's order.  DUM_EXEC_BOUNDARY past
 * the end of an iteration that a flush ended: nothing crosses it.
 */
static u32 positional_exec(const struct deepum_core *core, u64 ahead)
{
	u64 pos = (u64)core->iter_pos - 1 + ahead;

	if (core->cfg.flags & DEEPUM_CFG_F_NO_POSITIONAL || !core->iter_len || !core->iter_pos ||
	    core->pos_misses >= RESYNC_EXTRA)
		return DUM_NIL;
	if (pos >= core->iter_len) {
		if (core->iter_flushed)
			return DUM_EXEC_BOUNDARY;
		pos -= core->iter_len;	/* the next iteration's */
	}
	return pos < core->iter_len && pos < ITER_SEQ_MAX ? core->iter_seq[pos] : DUM_NIL;
}

/* Walk @slot's kernel from its start blocks, as a prefetching or a marking one. */
static bool walk_slot(struct deepum_core *core, struct dum_window_slot *slot, u64 *added)
{
	bool complete;

	core->marking = slot->horizon;
	slot->startless = !dum_exec_first_start(&core->corr, slot->exec);
	slot->walk_gen = walk_begin(core);
	complete = walk(core, slot->exec, 0, slot->seq, slot->walk_gen, DUM_NIL, added);
	core->marking = false;
	return complete;
}

/* Walk @slot, already in the window, again to prefetch: its new blocks count. */
static bool prefetch_slot(struct deepum_core *core, struct dum_window_slot *slot)
{
	u64 added = 0;

	slot->horizon = false;
	slot->complete = walk_slot(core, slot, &added);
	slot->blocks += added;
	core->win_blocks += added;
	return slot->complete;
}

/*
 * Walk further ahead until lookahead_kernels are predicted or the walk budget
 * is spent.  Kernels prefetch while the window holds fewer blocks than its
 * budget; the kernels after them form the horizon, walked only to mark when
 * their blocks will be needed (find_victim() uses it).  A horizon kernel the
 * budget reaches again is walked once more, to prefetch.
 */
static void window_extend(struct deepum_core *core)
{
	struct dum_corr *c = &core->corr;
	bool horizon = core->cfg.flags & DEEPUM_CFG_F_HORIZON;

	while (core->walk_left) {
		bool room = core->win_blocks < window_block_budget(core);
		struct dum_window_slot *last = core->win_count ?
			window_slot(core, core->win_count - 1) : NULL;
		u32 context;
		u64 added = 0;
		u64 seq;
		u32 next;

		if (core->win_prefetch < core->win_count) {
			struct dum_window_slot *slot = window_slot(core, core->win_prefetch);

			/* A prefetching kernel a previous extension could not finish
			 * (it waits for room), or the first horizon kernel, which
			 * prefetches once there is room for it. */
			if (!slot->horizon && !room)
				return;
			if (room) {
				if (!prefetch_slot(core, slot))
					return;
				core->win_prefetch++;
				continue;
			}
		}
		if (last && !last->complete) {
			/* A horizon kernel left unfinished. */
			last->complete = walk_slot(core, last, &added);
			if (!last->complete)
				return;
			continue;
		}
		if (core->win_count == core->cfg.lookahead_kernels || (!last && core->cur_exec == DUM_NIL) ||
		    (!room && !horizon))
			return;
		seq = (last ? last->seq : core->launch_clock) + 1;
		/*
		 * Never more than one iteration ahead.  A block keeps two marks,
		 * its next and its latest predicted use; past one iteration every
		 * block is predicted again, so once its next use has passed, its
		 * latest would be an iteration or more away however soon it comes
		 * back (GPT-2's horizon over 3.7 iterations moved 2x the data of
		 * one within an iteration).  And a loop shorter than the window
		 * would fill it with kernels walked on the tables of an iteration
		 * or more before: after forgetting, with slots that prefetch
		 * nothing, and their blocks' budget with slots far ahead.
		 */
		if (core->iter_len && seq - core->launch_clock > core->iter_len)
			return;
		if (!last)
			context = core->prev_context;
		else if (core->win_count > 1)
			context = window_slot(core, core->win_count - 2)->exec;
		else
			context = core->cur_exec;
		next = positional_exec(core, seq - core->launch_clock);
		if (next == DUM_NIL)
			next = dum_exec_predict(c, last ? last->exec : core->cur_exec, context);
		if (next == DEEPUM_EXEC_NONE || next == DUM_EXEC_BOUNDARY)
			return;
		last = window_slot(core, core->win_count++);
		last->exec = next;
		last->seq = seq;
		last->horizon = !room;
		last->complete = walk_slot(core, last, &added);
		last->blocks = room ? added : 0;
		core->win_blocks += last->blocks;
		if (!last->complete)
			return;
		if (room)
			core->win_prefetch++;
	}
}

/*
 * The next kernel's slot was walked while the kernel had no start blocks
 * (tables just forgotten, or it had not faulted yet), so it prefetched
 * nothing; if it has them now, walk it again, so that it gets its blocks
 * ahead of its launch rather than after its faults.  A window of empty slots
 * would otherwise keep a program whose iterations are shorter than the
 * window from learning back what it forgot.
 */
static void rewalk_next_if_startless(struct deepum_core *core)
{
	struct dum_window_slot *next = core->win_count ? window_slot(core, 0) : NULL;

	if (next && next->startless && !next->horizon && next->complete &&
	    dum_exec_first_start(&core->corr, next->exec) && core->win_blocks < window_block_budget(core))
		prefetch_slot(core, next);
}

/* ---- records --------------------------------------------------------- */

/* Table slot of an exec ID: its own, the unknown kernel's for DEEPUM_EXEC_NONE,
 * DUM_NIL beyond exec_max. */
static u32 exec_slot(const struct deepum_core *core, u32 exec_id)
{
	if (exec_id == DEEPUM_EXEC_NONE)
		return core->cfg.exec_max;
	return exec_id < core->cfg.exec_max ? exec_id : DUM_NIL;
}

/* Has @exec ever faulted or been followed by another launch? */
static bool exec_known(const struct deepum_core *core, u32 exec)
{
	return dum_exec_first_start(&core->corr, exec) || dum_exec_successors(&core->corr, exec)[0];
}

/* Position (1..RESYNC_SKIP) of the first window kernel after the head that is
 * @exec, or 0. */
static u32 window_find(struct deepum_core *core, u32 exec)
{
	u32 i;

	for (i = 1; i < core->win_count && i <= RESYNC_SKIP; i++)
		if (window_slot(core, i)->exec == exec)
			return i;
	return 0;
}

static void on_launch(struct deepum_core *core, u32 exec_id)
{
	u32 exec = exec_slot(core, exec_id);
	struct dum_window_slot *head;
	bool positional = false, matched, replaced;
	u64 added = 0;
	u32 skip;

	core->stats.launches++;
	core->hist_len = 0;
	core->cur_exec = exec;
	if (exec == DUM_NIL) {
		core->stats.exec_ignored++;
		core->prev_exec = DUM_NIL;
		core->prev_context = DUM_EXEC_NO_CONTEXT;
		return;
	}
	if (!exec_known(core, exec))
		core->iter_new_execs++;
	if (core->prev_exec != DUM_NIL)
		dum_exec_add_successor(&core->corr, core->prev_exec, exec, core->prev_context);
	core->prev_context = core->prev_exec;
	core->prev_exec = exec;
	core->launch_clock++;
	if (core->iter_pos < ITER_SEQ_MAX) {
		u32 expected = positional_exec(core, 1);

		positional = expected != DUM_NIL && expected != DUM_EXEC_BOUNDARY;
		core->pos_misses = core->iter_seq[core->iter_pos] == exec ? 0 : core->pos_misses + 1;
		core->iter_seq[core->iter_pos] = exec;
	}
	core->iter_pos++;

	head = core->win_count ? window_slot(core, 0) : NULL;
	if (head && head->seq == core->launch_clock && head->exec != exec && core->in_sync &&
	    !exec_known(core, exec)) {
		/*
		 * A kernel never seen, where the window expected another: most
		 * likely that kernel with some tensors moved (a new argument
		 * hashes to a new exec ID).  It inherits the expected kernel's
		 * table, walked again to copy it, and learns its own faults on
		 * top: its hits would never teach it what it shares.
		 */
		u32 gen = walk_begin(core);
		u64 start = dum_exec_first_start(&core->corr, head->exec);

		core->stats.exec_stand_ins++;
		if (start)
			dum_exec_add_start(&core->corr, exec, start);
		walk(core, head->exec, 0, core->launch_clock, gen, exec, &added);
		window_pop(core);
		window_extend(core);
		return;
	}
	matched = head && head->exec == exec && head->seq == core->launch_clock;
	replaced = head && !matched && positional && head->seq == core->launch_clock;
	if (replaced) {
		/*
		 * The last iteration ran another kernel at this position: this
		 * one takes its place, and the kernels after it still come
		 * where the window has them.  Waiting for the expected kernel
		 * or resetting would shift or drop a window that is right.
		 */
		window_pop(core);
	} else if (head && !matched) {
		skip = window_find(core, exec);
		if (skip) {
			/* The kernels before it did not run: their protection ends. */
			core->stats.window_skips++;
			while (skip--)
				window_pop(core);
			head = window_slot(core, 0);
			core->launch_clock = head->seq;
			matched = true;
		} else if (core->off_track < RESYNC_EXTRA) {
			/* An extra kernel: it takes no tick, so the window
			 * still expects its head next. */
			core->stats.window_waits++;
			core->off_track++;
			core->launch_clock--;
			core->in_sync = false;
			walk(core, exec, 0, core->launch_clock, walk_begin(core), DUM_NIL, &added);
			core->cur_walk_gen = 0;
			window_extend(core);
			return;
		}
	}
	core->off_track = 0;
	core->in_sync = matched || replaced || !head;
	if (replaced) {
		core->cur_walk_gen = 0;	/* walked below, from its own start blocks */
	} else if (matched) {
		/* As predicted: its blocks stay protected for this tick. */
		core->cur_walk_gen = head->complete && !head->horizon ? head->walk_gen : 0;
		window_pop(core);
		rewalk_next_if_startless(core);
	} else {
		if (head) {
			core->stats.window_resets++;
			window_reset(core);
		}
		core->cur_walk_gen = 0;
	}
	if (!core->cur_walk_gen) {
		u32 gen = walk_begin(core);

		if (walk(core, exec, 0, core->launch_clock, gen, DUM_NIL, &added))
			core->cur_walk_gen = gen;
	}
	window_extend(core);
}

static void learn(struct deepum_core *core, u32 exec, u64 blk)
{
	struct dum_corr *c = &core->corr;
	u32 level, n, way;

	if (core->hist_exec != exec) {
		core->hist_exec = exec;
		core->hist_len = 0;
	}
	if (core->hist_len && core->hist[0] == blk)
		return;	/* the same block again: no self-successor */
	if (!core->hist_len)
		dum_exec_add_start(c, exec, blk);

	switch (dum_corr_get(c, exec, blk, &way)) {
	case DUM_CORR_REPLACED:
		core->stats.corr_replacements++;
		fallthrough;
	case DUM_CORR_INSERTED:
		core->stats.corr_inserts++;
		break;
	case DUM_CORR_FOUND:
		break;
	}

	n = core->hist_len < c->levels ? core->hist_len : c->levels;
	for (level = 0; level < n; level++) {
		u32 prev = core->hist_way[level];

		/* The way may have been given to another entry since. */
		if (c->ways[prev].blk == core->hist[level] && c->ways[prev].exec == exec &&
		    dum_corr_live(c, prev) && core->hist[level] != blk)
			dum_mru_insert(dum_corr_successors(c, prev, level),
				       dum_corr_successor_ways(c, prev, level), c->succs, blk, way);
	}
	for (level = n < c->levels ? n : c->levels - 1; level > 0; level--) {
		core->hist[level] = core->hist[level - 1];
		core->hist_way[level] = core->hist_way[level - 1];
	}
	core->hist[0] = blk;
	core->hist_way[0] = way;
	if (core->hist_len < c->levels)
		core->hist_len++;
}

static void on_fault(struct deepum_core *core, const struct deepum_record *rec)
{
	u64 blk = rec->addr >> core->cfg.block_shift;
	u32 exec = rec->exec_id == DEEPUM_EXEC_NONE ? core->cur_exec : exec_slot(core, rec->exec_id);
	u32 slot = dum_residency_get(&core->res, blk);
	bool missed = true;
	u64 added = 0;
	u32 gen;

	core->stats.faults++;
	if (slot == DUM_NIL) {
		core->stats.blocks_untracked++;
	} else {
		struct dum_block *b = dum_block_at(&core->res, slot);

		if (dum_block_resident(b)) {
			/* Predicted, but its copy had not landed yet. */
			core->stats.faults_resident++;
			missed = false;
		} else if (core->cfg.capacity_blocks && !free_blocks(core)) {
			/* The driver evicts on the fault path, oldest first. */
			evict(core, core->res.lrm_head, DEEPUM_CMD_F_DEMAND);
		}
		dum_residency_touch(&core->res, slot);
		b->flags &= ~DUM_BLOCK_DEAD;
		protect(b, core->launch_clock);
		note_use(core, b, core->iter_pos);
	}
	if (exec == DUM_NIL) {
		core->stats.exec_ignored++;
		return;
	}
	learn(core, exec, blk);
	if (!missed)
		return;
	/*
	 * A miss: the blocks after it in this kernel may not be predicted yet.
	 * Within the running kernel, continue its walk's generation, so that
	 * only what that walk did not reach is expanded.
	 */
	gen = exec == core->cur_exec && core->cur_walk_gen ? core->cur_walk_gen : walk_begin(core);
	if (!walk(core, exec, blk, core->launch_clock, gen, DUM_NIL, &added) && gen == core->cur_walk_gen)
		core->cur_walk_gen = 0;
	window_extend(core);
}

static void invalidate(struct deepum_core *core, u32 slot)
{
	struct dum_block *b = dum_block_at(&core->res, slot);

	b->flags |= DUM_BLOCK_DEAD;
	/* Without room now, pre-eviction discards it later. */
	if (dum_block_resident(b) && out_room(core, 1))
		evict(core, slot, 0);
}

static void on_free(struct deepum_core *core, const struct deepum_record *rec)
{
	u32 shift = core->cfg.block_shift;
	u64 first = (rec->addr + block_bytes(core) - 1) >> shift;
	u64 end = (rec->addr + rec->len) >> shift;
	u64 blk;
	u32 slot;

	/* Only whole blocks are dead; only tracked blocks can be in any table. */
	if (end <= first)
		return;
	core->stats.invalidated_bytes += (end - first) << shift;
	if (end - first <= core->res.used) {
		for (blk = first; blk < end; blk++) {
			slot = dum_residency_find(&core->res, blk);
			if (slot != DUM_NIL)
				invalidate(core, slot);
		}
		return;
	}
	/* A range larger than what is tracked: visit the tracked blocks instead. */
	for (slot = 0; slot < core->res.used; slot++) {
		blk = dum_block_at(&core->res, slot)->blk;
		if (blk >= first && blk < end)
			invalidate(core, slot);
	}
}

/*
 * The capacity holds under two thirds of the blocks the program has used:
 * most blocks leave and come back every iteration, so a pair the core forgot
 * faults again, and is learned again, within an iteration or two.  With room
 * to spare the blocks it predicted right stay resident and never fault, and
 * come back to its tables one regretted eviction at a time (GPT-2 at 75% on
 * the H200: 11-21% slower per iteration with forgetting, eighteenth session).
 */
static bool memory_tight(const struct deepum_core *core)
{
	return core->cfg.capacity_blocks &&
	       core->cfg.capacity_blocks * TIGHT_DEN < (u64)core->res.used * TIGHT_NUM;
}

static void on_iteration(struct deepum_core *core, const struct deepum_record *rec)
{
	if (core->iter_pos) {
		/*
		 * Many new exec IDs at the program's start: its memory was
		 * still moving (an allocator filling its pools), so the blocks
		 * learned belong to a layout that is gone.  Kept, they would be
		 * walked, and so kept alive, in every iteration to come.  Later
		 * (a program whose IDs never settle) forgetting would only lose
		 * what is still right.
		 */
		if ((u64)core->iter_new_execs * DEEPUM_UNSETTLED_SHARE <= core->iter_pos)
			core->iter_settled = true;
		else if (core->cfg.flags & DEEPUM_CFG_F_FORGET_UNSETTLED && !core->iter_settled &&
			 core->iter_number < FORGET_ITERATIONS && memory_tight(core))
			dum_corr_forget(&core->corr);
		core->iter_new_execs = 0;
		core->iter_len = core->iter_pos;
		core->iter_pos = 0;
		core->iter_number++;
	}
	core->iter_flushed = rec->flags & DEEPUM_ITER_F_FLUSHED;
	if (!(rec->flags & DEEPUM_ITER_F_FLUSHED))
		return;
	/* Everything went back to the host: nothing is resident, nothing predicted
	 * survives, and no prefetch should ever cross this point again. */
	dum_residency_clear(&core->res);
	window_reset(core);
	core->cur_walk_gen = 0;
	if (core->prev_exec != DUM_NIL)
		dum_exec_add_successor(&core->corr, core->prev_exec, DUM_EXEC_BOUNDARY, core->prev_context);
	core->prev_exec = DUM_NIL;
	core->prev_context = DUM_EXEC_NO_CONTEXT;
	core->hist_len = 0;
}

int deepum_record_check(u32 block_shift, const struct deepum_record *rec)
{
	bool ok;

	switch (rec->type) {
	case DEEPUM_REC_LAUNCH:
		ok = !rec->flags;
		break;
	case DEEPUM_REC_FAULT:
		ok = !(rec->flags & ~DEEPUM_FAULT_F_ALL) && rec->aux <= DEEPUM_ACCESS_PREFETCH &&
		     rec->addr >> block_shift;
		break;
	case DEEPUM_REC_ALLOC:
	case DEEPUM_REC_FREE:
		ok = !rec->flags && rec->addr + rec->len >= rec->addr;
		break;
	case DEEPUM_REC_ITERATION:
		ok = !(rec->flags & ~DEEPUM_ITER_F_ALL);
		break;
	default:
		ok = false;
	}
	return ok ? 0 : -EINVAL;
}

int deepum_core_process(struct deepum_core *core, const struct deepum_record *rec,
			struct deepum_cmd *cmds, u32 max_cmds, u32 *ncmds)
{
	*ncmds = 0;
	if (deepum_record_check(core->cfg.block_shift, rec))
		return -EINVAL;

	core->out = cmds;
	core->out_len = 0;
	core->out_max = max_cmds;
	core->walk_left = core->cfg.walk_max;
	core->stats.records++;

	switch (rec->type) {
	case DEEPUM_REC_LAUNCH:
		on_launch(core, rec->exec_id);
		break;
	case DEEPUM_REC_FAULT:
		on_fault(core, rec);
		break;
	case DEEPUM_REC_FREE:
		on_free(core, rec);
		break;
	case DEEPUM_REC_ITERATION:
		on_iteration(core, rec);
		break;
	case DEEPUM_REC_ALLOC:
		/* A new range holds no data yet: its first touch will fault. */
		break;
	}
	preevict(core);
	finish_output(core);

	*ncmds = core->out_len;
	core->out = NULL;
	return 0;
}

/* ---- introspection --------------------------------------------------- */

bool deepum_core_is_resident(const struct deepum_core *core, u64 addr)
{
	u32 slot = dum_residency_find(&core->res, addr >> core->cfg.block_shift);

	return slot != DUM_NIL && dum_block_resident(dum_block_at(&core->res, slot));
}

u32 deepum_core_exec_successors(const struct deepum_core *core, u32 exec_id, u32 *ret, u32 n)
{
	u32 exec = exec_slot(core, exec_id);
	const u64 *succ;
	u32 i, j, found = 0;

	if (exec == DUM_NIL)
		return 0;
	succ = dum_exec_successors(&core->corr, exec);
	/* Distinct successors, MRU first, whatever their contexts. */
	for (i = 0; i < core->corr.exec_nsuccs && succ[i] && found < n; i++) {
		u32 next = dum_exec_entry_next(succ[i]);

		for (j = 0; j < found && ret[j] != next; j++)
			;
		if (j == found)
			ret[found++] = next;
	}
	return found;
}

u32 deepum_core_exec_starts(const struct deepum_core *core, u32 exec_id, u64 *ret, u32 n)
{
	u32 exec = exec_slot(core, exec_id);
	const u64 *starts;
	u32 i;

	if (exec == DUM_NIL)
		return 0;
	starts = dum_exec_starts(&core->corr, exec);
	for (i = 0; starts && i < n && i < core->corr.exec_nstarts && starts[i]; i++)
		ret[i] = starts[i] << core->cfg.block_shift;
	return i;
}

int deepum_core_block_successors(const struct deepum_core *core, u32 exec_id, u64 addr,
				 u32 level, u64 *ret, u32 n)
{
	u32 exec = exec_slot(core, exec_id);
	const u64 *succ;
	u32 way, i;

	if (exec == DUM_NIL || level >= core->corr.levels)
		return -1;
	way = dum_corr_find(&core->corr, exec, addr >> core->cfg.block_shift);
	if (way == DUM_NIL)
		return -1;
	succ = dum_corr_successors(&core->corr, way, level);
	for (i = 0; i < n && i < core->corr.succs && succ[i]; i++)
		ret[i] = succ[i] << core->cfg.block_shift;
	return (int)i;
}
