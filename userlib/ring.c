// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The process's record ring: LAUNCH, ALLOC, FREE and ITERATION records in
 * the order the host issued them, for the user-mode engine and the tracer to
 * consume.  Bounded and lock-free (a sequence number per cell, as in Dmitry
 * Vyukov's bounded MPMC queue): any thread pushes, a push never blocks, and
 * a full ring drops the record and counts it.
 */
#include <time.h>

#include "deepum_user.h"

enum { RING_CELLS = 1 << 16 };

struct ring_cell {
	_Atomic u64 seq;
	struct deepum_record rec;
};

static struct ring_cell *cells;
static _Atomic u64 ring_head;	/* next cell to fill */
static _Atomic u64 ring_tail;	/* next cell to consume */

bool ring_init(void)
{
	cells = deepum_calloc(RING_CELLS, sizeof(*cells));
	if (!cells)
		return false;
	for (u64 i = 0; i < RING_CELLS; i++)
		atomic_init(&cells[i].seq, i);
	return true;
}

u32 ring_capacity(void)
{
	return RING_CELLS;
}

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

void ring_push(u32 type, u64 addr, u64 len, u32 exec_id, u32 aux)
{
	u64 pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
	struct ring_cell *cell;

	for (;;) {
		cell = &cells[pos & (RING_CELLS - 1)];
		int64_t lag = (int64_t)(atomic_load_explicit(&cell->seq, memory_order_acquire) - pos);

		if (lag == 0 && atomic_compare_exchange_weak_explicit(&ring_head, &pos, pos + 1,
								      memory_order_relaxed,
								      memory_order_relaxed))
			break;
		if (lag < 0) {
			COUNT(ring_dropped, 1);
			return;
		}
		if (lag > 0)
			pos = atomic_load_explicit(&ring_head, memory_order_relaxed);
	}
	cell->rec = (struct deepum_record){
		.ts = now_ns(), .addr = addr, .len = len,
		.exec_id = exec_id, .aux = aux, .type = type,
	};
	atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
	COUNT(ring_pushed, 1);
}

bool ring_pop(struct deepum_record *ret)
{
	u64 pos = atomic_load_explicit(&ring_tail, memory_order_relaxed);
	struct ring_cell *cell;

	if (!cells)
		return false;
	for (;;) {
		cell = &cells[pos & (RING_CELLS - 1)];
		int64_t lag = (int64_t)(atomic_load_explicit(&cell->seq, memory_order_acquire) - (pos + 1));

		if (lag == 0 && atomic_compare_exchange_weak_explicit(&ring_tail, &pos, pos + 1,
								      memory_order_relaxed,
								      memory_order_relaxed))
			break;
		if (lag < 0)
			return false;
		if (lag > 0)
			pos = atomic_load_explicit(&ring_tail, memory_order_relaxed);
	}
	*ret = cell->rec;
	atomic_store_explicit(&cell->seq, pos + RING_CELLS, memory_order_release);
	return true;
}
