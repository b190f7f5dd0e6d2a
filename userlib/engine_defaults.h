/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Defaults of libdeepum's user-mode engine where they differ from the core's,
 * in one place for the engine (engine.c, intercept.c) and, where they depend
 * on its budget, for the simulator's model of it (pydeepum/_native_src/sim.c,
 * the deepum-user, -issuer and -split policies).
 */
#ifndef _DEEPUM_ENGINE_DEFAULTS_H
#define _DEEPUM_ENGINE_DEFAULTS_H

#include "../kmod/include/uapi/deepum.h"

/* Free blocks pre-eviction keeps: the faults that arrive before the engine
 * can answer them land there, so the default grows with the budget. */
static inline __u32 deepum_engine_watermark(__u64 capacity_blocks)
{
	__u64 blocks = capacity_blocks / 32;

	if (blocks < DEEPUM_CFG_WATERMARK_BLOCKS_DEFAULT)
		return DEEPUM_CFG_WATERMARK_BLOCKS_DEFAULT;
	return blocks > 1024 ? 1024 : (__u32)blocks;
}

/* Core flags the engine sets unless told otherwise, where they apply:
 * victims in address runs (DEEPUM_VICTIM_RUNS, since the twenty-second
 * session) and forgetting an unsettled start (DEEPUM_FORGET_UNSETTLED, since
 * the twenty-third), each measured on the H200 (docs/BENCHMARKS.md).  The
 * core's own default, deepum.ko's and the simulator's, has neither: in a
 * trace of a few iterations forgetting's relearning would fall in the
 * measured ones (`deepumctl simulate --set flags=200` models the engine). */
#define DEEPUM_ENGINE_FLAGS_DEFAULT (DEEPUM_CFG_F_VICTIM_RUNS | DEEPUM_CFG_F_FORGET_UNSETTLED)

#endif /* _DEEPUM_ENGINE_DEFAULTS_H */
