// SPDX-License-Identifier: GPL-2.0 OR MIT
#include "plan.h"

static void swap_cmds(struct deepum_cmd *a, struct deepum_cmd *b)
{
	struct deepum_cmd t = *a;

	*a = *b;
	*b = t;
}

/* Heapsort: no allocation, no recursion, O(n log n) on the kernel stack too. */
static void sift_down(struct deepum_cmd *cmds, u32 root, u32 n)
{
	u32 child;

	while ((child = 2 * root + 1) < n) {
		if (child + 1 < n && cmds[child + 1].addr > cmds[child].addr)
			child++;
		if (cmds[root].addr >= cmds[child].addr)
			return;
		swap_cmds(&cmds[root], &cmds[child]);
		root = child;
	}
}

void deepum_plan_sort(struct deepum_cmd *cmds, u32 n)
{
	u32 i;

	for (i = n / 2; i-- > 0;)
		sift_down(cmds, i, n);
	for (i = n; i-- > 1;) {
		swap_cmds(&cmds[0], &cmds[i]);
		sift_down(cmds, 0, i);
	}
}

u32 deepum_plan_order(struct deepum_cmd *cmds, u32 n, struct deepum_cmd *scratch)
{
	u32 i, first = 0, npf = 0, run;

	for (i = 0; i < n; i++) {
		if (cmds[i].op == DEEPUM_CMD_PREFETCH)
			scratch[npf++] = cmds[i];
		else
			cmds[first++] = cmds[i];
	}
	memcpy(&cmds[first], scratch, (size_t)npf * sizeof(*cmds));
	for (i = first; i < n; i += run) {
		for (run = 1; i + run < n && cmds[i + run].exec_id == cmds[i].exec_id; run++)
			;
		deepum_plan_sort(&cmds[i], run);
	}
	return first;
}

u32 deepum_plan_run(const struct deepum_cmd *cmds, u32 n, u32 block_shift)
{
	u32 run;

	for (run = 1; run < n && cmds[run].op == cmds[0].op &&
	     (cmds[0].op != DEEPUM_CMD_PREFETCH || cmds[run].exec_id == cmds[0].exec_id) &&
	     cmds[run].addr == cmds[0].addr + ((u64)run << block_shift); run++)
		;
	return run;
}
