/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Sums of struct deepum_stats, for contexts and the module-wide totals. */
#ifndef _DEEPUM_STATS_H
#define _DEEPUM_STATS_H

#include <linux/build_bug.h>
#include <linux/types.h>

#include "include/uapi/deepum.h"

/* Add every field of @src to @dst: all are __u64 counters (or gauges, see below). */
static inline void deepum_stats_add(struct deepum_stats *dst, const struct deepum_stats *src)
{
	u64 *d = (u64 *)dst;
	const u64 *s = (const u64 *)src;
	size_t i;

	BUILD_BUG_ON(sizeof(*dst) % sizeof(u64));
	for (i = 0; i < sizeof(*dst) / sizeof(u64); i++)
		d[i] += s[i];
}

/*
 * Zero the gauges of counters that are being retired (a replaced core, a
 * closed context): totals keep their counts, but what they held is gone.
 * A new gauge in struct deepum_stats belongs here.
 */
static inline void deepum_stats_clear_gauges(struct deepum_stats *stats)
{
	stats->resident_blocks = 0;
}

#endif /* _DEEPUM_STATS_H */
