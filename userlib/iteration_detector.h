/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Where the iterations of a program that marks none begin, found from its
 * stream of exec IDs alone (iteration_detector.c says how).  Plain C over
 * kmod/core/port.h, like the prefetch core: libdeepum runs it on its launch
 * path (iterations.c adds the lock), the cffi extension on a trace's launches,
 * so that the simulator marks an unmarked program where libdeepum would.
 * One instance is driven by one caller at a time.
 */
#ifndef _DEEPUM_ITERATION_DETECTOR_H
#define _DEEPUM_ITERATION_DETECTOR_H

#include "../kmod/core/port.h"

enum {
	ITERATION_CANDIDATES = 16,	/* distances tracked at once */
};

struct iteration_candidate {
	u32 gap, count;
	u32 matches;		/* once confirmed: of the last gap launches, those equal to the one gap before */
};

struct iteration_detector {
	u32 exec_max;		/* exec IDs at or above it are not observed */
	u64 *last;		/* per exec ID: launch number + 1 of its last launch; 0: none */
	u64 *first;		/* per exec ID: launch number of its first launch */
	u32 *gap;		/* per exec ID: the distance before that */
	u32 *recent;		/* exec ID of launch i, at i modulo the launches remembered */
	u32 ids;		/* exec IDs below this were seen */
	u64 launches;
	struct iteration_candidate candidates[ITERATION_CANDIDATES];
	u32 period;		/* 0: not found yet */
	u32 anchor;		/* exec ID whose launches mark iterations */
	u64 anchor_seen;	/* launch number of the anchor's last launch */
};

/* Tables for exec IDs below @exec_max: 0, or -ENOMEM with nothing held. */
int iteration_detector_init(struct iteration_detector *d, u32 exec_max);
void iteration_detector_destroy(struct iteration_detector *d);
/* Whether the launch of @exec_id about to happen begins an iteration. */
bool iteration_detector_observe(struct iteration_detector *d, u32 exec_id);

#endif /* _DEEPUM_ITERATION_DETECTOR_H */
