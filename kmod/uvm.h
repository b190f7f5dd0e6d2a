/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The nvidia-uvm backend (uvm_backend.c), built only when the module is built
 * against a tree with deepum's uvm_ext patch (kmod/patches/): GPU faults in,
 * prefetch/evict/discard out.  Without it, binding fails with -ENODEV.
 */
#ifndef _DEEPUM_UVM_H
#define _DEEPUM_UVM_H

#include <linux/errno.h>

#include "backend.h"

struct deepum_context;

#ifdef DEEPUM_UVM_BACKEND
#define DEEPUM_UVM_FEATURES DEEPUM_FEATURE_UVM
extern const struct deepum_backend_ops deepum_uvm_backend;
int deepum_uvm_module_init(void);
void deepum_uvm_module_exit(void);
int deepum_uvm_bind(struct deepum_context *ctx, unsigned int fd);
void deepum_uvm_unbind(struct deepum_context *ctx);
#else
#define DEEPUM_UVM_FEATURES 0
static inline int deepum_uvm_module_init(void) { return 0; }
static inline void deepum_uvm_module_exit(void) { }
static inline int deepum_uvm_bind(struct deepum_context *ctx, unsigned int fd) { return -ENODEV; }
static inline void deepum_uvm_unbind(struct deepum_context *ctx) { }
#endif

#endif /* _DEEPUM_UVM_H */
