// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Contexts: the per-process state behind an attached file, and the registry
 * of live ones that module-wide counters and sysfs read.  The registry's lock
 * is taken when a context comes or goes and when module-wide counters are
 * read, never on a record's way through a pipeline.
 */
#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "backend.h"
#include "context.h"
#include "core/core.h"
#include "params.h"
#include "stats.h"
#include "uvm.h"

static DEFINE_MUTEX(deepum_defaults_lock);
static struct deepum_config deepum_defaults;		/* under deepum_defaults_lock */

static DEFINE_MUTEX(deepum_contexts_lock);
static LIST_HEAD(deepum_contexts);			/* under deepum_contexts_lock */
static unsigned int deepum_contexts_live;		/* written under deepum_contexts_lock */
static struct deepum_stats deepum_contexts_gone;	/* under deepum_contexts_lock; no gauges */
static atomic64_t deepum_context_ids = ATOMIC64_INIT(0);

/* Locking: module init, before the device exists. */
int deepum_contexts_module_init(void)
{
	/* All zero: every field its default. */
	return deepum_core_config_check(&deepum_defaults);
}

/* The backend new contexts get; enable_test_ioctls is fixed at load. */
static const struct deepum_backend_ops *deepum_contexts_backend_ops(void)
{
	if (deepum_enable_test_ioctls)
		return &deepum_record_backend;
#ifdef DEEPUM_UVM_BACKEND
	return &deepum_uvm_backend;
#else
	return &deepum_null_backend;
#endif
}

/* Locking: none; reads a constant. */
const char *deepum_contexts_backend(void)
{
	return deepum_contexts_backend_ops()->name;
}

/*
 * A context for the calling process, started from the default configuration.
 * Returns 0 or -ENOMEM (no memory for the context or its queues; no memory
 * for a prefetch core only means no prefetching).
 *
 * Locking: takes deepum_defaults_lock, then deepum_contexts_lock, each alone.
 * Sleeps.
 */
int deepum_context_create(struct deepum_context **ret)
{
	struct deepum_context *ctx;
	struct deepum_config cfg;
	int err;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;
	deepum_defaults_get(&cfg);
	err = deepum_pipeline_init(&ctx->pipe, &cfg, deepum_contexts_backend_ops(),
				   deepum_enable_test_ioctls);
	if (err) {
		kfree(ctx);
		return err;
	}
	deepum_launches_init(&ctx->launches);
	ctx->id = atomic64_inc_return(&deepum_context_ids);
	ctx->mm = current->mm;
	mmgrab(ctx->mm);
	ctx->tgid = get_pid(task_tgid(current));

	mutex_lock(&deepum_contexts_lock);
	list_add_tail(&ctx->node, &deepum_contexts);
	WRITE_ONCE(deepum_contexts_live, deepum_contexts_live + 1);
	mutex_unlock(&deepum_contexts_lock);

	*ret = ctx;
	return 0;
}

/*
 * Stop what feeds the context (the fault hook, the launch page), then its
 * pipeline; move its final counters into the module's
 * totals and free it.  Leaving the registry and joining the totals happen
 * under one lock, so module-wide counters never go backwards.
 *
 * Locking: takes deepum_contexts_lock, then the pipeline's core_lock.  Sleeps.
 */
void deepum_context_destroy(struct deepum_context *ctx)
{
	struct deepum_stats final;

	deepum_uvm_unbind(ctx);
	deepum_launches_destroy(&ctx->launches);
	deepum_pipeline_stop(&ctx->pipe);

	mutex_lock(&deepum_contexts_lock);
	deepum_pipeline_stats(&ctx->pipe, &final);
	deepum_stats_clear_gauges(&final);
	deepum_stats_add(&deepum_contexts_gone, &final);
	list_del(&ctx->node);
	WRITE_ONCE(deepum_contexts_live, deepum_contexts_live - 1);
	mutex_unlock(&deepum_contexts_lock);

	deepum_pipeline_destroy(&ctx->pipe);
	put_pid(ctx->tgid);
	mmdrop(ctx->mm);
	kfree(ctx);
}

/*
 * Whether the caller is a thread of the process that attached @ctx.  Both the
 * thread group and the memory must match: a child shares neither, and a
 * process that called execve() kept its thread group but not its memory.
 *
 * Locking: none; both fields are fixed for the context's life.
 */
bool deepum_context_is_current(const struct deepum_context *ctx)
{
	return ctx->mm == current->mm && ctx->tgid == task_tgid(current);
}

/* Locking: none; a racy read of a counter is all sysfs needs. */
unsigned int deepum_contexts_attached(void)
{
	return READ_ONCE(deepum_contexts_live);
}

/*
 * DEEPUM_SCOPE_GLOBAL: the totals of every context since the module loaded,
 * the gone ones' and the live ones'; gauges cover the live ones only.
 *
 * Locking: takes deepum_contexts_lock, then each live context's core_lock in
 * turn.  Sleeps.
 */
void deepum_contexts_stats(struct deepum_stats *ret)
{
	struct deepum_context *ctx;
	struct deepum_stats stats;

	mutex_lock(&deepum_contexts_lock);
	*ret = deepum_contexts_gone;
	list_for_each_entry(ctx, &deepum_contexts, node) {
		deepum_pipeline_stats(&ctx->pipe, &stats);
		deepum_stats_add(ret, &stats);
	}
	mutex_unlock(&deepum_contexts_lock);
}

/* Locking: takes deepum_defaults_lock.  Sleeps. */
void deepum_defaults_get(struct deepum_config *ret)
{
	mutex_lock(&deepum_defaults_lock);
	*ret = deepum_defaults;
	mutex_unlock(&deepum_defaults_lock);
}

/* @cfg is checked.  Locking: takes deepum_defaults_lock.  Sleeps. */
void deepum_defaults_set(const struct deepum_config *cfg)
{
	mutex_lock(&deepum_defaults_lock);
	deepum_defaults = *cfg;
	mutex_unlock(&deepum_defaults_lock);
}
