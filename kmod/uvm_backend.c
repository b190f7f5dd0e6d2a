// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The nvidia-uvm backend: the one file that knows nvidia-uvm, and only
 * through uvm_ext.h, the interface deepum's patch adds to it
 * (kmod/patches/README.md).
 *
 * In: nvidia-uvm calls deepum_uvm_fault_batch() after servicing each
 * replayable fault batch; the faults of a bound VA space become FAULT
 * records in its context's fault queue, after the launches the GPU reached
 * according to its launch page (so the running kernel is the one the last
 * LAUNCH record named).  Out: the pipeline's migration work item hands
 * each command to deepum_uvm_migrate(), which starts it with an exported
 * helper and does not wait for the copy.
 *
 * A context is bound to a VA space by DEEPUM_IOC_BIND_UVM, from a
 * /dev/nvidia-uvm file of its process; the binding holds a reference on that
 * file, so the VA space outlives it.  Bindings are found from the fault hook
 * under RCU (the hook may not sleep); binding and unbinding serialise on
 * deepum_uvm_lock.  Lock order: deepum_uvm_lock, then a pipeline's
 * fault_lock (in deepum_pipeline_push()); the hook takes only fault_lock.
 */
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include <uvm_ext.h>

#include "context.h"
#include "pipeline.h"
#include "uvm.h"

struct deepum_uvm_binding {
	struct list_head node;		/* in deepum_uvm_bound while bound */
	struct deepum_pipeline *pipe;
	struct file *file;		/* set before va_space, put on destroy */
	struct uvm_va_space_struct *va_space;	/* published with release; NULL: unbound */
	spinlock_t gpu_lock;		/* gpu_uuid: written once by the hook */
	u8 gpu_uuid[UVM_EXT_UUID_SIZE];
	bool gpu_known;			/* under gpu_lock; READ_ONCE() outside */
};

static DEFINE_MUTEX(deepum_uvm_lock);
static LIST_HEAD(deepum_uvm_bound);	/* RCU for readers, deepum_uvm_lock for writers */

/* nvidia-uvm's access types as the records carry them. */
static u32 deepum_uvm_access(u8 access_type)
{
	switch (access_type) {
	case UVM_EXT_ACCESS_READ:
		return DEEPUM_ACCESS_READ;
	case UVM_EXT_ACCESS_WRITE:
		return DEEPUM_ACCESS_WRITE;
	case UVM_EXT_ACCESS_ATOMIC_WEAK:
	case UVM_EXT_ACCESS_ATOMIC_STRONG:
		return DEEPUM_ACCESS_ATOMIC;
	default:
		return DEEPUM_ACCESS_PREFETCH;
	}
}

/*
 * Locking: called by nvidia-uvm inside rcu_read_lock(), from a GPU's fault
 * bottom half; must not sleep.  Takes gpu_lock once per binding, the
 * launch page's read_lock, and each pipeline's fault_lock per record.
 * Bounded: at most UVM_EXT_FAULT_CHUNK records and one batch of launches
 * per call, dropped (and counted) if the fault queue is full.
 */
static void deepum_uvm_fault_batch(struct uvm_va_space_struct *va_space, const u8 *gpu_uuid,
				   u32 batch_id, const struct uvm_ext_fault *faults, u32 count)
{
	struct deepum_uvm_binding *b;
	struct deepum_context *ctx;
	bool more;
	u32 i;

	list_for_each_entry_rcu(b, &deepum_uvm_bound, node) {
		if (READ_ONCE(b->va_space) != va_space)
			continue;
		/* A context prefetches to one GPU: the first that faults. */
		if (!READ_ONCE(b->gpu_known)) {
			spin_lock(&b->gpu_lock);
			if (!b->gpu_known) {
				memcpy(b->gpu_uuid, gpu_uuid, UVM_EXT_UUID_SIZE);
				WRITE_ONCE(b->gpu_known, true);
			}
			spin_unlock(&b->gpu_lock);
		}
		ctx = container_of(b->pipe, struct deepum_context, pipe);
		deepum_launches_take(ctx, &more);
		if (more)
			deepum_queue_work(&ctx->launches.watch);
		for (i = 0; i < count && i < UVM_EXT_FAULT_CHUNK; i++) {
			struct deepum_record rec = {
				.type = DEEPUM_REC_FAULT,
				.ts = faults[i].timestamp,
				.addr = faults[i].address,
				.exec_id = DEEPUM_EXEC_NONE,
				.aux = deepum_uvm_access(faults[i].access_type),
			};

			/* Nothing to learn from a fault the GPU will never see serviced. */
			if (faults[i].flags & (UVM_EXT_FAULT_FATAL | UVM_EXT_FAULT_INVALID_PREFETCH))
				continue;
			deepum_pipeline_push(b->pipe, &rec);
		}
		return;
	}
}

static const struct uvm_ext_ops deepum_uvm_ops = {
	.fault_batch = deepum_uvm_fault_batch,
};

/* Locking: none; the pipeline is not yet shared. */
static int deepum_uvm_init(struct deepum_pipeline *pipe, u32 queue_len)
{
	struct deepum_uvm_binding *b;

	b = kzalloc(sizeof(*b), DEEPUM_GFP);
	if (!b)
		return -ENOMEM;
	INIT_LIST_HEAD(&b->node);
	spin_lock_init(&b->gpu_lock);
	b->pipe = pipe;
	pipe->backend_data = b;
	return 0;
}

/* Locking: none; the pipeline is stopped and deepum_uvm_unbind() has run. */
static void deepum_uvm_destroy(struct deepum_pipeline *pipe)
{
	struct deepum_uvm_binding *b = pipe->backend_data;

	if (b->file)
		fput(b->file);
	kfree(b);
}

/*
 * Start @cmd in nvidia-uvm.  A helper that fails costs that command only;
 * the pipeline never waits and never stops for it.  Evictions the
 * core charged to the fault path (DEEPUM_CMD_F_DEMAND) are the driver's own.
 *
 * Locking: the context's migration work item only; the helpers take
 * nvidia-uvm's locks themselves and may sleep.
 */
static bool deepum_uvm_migrate(struct deepum_pipeline *pipe, const struct deepum_cmd *cmd)
{
	struct deepum_uvm_binding *b = pipe->backend_data;
	struct uvm_va_space_struct *va_space = smp_load_acquire(&b->va_space);
	u64 len = 1ULL << READ_ONCE(pipe->block_shift);
	u8 gpu_uuid[UVM_EXT_UUID_SIZE];
	int err = 0;

	if (!va_space || cmd->flags & DEEPUM_CMD_F_DEMAND)
		return true;
	switch (cmd->op) {
	case DEEPUM_CMD_PREFETCH:
		if (!READ_ONCE(b->gpu_known))
			break;	/* no fault yet, so no GPU to prefetch to */
		spin_lock(&b->gpu_lock);
		memcpy(gpu_uuid, b->gpu_uuid, sizeof(gpu_uuid));
		spin_unlock(&b->gpu_lock);
		err = uvm_ext_migrate(va_space, cmd->addr, len, gpu_uuid);
		break;
	case DEEPUM_CMD_DISCARD:
#ifdef UVM_EXT_HAS_DISCARD
		err = uvm_ext_discard(va_space, cmd->addr, len);
		break;
#else
		/* No discard path in this driver: write the dead data back. */
		fallthrough;
#endif
	case DEEPUM_CMD_EVICT:
		err = uvm_ext_evict_block(va_space, cmd->addr);
		break;
	}
	if (err)
		pr_debug_ratelimited("op %u at 0x%llx: %d\n", cmd->op, cmd->addr, err);
	return true;
}

/* Locking: none. */
static bool deepum_uvm_congested(struct deepum_pipeline *pipe)
{
	return false;
}

const struct deepum_backend_ops deepum_uvm_backend = {
	.name = "uvm",
	.init = deepum_uvm_init,
	.destroy = deepum_uvm_destroy,
	.migrate = deepum_uvm_migrate,
	.congested = deepum_uvm_congested,
};

/*
 * DEEPUM_IOC_BIND_UVM for @ctx.
 *
 * Locking: takes deepum_uvm_lock.  Sleeps.
 */
int deepum_uvm_bind(struct deepum_context *ctx, unsigned int fd)
{
	struct deepum_uvm_binding *b = ctx->pipe.backend_data, *other;
	struct uvm_va_space_struct *va_space;
	struct file *file;
	int err = -EBUSY;

	if (ctx->pipe.backend != &deepum_uvm_backend)
		return -ENODEV;	/* the test ioctls' recording backend */
	file = fget(fd);
	if (!file)
		return -EBADF;
	va_space = uvm_ext_va_space_from_file(file);
	if (IS_ERR(va_space)) {
		fput(file);
		return PTR_ERR(va_space);
	}
	mutex_lock(&deepum_uvm_lock);
	if (b->va_space)
		goto out_unlock;
	list_for_each_entry(other, &deepum_uvm_bound, node)
		if (other->va_space == va_space)
			goto out_unlock;
	b->file = file;
	smp_store_release(&b->va_space, va_space);
	list_add_tail_rcu(&b->node, &deepum_uvm_bound);
	mutex_unlock(&deepum_uvm_lock);
	return 0;

out_unlock:
	mutex_unlock(&deepum_uvm_lock);
	fput(file);
	return err;
}

/*
 * Stop the fault hook from feeding @ctx: once this returns no hook call is
 * inside its pipeline.  The file stays held until the pipeline is destroyed,
 * since its migration work item may still be running a helper.
 *
 * Locking: takes deepum_uvm_lock, then waits for an RCU grace period.  Sleeps.
 */
void deepum_uvm_unbind(struct deepum_context *ctx)
{
	struct deepum_uvm_binding *b = ctx->pipe.backend_data;
	bool bound;

	if (ctx->pipe.backend != &deepum_uvm_backend)
		return;
	mutex_lock(&deepum_uvm_lock);
	bound = b->va_space;
	if (bound)
		list_del_rcu(&b->node);
	mutex_unlock(&deepum_uvm_lock);
	if (bound)
		synchronize_rcu();
}

/* Locking: module init. */
int deepum_uvm_module_init(void)
{
	int err = uvm_ext_register(&deepum_uvm_ops);

	if (err)
		pr_err("nvidia-uvm refused the hook table (%d): another module holds it\n", err);
	return err;
}

/* Locking: module exit; no context is left, so nothing is bound. */
void deepum_uvm_module_exit(void)
{
	uvm_ext_unregister(&deepum_uvm_ops);
}
