/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Defaults of libdeepum's user-mode engine that depend on its budget, in one
 * place for the engine (engine.c) and for the simulator's model of it
 * (pydeepum/_native_src/sim.c, the deepum-user, -issuer and -split policies).
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

#endif /* _DEEPUM_ENGINE_DEFAULTS_H */
