/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Where libdeepum would mark the iterations of a program that marks none:
 * its detector (userlib/iteration_detector.c, the same source) run over a
 * trace's launches, so that a trace can be simulated as an unmarked program.
 */
#ifndef _DEEPUM_MARKS_H
#define _DEEPUM_MARKS_H

#include "../../kmod/core/port.h"

/* The launch numbers of @exec_ids (in launch order) before which the detector,
 * sized for @exec_max exec IDs, marks an iteration: into @marks (room for @n),
 * their count into *@n_marks.  0, or -ENOMEM. */
int dum_detect_iterations(const __u32 *exec_ids, __u64 n, __u32 exec_max, __u64 *marks, __u64 *n_marks);

#endif /* _DEEPUM_MARKS_H */
