// SPDX-License-Identifier: GPL-2.0 OR MIT
#include "marks.h"
#include "../../userlib/iteration_detector.h"

int dum_detect_iterations(const __u32 *exec_ids, __u64 n, __u32 exec_max, __u64 *marks, __u64 *n_marks)
{
	struct iteration_detector d;
	int err = iteration_detector_init(&d, exec_max);

	*n_marks = 0;
	if (err)
		return err;
	for (__u64 i = 0; i < n; i++)
		if (iteration_detector_observe(&d, exec_ids[i]))
			marks[(*n_marks)++] = i;
	iteration_detector_destroy(&d);
	return 0;
}
