// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * deepum: correlation prefetching and pre-eviction for GPU Unified Memory
 * (DeepUM, ASPLOS '23).  This file only brings the module up and down.
 */
#include <linux/init.h>
#include <linux/module.h>

#include "chardev.h"
#include "include/uapi/deepum.h"

/* Locking: module init; runs once, before anything else in the module. */
static int __init deepum_init(void)
{
	int err;

	err = deepum_chardev_init();
	if (err)
		return err;

	pr_info("API %u.%u, /dev/deepum ready\n", DEEPUM_API_MAJOR, DEEPUM_API_MINOR);
	return 0;
}

/* Locking: module exit; no file is open and init has completed. */
static void __exit deepum_exit(void)
{
	deepum_chardev_exit();
}

module_init(deepum_init);
module_exit(deepum_exit);

MODULE_DESCRIPTION("DeepUM correlation prefetcher for GPU Unified Memory");
MODULE_LICENSE("Dual MIT/GPL");
