// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /dev/deepum: the ioctls of include/uapi/deepum.h.
 *
 * A file starts unbound.  DEEPUM_IOC_API must come first (-EPROTO before);
 * DEEPUM_IOC_ATTACH then binds it, once, to the calling process and gives it
 * a context (context.c) with its own prefetch pipeline.  Everything about a
 * context needs the binding (-ENOTCONN) and a thread of that process (-EPERM).
 *
 * Checks come in this order, so each errno means one thing: unknown command
 * (-ENOTTY); test ioctl while they are disabled (-EPERM); no handshake yet
 * (-EPROTO); the argument cannot be copied in (-EFAULT, -E2BIG); a bad
 * argument (-EINVAL); then what the command needs of the file and the caller
 * (-ENOTCONN, -EPERM, -EBUSY); then what it does (-ENOMEM, -EFAULT, -EINTR).
 */
#include <linux/bits.h>
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "backend.h"
#include "chardev.h"
#include "context.h"
#include "core/core.h"
#include "include/uapi/deepum.h"
#include "params.h"
#include "sysfs.h"
#include "uvm.h"

#define DEEPUM_FEATURES                                                                  \
	(DEEPUM_FEATURE_PREFETCH | DEEPUM_FEATURE_PREEVICT | DEEPUM_FEATURE_INVALIDATE |      \
	 DEEPUM_FEATURE_LAUNCH_PAGE | DEEPUM_UVM_FEATURES)

/* One open file of /dev/deepum. */
struct deepum_file {
	bool handshake_done;		/* DEEPUM_IOC_API succeeded; READ_ONCE() */
	struct mutex attach_lock;	/* one DEEPUM_IOC_ATTACH at a time */
	/* Set once under attach_lock, read with smp_load_acquire(); freed on release. */
	struct deepum_context *ctx;
};

/* Every ioctl argument: the dispatcher holds one on its stack. */
union deepum_ioctl_arg {
	struct deepum_api api;
	struct deepum_attach attach;
	struct deepum_set_exec_id set_exec_id;
	struct deepum_config_req config;
	struct deepum_range range;
	struct deepum_stats_req stats;
	struct deepum_bind_uvm bind_uvm;
	struct deepum_test_inject inject;
	struct deepum_test_drain drain;
};

#define DEEPUM_IOCTL_F_HANDSHAKE	BIT(0)	/* allowed before the handshake: is it */
#define DEEPUM_IOCTL_F_TEST		BIT(1)	/* refused unless enable_test_ioctls */

struct deepum_ioctl_desc {
	unsigned int cmd;	/* direction and the size this module was built with */
	unsigned int flags;	/* DEEPUM_IOCTL_F_* */
	int (*func)(struct deepum_file *df, union deepum_ioctl_arg *arg);
};

static int deepum_ioctl_api(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_attach(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_set_exec_id(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_config(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_get_config(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_invalidate(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_stats(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_bind_uvm(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_test_inject(struct deepum_file *df, union deepum_ioctl_arg *arg);
static int deepum_ioctl_test_drain(struct deepum_file *df, union deepum_ioctl_arg *arg);

#define DEEPUM_IOCTL(name, fn, fl) \
	[DEEPUM_IOC_NR_##name] = { .cmd = DEEPUM_IOC_##name, .flags = (fl), .func = (fn) }

static const struct deepum_ioctl_desc deepum_ioctls[] = {
	DEEPUM_IOCTL(API,		deepum_ioctl_api,		DEEPUM_IOCTL_F_HANDSHAKE),
	DEEPUM_IOCTL(ATTACH,		deepum_ioctl_attach,		0),
	DEEPUM_IOCTL(SET_EXEC_ID,	deepum_ioctl_set_exec_id,	0),
	DEEPUM_IOCTL(CONFIG,		deepum_ioctl_config,		0),
	DEEPUM_IOCTL(GET_CONFIG,	deepum_ioctl_get_config,	0),
	DEEPUM_IOCTL(INVALIDATE,	deepum_ioctl_invalidate,	0),
	DEEPUM_IOCTL(STATS,		deepum_ioctl_stats,		0),
	DEEPUM_IOCTL(BIND_UVM,		deepum_ioctl_bind_uvm,		0),
	DEEPUM_IOCTL(TEST_INJECT,	deepum_ioctl_test_inject,	DEEPUM_IOCTL_F_TEST),
	DEEPUM_IOCTL(TEST_DRAIN,	deepum_ioctl_test_drain,	DEEPUM_IOCTL_F_TEST),
};

static bool deepum_ioctl_allowed(const struct deepum_ioctl_desc *desc)
{
	return !(desc->flags & DEEPUM_IOCTL_F_TEST) || deepum_enable_test_ioctls;
}

/* What struct deepum_api's ioctls field reports: bit n for ioctl number n, if usable. */
static u64 deepum_ioctl_mask(void)
{
	u64 mask = 0;
	unsigned int nr;

	BUILD_BUG_ON(ARRAY_SIZE(deepum_ioctls) > 64);
	for (nr = 0; nr < ARRAY_SIZE(deepum_ioctls); nr++)
		if (deepum_ioctls[nr].func && deepum_ioctl_allowed(&deepum_ioctls[nr]))
			mask |= BIT_ULL(nr);
	return mask;
}

static bool deepum_reserved_zero(const void *reserved, size_t size)
{
	return !memchr_inv(reserved, 0, size);
}

/*
 * The context of @df, for the calling thread: -ENOTCONN before ATTACH,
 * -EPERM for any thread outside the process that attached it.
 *
 * Locking: none; the pointer is published once, with release semantics.
 */
static struct deepum_context *deepum_file_context(struct deepum_file *df)
{
	struct deepum_context *ctx = smp_load_acquire(&df->ctx);

	if (!ctx)
		return ERR_PTR(-ENOTCONN);
	if (!deepum_context_is_current(ctx))
		return ERR_PTR(-EPERM);
	return ctx;
}

/*
 * DEEPUM_IOC_API: refuse what this module cannot honour, then say what it
 * speaks.  A newer minor version of the same major is accepted: minors only
 * add, and what they add is negotiated through the feature and ioctl masks.
 *
 * Locking: none; it reads constants and sets a flag that only ever goes up.
 */
static int deepum_ioctl_api(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_api *api = &arg->api;

	if (api->api >> 16 != DEEPUM_API_MAJOR)
		return -EINVAL;
	if (api->flags || !deepum_reserved_zero(api->reserved, sizeof(api->reserved)))
		return -EINVAL;
	if (api->features & ~DEEPUM_FEATURES)
		return -EINVAL;

	memset(api, 0, sizeof(*api));
	api->api = DEEPUM_API_VERSION;
	api->features = DEEPUM_FEATURES;
	api->ioctls = deepum_ioctl_mask();
	WRITE_ONCE(df->handshake_done, true);
	return 0;
}

/*
 * DEEPUM_IOC_ATTACH: bind the file to the caller's process, once.
 *
 * Locking: takes attach_lock, then what deepum_context_create() takes.  Sleeps.
 */
static int deepum_ioctl_attach(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_attach *req = &arg->attach;
	struct deepum_context *ctx;
	int err;

	if (req->flags || !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;

	mutex_lock(&df->attach_lock);
	err = -EBUSY;
	if (df->ctx)
		goto out_unlock;
	err = deepum_context_create(&ctx);
	if (err)
		goto out_unlock;
	/* Pairs with deepum_file_context(): the context is complete when seen. */
	smp_store_release(&df->ctx, ctx);

	memset(req, 0, sizeof(*req));
	req->pid = task_tgid_vnr(current);
	req->context = ctx->id;
out_unlock:
	mutex_unlock(&df->attach_lock);
	return err;
}

/*
 * DEEPUM_IOC_SET_EXEC_ID: a LAUNCH record into the pipeline.  A full fault
 * queue drops it (counted), never fails the call.
 *
 * Locking: what deepum_pipeline_push() takes (a spinlock, briefly).
 */
static int deepum_ioctl_set_exec_id(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	const struct deepum_set_exec_id *req = &arg->set_exec_id;
	struct deepum_context *ctx;
	struct deepum_record rec = {
		.type = DEEPUM_REC_LAUNCH,
		.ts = req->ts ?: ktime_get_ns(),
		.addr = req->name_hash,
		.exec_id = req->exec_id,
		.aux = req->stream,
	};

	if (!deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	ctx = deepum_file_context(df);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	deepum_pipeline_push(&ctx->pipe, &rec);
	return 0;
}

/*
 * DEEPUM_IOC_BIND_UVM: the context's GPU faults and commands go through
 * nvidia-uvm (uvm_backend.c); -ENODEV in a module built without it.
 *
 * Locking: what deepum_uvm_bind() takes.  Sleeps.
 */
static int deepum_ioctl_bind_uvm(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	const struct deepum_bind_uvm *req = &arg->bind_uvm;
	struct deepum_context *ctx;

	if (req->flags || !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	ctx = deepum_file_context(df);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	return deepum_uvm_bind(ctx, req->fd);
}

/*
 * DEEPUM_IOC_INVALIDATE: a FREE record into the pipeline, dropped like a
 * LAUNCH when the queue is full.
 *
 * Locking: what deepum_pipeline_push() takes (a spinlock, briefly).
 */
static int deepum_ioctl_invalidate(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	const struct deepum_range *req = &arg->range;
	struct deepum_context *ctx;
	struct deepum_record rec = {
		.type = DEEPUM_REC_FREE,
		.addr = req->addr,
		.len = req->len,
	};

	if (!deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	if (req->addr + req->len < req->addr)
		return -EINVAL;
	ctx = deepum_file_context(df);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	rec.ts = ktime_get_ns();
	deepum_pipeline_push(&ctx->pipe, &rec);
	return 0;
}

/*
 * DEEPUM_IOC_CONFIG: a new core for the context (tables empty), or new
 * defaults for contexts attached from now on.  Answers with the
 * configuration in force, defaults filled in.
 *
 * Locking: what deepum_pipeline_configure() or deepum_defaults_set() take.
 * Sleeps.
 */
static int deepum_ioctl_config(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_config_req *req = &arg->config;
	struct deepum_context *ctx;

	if (req->flags || !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;

	switch (req->scope) {
	case DEEPUM_SCOPE_CONTEXT:
		ctx = deepum_file_context(df);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
		if (deepum_core_config_check(&req->config))
			return -EINVAL;
		return deepum_pipeline_configure(&ctx->pipe, &req->config);
	case DEEPUM_SCOPE_DEFAULTS:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		if (deepum_core_config_check(&req->config))
			return -EINVAL;
		deepum_defaults_set(&req->config);
		return 0;
	default:
		return -EINVAL;
	}
}

/* Locking: what deepum_pipeline_get_config() or deepum_defaults_get() take.  Sleeps. */
static int deepum_ioctl_get_config(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_config_req *req = &arg->config;
	struct deepum_context *ctx;

	if (req->flags || !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;

	switch (req->scope) {
	case DEEPUM_SCOPE_CONTEXT:
		ctx = deepum_file_context(df);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
		deepum_pipeline_get_config(&ctx->pipe, &req->config);
		return 0;
	case DEEPUM_SCOPE_DEFAULTS:
		deepum_defaults_get(&req->config);
		return 0;
	default:
		return -EINVAL;
	}
}

/* Locking: what deepum_pipeline_stats() or deepum_contexts_stats() take.  Sleeps. */
static int deepum_ioctl_stats(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_stats_req *req = &arg->stats;
	struct deepum_context *ctx;

	if (req->flags || !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;

	switch (req->scope) {
	case DEEPUM_SCOPE_CONTEXT:
		ctx = deepum_file_context(df);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
		deepum_pipeline_stats(&ctx->pipe, &req->stats);
		return 0;
	case DEEPUM_SCOPE_GLOBAL:
		deepum_contexts_stats(&req->stats);
		return 0;
	default:
		return -EINVAL;
	}
}

/* Locking: what deepum_pipeline_inject() takes.  Sleeps. */
static int deepum_ioctl_test_inject(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_test_inject *req = &arg->inject;
	struct deepum_context *ctx;

	if (req->flags || req->reserved0 ||
	    !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	if (req->count > DEEPUM_TEST_BATCH_MAX)
		return -EINVAL;
	ctx = deepum_file_context(df);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	return deepum_pipeline_inject(&ctx->pipe, u64_to_user_ptr(req->records), req->count,
				      &req->accepted);
}

/* Locking: none held while waiting; then what the recording backend's drain takes.  Sleeps. */
static int deepum_ioctl_test_drain(struct deepum_file *df, union deepum_ioctl_arg *arg)
{
	struct deepum_test_drain *req = &arg->drain;
	struct deepum_context *ctx;
	int err;

	if (req->flags & ~DEEPUM_DRAIN_F_WAIT || req->reserved0 ||
	    !deepum_reserved_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	if (req->max > DEEPUM_TEST_BATCH_MAX)
		return -EINVAL;
	ctx = deepum_file_context(df);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	if (req->flags & DEEPUM_DRAIN_F_WAIT) {
		err = deepum_pipeline_wait(&ctx->pipe);
		if (err)
			return err;
	}
	/* Test ioctls enabled means every context records (params.c). */
	return deepum_record_backend_drain(&ctx->pipe, u64_to_user_ptr(req->cmds), req->max,
					   &req->count);
}

/*
 * Structs only grow at the end, so the command's size is not part of its
 * identity: an older caller's shorter struct is zero-extended, a newer
 * caller's longer one is accepted if the part this module does not know is
 * zero (copy_struct_from_user()), and only the common part is copied back.
 *
 * Locking: none taken here; each handler documents its own.
 */
static long deepum_ioctl(struct file *file, unsigned int cmd, unsigned long uarg)
{
	struct deepum_file *df = file->private_data;
	void __user *uptr = (void __user *)uarg;
	const struct deepum_ioctl_desc *desc;
	unsigned int nr = _IOC_NR(cmd);
	unsigned int usize = _IOC_SIZE(cmd);
	union deepum_ioctl_arg karg;
	unsigned int ksize;
	int ret;

	/* Arguments that outgrow this belong in a kmalloc()ed buffer. */
	BUILD_BUG_ON(sizeof(karg) > 256);

	if (_IOC_TYPE(cmd) != DEEPUM_IOC_MAGIC || nr >= ARRAY_SIZE(deepum_ioctls))
		return -ENOTTY;
	desc = &deepum_ioctls[array_index_nospec(nr, ARRAY_SIZE(deepum_ioctls))];
	if (!desc->func || _IOC_DIR(cmd) != _IOC_DIR(desc->cmd))
		return -ENOTTY;
	if (!deepum_ioctl_allowed(desc))
		return -EPERM;
	if (!(desc->flags & DEEPUM_IOCTL_F_HANDSHAKE) && !READ_ONCE(df->handshake_done))
		return -EPROTO;
	ksize = _IOC_SIZE(desc->cmd);

	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		ret = copy_struct_from_user(&karg, ksize, uptr, usize);
		if (ret)
			return ret;
	} else {
		memset(&karg, 0, ksize);
	}

	ret = desc->func(df, &karg);
	if (ret)
		return ret;

	if ((_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(uptr, &karg, min(usize, ksize)))
		return -EFAULT;
	return 0;
}

/*
 * mmap(): the context's launch page (launches.c), after ATTACH, from its
 * process only (-ENOTCONN, -EPERM as for the ioctls).
 *
 * Locking: mmap_lock is held by the caller; takes what
 * deepum_launches_mmap() takes.  Sleeps.
 */
static int deepum_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct deepum_context *ctx = deepum_file_context(file->private_data);

	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	return deepum_launches_mmap(ctx, vma);
}

/* Locking: none needed; the file is not yet visible to anyone else. */
static int deepum_open(struct inode *inode, struct file *file)
{
	struct deepum_file *df;

	df = kzalloc(sizeof(*df), GFP_KERNEL_ACCOUNT);
	if (!df)
		return -ENOMEM;
	mutex_init(&df->attach_lock);
	file->private_data = df;
	return 0;
}

/*
 * The last reference to the file is gone, so no ioctl is running on it:
 * the context, its pipeline and its counters go (its counters into the
 * module's totals).
 *
 * Locking: what deepum_context_destroy() takes.  Sleeps.
 */
static int deepum_release(struct inode *inode, struct file *file)
{
	struct deepum_file *df = file->private_data;

	if (df->ctx)
		deepum_context_destroy(df->ctx);
	kfree(df);
	return 0;
}

/* .owner: every open file holds a module reference, so rmmod fails while one is open. */
static const struct file_operations deepum_fops = {
	.owner		= THIS_MODULE,
	.open		= deepum_open,
	.release	= deepum_release,
	.unlocked_ioctl	= deepum_ioctl,
	.mmap		= deepum_mmap,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice deepum_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "deepum",
	.fops	= &deepum_fops,
	.groups	= deepum_sysfs_groups,
	.mode	= 0660,		/* root:root unless a udev rule says otherwise */
};

/* Locking: module init; nothing can reach the device before it returns. */
int deepum_chardev_init(void)
{
	return misc_register(&deepum_misc);
}

/* Locking: module exit; no file is open, the module reference saw to that. */
void deepum_chardev_exit(void)
{
	misc_deregister(&deepum_misc);
}
