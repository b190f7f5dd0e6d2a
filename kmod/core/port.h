/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The only place the prefetch core learns where it runs.  Everything else in
 * kmod/core/ is plain C over these few names: fixed-width integers, zeroed
 * array allocation, memset, errno values and the kernel's fallthrough.  The core
 * needs no locks and no atomics: one instance is driven by one caller at a
 * time, and each caller (kernel pipeline, libdeepum engine, replay) owns the
 * serialisation.
 */
#ifndef _DEEPUM_PORT_H
#define _DEEPUM_PORT_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/string.h>
#include <linux/slab.h>
#include <linux/mm.h>

/*
 * Sizes come from user-settable configuration: charged to the caller's
 * memory cgroup, and a refusal rather than a WARN or the OOM killer when
 * memory is short (the caller then runs without prefetching).
 */
#define dum_calloc(n, size)	kvcalloc((n), (size), GFP_KERNEL_ACCOUNT | __GFP_NOWARN | __GFP_RETRY_MAYFAIL)
#define dum_free(p)		kvfree(p)

#else /* userspace: libdeepum, the cffi extension, tests */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <linux/types.h>

/* The kernel's names, with the kernel's definitions. */
typedef __u32 u32;
typedef __u64 u64;

void *dum_calloc(size_t n, size_t size);
void dum_free(void *p);

#define fallthrough __attribute__((__fallthrough__))
#endif

#include "../include/uapi/deepum.h"

#endif /* _DEEPUM_PORT_H */
