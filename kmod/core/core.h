/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The DeepUM prefetch core: correlation tables, chain walker, residency
 * model with pre-eviction, and invalidation, as one deterministic state
 * machine.  Records go in (struct deepum_record), commands come out
 * (struct deepum_cmd).  The same input sequence always produces the same
 * command sequence, byte for byte, whichever build (kernel module, libdeepum,
 * cffi extension) runs it.
 *
 * Locking: none inside.  One caller drives one instance at a time; callers
 * serialise deepum_core_process() with every other call on the instance.
 * Work per record is bounded by the configuration (walk_max, evict_scan,
 * the command buffer), and nothing is allocated after deepum_core_create().
 */
#ifndef _DEEPUM_CORE_H
#define _DEEPUM_CORE_H

#include "port.h"

struct deepum_core;

/*
 * Fill zero fields of @cfg with defaults and check every field against its
 * DEEPUM_CFG_*_MIN/MAX.  Returns 0 or -EINVAL (nothing is changed then).
 */
int deepum_core_config_check(struct deepum_config *cfg);

/* Bytes deepum_core_create() allocates for a checked @cfg. */
u64 deepum_core_mem_bytes(const struct deepum_config *cfg);

/*
 * Allocate an instance.  Returns 0, -EINVAL for a bad config, or -ENOMEM:
 * a caller then runs without prefetching for that process, never fails it.
 */
int deepum_core_create(const struct deepum_config *cfg, struct deepum_core **ret);
void deepum_core_destroy(struct deepum_core *core);

/* The configuration in force (defaults filled in). */
void deepum_core_get_config(const struct deepum_core *core, struct deepum_config *ret);

/* Most commands one deepum_core_process() call can emit. */
u32 deepum_core_max_cmds(const struct deepum_core *core);

/*
 * Consume one record; write up to @max_cmds commands to @cmds and their
 * number to @ncmds.  With fewer than deepum_core_max_cmds() slots the core
 * emits less (walks stop early) but stays consistent.
 * Returns 0, or -EINVAL for a malformed record (unknown type or flags),
 * which changes nothing.
 */
int deepum_core_process(struct deepum_core *core, const struct deepum_record *rec,
			struct deepum_cmd *cmds, u32 max_cmds, u32 *ncmds);

/* 0 if @rec is well formed for blocks of 1 << @block_shift bytes, else -EINVAL:
 * an unknown type or flags, an access type above 4, a FAULT in block 0, or
 * a range that wraps around. */
int deepum_record_check(u32 block_shift, const struct deepum_record *rec);

void deepum_core_get_stats(const struct deepum_core *core, struct deepum_stats *ret);
/* Callers that time the core add their measurement here. */
void deepum_core_add_time(struct deepum_core *core, u64 ns);

/* FNV-1a offset basis: the first @hash of a deepum_hash_bytes() chain. */
#define DEEPUM_HASH_INIT 0xcbf29ce484222325ULL
/* Chain @len bytes at @data into @hash (FNV-1a 64). */
u64 deepum_hash_bytes(u64 hash, const void *data, u64 len);

/* Introspection, for replay accounting, tests and debugging. */
bool deepum_core_is_resident(const struct deepum_core *core, u64 addr);
u32 deepum_core_exec_successors(const struct deepum_core *core, u32 exec_id, u32 *ret, u32 n);
u32 deepum_core_exec_starts(const struct deepum_core *core, u32 exec_id, u64 *ret, u32 n);
/* Successor block addresses of @addr in @exec_id's table at @level; -1 if no entry. */
int deepum_core_block_successors(const struct deepum_core *core, u32 exec_id, u64 addr,
				 u32 level, u64 *ret, u32 n);

#endif /* _DEEPUM_CORE_H */
