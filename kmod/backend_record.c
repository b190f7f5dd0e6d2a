// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Backends that migrate nothing.  The recording backend keeps every command,
 * in order, until DEEPUM_IOC_TEST_DRAIN reads it: it is what the test ioctls
 * observe.  The null backend, for contexts of a module loaded without them,
 * accepts and forgets, since nothing could ever read a recording.
 */
#include <linux/kfifo.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "backend.h"
#include "pipeline.h"

struct deepum_recorder {
	DECLARE_KFIFO_PTR(ring, struct deepum_cmd);	/* migrate_work in, drain out */
	struct deepum_cmd *ring_buf;
	struct mutex drain_lock;			/* one reader at a time */
	struct deepum_cmd *bounce;			/* DEEPUM_TEST_BATCH_MAX slots */
};

/* Locking: none; the pipeline is not yet shared. */
static int deepum_recorder_init(struct deepum_pipeline *pipe, u32 queue_len)
{
	struct deepum_recorder *rec;

	rec = kzalloc(sizeof(*rec), DEEPUM_GFP);
	if (!rec)
		return -ENOMEM;
	rec->ring_buf = kvmalloc_array(queue_len, sizeof(*rec->ring_buf), DEEPUM_GFP);
	rec->bounce = kvmalloc_array(DEEPUM_TEST_BATCH_MAX, sizeof(*rec->bounce), DEEPUM_GFP);
	if (!rec->ring_buf || !rec->bounce) {
		kvfree(rec->bounce);
		kvfree(rec->ring_buf);
		kfree(rec);
		return -ENOMEM;
	}
	/* Cannot fail: queue_len is a power of two of at least DEEPUM_QUEUE_LEN_MIN. */
	kfifo_init(&rec->ring, rec->ring_buf, queue_len * sizeof(*rec->ring_buf));
	mutex_init(&rec->drain_lock);
	pipe->backend_data = rec;
	return 0;
}

/* Locking: none; the pipeline is stopped. */
static void deepum_recorder_destroy(struct deepum_pipeline *pipe)
{
	struct deepum_recorder *rec = pipe->backend_data;

	kvfree(rec->bounce);
	kvfree(rec->ring_buf);
	kfree(rec);
}

/* Locking: from migrate_work, the ring's only writer. */
static bool deepum_recorder_migrate(struct deepum_pipeline *pipe, const struct deepum_cmd *cmd)
{
	struct deepum_recorder *rec = pipe->backend_data;

	return kfifo_put(&rec->ring, *cmd);
}

/* Locking: none; a racy look at the ring's fill, as backend.h allows. */
static bool deepum_recorder_congested(struct deepum_pipeline *pipe)
{
	struct deepum_recorder *rec = pipe->backend_data;

	return kfifo_is_full(&rec->ring);
}

/*
 * DEEPUM_IOC_TEST_DRAIN: move up to @max recorded commands to @ucmds.  A
 * fault while copying consumes nothing.  The room made lets migrate_work go
 * on if the ring had filled up.
 *
 * Locking: takes drain_lock, the ring's only reader; may fault on @ucmds.
 */
int deepum_record_backend_drain(struct deepum_pipeline *pipe, struct deepum_cmd __user *ucmds,
				u32 max, u32 *count)
{
	struct deepum_recorder *rec = pipe->backend_data;
	int err = 0;
	u32 n;

	mutex_lock(&rec->drain_lock);
	n = kfifo_out_peek(&rec->ring, rec->bounce, max);
	if (copy_to_user(ucmds, rec->bounce, n * sizeof(*rec->bounce))) {
		err = -EFAULT;
		goto out_unlock;
	}
	/* Consume what was copied (this kernel has no kfifo_skip_count()). */
	*count = kfifo_out(&rec->ring, rec->bounce, n);
out_unlock:
	mutex_unlock(&rec->drain_lock);
	if (!err && n)
		deepum_pipeline_resume_migration(pipe);
	return err;
}

const struct deepum_backend_ops deepum_record_backend = {
	.name		= "record",
	.init		= deepum_recorder_init,
	.destroy	= deepum_recorder_destroy,
	.migrate	= deepum_recorder_migrate,
	.congested	= deepum_recorder_congested,
};

/* Locking: none; it touches nothing. */
static bool deepum_null_migrate(struct deepum_pipeline *pipe, const struct deepum_cmd *cmd)
{
	return true;
}

static bool deepum_null_congested(struct deepum_pipeline *pipe)
{
	return false;
}

const struct deepum_backend_ops deepum_null_backend = {
	.name		= "null",
	.migrate	= deepum_null_migrate,
	.congested	= deepum_null_congested,
};
