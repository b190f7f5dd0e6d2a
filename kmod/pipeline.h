/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * One context's prefetch pipeline (pipeline.c): fault queue -> prefetch core
 * -> command queue -> migration backend.
 */
#ifndef _DEEPUM_PIPELINE_H
#define _DEEPUM_PIPELINE_H

#include <linux/atomic.h>
#include <linux/compiler_types.h>
#include <linux/gfp.h>
#include <linux/kfifo.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "include/uapi/deepum.h"

struct deepum_backend_ops;
struct deepum_core;

/* Sizes come from parameters and ioctls: too large is a refusal, never a WARN. */
#define DEEPUM_GFP	(GFP_KERNEL_ACCOUNT | __GFP_NOWARN)

/* A prefetch core and the buffer deepum_core_process() writes its commands to. */
struct deepum_prefetcher {
	struct deepum_core *core;	/* NULL: no memory for one, not prefetching */
	struct deepum_cmd *out;		/* deepum_core_max_cmds(core) slots */
	u32 out_max;
};

struct deepum_pipeline {
	/* Fault queue: producers serialise on fault_lock; process_work is the one consumer. */
	spinlock_t fault_lock;
	DECLARE_KFIFO_PTR(faults, struct deepum_record);
	struct deepum_record *fault_buf;
	u64 records_queued;		/* written under fault_lock */
	u64 records_done;		/* written by process_work only */
	atomic64_t records_dropped;

	/* The core, replaced whole by deepum_pipeline_configure(). */
	struct mutex core_lock;
	struct deepum_prefetcher pf;	/* under core_lock */
	struct deepum_config cfg;	/* under core_lock: in force (or wanted, without a core) */
	u32 block_shift;		/* cfg.block_shift, for checks that take no lock */
	struct deepum_stats retired;	/* under core_lock: counters of replaced cores */

	/* Command queue: process_work produces, migrate_work consumes. */
	DECLARE_KFIFO_PTR(cmds, struct deepum_cmd);
	struct deepum_cmd *cmd_buf;
	atomic64_t cmds_dropped;
	const struct deepum_backend_ops *backend;
	void *backend_data;

	struct work_struct process_work;
	struct work_struct migrate_work;
	wait_queue_head_t progress;	/* woken after every run of either work item */

	/* TEST_INJECT stages a batch here and checks it whole before queueing any. */
	struct mutex inject_lock;
	struct deepum_record *inject_buf;	/* NULL without the test ioctls */
};

int deepum_pipeline_module_init(void);
void deepum_pipeline_module_exit(void);
void deepum_queue_work(struct work_struct *work);

int deepum_pipeline_init(struct deepum_pipeline *pipe, const struct deepum_config *cfg,
			 const struct deepum_backend_ops *backend, bool test_inject);
void deepum_pipeline_stop(struct deepum_pipeline *pipe);
void deepum_pipeline_destroy(struct deepum_pipeline *pipe);

void deepum_pipeline_push(struct deepum_pipeline *pipe, const struct deepum_record *rec);
int deepum_pipeline_inject(struct deepum_pipeline *pipe, const struct deepum_record __user *urecs,
			   u32 count, u32 *accepted);
int deepum_pipeline_wait(struct deepum_pipeline *pipe);
void deepum_pipeline_resume_migration(struct deepum_pipeline *pipe);

int deepum_pipeline_configure(struct deepum_pipeline *pipe, const struct deepum_config *cfg);
void deepum_pipeline_get_config(struct deepum_pipeline *pipe, struct deepum_config *ret);
void deepum_pipeline_stats(struct deepum_pipeline *pipe, struct deepum_stats *ret);

#endif /* _DEEPUM_PIPELINE_H */
