// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * libdeepum's iteration detector (userlib/iterations.c) on a recorded
 * stream of exec IDs: one decimal exec ID per line on stdin, one line per
 * detected mark on stdout, the number of launches before it.  Lets
 * tests/test_iterations.py run the detector on real H200 launch streams.
 */
#include <stdio.h>

#include "../../userlib/deepum_user.h"

struct deepum_state deepum = { .exec_max = DEEPUM_CFG_EXEC_MAX_DEFAULT };
static unsigned long long launches;

void deepum_mark_detected_iteration(void)
{
	printf("%llu\n", launches);
}

int main(void)
{
	unsigned int exec_id;

	while (scanf("%u", &exec_id) == 1) {
		iterations_launch(exec_id);
		launches++;
	}
	return ferror(stdin) ? 1 : 0;
}
