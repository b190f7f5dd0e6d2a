/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * The launch page: how a watcher (the user-mode engine's thread now; the
 * kernel module once the UAPI has an ioctl to register the page, see
 * userlib/README.md) learns, in stream order, which kernel runs now.
 *
 * One page per process, in pinned host memory mapped into the GPU's address
 * space.  Each stream libdeepum has seen owns a slot, with two parts:
 *
 *   ring[slot][s % DEEPUM_RING_DEPTH] = (u64)s << 32 | exec_id
 *       written by the launching thread, before it enqueues the stream's
 *       s-th launch (s = 1, 2, ...): which launch is which;
 *   position[slot] = (u64)s << 32 | exec_id
 *       written in stream order, when everything enqueued before launch s
 *       on that stream has completed: how far the stream has got.  The GPU
 *       writes it (cuStreamWriteValue64, delivery "write") before every
 *       DEEPUM_WRITE_EVERY-th launch, or a host callback (cuLaunchHostFunc,
 *       delivery "callback") before every launch; marks and reported frees
 *       write it too (userlib/README.md).
 *
 * A reader that sees position s reads launches last + 1 .. s from the ring.
 * Each 64-bit entry carries its own s, so a torn pair is impossible and an
 * entry the launching thread has already reused (it ran more than
 * DEEPUM_RING_DEPTH launches ahead of the reader) is recognised and
 * counted, never misread.  s wraps at 2^32; exec_id may be
 * DEEPUM_EXEC_NONE (a kernel not tracked).
 */
#ifndef _DEEPUM_LAUNCH_PAGE_H
#define _DEEPUM_LAUNCH_PAGE_H

#include <linux/types.h>

#define DEEPUM_PAGE_MAGIC	0x4c50554dU	/* "MUPL" read as little-endian bytes */
#define DEEPUM_PAGE_VERSION	2
#define DEEPUM_PAGE_STREAMS	128
/* How far the host may run ahead of the reader: CUDA queues ~1,000
 * launches per stream before a launch blocks, so 4,096 leaves room. */
#define DEEPUM_RING_DEPTH	4096

struct deepum_launch_page {
	__u32 magic;
	__u32 version;
	__u32 streams;		/* DEEPUM_PAGE_STREAMS */
	__u32 depth;		/* DEEPUM_RING_DEPTH */
	/* The CUstream handle of each slot (0: free slot; 0x1: legacy default
	 * stream; 0x2: a per-thread default stream), set before first use. */
	__u64 stream[DEEPUM_PAGE_STREAMS];
	__u64 position[DEEPUM_PAGE_STREAMS];
	__u64 ring[DEEPUM_PAGE_STREAMS][DEEPUM_RING_DEPTH];
};

#endif /* _DEEPUM_LAUNCH_PAGE_H */
