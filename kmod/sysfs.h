/* SPDX-License-Identifier: GPL-2.0 OR MIT */
#ifndef _DEEPUM_SYSFS_H
#define _DEEPUM_SYSFS_H

struct attribute_group;

/* The attributes of /sys/class/misc/deepum/ (sysfs.c), for the misc device. */
extern const struct attribute_group *deepum_sysfs_groups[];

#endif /* _DEEPUM_SYSFS_H */
