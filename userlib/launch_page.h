/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * The launch page: where libdeepum delivers, in stream order, the exec ID of
 * the kernel about to run, for a watcher to read (the user-mode engine's
 * thread now; the kernel module once the UAPI has an ioctl to register the
 * page, see userlib/README.md).
 *
 * One page per process, in pinned host memory mapped into the GPU's address
 * space.  Each stream libdeepum has seen owns a slot: a ring of
 * DEEPUM_PAGE_DEPTH entries.  Before each launch on the stream, the entry
 * for the stream's next sequence number s (1, 2, ...) is written with
 *
 *     entry[slot][s % DEEPUM_PAGE_DEPTH] = (u64)s << 32 | exec_id
 *
 * by the GPU itself (cuStreamWriteValue64, delivery "write") or by a host
 * callback (cuLaunchHostFunc, delivery "callback"), in either case only once
 * everything enqueued before it on that stream has completed.  One 64-bit
 * store carries both halves, so a reader never sees a torn pair; a reader
 * that falls more than DEEPUM_PAGE_DEPTH entries behind sees the gap in s.
 * s wraps at 2^32.  exec_id may be DEEPUM_EXEC_NONE (a kernel not tracked).
 */
#ifndef _DEEPUM_LAUNCH_PAGE_H
#define _DEEPUM_LAUNCH_PAGE_H

#include <linux/types.h>

#define DEEPUM_PAGE_MAGIC	0x4c50554dU	/* "MUPL" read as little-endian bytes */
#define DEEPUM_PAGE_VERSION	1
#define DEEPUM_PAGE_STREAMS	128
#define DEEPUM_PAGE_DEPTH	64

struct deepum_launch_page {
	__u32 magic;
	__u32 version;
	__u32 streams;		/* DEEPUM_PAGE_STREAMS */
	__u32 depth;		/* DEEPUM_PAGE_DEPTH */
	/* The CUstream handle of each slot (0: free slot; 0x1: legacy default
	 * stream; 0x2: a per-thread default stream), set before first use. */
	__u64 stream[DEEPUM_PAGE_STREAMS];
	__u64 entry[DEEPUM_PAGE_STREAMS][DEEPUM_PAGE_DEPTH];
};

#endif /* _DEEPUM_LAUNCH_PAGE_H */
