// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /dev/deepum: each open file is one process's prefetcher, with a prefetch
 * core of its own, driven through the ioctls of include/uapi/deepum.h.
 */
#include <linux/bits.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "chardev.h"
#include "core/core.h"
#include "include/uapi/deepum.h"

#define DEEPUM_FEATURES \
	(DEEPUM_FEATURE_PREFETCH | DEEPUM_FEATURE_PREEVICT | DEEPUM_FEATURE_INVALIDATE)

/* Every ioctl argument: the dispatcher holds one on its stack. */
union deepum_ioctl_arg {
	struct deepum_api api;
};

struct deepum_ioctl_desc {
	unsigned int cmd;	/* direction and the size this module was built with */
	int (*func)(struct file *file, union deepum_ioctl_arg *arg);
};

static int deepum_ioctl_api(struct file *file, union deepum_ioctl_arg *arg);

#define DEEPUM_IOCTL(name, fn) \
	[DEEPUM_IOC_NR_##name] = { .cmd = DEEPUM_IOC_##name, .func = fn }

static const struct deepum_ioctl_desc deepum_ioctls[] = {
	DEEPUM_IOCTL(API, deepum_ioctl_api),
};

/* What struct deepum_api's ioctls field reports: bit n for ioctl number n. */
static u64 deepum_ioctl_mask(void)
{
	u64 mask = 0;
	unsigned int nr;

	BUILD_BUG_ON(ARRAY_SIZE(deepum_ioctls) > 64);
	for (nr = 0; nr < ARRAY_SIZE(deepum_ioctls); nr++)
		if (deepum_ioctls[nr].func)
			mask |= BIT_ULL(nr);
	return mask;
}

/*
 * DEEPUM_IOC_API: refuse what this module cannot honour, then say what it
 * speaks.  A newer minor version of the same major is accepted: minors only
 * add, and what they add is negotiated through the feature and ioctl masks.
 *
 * Locking: none needed; it reads only constants.
 */
static int deepum_ioctl_api(struct file *file, union deepum_ioctl_arg *arg)
{
	struct deepum_api *api = &arg->api;

	if (api->api >> 16 != DEEPUM_API_MAJOR)
		return -EINVAL;
	if (api->flags || memchr_inv(api->reserved, 0, sizeof(api->reserved)))
		return -EINVAL;
	if (api->features & ~DEEPUM_FEATURES)
		return -EINVAL;

	memset(api, 0, sizeof(*api));
	api->api = DEEPUM_API_VERSION;
	api->features = DEEPUM_FEATURES;
	api->ioctls = deepum_ioctl_mask();
	return 0;
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
	ksize = _IOC_SIZE(desc->cmd);

	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		ret = copy_struct_from_user(&karg, ksize, uptr, usize);
		if (ret)
			return ret;
	} else {
		memset(&karg, 0, ksize);
	}

	ret = desc->func(file, &karg);
	if (ret)
		return ret;

	if ((_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(uptr, &karg, min(usize, ksize)))
		return -EFAULT;
	return 0;
}

/*
 * Give the file its own prefetch core.  Without memory for one the file
 * still opens: the process then runs without prefetching, never fails.
 *
 * Locking: none needed; the file is not yet visible to anyone else.
 */
static int deepum_open(struct inode *inode, struct file *file)
{
	struct deepum_config cfg = {};	/* all defaults */
	struct deepum_core *core;
	int err;

	err = deepum_core_create(&cfg, &core);
	if (err == -ENOMEM)
		pr_warn_ratelimited("pid %d: no memory for a prefetch core, not prefetching\n",
				    task_pid_nr(current));
	else if (err)
		return err;

	file->private_data = core;
	return 0;
}

/* Locking: none needed; the last reference to the file is gone. */
static int deepum_release(struct inode *inode, struct file *file)
{
	deepum_core_destroy(file->private_data);
	return 0;
}

static const struct file_operations deepum_fops = {
	.owner		= THIS_MODULE,
	.open		= deepum_open,
	.release	= deepum_release,
	.unlocked_ioctl	= deepum_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice deepum_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "deepum",
	.fops	= &deepum_fops,
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
