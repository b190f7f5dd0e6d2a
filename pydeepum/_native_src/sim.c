// SPDX-License-Identifier: GPL-2.0 OR MIT
#include <stdlib.h>

#include "sim.h"
#include "../../kmod/core/plan.h"
#include "../../kmod/core/residency.h"
#include "../../userlib/engine_defaults.h"

#define NS_PER_SEC 1000000000ULL
#define NEVER (~0ULL)

/* Per tracked block, beside the residency map's slot. */
struct sim_block {
	__u64 arrival_ns;	/* when its copy lands (resident blocks) */
	__u64 next_use;		/* ORACLE, MIN: record index of its next access */
	__u64 last_use_end_ns;	/* MIN: when the kernel that used it last ends */
	__u64 leaves_ns;	/* evicted: when its write-back starts; on the GPU until then */
	__u32 pending;		/* prefetched and not touched yet: 1 + the iteration that prefetched it */
	__u32 prefetched_in;	/* 1 + the iteration that prefetched it last */
	bool unheard;		/* DEEPUM_USER: faulted in while the engine was in the driver */
};

struct dum_sim {
	__u32 policy;
	struct dum_sim_cost cost;
	__u32 shift;
	__u64 capacity;			/* blocks; 0: unlimited */

	struct dum_residency res;	/* the GPU, LRM order (all but DEEPUM) */
	struct sim_block *blocks;	/* by residency slot */
	struct deepum_core *core;	/* DEEPUM */
	struct deepum_cmd *cmds;	/* one record's */
	__u32 max_cmds;
	struct deepum_cmd *round;	/* a round's, applied together as the engine does */
	struct deepum_cmd *scratch;	/* deepum_plan_order()'s, as long as round */
	__u64 round_len, round_cap;

	/* ORACLE, MIN: resident blocks by next use, a lazy max-heap of (next_use, slot). */
	struct heap_entry { __u64 next_use; __u32 slot; } *heap;
	__u64 heap_len, heap_cap;
	__u64 cursor;			/* next record the oracle may prefetch for */
	__u64 flushed_ns;		/* MIN: the last flush, memory empty from then on */
	__u64 launches;			/* LAUNCH records seen: index into compute_ns */

	__u64 now;			/* the running kernel's clock */
	__u64 compute;			/* ... and its compute time, paid when it ends */
	bool in_kernel;
	__u64 h2d_free, d2h_free;	/* when each link finishes what is queued */
	__u64 stream_free;		/* DEEPUM_USER, _ISSUER: when its stream finishes what is queued */
	__u64 engine_free;		/* DEEPUM_USER: when the engine's thread is back from the driver */
	struct deepum_record *deferred;	/* ... records that happened before that, in order */
	__u64 deferred_len, deferred_cap;
	/* DEEPUM_USER, _ISSUER, _SPLIT: launches reach the core a group at a time */
	__u32 launch_group;		/* launches per position the engine sees (1: each) */
	__u32 group_pos;		/* launches into the iteration */
	struct deepum_record *unseen;	/* launched, the engine has not seen them yet */
	__u32 unseen_len;
	__u32 seen_exec;		/* the last launch it saw: faults are tied to it */

	struct dum_sim_iteration *iv;
	__u32 iv_len, iv_cap;
	bool iv_open;
	__u64 iv_start;
};

static __u64 copy_ns(__u64 bytes, __u64 bytes_per_sec)
{
	return bytes_per_sec ? bytes * NS_PER_SEC / bytes_per_sec : 0;
}

static __u64 max64(__u64 a, __u64 b)
{
	return a > b ? a : b;
}

/* @array (of @size-byte elements, *@cap of them) with room for twice as many;
 * NULL, with @array untouched, if there is no memory. */
static void *grown(void *array, __u64 *cap, size_t size)
{
	__u64 more = *cap ? 2 * *cap : 1024;
	void *bigger = realloc(array, more * size);

	if (bigger)
		*cap = more;
	return bigger;
}

static struct dum_sim_iteration *cur(struct dum_sim *s)
{
	return &s->iv[s->iv_len - 1];
}

/* A prefetch is useful to the iteration that issued it, whenever it is used. */
static void prefetched(struct dum_sim *s, struct sim_block *b)
{
	if (b->prefetched_in == s->iv_len)
		cur(s)->refetches++;
	b->pending = s->iv_len;
	b->prefetched_in = s->iv_len;
}

static void touched(struct dum_sim *s, struct sim_block *b)
{
	if (b->pending)
		s->iv[b->pending - 1].useful++;
	b->pending = 0;
}

/* The kernel uses @b: it waits if the block's copy is still on its way. */
static void use_block(struct dum_sim *s, struct sim_block *b)
{
	touched(s, b);
	if (b->arrival_ns > s->now) {
		cur(s)->late++;
		cur(s)->late_stall_ns += b->arrival_ns - s->now;
		s->now = b->arrival_ns;
	}
}

/* The user-mode engine's one stream: every command waits for the ones before it. */
static bool one_stream(const struct dum_sim *s)
{
	return s->policy == DUM_SIM_DEEPUM_USER || s->policy == DUM_SIM_DEEPUM_ISSUER;
}

/* An engine in libdeepum: it evicts through the user API, which costs per range. */
static bool user_api_policy(__u32 policy)
{
	return policy == DUM_SIM_DEEPUM_USER || policy == DUM_SIM_DEEPUM_ISSUER || policy == DUM_SIM_DEEPUM_SPLIT;
}

static bool user_api(const struct dum_sim *s)
{
	return user_api_policy(s->policy);
}

/* Evicted under an emulated capacity, its write-back not started: the GPU
 * still has it, and a use costs nothing (and goes unheard). */
static bool lingering(struct dum_sim *s, const struct sim_block *b)
{
	if (b->leaves_ns <= s->now)
		return false;
	cur(s)->lingering++;
	return true;
}

int dum_sim_create(__u32 policy, const struct deepum_config *cfg, const struct dum_sim_cost *cost,
		   __u64 capacity_blocks, __u32 launch_group, struct dum_sim **ret)
{
	struct deepum_config checked = *cfg;
	struct dum_sim *s;
	int err;

	*ret = NULL;
	if (policy > DUM_SIM_POLICY_MAX || !cost->fault_bytes || cost->tree_threshold_pct > 100 ||
	    cost->both_ways_overlap_pct > 100 || !cost->prefetch_bytes_per_sec || !cost->h2d_bytes_per_sec ||
	    !cost->user_evict_bytes_per_sec || !launch_group || launch_group > DUM_SIM_LAUNCH_GROUP_MAX)
		return -EINVAL;
	checked.capacity_blocks = capacity_blocks;
	/* libdeepum's engine keeps more room than the core's default under a budget */
	if (user_api_policy(policy) && capacity_blocks && !checked.watermark_blocks)
		checked.watermark_blocks = deepum_engine_watermark(capacity_blocks);
	err = deepum_core_config_check(&checked);
	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->policy = policy;
	s->cost = *cost;
	s->shift = checked.block_shift;
	s->capacity = capacity_blocks;
	s->launch_group = user_api(s) ? launch_group : 1;
	s->seen_exec = DEEPUM_EXEC_NONE;
	s->iv_cap = 16;
	s->iv = calloc(s->iv_cap, sizeof(*s->iv));
	s->blocks = calloc(checked.block_max, sizeof(*s->blocks));
	err = dum_residency_init(&s->res, checked.block_max);
	if (err || !s->iv || !s->blocks)
		goto out_fail;
	if (policy == DUM_SIM_DEEPUM || policy == DUM_SIM_DEEPUM_USER || policy == DUM_SIM_DEEPUM_ISSUER ||
	    policy == DUM_SIM_DEEPUM_SPLIT) {
		err = deepum_core_create(&checked, &s->core);
		if (err)
			goto out_fail;
		s->max_cmds = deepum_core_max_cmds(s->core);
		s->cmds = calloc(s->max_cmds, sizeof(*s->cmds));
		s->unseen = calloc(s->launch_group, sizeof(*s->unseen));
		if (!s->cmds || !s->unseen)
			goto out_fail;
	}
	*ret = s;
	return 0;

out_fail:
	dum_sim_destroy(s);
	return err ? err : -ENOMEM;
}

void dum_sim_destroy(struct dum_sim *s)
{
	if (!s)
		return;
	deepum_core_destroy(s->core);
	dum_residency_destroy(&s->res);
	free(s->cmds);
	free(s->round);
	free(s->scratch);
	free(s->blocks);
	free(s->heap);
	free(s->deferred);
	free(s->unseen);
	free(s->iv);
	free(s);
}

/* ---- iterations and kernels ----------------------------------------- */

static void end_kernel(struct dum_sim *s)
{
	if (!s->in_kernel)
		return;
	s->now += s->compute;
	if (s->iv_open)
		cur(s)->compute_ns += s->compute;
	s->in_kernel = false;
}

static int open_iteration(struct dum_sim *s, __u64 index)
{
	if (s->iv_len == s->iv_cap) {
		struct dum_sim_iteration *iv = realloc(s->iv, 2 * s->iv_cap * sizeof(*iv));

		if (!iv)
			return -ENOMEM;
		s->iv = iv;
		s->iv_cap *= 2;
	}
	memset(&s->iv[s->iv_len], 0, sizeof(s->iv[0]));
	s->iv[s->iv_len++].iteration = index;
	s->iv_open = true;
	s->iv_start = NEVER;
	return 0;
}

static void close_iteration(struct dum_sim *s)
{
	end_kernel(s);
	if (s->iv_open && s->iv_start != NEVER)
		cur(s)->time_ns = s->now - s->iv_start;
	s->iv_open = false;
}

/* Everything went back to the host (access-set boundary); it takes no kernel time. */
static void flush(struct dum_sim *s)
{
	__u32 slot;

	dum_residency_clear(&s->res);
	for (slot = 0; slot < s->res.used; slot++)
		s->blocks[slot].leaves_ns = 0;
	s->heap_len = 0;
	s->h2d_free = s->d2h_free = s->stream_free = s->engine_free = s->flushed_ns = s->now;
}

static void start_kernel(struct dum_sim *s, __u64 compute_ns)
{
	end_kernel(s);
	if (s->iv_open && s->iv_start == NEVER)
		s->iv_start = s->now;
	s->compute = compute_ns;
	s->in_kernel = true;
}

/* ---- demand faults (all policies) -------------------------------------- */

/* Time to fault in the @bytes a kernel touched in one block. */
static __u64 fault_ns(const struct dum_sim *s, __u64 bytes)
{
	__u64 pages = (bytes + s->cost.fault_bytes - 1) / s->cost.fault_bytes;
	__u64 rounds = pages;

	/* With the tree prefetcher, faults stop once the threshold is passed. */
	if (s->policy != DUM_SIM_DEMAND)
		rounds = (pages * s->cost.tree_threshold_pct + 99) / 100;
	return rounds * s->cost.fault_ns;
}

/* A kernel waits for a fault of @bytes: fault rounds, then the copy, which
 * takes the host-to-device link ahead of any queued prefetch. */
static void charge_fault(struct dum_sim *s, __u64 bytes)
{
	__u64 copy = copy_ns(bytes, s->cost.h2d_bytes_per_sec);
	__u64 stall = fault_ns(s, bytes) + copy;

	s->now += stall;
	s->h2d_free = max64(s->h2d_free, s->now - copy) + copy;
	cur(s)->fault_stall_ns += stall;
	cur(s)->faults++;
	cur(s)->h2d_bytes += bytes;
}

/* The fault path evicts before it can migrate: the kernel waits for it. */
static void charge_fault_eviction(struct dum_sim *s)
{
	__u64 stall = copy_ns(1ULL << s->shift, s->cost.d2h_bytes_per_sec);

	s->now += stall;
	cur(s)->fault_stall_ns += stall;
	cur(s)->fault_evictions++;
	cur(s)->evictions++;
	cur(s)->d2h_bytes += 1ULL << s->shift;
}

/* ---- DEMAND and UVM ---------------------------------------------------- */

/*
 * UVM_USER: the engine hears the fault and writes its least recently
 * migrated block back on its stream, one range per block, as
 * DEEPUM_MODE=demand does; the victim stays on the GPU (and is used for
 * free) until its write-back starts.
 */
static void evict_behind(struct dum_sim *s, __u32 victim)
{
	__u64 start = max64(s->stream_free, s->now);

	dum_residency_remove(&s->res, victim);
	s->blocks[victim].leaves_ns = start;
	s->stream_free = start + s->cost.evict_range_ns + copy_ns(1ULL << s->shift, s->cost.user_evict_bytes_per_sec);
	cur(s)->evictions++;
	cur(s)->fault_evictions++;
	cur(s)->d2h_bytes += 1ULL << s->shift;
}

static int access_demand(struct dum_sim *s, __u64 blk, __u64 bytes)
{
	__u32 slot = dum_residency_get(&s->res, blk);

	if (slot == DUM_NIL)
		return -ENOMEM;
	if (dum_block_resident(dum_block_at(&s->res, slot)) || lingering(s, &s->blocks[slot]))
		return 0;
	if (s->capacity && s->res.resident >= s->capacity) {
		if (s->policy == DUM_SIM_UVM_USER) {
			evict_behind(s, s->res.lrm_head);
		} else {
			dum_residency_remove(&s->res, s->res.lrm_head);
			charge_fault_eviction(s);
		}
	}
	charge_fault(s, bytes);
	dum_residency_touch(&s->res, slot);
	return 0;
}

/* ---- DEEPUM ------------------------------------------------------------ */

/*
 * DEEPUM_SPLIT: a copy of @cost ns queued at @start while the other
 * direction is busy until *@other_free shares the driver with it: of the
 * time they overlap, the part that does not run alongside delays both (the
 * other's queue by as much, for what is issued after).  Its extra time.
 */
static __u64 shared_driver_ns(const struct dum_sim *s, __u64 start, __u64 cost, __u64 *other_free)
{
	__u64 overlap, extra;

	if (s->policy != DUM_SIM_DEEPUM_SPLIT || *other_free <= start)
		return 0;
	overlap = *other_free - start < cost ? *other_free - start : cost;
	extra = overlap * (100 - s->cost.both_ways_overlap_pct) / 100;
	*other_free += extra;
	return extra;
}

/* Blocks of one prefetch range land together when the range's copy ends. */
static void prefetch_range(struct dum_sim *s, const struct deepum_cmd *first, __u32 n, __u64 not_before)
{
	__u64 bytes = (__u64)n << s->shift;
	__u64 start = max64(max64(s->h2d_free, s->now), max64(not_before, s->stream_free));
	__u64 cost = s->cost.prefetch_range_ns + copy_ns(bytes, s->cost.prefetch_bytes_per_sec);
	__u64 done = start + cost + shared_driver_ns(s, start, cost, &s->d2h_free);
	__u32 i;

	s->h2d_free = done;
	if (one_stream(s))
		s->stream_free = done;
	cur(s)->h2d_bytes += bytes;
	cur(s)->prefetches += n;
	for (i = 0; i < n; i++) {
		__u32 slot = dum_residency_get(&s->res, first[i].addr >> s->shift);

		if (slot != DUM_NIL && !s->blocks[slot].unheard) {
			s->blocks[slot].arrival_ns = done;
			prefetched(s, &s->blocks[slot]);
		}
	}
}

/*
 * Write back (or discard) a run of @n contiguous blocks, after what the
 * stream and the device-to-host side already hold; when it is done.  The
 * user API charges per range here too (evict_range_ns); evictions a fault
 * calls for under DEEPUM are the driver's own, on the fault path.
 */
static __u64 evict_range(struct dum_sim *s, const struct deepum_cmd *cmds, __u32 n)
{
	__u64 start = max64(max64(s->d2h_free, s->stream_free), s->now), cost = 0;
	bool ranged = false;
	__u32 i;

	for (i = 0; i < n; i++) {
		__u32 slot = dum_residency_find(&s->res, cmds[i].addr >> s->shift);

		if (slot != DUM_NIL)
			s->blocks[slot].pending = 0;
		if (cmds[i].flags & DEEPUM_CMD_F_DEMAND && s->policy == DUM_SIM_DEEPUM) {
			charge_fault_eviction(s);
			continue;
		}
		if (cmds[i].flags & DEEPUM_CMD_F_DEMAND)
			cur(s)->fault_evictions++;
		if (cmds[i].op == DEEPUM_CMD_DISCARD) {
			cost += s->cost.discard_ns;
			continue;
		}
		if (slot != DUM_NIL && user_api(s))
			s->blocks[slot].leaves_ns = start + cost;
		cost += copy_ns(1ULL << s->shift,
				user_api(s) ? s->cost.user_evict_bytes_per_sec : s->cost.evict_bytes_per_sec);
		ranged = true;
		cur(s)->evictions++;
		cur(s)->d2h_bytes += 1ULL << s->shift;
	}
	if (!cost)
		return 0;
	/* The range cost is the user API's (measured with cudaMemPrefetchAsync
	 * to the host); the module's backend evicts inside the driver. */
	if (ranged && user_api(s))
		cost += s->cost.evict_range_ns;
	/* (the module's fault-path evictions above may have moved the clock past start) */
	start = max64(start, s->now);
	s->d2h_free = start + cost + shared_driver_ns(s, start, cost, &s->h2d_free);
	if (one_stream(s))
		s->stream_free = s->d2h_free;
	return s->d2h_free;
}

/*
 * As a backend applies a round's commands (kmod/core/plan.h): evictions and
 * discards first (they make the room), sorted and coalesced into ranges,
 * then the prefetches kernel by kernel in the order the kernels are
 * expected, each kernel's sorted by address and coalesced into contiguous
 * ranges: the driver charges per range, so long ranges are what makes
 * prefetching reach the link's bandwidth, and sorting across kernels would
 * delay the next one's.
 */
static void apply_round(struct dum_sim *s)
{
	struct deepum_cmd *cmds = s->round;
	__u32 n = (__u32)s->round_len, i, first, run;
	__u64 evicted_by = 0;

	s->round_len = 0;
	if (!n)
		return;
	first = deepum_plan_order(cmds, n, s->scratch);
	deepum_plan_sort(cmds, first);
	for (i = 0; i < first; i += run) {
		run = deepum_plan_run(&cmds[i], first - i, s->shift);
		evicted_by = max64(evicted_by, evict_range(s, &cmds[i], run));
	}
	for (i = first; i < n; i += run) {
		run = deepum_plan_run(&cmds[i], n - i, s->shift);
		prefetch_range(s, &cmds[i], run, evicted_by);
	}
	/* The engine's batch calls return when their copies are done (on the
	 * H200 an eviction batch kept it in the driver up to 215 ms). */
	if (s->policy == DUM_SIM_DEEPUM_USER)
		s->engine_free = max64(s->engine_free, s->stream_free);
}

/* Room in the round (and its scratch) for @n more commands. */
static int round_room(struct dum_sim *s, __u32 n)
{
	while (s->round_len + n > s->round_cap) {
		__u64 cap = s->round_cap;
		struct deepum_cmd *scratch = grown(s->scratch, &cap, sizeof(*scratch));
		struct deepum_cmd *round;

		if (!scratch)
			return -ENOMEM;
		s->scratch = scratch;
		round = grown(s->round, &s->round_cap, sizeof(*round));
		if (!round)
			return -ENOMEM;
		s->round = round;
	}
	return 0;
}

/* The core takes @rec; its commands join the round. */
static int feed_one(struct dum_sim *s, const struct deepum_record *rec)
{
	__u32 n;
	int err = deepum_core_process(s->core, rec, s->cmds, s->max_cmds, &n);

	if (!err)
		err = round_room(s, n);
	if (!err && n) {	/* (a round not grown yet is NULL, even for none) */
		memcpy(&s->round[s->round_len], s->cmds, n * sizeof(*s->cmds));
		s->round_len += n;
	}
	if (!err && rec->type == DEEPUM_REC_FAULT) {
		__u32 slot = dum_residency_find(&s->res, rec->addr >> s->shift);

		if (slot != DUM_NIL)
			s->blocks[slot].unheard = false;
	}
	return err;
}

/*
 * The core hears of @rec.  Under DEEPUM_USER not while the engine's thread
 * is in the driver: what happens meanwhile waits, and the engine takes it
 * all once it is back (DEEPUM_ISSUER's thread never leaves).
 */
static int feed_core(struct dum_sim *s, const struct deepum_record *rec)
{
	__u64 i;
	int err = 0;

	if (s->policy == DUM_SIM_DEEPUM_USER && s->now < s->engine_free) {
		if (s->deferred_len == s->deferred_cap) {
			struct deepum_record *d = grown(s->deferred, &s->deferred_cap, sizeof(*d));

			if (!d)
				return -ENOMEM;
			s->deferred = d;
		}
		s->deferred[s->deferred_len++] = *rec;
		return 0;
	}
	for (i = 0; i < s->deferred_len && !err; i++)
		err = feed_one(s, &s->deferred[i]);
	s->deferred_len = 0;
	if (!err)
		err = feed_one(s, rec);
	apply_round(s);
	return err;
}

/* The GPU reached the position written before the launches held back: the
 * engine sees them all now. */
static int see_launches(struct dum_sim *s)
{
	__u32 i;
	int err = 0;

	for (i = 0; i < s->unseen_len && !err; i++)
		err = feed_core(s, &s->unseen[i]);
	if (s->unseen_len)
		s->seen_exec = s->unseen[s->unseen_len - 1].exec_id;
	s->unseen_len = 0;
	return err;
}

/* A launch starts; the engine sees it with the first of its group. */
static int hear_launch(struct dum_sim *s, const struct deepum_record *rec)
{
	if (s->launch_group == 1)
		return feed_core(s, rec);
	s->unseen[s->unseen_len++] = *rec;
	return s->group_pos++ % s->launch_group ? 0 : see_launches(s);
}

/* A fault, tied to the last launch the engine has seen. */
static int hear_fault(struct dum_sim *s, const struct deepum_record *rec)
{
	struct deepum_record tied = *rec;

	if (s->launch_group > 1)
		tied.exec_id = s->seen_exec;
	return feed_core(s, &tied);
}

static int access_deepum(struct dum_sim *s, const struct deepum_record *rec, __u64 bytes)
{
	__u64 blk = rec->addr >> s->shift;
	__u32 slot = dum_residency_get(&s->res, blk);
	struct sim_block *b;

	if (slot == DUM_NIL)
		return -ENOMEM;
	b = &s->blocks[slot];
	if (deepum_core_is_resident(s->core, rec->addr)) {
		/* Late, the GPU faults and waits for the copy in flight: the core hears of it. */
		bool late = b->arrival_ns > s->now;

		use_block(s, b);
		return late ? hear_fault(s, rec) : 0;
	}
	if (b->unheard) {
		use_block(s, b);	/* faulted in already; the engine has yet to hear */
		return 0;
	}
	if (lingering(s, b))
		return 0;
	/* The core hears of the fault first: it may evict (DEMAND) and walk on. */
	charge_fault(s, bytes);
	b->arrival_ns = s->now;
	b->unheard = s->policy == DUM_SIM_DEEPUM_USER;
	return hear_fault(s, rec);
}

/* ---- ORACLE ------------------------------------------------------------ */

static int heap_push(struct dum_sim *s, __u64 next_use, __u32 slot)
{
	__u64 i;

	if (s->heap_len == s->heap_cap) {
		struct heap_entry *h = grown(s->heap, &s->heap_cap, sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
	}
	for (i = s->heap_len++; i && s->heap[(i - 1) / 2].next_use < next_use; i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i].next_use = next_use;
	s->heap[i].slot = slot;
	return 0;
}

static void heap_pop(struct dum_sim *s)
{
	struct heap_entry last = s->heap[--s->heap_len];
	__u64 i = 0, child;

	while ((child = 2 * i + 1) < s->heap_len) {
		if (child + 1 < s->heap_len && s->heap[child + 1].next_use > s->heap[child].next_use)
			child++;
		if (s->heap[child].next_use <= last.next_use)
			break;
		s->heap[i] = s->heap[child];
		i = child;
	}
	if (s->heap_len)
		s->heap[i] = last;
}

/* Write @victim back, starting no sooner than @not_before; its room is free
 * when the write-back is done (returned). */
static __u64 oracle_evict(struct dum_sim *s, __u32 victim, __u64 not_before)
{
	dum_residency_remove(&s->res, victim);
	s->d2h_free = max64(s->d2h_free, not_before) + copy_ns(1ULL << s->shift, s->cost.evict_bytes_per_sec);
	cur(s)->evictions++;
	cur(s)->d2h_bytes += 1ULL << s->shift;
	return s->d2h_free;
}

/* Copy block @slot in over the link, starting no sooner than @room. */
static void oracle_land(struct dum_sim *s, __u32 slot, __u64 room)
{
	dum_residency_touch(&s->res, slot);
	s->h2d_free = max64(s->h2d_free, room) + copy_ns(1ULL << s->shift, s->cost.h2d_bytes_per_sec);
	s->blocks[slot].arrival_ns = s->h2d_free;
	prefetched(s, &s->blocks[slot]);
	cur(s)->h2d_bytes += 1ULL << s->shift;
	cur(s)->prefetches++;
}

/* The resident block used farthest in the future (entries go stale when a
 * block is used again or leaves; those are dropped here). */
static __u32 oracle_victim(struct dum_sim *s)
{
	while (s->heap_len) {
		struct heap_entry top = s->heap[0];
		const struct dum_block *b = dum_block_at(&s->res, top.slot);

		if (dum_block_resident(b) && s->blocks[top.slot].next_use == top.next_use)
			return top.slot;
		heap_pop(s);
	}
	return DUM_NIL;
}

/*
 * Bring the block record @idx needs onto the GPU as early as the link and
 * Belady's rule allow: a victim must be used later than this block.  Returns
 * 1 if it could not (memory holds only blocks needed sooner), 0, or -errno.
 * A block's heap key is its next use: @idx for a block brought for it; a
 * resident one keeps its key, which is its first use from now on.
 */
static int oracle_fetch(struct dum_sim *s, const struct deepum_record *rec, __u64 idx, bool now_needed)
{
	__u32 slot = dum_residency_get(&s->res, rec->addr >> s->shift);
	__u64 room = s->now;		/* when the block has somewhere to land */

	if (slot == DUM_NIL)
		return -ENOMEM;
	if (dum_block_resident(dum_block_at(&s->res, slot)))
		return 0;
	if (s->capacity && s->res.resident >= s->capacity) {
		__u32 victim = oracle_victim(s);

		if (victim != DUM_NIL && (now_needed || s->blocks[victim].next_use > idx))
			heap_pop(s);
		else if (now_needed)
			victim = s->res.lrm_head;	/* no use is known for any resident block */
		else
			return 1;
		room = oracle_evict(s, victim, s->now);
	}
	oracle_land(s, slot, room);
	s->blocks[slot].next_use = idx;
	return heap_push(s, idx, slot);
}

static int access_oracle(struct dum_sim *s, const struct deepum_record *recs, const __u64 *next_use,
			 __u64 i, __u64 n)
{
	__u64 blk = recs[i].addr >> s->shift;
	__u32 slot = dum_residency_find(&s->res, blk);
	int err;

	/* The block needed now first: fetched after blocks needed later, it
	 * could only evict one of those, which must then come back. */
	if (slot == DUM_NIL || !dum_block_resident(dum_block_at(&s->res, slot))) {
		err = oracle_fetch(s, &recs[i], i, true);
		if (err < 0)
			return err;
		slot = dum_residency_find(&s->res, blk);
	}
	/* Then prefetch ahead, in order of need, until memory holds only sooner needs. */
	if (s->cursor <= i)
		s->cursor = i + 1;
	while (s->cursor < n) {
		const struct deepum_record *r = &recs[s->cursor];

		if (r->type == DEEPUM_REC_ITERATION && r->flags & DEEPUM_ITER_F_FLUSHED)
			break;
		if (r->type == DEEPUM_REC_FAULT) {
			err = oracle_fetch(s, r, s->cursor, false);
			if (err < 0)
				return err;
			if (err)
				break;
		}
		s->cursor++;
	}
	s->blocks[slot].next_use = next_use[i];
	use_block(s, &s->blocks[slot]);
	return heap_push(s, next_use[i], slot);
}

/*
 * ---- MIN -----------------------------------------------------------------
 * Belady's MIN moves the fewest blocks any policy can (a miss evicts the
 * resident block used farthest ahead): its bytes make the ideal bound.  Each
 * fetch starts once there is room and the link is free, in order of need:
 * room is there from the start (or the last flush) while memory is not
 * full, else once the victim's last kernel is over and its write-back done.
 * The times this gives are no bound (MIN's victims are often the blocks just
 * used, so fetches cannot start early): the caller reports only bytes.
 */
static int access_min(struct dum_sim *s, const struct deepum_record *rec, __u64 next_use)
{
	__u32 slot = dum_residency_get(&s->res, rec->addr >> s->shift);
	struct sim_block *b;

	if (slot == DUM_NIL)
		return -ENOMEM;
	b = &s->blocks[slot];
	if (!dum_block_resident(dum_block_at(&s->res, slot))) {
		__u64 room = s->flushed_ns;

		if (s->capacity && s->res.resident >= s->capacity) {
			__u32 victim = oracle_victim(s);

			if (victim != DUM_NIL)
				heap_pop(s);
			else
				victim = s->res.lrm_head;	/* no use is known for any resident block */
			room = oracle_evict(s, victim, s->blocks[victim].last_use_end_ns);
		}
		oracle_land(s, slot, room);
	}
	use_block(s, b);
	/* Its kernel ends no sooner than this (later waits would delay it). */
	b->last_use_end_ns = s->now + s->compute;
	b->next_use = next_use;
	return heap_push(s, next_use, slot);
}

/* ---- the record loop ------------------------------------------------- */

static int sim_record(struct dum_sim *s, const struct deepum_record *recs, const __u64 *compute,
		      const __u64 *next_use, __u64 i, __u64 n)
{
	const struct deepum_record *rec = &recs[i];
	__u64 bytes;
	int err = 0;

	if (rec->type == DEEPUM_REC_ITERATION) {
		close_iteration(s);
		if (rec->flags & DEEPUM_ITER_F_FLUSHED)
			flush(s);
		/* The mark writes a position too, and positions count from it. */
		s->group_pos = 0;
		if (s->core)
			err = see_launches(s);
		if (!err && s->core)
			err = feed_core(s, rec);
		if (!err && !(rec->flags & DEEPUM_ITER_F_END))
			err = open_iteration(s, rec->aux);
		return err;
	}
	if (rec->type != DEEPUM_REC_LAUNCH && rec->type != DEEPUM_REC_FAULT)
		return s->core ? feed_core(s, rec) : 0;
	/* Kernels before any ITERATION record form an iteration of their own. */
	if (!s->iv_open) {
		err = open_iteration(s, s->iv_len ? cur(s)->iteration + 1 : 0);
		if (err)
			return err;
	}
	switch (rec->type) {
	case DEEPUM_REC_LAUNCH:
		start_kernel(s, compute[s->launches++]);
		return s->core ? hear_launch(s, rec) : 0;
	case DEEPUM_REC_FAULT:
		bytes = rec->len ? rec->len : 1ULL << s->shift;
		cur(s)->accesses++;
		switch (s->policy) {
		case DUM_SIM_DEEPUM:
		case DUM_SIM_DEEPUM_USER:
		case DUM_SIM_DEEPUM_ISSUER:
		case DUM_SIM_DEEPUM_SPLIT:
			return access_deepum(s, rec, bytes);
		case DUM_SIM_ORACLE:
			return access_oracle(s, recs, next_use, i, n);
		case DUM_SIM_MIN:
			return access_min(s, rec, next_use[i]);
		default:	/* DEMAND, UVM, UVM_USER */
			return access_demand(s, rec->addr >> s->shift, bytes);
		}
	}
	return 0;
}

int dum_sim_run(struct dum_sim *s, const struct deepum_record *recs, const __u64 *compute_ns,
		const __u64 *next_use, __u64 n, __u64 lo, __u64 hi, __u64 *bad_index)
{
	__u64 i;
	int err;

	if ((s->policy == DUM_SIM_ORACLE || s->policy == DUM_SIM_MIN) && !next_use)
		return -EINVAL;
	for (i = lo; i < hi && i < n; i++) {
		err = deepum_record_check(s->shift, &recs[i]);
		if (!err)
			err = sim_record(s, recs, compute_ns, next_use, i, n);
		if (err) {
			*bad_index = i;
			return err;
		}
	}
	return 0;
}

__u32 dum_sim_iterations(const struct dum_sim *s, struct dum_sim_iteration *ret, __u32 n)
{
	__u32 count = n < s->iv_len ? n : s->iv_len;

	memcpy(ret, s->iv, count * sizeof(*ret));
	/* The open iteration, up to the kernel running now. */
	if (count && count == s->iv_len && s->iv_open && s->iv_start != NEVER)
		ret[count - 1].time_ns = s->now + (s->in_kernel ? s->compute : 0) - s->iv_start;
	return count;
}

int dum_sim_next_use(const struct deepum_record *recs, __u64 n, __u32 block_shift, __u64 *next_use)
{
	struct dum_residency seen;	/* block -> slot, for the last index below */
	__u64 *later, i;
	__u32 cap = 1024, slot, known;
	int err;

	/* Count blocks to size the map. */
	for (i = 0; i < n; i++)
		cap += recs[i].type == DEEPUM_REC_FAULT;
	if (cap > DEEPUM_CFG_BLOCK_MAX_MAX)
		cap = DEEPUM_CFG_BLOCK_MAX_MAX;
	err = dum_residency_init(&seen, cap);
	if (err)
		return err;
	later = malloc((__u64)cap * sizeof(*later));
	if (!later) {
		dum_residency_destroy(&seen);
		return -ENOMEM;
	}
	for (i = n; i-- > 0;) {
		next_use[i] = NEVER;
		if (recs[i].type != DEEPUM_REC_FAULT)
			continue;
		known = seen.used;
		slot = dum_residency_get(&seen, recs[i].addr >> block_shift);
		if (slot == DUM_NIL) {
			err = -ENOMEM;
			break;
		}
		if (seen.used != known)
			later[slot] = NEVER;	/* first sighting, from the end */
		next_use[i] = later[slot];
		later[slot] = i;
	}
	free(later);
	dum_residency_destroy(&seen);
	return err;
}
