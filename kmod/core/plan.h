/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * How a migration backend turns the core's commands into driver calls: the
 * one rule the simulator's model of a backend (pydeepum/_native_src/sim.c)
 * and the real backends (libdeepum's user-mode engine; the kernel module's
 * UVM backend later) share, so that what is simulated is what runs.
 *
 *   1. Evictions and discards first: they make the room the prefetches use.
 *   2. Then the prefetches, in runs of the same predicted exec ID, in the
 *      order the core emitted them (the order the kernels are expected),
 *      each run sorted by address.
 *   3. Consecutive blocks with the same operation (and, for prefetches, the
 *      same exec ID) become one range: the driver pays ~100 us per range,
 *      so long ranges are what reaches the link's bandwidth
 *      (../shared/reference/h200-um-traces.md).
 *
 * Pure C over caller-provided buffers: nothing is allocated.
 */
#ifndef _DEEPUM_PLAN_H
#define _DEEPUM_PLAN_H

#include "port.h"

/*
 * Reorder @cmds (@n of them) as rules 1 and 2 say, using @scratch (room for
 * @n commands).  Evictions and discards keep their order; returns how many
 * there are: they are cmds[0 .. ret), the prefetches cmds[ret .. n).
 */
u32 deepum_plan_order(struct deepum_cmd *cmds, u32 n, struct deepum_cmd *scratch);

/* Sort @n commands by address (in place, not stable: addresses of one
 * planning batch are distinct). */
void deepum_plan_sort(struct deepum_cmd *cmds, u32 n);

/* Commands in the range that starts at cmds[0] (rule 3), at most @n. */
u32 deepum_plan_run(const struct deepum_cmd *cmds, u32 n, u32 block_shift);

#endif /* _DEEPUM_PLAN_H */
