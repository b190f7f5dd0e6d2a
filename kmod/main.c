// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * deepum: correlation prefetching and pre-eviction for GPU Unified Memory
 * (DeepUM, ASPLOS '23).  This file only brings the module up and down.
 */
#include <linux/init.h>
#include <linux/module.h>

#include "chardev.h"
#include "context.h"
#include "include/uapi/deepum.h"
#include "params.h"
#include "pipeline.h"
#include "uvm.h"

/* Locking: module init; runs once, before anything else in the module. */
static int __init deepum_init(void)
{
	int err;

	err = deepum_contexts_module_init();
	if (err)
		return err;
	err = deepum_pipeline_module_init();
	if (err)
		return err;
	err = deepum_uvm_module_init();
	if (err)
		goto out_pipeline_exit;
	err = deepum_chardev_init();
	if (err)
		goto out_uvm_exit;

	if (deepum_enable_test_ioctls)
		pr_notice("test ioctls enabled: who can open /dev/deepum can feed it any record\n");
	pr_info("API %u.%u, /dev/deepum ready\n", DEEPUM_API_MAJOR, DEEPUM_API_MINOR);
	return 0;

out_uvm_exit:
	deepum_uvm_module_exit();
out_pipeline_exit:
	deepum_pipeline_module_exit();
	return err;
}

/* Locking: module exit; no file is open and init has completed. */
static void __exit deepum_exit(void)
{
	deepum_chardev_exit();
	deepum_uvm_module_exit();
	deepum_pipeline_module_exit();
}

module_init(deepum_init);
module_exit(deepum_exit);

MODULE_DESCRIPTION("DeepUM correlation prefetcher for GPU Unified Memory");
MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION(DEEPUM_VERSION);
