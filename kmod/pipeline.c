// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * One context's prefetch pipeline, as DeepUM's:
 *
 *   SET_EXEC_ID, INVALIDATE, TEST_INJECT (the fault hook, later)
 *     -> fault queue      bounded: a full one drops and counts (TEST_INJECT
 *                         is told what fit instead)
 *     -> process_work     the core learns from each record, then walks
 *     -> command queue    bounded; a full one drops and counts
 *     -> migrate_work     one command at a time, in order
 *     -> backend          (backend.h)
 *
 * DeepUM runs the correlator (learning) and the prefetcher (table walks) as
 * two threads.  Here both stages run in order, record by record, in one work
 * item: the prefetch core learns from record i and then walks the tables it
 * just updated, and record i + 1 is learned against the window record i left.
 * Two threads would have to lock-step on every record to keep that order, or
 * emit commands that depend on scheduling; ours must equal the userspace
 * core's byte for byte (the QEMU fault-replay test checks it).
 *
 * The work items run on one unbound workqueue, not a kthread per process:
 * contexts come and go with processes and an idle one costs nothing.  Each
 * run handles a bounded batch and requeues itself for the rest, so a busy
 * context cannot hold a worker, and CONFIG and STATS, which take core_lock,
 * wait for one batch at most.  Nothing is allocated per record, and no
 * producer ever waits for the pipeline.
 */
#include <linux/ktime.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "backend.h"
#include "core/core.h"
#include "params.h"
#include "pipeline.h"
#include "stats.h"

#define DEEPUM_PROCESS_BATCH	64	/* records per process_work run */
#define DEEPUM_MIGRATE_BATCH	256	/* commands per migrate_work run */

static struct workqueue_struct *deepum_wq;

/* Locking: module init, before any context exists. */
int deepum_pipeline_module_init(void)
{
	deepum_wq = alloc_workqueue("deepum", WQ_UNBOUND, 0);
	return deepum_wq ? 0 : -ENOMEM;
}

/* Run @work on the pipelines' workqueue.  Locking: none; any context, interrupts included. */
void deepum_queue_work(struct work_struct *work)
{
	queue_work(deepum_wq, work);
}

/* Locking: module exit; every context, and so every work item, is gone. */
void deepum_pipeline_module_exit(void)
{
	destroy_workqueue(deepum_wq);
}

/* Locking: none; the prefetcher is not yet (or no longer) shared. */
static int deepum_prefetcher_create(const struct deepum_config *cfg, struct deepum_prefetcher *ret)
{
	struct deepum_prefetcher pf = {};
	int err;

	err = deepum_core_create(cfg, &pf.core);
	if (err)
		return err;
	pf.out_max = deepum_core_max_cmds(pf.core);
	pf.out = kvmalloc_array(pf.out_max, sizeof(*pf.out), DEEPUM_GFP);
	if (!pf.out) {
		deepum_core_destroy(pf.core);
		return -ENOMEM;
	}
	*ret = pf;
	return 0;
}

static void deepum_prefetcher_destroy(struct deepum_prefetcher *pf)
{
	kvfree(pf->out);
	deepum_core_destroy(pf->core);
}

/*
 * Both DeepUM stages for one record: the core learns from it and walks what
 * it learned; its commands go to the command queue.
 *
 * Locking: core_lock held, from process_work.
 */
static void deepum_pipeline_run_core(struct deepum_pipeline *pipe, const struct deepum_record *rec)
{
	struct deepum_prefetcher *pf = &pipe->pf;
	u32 ncmds, queued;
	u64 start;

	lockdep_assert_held(&pipe->core_lock);
	if (!pf->core)
		return;

	start = ktime_get_ns();
	/*
	 * Records were checked when they were queued; the core refuses one only
	 * if CONFIG changed the block size since, and then changes nothing.
	 */
	if (deepum_core_process(pf->core, rec, pf->out, pf->out_max, &ncmds))
		return;
	deepum_core_add_time(pf->core, ktime_get_ns() - start);
	if (!ncmds)
		return;

	queued = kfifo_in(&pipe->cmds, pf->out, ncmds);
	if (queued < ncmds)
		atomic64_add(ncmds - queued, &pipe->cmds_dropped);
	queue_work(deepum_wq, &pipe->migrate_work);
}

/* Locking: takes core_lock for the batch; the only reader of the fault queue. */
static void deepum_process_work(struct work_struct *work)
{
	struct deepum_pipeline *pipe = container_of(work, struct deepum_pipeline, process_work);
	u64 done = pipe->records_done;
	struct deepum_record rec;
	u32 budget;

	mutex_lock(&pipe->core_lock);
	for (budget = DEEPUM_PROCESS_BATCH; budget && kfifo_get(&pipe->faults, &rec); budget--) {
		deepum_pipeline_run_core(pipe, &rec);
		done++;
	}
	mutex_unlock(&pipe->core_lock);

	/* Pairs with deepum_pipeline_settled(): these records' commands are queued. */
	smp_store_release(&pipe->records_done, done);
	if (!kfifo_is_empty(&pipe->faults))
		queue_work(deepum_wq, work);
	wake_up_all(&pipe->progress);
}

/* Locking: none; the only reader of the command queue. */
static void deepum_migrate_work(struct work_struct *work)
{
	struct deepum_pipeline *pipe = container_of(work, struct deepum_pipeline, migrate_work);
	struct deepum_cmd cmd;
	u32 budget;

	for (budget = DEEPUM_MIGRATE_BATCH; budget && kfifo_peek(&pipe->cmds, &cmd); budget--) {
		if (!pipe->backend->migrate(pipe, &cmd))
			break;	/* the backend resumes us when it has room */
		kfifo_skip(&pipe->cmds);
	}
	if (!budget && !kfifo_is_empty(&pipe->cmds))
		queue_work(deepum_wq, work);
	wake_up_all(&pipe->progress);
}

/* Locking: any context that may sleep; called by backends when they have room again. */
void deepum_pipeline_resume_migration(struct deepum_pipeline *pipe)
{
	queue_work(deepum_wq, &pipe->migrate_work);
}

/*
 * Set up @pipe with a core for @cfg (checked).  Without memory for the core
 * the context still works, without prefetching; without memory for its
 * queues it cannot, and -ENOMEM is returned.
 *
 * Locking: none; @pipe is not yet shared.  Sleeps.
 */
int deepum_pipeline_init(struct deepum_pipeline *pipe, const struct deepum_config *cfg,
			 const struct deepum_backend_ops *backend, bool test_inject)
{
	u32 fault_len = READ_ONCE(deepum_fault_queue_len);
	u32 cmd_len = READ_ONCE(deepum_cmd_queue_len);
	int err;

	spin_lock_init(&pipe->fault_lock);
	mutex_init(&pipe->core_lock);
	mutex_init(&pipe->inject_lock);
	init_waitqueue_head(&pipe->progress);
	INIT_WORK(&pipe->process_work, deepum_process_work);
	INIT_WORK(&pipe->migrate_work, deepum_migrate_work);
	atomic64_set(&pipe->records_dropped, 0);
	atomic64_set(&pipe->cmds_dropped, 0);
	pipe->cfg = *cfg;
	pipe->block_shift = cfg->block_shift;
	pipe->backend = backend;

	err = -ENOMEM;
	pipe->fault_buf = kvmalloc_array(fault_len, sizeof(*pipe->fault_buf), DEEPUM_GFP);
	pipe->cmd_buf = kvmalloc_array(cmd_len, sizeof(*pipe->cmd_buf), DEEPUM_GFP);
	if (test_inject)
		pipe->inject_buf = kvmalloc_array(DEEPUM_TEST_BATCH_MAX, sizeof(*pipe->inject_buf),
						  DEEPUM_GFP);
	if (!pipe->fault_buf || !pipe->cmd_buf || (test_inject && !pipe->inject_buf))
		goto out_free_buffers;
	/* Cannot fail: the lengths are powers of two of at least DEEPUM_QUEUE_LEN_MIN. */
	kfifo_init(&pipe->faults, pipe->fault_buf, fault_len * sizeof(*pipe->fault_buf));
	kfifo_init(&pipe->cmds, pipe->cmd_buf, cmd_len * sizeof(*pipe->cmd_buf));

	if (backend->init) {
		err = backend->init(pipe, cmd_len);
		if (err)
			goto out_free_buffers;
	}

	if (deepum_prefetcher_create(cfg, &pipe->pf))
		pr_warn_ratelimited("pid %d: no memory for a prefetch core, not prefetching\n",
				    task_tgid_nr(current));
	return 0;

out_free_buffers:
	kvfree(pipe->inject_buf);
	kvfree(pipe->cmd_buf);
	kvfree(pipe->fault_buf);
	return err;
}

/*
 * Stop both work items; records still queued are never processed.  After
 * this, the counters no longer move.
 *
 * Locking: sleeps; the caller guarantees no producer is left (the file is
 * being released).  process_work feeds migrate_work, so it stops first.
 */
void deepum_pipeline_stop(struct deepum_pipeline *pipe)
{
	cancel_work_sync(&pipe->process_work);
	cancel_work_sync(&pipe->migrate_work);
}

/* Locking: none; deepum_pipeline_stop() ran and nothing else holds @pipe. */
void deepum_pipeline_destroy(struct deepum_pipeline *pipe)
{
	if (pipe->backend->destroy)
		pipe->backend->destroy(pipe);
	deepum_prefetcher_destroy(&pipe->pf);
	kvfree(pipe->inject_buf);
	kvfree(pipe->cmd_buf);
	kvfree(pipe->fault_buf);
}

/* Queue up to @n records in order; returns how many fit.  Locking: takes fault_lock. */
static u32 deepum_pipeline_enqueue(struct deepum_pipeline *pipe, const struct deepum_record *recs,
				   u32 n)
{
	u32 queued;

	spin_lock(&pipe->fault_lock);
	queued = kfifo_in(&pipe->faults, recs, n);
	/* Read without the lock by deepum_pipeline_wait(). */
	WRITE_ONCE(pipe->records_queued, pipe->records_queued + queued);
	spin_unlock(&pipe->fault_lock);
	if (queued)
		queue_work(deepum_wq, &pipe->process_work);
	return queued;
}

/*
 * Queue @rec for the core.  Never blocks, never fails: a full queue drops
 * the record and counts it in records_dropped.
 *
 * Locking: takes fault_lock, a spinlock, so that the fault hook can produce
 * from its servicing thread; process context, never from an interrupt.
 */
void deepum_pipeline_push(struct deepum_pipeline *pipe, const struct deepum_record *rec)
{
	if (!deepum_pipeline_enqueue(pipe, rec, 1))
		atomic64_inc(&pipe->records_dropped);
}

/*
 * DEEPUM_IOC_TEST_INJECT: check all @count records, then queue as many as
 * fit, in order.  One malformed record refuses the whole batch.
 *
 * Locking: takes inject_lock (the staging buffer), then fault_lock.  Sleeps.
 */
int deepum_pipeline_inject(struct deepum_pipeline *pipe, const struct deepum_record __user *urecs,
			   u32 count, u32 *accepted)
{
	u32 block_shift = READ_ONCE(pipe->block_shift);
	int err = 0;
	u32 i;

	mutex_lock(&pipe->inject_lock);
	if (copy_from_user(pipe->inject_buf, urecs, count * sizeof(*urecs))) {
		err = -EFAULT;
		goto out_unlock;
	}
	for (i = 0; i < count; i++) {
		err = deepum_record_check(block_shift, &pipe->inject_buf[i]);
		if (err)
			goto out_unlock;
	}
	*accepted = deepum_pipeline_enqueue(pipe, pipe->inject_buf, count);
out_unlock:
	mutex_unlock(&pipe->inject_lock);
	return err;
}

/*
 * Every record up to @target went through the core, and every command it
 * produced reached the backend, or the backend is full and waits for
 * room (the recording backend does until TEST_DRAIN reads it).
 */
static bool deepum_pipeline_settled(struct deepum_pipeline *pipe, u64 target)
{
	return smp_load_acquire(&pipe->records_done) >= target &&
	       (kfifo_is_empty(&pipe->cmds) || pipe->backend->congested(pipe));
}

/*
 * DEEPUM_DRAIN_F_WAIT: wait until the records queued so far are processed.
 *
 * Locking: takes none; sleeps, interruptibly: -EINTR on a signal.
 */
int deepum_pipeline_wait(struct deepum_pipeline *pipe)
{
	u64 target = READ_ONCE(pipe->records_queued);

	if (wait_event_interruptible(pipe->progress, deepum_pipeline_settled(pipe, target)))
		return -EINTR;
	return 0;
}

/*
 * Replace the core with a new, empty one for @cfg (checked).  Its counters
 * move to pipe->retired so that the context's stay monotonic.  Without
 * memory for the new core, the old one stays and -ENOMEM is returned.
 *
 * Locking: allocates and frees outside core_lock; holds it only for the
 * swap, which waits for the batch process_work may be running.  Sleeps.
 */
int deepum_pipeline_configure(struct deepum_pipeline *pipe, const struct deepum_config *cfg)
{
	struct deepum_prefetcher new_pf, old_pf;
	struct deepum_stats old_stats;
	int err;

	err = deepum_prefetcher_create(cfg, &new_pf);
	if (err)
		return err;

	mutex_lock(&pipe->core_lock);
	old_pf = pipe->pf;
	if (old_pf.core) {
		deepum_core_get_stats(old_pf.core, &old_stats);
		deepum_stats_clear_gauges(&old_stats);
		deepum_stats_add(&pipe->retired, &old_stats);
	}
	pipe->pf = new_pf;
	pipe->cfg = *cfg;
	WRITE_ONCE(pipe->block_shift, cfg->block_shift);
	mutex_unlock(&pipe->core_lock);

	deepum_prefetcher_destroy(&old_pf);
	return 0;
}

/* Locking: takes core_lock.  Sleeps. */
void deepum_pipeline_get_config(struct deepum_pipeline *pipe, struct deepum_config *ret)
{
	mutex_lock(&pipe->core_lock);
	*ret = pipe->cfg;
	mutex_unlock(&pipe->core_lock);
}

/*
 * The context's counters: its cores', old and current, and the pipeline's.
 *
 * Locking: takes core_lock, so the snapshot falls between two of
 * process_work's batches.  Sleeps.
 */
void deepum_pipeline_stats(struct deepum_pipeline *pipe, struct deepum_stats *ret)
{
	struct deepum_stats core_stats;

	mutex_lock(&pipe->core_lock);
	*ret = pipe->retired;
	if (pipe->pf.core) {
		deepum_core_get_stats(pipe->pf.core, &core_stats);
		deepum_stats_add(ret, &core_stats);
	}
	ret->records_dropped = atomic64_read(&pipe->records_dropped);
	ret->cmds_dropped = atomic64_read(&pipe->cmds_dropped);
	mutex_unlock(&pipe->core_lock);
}
