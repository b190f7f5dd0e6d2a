// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Iteration marks for programs that make none: libdeepum's one detector
 * (iteration_detector.c says how it finds them) fed from the launch path.
 * A mark the program makes itself turns detection off for good: it knows
 * better.
 *
 * Launches race from any thread; a launch that finds the detector busy is
 * not observed (it only delays detection), so the launch path never waits.
 */
#include <pthread.h>

#include "deepum_user.h"
#include "iteration_detector.h"

static struct {
	pthread_mutex_t lock;
	struct iteration_detector detector;
	bool ready;		/* detector's tables allocated (at the first launch) */
	bool off;		/* the program marks, or no memory */
} det = { .lock = PTHREAD_MUTEX_INITIALIZER };

void iterations_program_marks(void)
{
	__atomic_store_n(&det.off, true, __ATOMIC_RELAXED);
}

/* Under det.lock: whether the launch of @exec_id about to happen begins an iteration. */
static bool observe(u32 exec_id)
{
	if (!det.ready) {
		if (iteration_detector_init(&det.detector, deepum.exec_max)) {
			det.off = true;
			return false;
		}
		det.ready = true;
	}
	return iteration_detector_observe(&det.detector, exec_id);
}

void iterations_launch(u32 exec_id)
{
	bool mark;

	if (__atomic_load_n(&det.off, __ATOMIC_RELAXED) || exec_id == DEEPUM_EXEC_NONE)
		return;
	if (pthread_mutex_trylock(&det.lock) != 0)
		return;
	mark = !det.off && observe(exec_id);
	pthread_mutex_unlock(&det.lock);
	if (mark)
		deepum_mark_detected_iteration();
}
