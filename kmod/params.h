/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Module parameters (params.c).  The queue lengths may change at any time
 * through sysfs: read them with READ_ONCE(); a context keeps the lengths it
 * was attached with.
 */
#ifndef _DEEPUM_PARAMS_H
#define _DEEPUM_PARAMS_H

#include <linux/types.h>

/* Per-context queue lengths, in entries; powers of two. */
#define DEEPUM_QUEUE_LEN_MIN			64
#define DEEPUM_QUEUE_LEN_MAX			1048576
#define DEEPUM_FAULT_QUEUE_LEN_DEFAULT		16384
#define DEEPUM_CMD_QUEUE_LEN_DEFAULT		16384

/* How often a context reads its launch page, in microseconds. */
#define DEEPUM_LAUNCH_POLL_US_MIN		10
#define DEEPUM_LAUNCH_POLL_US_MAX		100000
#define DEEPUM_LAUNCH_POLL_US_DEFAULT		100

extern bool deepum_enable_test_ioctls;
extern unsigned int deepum_launch_poll_us;
extern unsigned int deepum_fault_queue_len;
extern unsigned int deepum_cmd_queue_len;

#endif /* _DEEPUM_PARAMS_H */
