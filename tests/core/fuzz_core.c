// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Randomized stress of the prefetch core, built with ASan + UBSan by
 * `make test-sanitize`.  A seeded stream of records, mostly plausible (a
 * training loop over a few hundred blocks, with noise) and partly hostile
 * (random types, flags, addresses, exec IDs, huge ranges), goes through cores
 * of several configurations, small tables and tight capacities included.
 * Checks the invariants the core promises: commands fit the buffer, never
 * name block 0 or an unknown op, the model never holds more than its
 * capacity, malformed records are refused without effect, and the same input
 * gives the same commands.  Exit 0 only if all held; sanitizers abort on
 * memory or undefined-behaviour errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

extern long dum_port_fail_allocs_after;	/* port_user.c */

static unsigned long long rng_state;

static unsigned long long rnd(void)
{
	/* xorshift64*: deterministic for a seed, good enough for fuzzing */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static void make_record(struct deepum_record *r, unsigned long long i)
{
	unsigned long long roll = rnd() % 100;

	memset(r, 0, sizeof(*r));
	r->ts = i;
	if (roll < 20) {
		r->type = DEEPUM_REC_LAUNCH;
		r->exec_id = rnd() % 64 == 0 ? (unsigned)rnd() : (unsigned)(i / 7 % 40);
	} else if (roll < 88) {
		r->type = DEEPUM_REC_FAULT;
		r->addr = ((1 + rnd() % 300) << 21) + rnd() % (1 << 21);
		r->exec_id = rnd() % 8 == 0 ? DEEPUM_EXEC_NONE : (unsigned)(rnd() % 48);
		r->aux = rnd() % 5;
	} else if (roll < 92) {
		r->type = rnd() % 2 ? DEEPUM_REC_FREE : DEEPUM_REC_ALLOC;
		r->addr = (rnd() % 300) << 20;
		r->len = rnd() % 4 == 0 ? rnd() : (rnd() % 64) << 20;
	} else if (roll < 94) {
		r->type = DEEPUM_REC_ITERATION;
		r->flags = rnd() % 2 ? DEEPUM_ITER_F_FLUSHED : 0;
	} else {
		/* hostile: anything at all */
		r->type = (unsigned)(rnd() % 8);
		r->flags = (unsigned)rnd();
		r->addr = rnd();
		r->len = rnd();
		r->exec_id = (unsigned)rnd();
		r->aux = (unsigned)rnd();
	}
}

static int check_cmds(const struct deepum_core *core, const struct deepum_cmd *cmds, __u32 n,
		      __u32 max, const struct deepum_config *cfg)
{
	struct deepum_stats st;
	__u32 i;

	if (n > max) {
		fprintf(stderr, "fuzz_core: %u commands for a %u-slot buffer\n", n, max);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (cmds[i].op < DEEPUM_CMD_PREFETCH || cmds[i].op > DEEPUM_CMD_DISCARD ||
		    !(cmds[i].addr >> cfg->block_shift) || cmds[i].reserved ||
		    (cmds[i].addr & (((__u64)1 << cfg->block_shift) - 1))) {
			fprintf(stderr, "fuzz_core: bad command op %u addr 0x%llx\n", cmds[i].op,
				(unsigned long long)cmds[i].addr);
			return -1;
		}
	}
	/* An eviction a later prediction of the same record wants back is taken
	 * back, never sent out with a prefetch of the block behind it. */
	for (i = 0; i < n; i++) {
		__u32 j;

		if (cmds[i].op == DEEPUM_CMD_PREFETCH)
			continue;
		for (j = i + 1; j < n; j++) {
			if (cmds[j].op == DEEPUM_CMD_PREFETCH && cmds[j].addr == cmds[i].addr) {
				fprintf(stderr, "fuzz_core: 0x%llx evicted and prefetched by one record\n",
					(unsigned long long)cmds[i].addr);
				return -1;
			}
		}
	}
	deepum_core_get_stats(core, &st);
	if (cfg->capacity_blocks && st.resident_blocks > cfg->capacity_blocks) {
		fprintf(stderr, "fuzz_core: %llu blocks resident, capacity %llu\n",
			(unsigned long long)st.resident_blocks, (unsigned long long)cfg->capacity_blocks);
		return -1;
	}
	return 0;
}

/* Run @n records through a core; the commands' checksum goes to *@sum. */
static int run(struct deepum_config *cfg, unsigned long long seed, unsigned long long n,
	       __u32 max_cmds, unsigned long long *sum)
{
	struct deepum_core *core;
	struct deepum_stats before, after;
	struct deepum_cmd *cmds;
	struct deepum_record r;
	unsigned long long i;
	__u32 ncmds, k;
	int err;

	if (deepum_core_create(cfg, &core))
		return -1;
	deepum_core_get_config(core, cfg);
	if (!max_cmds)
		max_cmds = deepum_core_max_cmds(core);
	cmds = calloc(max_cmds + 1, sizeof(*cmds));
	if (!cmds)
		return -1;
	rng_state = seed;
	*sum = 1469598103934665603ULL;
	for (i = 0; i < n; i++) {
		make_record(&r, i);
		deepum_core_get_stats(core, &before);
		err = deepum_core_process(core, &r, cmds, max_cmds, &ncmds);
		if (err) {
			deepum_core_get_stats(core, &after);
			if (err != -EINVAL || ncmds || memcmp(&before, &after, sizeof(before))) {
				fprintf(stderr, "fuzz_core: refused record %llu changed state\n", i);
				return -1;
			}
			continue;
		}
		if (check_cmds(core, cmds, ncmds, max_cmds, cfg))
			return -1;
		for (k = 0; k < ncmds; k++)
			*sum = deepum_hash_bytes(*sum, &cmds[k], sizeof(cmds[k]));
	}
	free(cmds);
	deepum_core_destroy(core);
	return 0;
}

/*
 * Fail the k-th allocation of deepum_core_create() for every k: each must be
 * a clean -ENOMEM (LeakSanitizer checks nothing leaks), until k is past the
 * last allocation and creation succeeds.
 */
static int check_alloc_failures(void)
{
	struct deepum_config cfg;
	struct deepum_core *core;
	long k;
	int err;

	for (k = 0;; k++) {
		memset(&cfg, 0, sizeof(cfg));
		dum_port_fail_allocs_after = k;
		err = deepum_core_create(&cfg, &core);
		dum_port_fail_allocs_after = -1;
		if (!err) {
			deepum_core_destroy(core);
			printf("fuzz_core: allocation failure at each of %ld allocations: clean -ENOMEM\n", k);
			return 0;
		}
		if (err != -ENOMEM || core) {
			fprintf(stderr, "fuzz_core: allocation %ld failing gave %d\n", k, err);
			return -1;
		}
	}
}

int main(int argc, char **argv)
{
	unsigned long long n = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000000;
	unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed;
	static const struct {
		__u32 sets, ways, levels, succs, exec_max, block_max, kernels, blocks;
		__u64 capacity;
		__u32 max_cmds;	/* 0: what the core asks for */
		__u32 flags;
	} shapes[] = {
		{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },		/* defaults, unlimited memory */
		{ 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, 0 },		/* defaults, tight memory */
		{ 16, 1, 1, 1, 16, 64, 1, 1, 8, 0, 0 },		/* smallest tables */
		{ 16, 2, 4, 8, 32, 128, 4, 16, 24, 3, 0 },	/* starved command buffer */
		{ 64, 16, 2, 3, 64, 1024, 64, 64, 256, 0, 0 },
		{ 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, DEEPUM_CFG_F_HORIZON },	/* tight, with a horizon */
		{ 16, 2, 4, 8, 32, 128, 4, 16, 24, 3, DEEPUM_CFG_F_HORIZON },
		{ 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, DEEPUM_CFG_F_LRM_VICTIMS },	/* tight, the oldest victims */
		{ 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, DEEPUM_CFG_F_NO_POSITIONAL },	/* tight, the exec-ID table only */
		{ 16, 1, 1, 1, 16, 64, 1, 1, 8, 0, DEEPUM_CFG_F_FORGET_UNSETTLED },	/* smallest, forgetting */
		{ 0, 0, 0, 0, 0, 0, 0, 0, 96, 0, DEEPUM_CFG_F_VICTIM_RUNS },	/* tight, victims in runs */
		{ 16, 2, 4, 8, 32, 128, 4, 16, 24, 3, DEEPUM_CFG_F_HORIZON | DEEPUM_CFG_F_VICTIM_RUNS },
	};
	unsigned long long per = n / (sizeof(shapes) / sizeof(shapes[0]));
	unsigned long long sum1, sum2;
	size_t s;

	if (check_alloc_failures())
		return 1;
	for (s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		struct deepum_config cfg;

		memset(&cfg, 0, sizeof(cfg));
		cfg.corr_sets = shapes[s].sets;
		cfg.corr_ways = shapes[s].ways;
		cfg.corr_levels = shapes[s].levels;
		cfg.corr_succs = shapes[s].succs;
		cfg.exec_max = shapes[s].exec_max;
		cfg.block_max = shapes[s].block_max;
		cfg.lookahead_kernels = shapes[s].kernels;
		cfg.lookahead_blocks = shapes[s].blocks;
		cfg.capacity_blocks = shapes[s].capacity;
		cfg.flags = shapes[s].flags;
		if (run(&cfg, seed + s, per, shapes[s].max_cmds, &sum1) ||
		    run(&cfg, seed + s, per, shapes[s].max_cmds, &sum2)) {
			fprintf(stderr, "fuzz_core: shape %zu failed\n", s);
			return 1;
		}
		if (sum1 != sum2) {
			fprintf(stderr, "fuzz_core: shape %zu: same input, different commands\n", s);
			return 1;
		}
	}
	printf("fuzz_core: %llu records x 2 runs over %zu configurations: ok\n", per * s, s);
	return 0;
}
