/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Migration backends: what carries out the commands the prefetch core emits.
 * The pipeline (pipeline.c) hands them over one at a time, in order, from its
 * migration work item.  Here: a recording backend, which keeps them for
 * DEEPUM_IOC_TEST_DRAIN, and a null backend; nvidia-uvm's is another issue.
 */
#ifndef _DEEPUM_BACKEND_H
#define _DEEPUM_BACKEND_H

#include <linux/compiler_types.h>
#include <linux/types.h>

#include "include/uapi/deepum.h"

struct deepum_pipeline;

struct deepum_backend_ops {
	const char *name;
	/* Optional: set up pipe->backend_data for a new context; 0 or -ENOMEM. */
	int (*init)(struct deepum_pipeline *pipe, u32 queue_len);
	/* Optional: undo init(); the pipeline is stopped. */
	void (*destroy)(struct deepum_pipeline *pipe);
	/*
	 * Carry out @cmd.  false: no room now; the command stays queued and the
	 * backend calls deepum_pipeline_resume_migration() once it has room.
	 * Locking: called from the context's migration work item only.
	 */
	bool (*migrate)(struct deepum_pipeline *pipe, const struct deepum_cmd *cmd);
	/* True while migrate() would refuse.  Locking: none; may race with migrate(). */
	bool (*congested)(struct deepum_pipeline *pipe);
};

extern const struct deepum_backend_ops deepum_record_backend;
extern const struct deepum_backend_ops deepum_null_backend;

int deepum_record_backend_drain(struct deepum_pipeline *pipe, struct deepum_cmd __user *ucmds,
				u32 max, u32 *count);

#endif /* _DEEPUM_BACKEND_H */
