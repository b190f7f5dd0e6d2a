/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Helpers shared by the core's fixed-size tables. */
#ifndef _DEEPUM_TABLE_H
#define _DEEPUM_TABLE_H

#include "port.h"

/* "No slot": table indices are u32 and never reach this. */
#define DUM_NIL 0xffffffffU

/*
 * Fibonacci hashing: the blocks of one allocation are consecutive numbers,
 * and multiplying by 2^64/phi spreads consecutive keys over all buckets (take
 * the top bits).  No random key: the keys come from the process's own faults,
 * and determinism across builds matters more here.
 */
static inline u64 dum_hash64(u64 key)
{
	return key * 0x9e3779b97f4a7c15ULL;
}

/* Smallest order with (1 << order) >= n, for n >= 1. */
static inline u32 dum_log2_ceil(u64 n)
{
	u32 order = 0;

	while (((u64)1 << order) < n)
		order++;
	return order;
}

/*
 * Put @val first in the @n-entry most-recently-used list @list, moving it up
 * if present, otherwise dropping the last entry.  @tags, if not NULL, is a
 * parallel array that moves along; @tag becomes @val's.
 */
static inline void dum_mru_insert(u64 *list, u32 *tags, u32 n, u64 val, u32 tag)
{
	u32 i;

	for (i = 0; i < n - 1 && list[i] != val; i++)
		;
	for (; i > 0; i--) {
		list[i] = list[i - 1];
		if (tags)
			tags[i] = tags[i - 1];
	}
	list[0] = val;
	if (tags)
		tags[0] = tag;
}

#endif /* _DEEPUM_TABLE_H */
