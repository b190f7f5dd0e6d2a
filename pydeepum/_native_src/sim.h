/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Trace-driven simulation of a training loop on a GPU of a given capacity:
 * how long each iteration would take under a memory policy.
 *
 * Kernels run one after another.  A kernel first waits for the blocks it
 * touches (in trace order), then computes for its compute time.  A touched
 * block that is resident costs nothing; one still being prefetched costs the
 * wait for its copy; an absent one is a demand fault, serviced as nvidia-uvm
 * does on the H200 (see docs/SIMULATOR.md for the model and its calibration):
 * sequential fault rounds of fault_us each, one per 64 KiB page that faults
 * (with the tree prefetcher, only the pages before the 51% threshold fault),
 * plus the copy on the host-to-device link.  A fault that finds the GPU full
 * first evicts the least recently migrated block, on the fault path.
 *
 * Policies:
 *   DEMAND  demand paging, 64 KiB granularity, no prefetching, LRM eviction;
 *   UVM     DEMAND plus nvidia-uvm's tree prefetcher inside each 2 MiB block;
 *   UVM_USER  UVM as libdeepum's DEEPUM_MODE=demand emulates it under
 *           DEEPUM_CAPACITY on a larger GPU: a fault does not wait for room;
 *           the engine hears it and writes the least recently migrated
 *           block back on its stream, one range each;
 *   DEEPUM  the prefetch core in the loop: its prefetches, coalesced into
 *           contiguous ranges, queue on the link behind faults and pay a
 *           per-range cost; its pre-evictions use the device-to-host link;
 *           misses fault as under UVM;
 *   DEEPUM_USER  DEEPUM as libdeepum's user-mode engine runs it under an
 *           emulated capacity (DEEPUM_CAPACITY) on a larger GPU: its
 *           pre-evictions and prefetches go down one CUDA stream, each
 *           waiting for everything issued before it, and the evictions
 *           that make room after a fault are queued there too (the real
 *           GPU had room: the fault does not wait for them).  The engine's
 *           thread makes the driver calls, which return when their copies
 *           are done: until then the core hears of nothing (launches and
 *           faults wait), and a block faulted in meanwhile is on the GPU
 *           without the core knowing;
 *   DEEPUM_ISSUER  DEEPUM_USER with DEEPUM_ISSUER=1: the driver calls are
 *           another thread's, and the core hears everything as it happens;
 *   DEEPUM_SPLIT  DEEPUM_ISSUER with its write-backs on a stream (and
 *           thread) of their own, as libdeepum's DEEPUM_WRITER=1: a prefetch
 *           waits for the room its round's write-backs make, not behind
 *           every command issued before it.  A prefetch and a write-back at
 *           the same time share the driver: of the shorter, the share
 *           both_ways_overlap_pct runs alongside the other and the rest
 *           delays both (the H200's driver: 7%, next to serial);
 *   ORACLE  Belady eviction and aggressive prefetching at link bandwidth:
 *           blocks are fetched in order of need as early as the link and
 *           room allow (room: a write-back must be done first), evicting
 *           only blocks needed later than the one fetched (which may then
 *           have to come back: more bytes than MIN);
 *   MIN     Belady's MIN, for its bytes: the fewest any policy moves.
 * Under an emulated capacity (UVM_USER, DEEPUM_USER, _ISSUER, _SPLIT) an
 * evicted block stays on the GPU until its write-back starts: a kernel that
 * uses it before then does not fault, and nobody hears of that use.
 * The engine (DEEPUM_USER, _ISSUER, _SPLIT) learns how far the GPU has got
 * from a position the GPU writes before every launch_group-th launch of an
 * iteration (libdeepum's DEEPUM_WRITE_EVERY): the core hears of launches in
 * groups, when the next group begins, and ties each fault to the last
 * launch it has heard of.  DEEPUM, the module's hook, hears each launch.
 * The ideal bound of an iteration (computed by the caller) is max(compute,
 * MIN's bytes / link bandwidth).
 */
#ifndef _DEEPUM_SIM_H
#define _DEEPUM_SIM_H

#include "../../kmod/core/core.h"

#define DUM_SIM_DEMAND	0
#define DUM_SIM_UVM	1
#define DUM_SIM_DEEPUM	2
#define DUM_SIM_ORACLE	3
#define DUM_SIM_DEEPUM_USER 4
#define DUM_SIM_MIN	5
#define DUM_SIM_DEEPUM_ISSUER 6
#define DUM_SIM_DEEPUM_SPLIT 7
#define DUM_SIM_UVM_USER 8
#define DUM_SIM_POLICY_MAX 8

/* Costs, in ns and bytes per second (from a calibration file). */
struct dum_sim_cost {
	__u64 h2d_bytes_per_sec;	/* the link: demand copies, the oracle's prefetches */
	__u64 d2h_bytes_per_sec;	/* evictions on the fault path */
	__u64 prefetch_bytes_per_sec;	/* driver prefetch ranges, beyond their fixed cost */
	__u64 evict_bytes_per_sec;	/* pre-evictions (asynchronous), the module's and the oracle's */
	__u64 user_evict_bytes_per_sec;	/* write-backs through the user API while the program runs */
	__u64 fault_ns;			/* one dependent fault round */
	__u64 prefetch_range_ns;	/* driver cost per prefetch range */
	__u64 evict_range_ns;		/* the user API's cost per write-back range */
	__u64 discard_ns;		/* per discarded block */
	__u32 fault_bytes;		/* fault granularity (64 KiB) */
	__u32 tree_threshold_pct;	/* UVM's tree prefetcher threshold (51) */
	__u32 both_ways_overlap_pct;	/* DEEPUM_SPLIT: see above (100: the link's two directions at once) */
};

struct dum_sim_iteration {
	__u64 time_ns;		/* first kernel's start to last kernel's end */
	__u64 compute_ns;
	__u64 fault_stall_ns;	/* time kernels waited on demand faults */
	__u64 late_stall_ns;	/* time kernels waited on prefetches in flight */
	__u64 accesses;
	__u64 faults;		/* blocks that were absent when touched */
	__u64 late;		/* blocks still being prefetched when touched */
	__u64 h2d_bytes;	/* faults and prefetches */
	__u64 d2h_bytes;	/* evictions */
	__u64 prefetches;
	__u64 refetches;	/* prefetches of a block prefetched before in the iteration (it left between) */
	__u64 useful;		/* prefetched blocks touched before they left */
	__u64 evictions;
	__u64 fault_evictions;	/* evictions on the fault path */
	__u64 lingering;	/* uses of an evicted block whose write-back had not started */
	__u64 iteration;	/* index from the ITERATION record */
};

struct dum_sim;

/* The most launches a position stands for: libdeepum's DEEPUM_WRITE_EVERY
 * limit, DEEPUM_RING_DEPTH / 2 (a literal: cffi reads this header). */
#define DUM_SIM_LAUNCH_GROUP_MAX 2048

/*
 * @compute_ns: one entry per LAUNCH record of @recs, in order.  @capacity_blocks
 * 0 means unlimited.  For DEEPUM, @cfg configures the core (its capacity is
 * set to @capacity_blocks); the other policies use only its block_shift and
 * block_max.  @launch_group: launches per position the engine sees, 1 to
 * DUM_SIM_LAUNCH_GROUP_MAX (DEEPUM_USER, _ISSUER, _SPLIT; see above).
 */
int dum_sim_create(__u32 policy, const struct deepum_config *cfg, const struct dum_sim_cost *cost,
		   __u64 capacity_blocks, __u32 launch_group, struct dum_sim **ret);
void dum_sim_destroy(struct dum_sim *s);
/*
 * For each of @n records, the index of the next FAULT record on the same
 * block (~0 if none): the oracle's knowledge of the future.  FAULT records
 * only; other entries are ~0.  Returns 0 or -ENOMEM.
 */
int dum_sim_next_use(const struct deepum_record *recs, __u64 n, __u32 block_shift, __u64 *next_use);

/*
 * Simulate records [@lo, @hi) of a trace of @n: call with consecutive ranges.
 * The whole trace is passed so that ORACLE can look ahead.  @compute_ns has
 * one entry per LAUNCH record of the whole trace; @next_use comes from
 * dum_sim_next_use() (ORACLE and MIN only; may be NULL otherwise).  Returns 0,
 * -EINVAL (a malformed record, index in *@bad_index) or -ENOMEM.
 */
int dum_sim_run(struct dum_sim *s, const struct deepum_record *recs, const __u64 *compute_ns,
		const __u64 *next_use, __u64 n, __u64 lo, __u64 hi, __u64 *bad_index);
/* Iterations so far (the last may still be open). */
__u32 dum_sim_iterations(const struct dum_sim *s, struct dum_sim_iteration *ret, __u32 n);

#endif /* _DEEPUM_SIM_H */
