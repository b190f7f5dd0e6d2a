// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Module parameters, under /sys/module/deepum/parameters/.  Every value is
 * checked when it is set, at load time or later, so a bad one is refused
 * (insmod or the sysfs write fails with EINVAL) instead of being clamped.
 */
#include <linux/log2.h>
#include <linux/moduleparam.h>
#include <linux/stringify.h>

#include "params.h"

/*
 * The test ioctls let a process push arbitrary records through its pipeline
 * and read the commands back: for testing only.  Fixed at load (0444), since
 * each context picks its migration backend from it when it attaches.
 */
bool deepum_enable_test_ioctls;
module_param_named(enable_test_ioctls, deepum_enable_test_ioctls, bool, 0444);
MODULE_PARM_DESC(enable_test_ioctls,
		 "Allow DEEPUM_IOC_TEST_INJECT and TEST_DRAIN (testing only; default 0)");

unsigned int deepum_fault_queue_len = DEEPUM_FAULT_QUEUE_LEN_DEFAULT;
unsigned int deepum_cmd_queue_len = DEEPUM_CMD_QUEUE_LEN_DEFAULT;

/* Locking: the module parameter lock serialises writers; readers use READ_ONCE(). */
static int deepum_queue_len_set(const char *val, const struct kernel_param *kp)
{
	unsigned int len;
	int err;

	err = kstrtouint(val, 0, &len);
	if (err)
		return err;
	if (len < DEEPUM_QUEUE_LEN_MIN || len > DEEPUM_QUEUE_LEN_MAX || !is_power_of_2(len))
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, len);
	return 0;
}

static const struct kernel_param_ops deepum_queue_len_ops = {
	.set = deepum_queue_len_set,
	.get = param_get_uint,
};

#define DEEPUM_QUEUE_LEN_RANGE \
	"power of two, " __stringify(DEEPUM_QUEUE_LEN_MIN) ".." __stringify(DEEPUM_QUEUE_LEN_MAX)

module_param_cb(fault_queue_len, &deepum_queue_len_ops, &deepum_fault_queue_len, 0644);
MODULE_PARM_DESC(fault_queue_len, "Records a new context's fault queue holds ("
		 DEEPUM_QUEUE_LEN_RANGE "; default "
		 __stringify(DEEPUM_FAULT_QUEUE_LEN_DEFAULT) ")");

module_param_cb(cmd_queue_len, &deepum_queue_len_ops, &deepum_cmd_queue_len, 0644);
MODULE_PARM_DESC(cmd_queue_len, "Commands a new context's command queue holds ("
		 DEEPUM_QUEUE_LEN_RANGE "; default "
		 __stringify(DEEPUM_CMD_QUEUE_LEN_DEFAULT) ")");

unsigned int deepum_launch_poll_us = DEEPUM_LAUNCH_POLL_US_DEFAULT;

/* Locking: the module parameter lock serialises writers; readers use READ_ONCE(). */
static int deepum_launch_poll_us_set(const char *val, const struct kernel_param *kp)
{
	unsigned int us;
	int err = kstrtouint(val, 0, &us);

	if (err)
		return err;
	if (us < DEEPUM_LAUNCH_POLL_US_MIN || us > DEEPUM_LAUNCH_POLL_US_MAX)
		return -EINVAL;
	WRITE_ONCE(deepum_launch_poll_us, us);
	return 0;
}

static const struct kernel_param_ops deepum_launch_poll_us_ops = {
	.set = deepum_launch_poll_us_set,
	.get = param_get_uint,
};

module_param_cb(launch_poll_us, &deepum_launch_poll_us_ops, &deepum_launch_poll_us, 0644);
MODULE_PARM_DESC(launch_poll_us, "How often a context reads its launch page, in us ("
		 __stringify(DEEPUM_LAUNCH_POLL_US_MIN) ".." __stringify(DEEPUM_LAUNCH_POLL_US_MAX)
		 "; default " __stringify(DEEPUM_LAUNCH_POLL_US_DEFAULT) ")");
