/* SPDX-License-Identifier: GPL-2.0 OR MIT */
#ifndef _DEEPUM_CHARDEV_H
#define _DEEPUM_CHARDEV_H

int deepum_chardev_init(void);
void deepum_chardev_exit(void);

#endif /* _DEEPUM_CHARDEV_H */
