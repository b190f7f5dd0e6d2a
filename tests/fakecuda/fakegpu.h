/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the fake driver (fakecuda.c) tells the fake CUPTI (fakecupti.c) about
 * its pretend GPU, in the order it happens: the interface between the two
 * test doubles, standing in for what the real driver tells the real CUPTI.
 */
#ifndef _FAKEGPU_H
#define _FAKEGPU_H

#include <stdint.h>

struct fakegpu_observer {
	/* A driver API call began on the calling thread, with this correlation ID. */
	void (*driver_call)(uint32_t correlation);
	/* A kernel ran, launched by the call of that correlation ID. */
	void (*kernel)(const char *name, const unsigned int grid[3], const unsigned int block[3], uint32_t stream,
		       uint32_t correlation, uint64_t start, uint64_t end);
	/* A Unified Memory counter record (CUpti_ActivityUnifiedMemoryCounterKind). */
	void (*unified_memory)(uint32_t kind, uint64_t value, uint64_t start, uint64_t end, uint64_t address,
			       uint32_t flags);
};

/* Exported by the fake libcuda.so.1: add an observer (a few may watch;
 * callbacks an observer does not need may be NULL). */
void fakecuda_observe(const struct fakegpu_observer *observer);
/* The GPU's clock in ns; every reading is later than the one before. */
uint64_t fakecuda_clock(void);

#endif /* _FAKEGPU_H */
