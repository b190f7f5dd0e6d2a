// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * hookcheck: the ABI a deepum backend uses, linked against a patched
 * nvidia-uvm (kmod/patches/).  Building it makes modpost resolve every
 * uvm_ext_* export, and the compiler check each one's type against the
 * declarations below, which are what deepum's backend is written to.
 *
 * Loaded on a host running the patched nvidia-uvm, it checks the
 * registration rules, then counts what the hooks deliver until it is
 * unloaded:
 *   insmod hookcheck.ko; <run a CUDA managed-memory program>; rmmod hookcheck
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/module.h>

#include "uvm_ext.h"

/* Every export, with the type a backend calls it with. */
static int (*const hookcheck_register)(const struct uvm_ext_ops *) = uvm_ext_register;
static void (*const hookcheck_unregister)(const struct uvm_ext_ops *) = uvm_ext_unregister;
static struct uvm_va_space_struct *(*const hookcheck_from_file)(struct file *) =
	uvm_ext_va_space_from_file;
static int (*const hookcheck_migrate)(struct uvm_va_space_struct *, u64, u64, const u8 *) =
	uvm_ext_migrate;
static int (*const hookcheck_evict_block)(struct uvm_va_space_struct *, u64) = uvm_ext_evict_block;
static int (*const hookcheck_block_lru)(struct uvm_va_space_struct *, u64, const u8 *, bool) =
	uvm_ext_block_lru;
static int (*const hookcheck_gpu_mem_info)(struct uvm_va_space_struct *, const u8 *,
					   struct uvm_ext_gpu_mem_info *) = uvm_ext_gpu_mem_info;
#ifdef UVM_EXT_HAS_DISCARD
static int (*const hookcheck_discard)(struct uvm_va_space_struct *, u64, u64) = uvm_ext_discard;
#endif

static atomic64_t hookcheck_calls = ATOMIC64_INIT(0);
static atomic64_t hookcheck_faults = ATOMIC64_INIT(0);
static atomic64_t hookcheck_created = ATOMIC64_INIT(0);
static atomic64_t hookcheck_destroyed = ATOMIC64_INIT(0);

/* Locking: rcu_read_lock() held by nvidia-uvm; only atomics here. */
static void hookcheck_fault_batch(struct uvm_va_space_struct *va_space, const u8 *gpu_uuid,
				  u32 batch_id, const struct uvm_ext_fault *faults, u32 count)
{
	atomic64_inc(&hookcheck_calls);
	atomic64_add(count, &hookcheck_faults);
}

static void hookcheck_va_space_create(struct uvm_va_space_struct *va_space)
{
	atomic64_inc(&hookcheck_created);
}

static void hookcheck_va_space_destroy(struct uvm_va_space_struct *va_space)
{
	atomic64_inc(&hookcheck_destroyed);
}

static const struct uvm_ext_ops hookcheck_ops = {
	.fault_batch = hookcheck_fault_batch,
	.va_space_create = hookcheck_va_space_create,
	.va_space_destroy = hookcheck_va_space_destroy,
};

/* A second table, to see a second registration refused. */
static const struct uvm_ext_ops hookcheck_other_ops;

/* The helpers that need no VA space, and the registration rules. */
static int hookcheck_abi(void)
{
	struct uvm_va_space_struct *va_space = hookcheck_from_file(NULL);
	int ret;

	if (PTR_ERR_OR_ZERO(va_space) != -EBADF) {
		pr_err("uvm_ext_va_space_from_file(NULL) gave %d, not -EBADF\n",
		       PTR_ERR_OR_ZERO(va_space));
		return -EINVAL;
	}

	ret = hookcheck_register(&hookcheck_ops);
	if (ret) {
		pr_err("uvm_ext_register() failed: %d (another module registered?)\n", ret);
		return ret;
	}

	ret = hookcheck_register(&hookcheck_other_ops);
	if (ret != -EBUSY) {
		pr_err("a second uvm_ext_register() gave %d, not -EBUSY\n", ret);
		if (!ret)
			hookcheck_unregister(&hookcheck_other_ops);
		hookcheck_unregister(&hookcheck_ops);
		return -EINVAL;
	}

	return 0;
}

static int __init hookcheck_init(void)
{
	int ret = hookcheck_abi();

	if (ret)
		return ret;

	/* Naming the helpers keeps their references, which modpost resolves. */
	pr_info("registered; helpers %ps %ps %ps %ps\n", hookcheck_migrate,
		hookcheck_evict_block, hookcheck_block_lru, hookcheck_gpu_mem_info);
#ifdef UVM_EXT_HAS_DISCARD
	pr_info("this driver discards: %ps\n", hookcheck_discard);
#endif
	return 0;
}

static void __exit hookcheck_exit(void)
{
	hookcheck_unregister(&hookcheck_ops);
	pr_info("%lld fault_batch calls, %lld faults, %lld VA spaces created, %lld destroyed\n",
		atomic64_read(&hookcheck_calls), atomic64_read(&hookcheck_faults),
		atomic64_read(&hookcheck_created), atomic64_read(&hookcheck_destroyed));
}

module_init(hookcheck_init);
module_exit(hookcheck_exit);

MODULE_DESCRIPTION("deepum: link and registration check of nvidia-uvm's uvm_ext hooks");
MODULE_LICENSE("Dual MIT/GPL");
