// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The launch page from the module's side (struct deepum_launch_page in
 * include/uapi/deepum.h): the process maps it from its /dev/deepum file,
 * registers it with CUDA, and the GPU writes each stream's position into it
 * in stream order; the context reads the launches up to there from the
 * rings and feeds them to its pipeline as LAUNCH records (and iteration
 * marks, DEEPUM_EXEC_ITERATION entries, as ITERATION records).  No system call
 * per launch (DEEPUM_IOC_SET_EXEC_ID costs a host callback per launch,
 * ~43 us on the H200).
 *
 * Who reads: a timer every launch_poll_us (a module parameter) queues the
 * context's watch work while the page exists, and the fault hook reads too,
 * before it queues a batch of faults, so that a fault is never learned
 * against a kernel older than the one the GPU had reached.  One reader at a
 * time (read_lock); each read takes at most DEEPUM_LAUNCHES_BATCH launches
 * and the work requeues itself while more are waiting.
 */
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/version.h>
#include <linux/vmalloc.h>

#include "context.h"
#include "launches.h"
#include "params.h"

#define DEEPUM_LAUNCHES_BATCH	1024	/* launches one read feeds */

static size_t deepum_launch_page_bytes(void)
{
	return PAGE_ALIGN(sizeof(struct deepum_launch_page));
}

/*
 * Feed the launches the GPU got to since the last read, at most
 * DEEPUM_LAUNCHES_BATCH; returns how many, and whether some are left.
 *
 * Locking: takes read_lock (a spinlock), then what deepum_pipeline_push()
 * takes.  Does not sleep: the fault hook calls it under nvidia-uvm's RCU
 * read lock.
 */
u32 deepum_launches_take(struct deepum_context *ctx, bool *more)
{
	struct deepum_launches *l = &ctx->launches;
	struct deepum_launch_page *page = smp_load_acquire(&l->page);
	u32 slot, n = 0;

	*more = false;
	if (!page)
		return 0;
	spin_lock(&l->read_lock);
	for (slot = 0; slot < DEEPUM_PAGE_STREAMS; slot++) {
		u32 reached = (u32)(READ_ONCE(page->position[slot]) >> 32);
		u32 behind = reached - l->fed[slot];

		if (!behind || behind > (1U << 31))
			continue;	/* nothing new, or an older position (racing launchers) */
		if (behind > DEEPUM_RING_DEPTH) {
			atomic64_add(behind - DEEPUM_RING_DEPTH, &ctx->pipe.records_dropped);
			l->fed[slot] = reached - DEEPUM_RING_DEPTH;
		}
		while (l->fed[slot] != reached) {
			u32 seq = l->fed[slot] + 1;
			u64 entry = READ_ONCE(page->ring[slot][seq % DEEPUM_RING_DEPTH]);
			u32 exec_id = (u32)entry;
			struct deepum_record rec = {
				.type = DEEPUM_REC_LAUNCH,
				.ts = ktime_get_ns(),
				.exec_id = exec_id,
				.aux = slot,
			};

			if (n == DEEPUM_LAUNCHES_BATCH) {
				*more = true;
				goto out;
			}
			l->fed[slot] = seq;
			if ((u32)(entry >> 32) != seq) {
				/* Reused before it was read: a record lost. */
				atomic64_inc(&ctx->pipe.records_dropped);
				continue;
			}
			if (exec_id == DEEPUM_EXEC_ITERATION)
				rec = (struct deepum_record){ .type = DEEPUM_REC_ITERATION, .ts = rec.ts,
							      .aux = l->marks++ };
			else if (exec_id < DEEPUM_PAGE_EXEC_IDS)
				rec.addr = READ_ONCE(page->name_hash[exec_id]);
			deepum_pipeline_push(&ctx->pipe, &rec);
			n++;
		}
	}
out:
	spin_unlock(&l->read_lock);
	return n;
}

/* Locking: none of its own; runs on the pipeline's workqueue, one at a time. */
static void deepum_launches_watch(struct work_struct *work)
{
	struct deepum_context *ctx = container_of(work, struct deepum_context, launches.watch);
	bool more;

	deepum_launches_take(ctx, &more);
	if (more)
		deepum_queue_work(work);
}

/* Locking: none; runs in hard interrupt context and only queues the work. */
static enum hrtimer_restart deepum_launches_tick(struct hrtimer *timer)
{
	struct deepum_launches *l = container_of(timer, struct deepum_launches, timer);

	deepum_queue_work(&l->watch);
	hrtimer_forward_now(timer, ns_to_ktime((u64)READ_ONCE(deepum_launch_poll_us) * NSEC_PER_USEC));
	return HRTIMER_RESTART;
}

/* Locking: none; the context is not yet visible. */
void deepum_launches_init(struct deepum_launches *l)
{
	mutex_init(&l->create_lock);
	spin_lock_init(&l->read_lock);
	INIT_WORK(&l->watch, deepum_launches_watch);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	hrtimer_setup(&l->timer, deepum_launches_tick, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
#else
	hrtimer_init(&l->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	l->timer.function = deepum_launches_tick;
#endif
}

/*
 * The page, for the life of the context: read one last time, then never
 * again.  The mappings keep its memory until they go (they hold the file,
 * so the context outlives them anyway).
 *
 * Locking: none; the file is being released, so no mmap() runs.  Sleeps.
 */
void deepum_launches_destroy(struct deepum_launches *l)
{
	struct deepum_context *ctx = container_of(l, struct deepum_context, launches);
	bool more = true;

	if (!l->page)
		return;
	hrtimer_cancel(&l->timer);
	cancel_work_sync(&l->watch);
	/* What the GPU reached last still counts (the pipeline runs on). */
	while (more)
		deepum_launches_take(ctx, &more);
	vfree(l->page);
	l->page = NULL;
}

/* The page, made (and the timer started) on the first mmap().  Locking: takes create_lock. */
static struct deepum_launch_page *deepum_launches_page(struct deepum_launches *l)
{
	struct deepum_launch_page *page;

	mutex_lock(&l->create_lock);
	page = l->page;
	if (!page) {
		page = vmalloc_user(deepum_launch_page_bytes());
		if (page) {
			page->magic = DEEPUM_PAGE_MAGIC;
			page->version = DEEPUM_PAGE_VERSION;
			page->streams = DEEPUM_PAGE_STREAMS;
			page->depth = DEEPUM_RING_DEPTH;
			/* Pairs with deepum_launches_take(): readers see it whole. */
			smp_store_release(&l->page, page);
			hrtimer_start(&l->timer, ns_to_ktime((u64)READ_ONCE(deepum_launch_poll_us) * NSEC_PER_USEC),
				      HRTIMER_MODE_REL);
		}
	}
	mutex_unlock(&l->create_lock);
	return page;
}

/*
 * mmap() of an attached file: the context's launch page, as the UAPI says.
 *
 * Locking: takes create_lock; mmap_lock is held by the caller.  Sleeps.
 */
int deepum_launches_mmap(struct deepum_context *ctx, struct vm_area_struct *vma)
{
	struct deepum_launch_page *page;

	if (vma->vm_pgoff || vma->vm_end - vma->vm_start != deepum_launch_page_bytes() ||
	    !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	page = deepum_launches_page(&ctx->launches);
	if (!page)
		return -ENOMEM;
	/* Not inherited: a child has a context of its own, or none. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, VM_DONTCOPY);
#else
	vma->vm_flags |= VM_DONTCOPY;
#endif
	return remap_vmalloc_range(vma, page, 0);
}
