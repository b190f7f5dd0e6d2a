/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The launch page from the module's side (launches.c).
 */
#ifndef _DEEPUM_LAUNCHES_H
#define _DEEPUM_LAUNCHES_H

#include <linux/atomic.h>
#include <linux/hrtimer.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "include/uapi/deepum.h"

struct deepum_context;
struct vm_area_struct;

struct deepum_launches {
	struct mutex create_lock;		/* the first mmap() makes the page */
	struct deepum_launch_page *page;	/* set once under create_lock; smp_load_acquire() */
	spinlock_t read_lock;			/* one reader of the rings */
	u32 fed[DEEPUM_PAGE_STREAMS];		/* under read_lock: last launch fed, per slot */
	u32 marks;				/* under read_lock: iteration marks fed */
	struct hrtimer timer;			/* every launch_poll_us while the page exists */
	struct work_struct watch;		/* reads the page on the pipeline's workqueue */
};

void deepum_launches_init(struct deepum_launches *l);
void deepum_launches_destroy(struct deepum_launches *l);
int deepum_launches_mmap(struct deepum_context *ctx, struct vm_area_struct *vma);
u32 deepum_launches_take(struct deepum_context *ctx, bool *more);

#endif /* _DEEPUM_LAUNCHES_H */
