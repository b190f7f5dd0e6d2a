/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Contexts (context.c): one per attached file, bound to one process, each
 * with its own prefetch pipeline.
 *
 * Lock order, outermost first:
 *   deepum_file.attach_lock		chardev.c: one ATTACH per file at a time
 *   deepum_defaults_lock		context.c: DEEPUM_SCOPE_DEFAULTS (held alone)
 *   deepum_contexts_lock		context.c: the registry of live contexts and
 *					the totals of gone ones; never per record
 *   deepum_launches.create_lock	launches.c: the first mmap() (under mmap_lock)
 *   deepum_pipeline.inject_lock	pipeline.c: TEST_INJECT's staging buffer
 *   deepum_pipeline.core_lock		pipeline.c: the core, held per batch
 *   deepum_launches.read_lock		launches.c: spinlock, the rings' one reader
 *   deepum_pipeline.fault_lock		pipeline.c: spinlock, innermost
 * The recording backend's drain_lock is taken alone (and may fault).
 */
#ifndef _DEEPUM_CONTEXT_H
#define _DEEPUM_CONTEXT_H

#include <linux/list.h>
#include <linux/types.h>

#include "launches.h"
#include "pipeline.h"

struct mm_struct;
struct pid;

struct deepum_context {
	u64 id;				/* unique while the module is loaded */
	struct mm_struct *mm;		/* mmgrab()bed: compared, never used */
	struct pid *tgid;
	struct list_head node;		/* in deepum_contexts, under deepum_contexts_lock */
	struct deepum_pipeline pipe;
	struct deepum_launches launches;	/* the launch page, once mapped */
};

int deepum_contexts_module_init(void);

int deepum_context_create(struct deepum_context **ret);
void deepum_context_destroy(struct deepum_context *ctx);
bool deepum_context_is_current(const struct deepum_context *ctx);

unsigned int deepum_contexts_attached(void);
const char *deepum_contexts_backend(void);
void deepum_contexts_stats(struct deepum_stats *ret);

void deepum_defaults_get(struct deepum_config *ret);
void deepum_defaults_set(const struct deepum_config *cfg);

#endif /* _DEEPUM_CONTEXT_H */
