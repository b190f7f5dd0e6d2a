// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A stand-in for a patched nvidia-uvm in the QEMU tests: it exports the
 * uvm_ext interface (the header deepum's patch series adds, extracted by
 * kmod/nvidia/uvm-ext-header) so that deepum.ko's UVM backend runs for real:
 * registration, the fault hook under RCU, binding from a file, the helper
 * calls from the migration work item, unload.  No GPU: /dev/deepum_fake_uvm
 * files are the VA spaces, FAKE_UVM_IOC_FAULTS plays a serviced fault batch,
 * and the helpers only record their calls.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <uvm_ext.h>

#include "fake_uvm.h"

#define FAKE_UVM_LOG	4096

struct uvm_va_space_struct {
	u32 id;
};

static const struct uvm_ext_ops __rcu *fake_ops;
static DEFINE_MUTEX(fake_ops_lock);

static DEFINE_MUTEX(fake_log_lock);
static struct fake_uvm_call fake_log[FAKE_UVM_LOG];	/* under fake_log_lock */
static u32 fake_log_len;
static atomic_t fake_ids = ATOMIC_INIT(0);

static const struct file_operations fake_fops;

int uvm_ext_register(const struct uvm_ext_ops *ops)
{
	int err = -EBUSY;

	mutex_lock(&fake_ops_lock);
	if (!rcu_access_pointer(fake_ops)) {
		rcu_assign_pointer(fake_ops, ops);
		err = 0;
	}
	mutex_unlock(&fake_ops_lock);
	return err;
}
EXPORT_SYMBOL_GPL(uvm_ext_register);

void uvm_ext_unregister(const struct uvm_ext_ops *ops)
{
	mutex_lock(&fake_ops_lock);
	if (rcu_access_pointer(fake_ops) == ops)
		RCU_INIT_POINTER(fake_ops, NULL);
	mutex_unlock(&fake_ops_lock);
	synchronize_rcu();
}
EXPORT_SYMBOL_GPL(uvm_ext_unregister);

struct uvm_va_space_struct *uvm_ext_va_space_from_file(struct file *filp)
{
	if (filp->f_op != &fake_fops)
		return ERR_PTR(-EBADF);
	return filp->private_data;
}
EXPORT_SYMBOL_GPL(uvm_ext_va_space_from_file);

/* Helpers may sleep, as nvidia-uvm's do: a mutex, and might_sleep() checks it. */
static int fake_record(u32 op, struct uvm_va_space_struct *va_space, u64 addr, u64 len, const u8 *uuid)
{
	might_sleep();
	mutex_lock(&fake_log_lock);
	if (fake_log_len < FAKE_UVM_LOG) {
		struct fake_uvm_call *c = &fake_log[fake_log_len++];

		memset(c, 0, sizeof(*c));
		c->op = op;
		c->va_space = va_space->id;
		c->addr = addr;
		c->len = len;
		if (uuid)
			memcpy(c->gpu_uuid, uuid, sizeof(c->gpu_uuid));
	}
	mutex_unlock(&fake_log_lock);
	return 0;
}

int uvm_ext_migrate(struct uvm_va_space_struct *va_space, u64 base, u64 length, const u8 *gpu_uuid)
{
	return fake_record(FAKE_UVM_OP_MIGRATE, va_space, base, length, gpu_uuid);
}
EXPORT_SYMBOL_GPL(uvm_ext_migrate);

int uvm_ext_evict_block(struct uvm_va_space_struct *va_space, u64 address)
{
	return fake_record(FAKE_UVM_OP_EVICT, va_space, address, 0, NULL);
}
EXPORT_SYMBOL_GPL(uvm_ext_evict_block);

int uvm_ext_block_lru(struct uvm_va_space_struct *va_space, u64 address, const u8 *gpu_uuid, bool hot)
{
	return -ENODATA;
}
EXPORT_SYMBOL_GPL(uvm_ext_block_lru);

int uvm_ext_gpu_mem_info(struct uvm_va_space_struct *va_space, const u8 *gpu_uuid,
			 struct uvm_ext_gpu_mem_info *info)
{
	return -EOPNOTSUPP;
}
EXPORT_SYMBOL_GPL(uvm_ext_gpu_mem_info);

#ifdef UVM_EXT_HAS_DISCARD
int uvm_ext_discard(struct uvm_va_space_struct *va_space, u64 base, u64 length)
{
	return fake_record(FAKE_UVM_OP_DISCARD, va_space, base, length, NULL);
}
EXPORT_SYMBOL_GPL(uvm_ext_discard);
#endif

/* As nvidia-uvm's fault bottom half: the hook inside rcu_read_lock(). */
static long fake_faults(struct uvm_va_space_struct *va_space, void __user *uarg)
{
	struct uvm_ext_fault faults[FAKE_UVM_CHUNK];
	const struct uvm_ext_ops *ops;
	struct fake_uvm_faults req;
	u32 i;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.count > FAKE_UVM_CHUNK)
		return -EINVAL;
	for (i = 0; i < req.count; i++) {
		faults[i] = (struct uvm_ext_fault){
			.address = req.addrs[i] & PAGE_MASK,
			.timestamp = ktime_get_ns(),
			.access_type_mask = 1U << req.access_type,
			.num_instances = 1,
			.access_type = req.access_type,
		};
	}
	rcu_read_lock();
	ops = rcu_dereference(fake_ops);
	if (ops && ops->fault_batch)
		ops->fault_batch(va_space, req.gpu_uuid, 0, faults, req.count);
	rcu_read_unlock();
	return 0;
}

static long fake_calls(void __user *uarg)
{
	struct fake_uvm_calls req;
	long err = 0;
	u32 n;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	mutex_lock(&fake_log_lock);
	n = min(req.max, fake_log_len);
	if (copy_to_user(u64_to_user_ptr(req.buf), fake_log, n * sizeof(*fake_log))) {
		err = -EFAULT;
	} else {
		memmove(fake_log, fake_log + n, (fake_log_len - n) * sizeof(*fake_log));
		fake_log_len -= n;
		req.count = n;
	}
	mutex_unlock(&fake_log_lock);
	if (!err && copy_to_user(uarg, &req, sizeof(req)))
		err = -EFAULT;
	return err;
}

static long fake_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct uvm_va_space_struct *va_space = file->private_data;

	switch (cmd) {
	case FAKE_UVM_IOC_FAULTS:
		return fake_faults(va_space, (void __user *)arg);
	case FAKE_UVM_IOC_CALLS:
		return fake_calls((void __user *)arg);
	case FAKE_UVM_IOC_ID:
		return put_user(va_space->id, (u32 __user *)arg);
	default:
		return -ENOTTY;
	}
}

static int fake_open(struct inode *inode, struct file *file)
{
	struct uvm_va_space_struct *va_space = kzalloc(sizeof(*va_space), GFP_KERNEL);

	if (!va_space)
		return -ENOMEM;
	va_space->id = atomic_inc_return(&fake_ids);
	file->private_data = va_space;
	return 0;
}

static int fake_release(struct inode *inode, struct file *file)
{
	kfree(file->private_data);
	return 0;
}

static const struct file_operations fake_fops = {
	.owner = THIS_MODULE,
	.open = fake_open,
	.release = fake_release,
	.unlocked_ioctl = fake_ioctl,
};

static struct miscdevice fake_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "deepum_fake_uvm",
	.fops = &fake_fops,
	.mode = 0666,
};

static int __init fake_init(void)
{
	return misc_register(&fake_dev);
}

static void __exit fake_exit(void)
{
	misc_deregister(&fake_dev);
}

module_init(fake_init);
module_exit(fake_exit);
MODULE_DESCRIPTION("deepum tests: a stand-in for nvidia-uvm's uvm_ext interface");
MODULE_LICENSE("Dual MIT/GPL");
