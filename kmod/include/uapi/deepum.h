/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * deepum: the one contract between deepum.ko, libdeepum (userlib) and pydeepum.
 *
 * Everything that crosses a boundary is defined here exactly once: ioctl
 * argument structs, the trace file format, the records the prefetch core
 * consumes, the commands it produces, its configuration and its counters.
 * The kernel module, the LD_PRELOAD library and the Python package (cffi,
 * API mode: the C compiler checks every layout) all compile against this file.
 *
 * Rules (Documentation/driver-api/ioctl.rst):
 *  - only __u32 and __u64 fields, naturally aligned, no implicit padding;
 *  - reserved fields must be zero on input (-EINVAL otherwise) and are zero
 *    on output;
 *  - structs only ever grow at the end; a field never changes meaning and a
 *    command number is never reused.  The kernel copies min(user, kernel)
 *    size and zero-fills the rest, so old binaries keep working.
 *
 * Addresses are process virtual addresses.  The prefetcher works on UM
 * blocks: naturally aligned ranges of (1 << block_shift) bytes, 2 MiB by
 * default, which is nvidia-uvm's uvm_va_block_t.
 *
 * Interface history:
 *   1.0  API handshake, attach, exec IDs, config, invalidation, stats, test
 *        injection; records, commands, trace format v1.
 *   1.1  stats: window_skips, window_waits (the window resynchronizes);
 *        DEEPUM_CFG_F_HORIZON (victims chosen by predicted next use);
 *        DEEPUM_IOC_BIND_UVM, DEEPUM_FEATURE_UVM.
 *   1.2  the launch page (struct deepum_launch_page, until then libdeepum's
 *        own) mapped from an attached file: DEEPUM_FEATURE_LAUNCH_PAGE, with
 *        iteration marks in its rings (DEEPUM_EXEC_ITERATION);
 *        DEEPUM_CFG_F_HISTORY (victims by next use as the last iteration had it).
 *   1.3  the core predicts kernels by their position in the iteration when
 *        iterations repeat; DEEPUM_CFG_F_NO_POSITIONAL turns that off.
 *   1.4  victims by the last iteration's uses are the default (a config
 *        check sets DEEPUM_CFG_F_HISTORY when no victim choice is given,
 *        and evict_scan then defaults to DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT);
 *        DEEPUM_CFG_F_LRM_VICTIMS asks for the choice before 1.4.
 *   1.5  with those victims, an unset evict_scan reaches every block of the
 *        capacity (capacity_blocks, at least ..._HISTORY_DEFAULT, at most
 *        DEEPUM_CFG_EVICT_SCAN_MAX); the correlation table's default sets 4x.
 *   1.6  DEEPUM_CFG_F_FORGET_UNSETTLED: at the mark of one of the first four
 *        iterations, if over 1 launch in 8 of it had a new exec ID, as in
 *        every iteration before it, and capacity_blocks is under two thirds
 *        of the blocks the core has seen, the core forgets its block tables
 *        and start blocks (not its exec-ID table).
 *   1.7  DEEPUM_CFG_F_VICTIM_RUNS: with victims by next use, an address
 *        neighbour of the latest victims is taken instead of the best victim
 *        when its next use is at least half as far, so that write-backs come
 *        in contiguous runs (the driver charges per range).
 *        DEEPUM_UNSETTLED_SHARE names 1.6's "1 launch in 8".
 */
#ifndef _UAPI_DEEPUM_H
#define _UAPI_DEEPUM_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define DEEPUM_API_MAJOR 1
#define DEEPUM_API_MINOR 7
/* What DEEPUM_IOC_API's "api" field carries: major << 16 | minor. */
#define DEEPUM_API_VERSION ((DEEPUM_API_MAJOR << 16) | DEEPUM_API_MINOR)

#define DEEPUM_DEFAULT_BLOCK_SHIFT 21	/* 2 MiB, nvidia-uvm's VA block */

/* An exec ID no launch carried: the fault's kernel is not known. */
#define DEEPUM_EXEC_NONE 0xffffffffU
/* In a launch page's ring, not a launch: an iteration begins here (an
 * ITERATION record, in stream order). */
#define DEEPUM_EXEC_ITERATION 0xfffffffeU

/* ------------------------------------------------------------------------
 * Records: what the prefetch core consumes, and what a trace file holds.
 *
 * One fixed-size layout for every type, so a trace is a flat array (numpy
 * reads it as a structured array).  Field meaning per type:
 *
 *  type        ts  addr               len            exec_id     aux     flags
 *  LAUNCH      ns  kernel name hash   duration ns*   ID to run   stream  0
 *  FAULT       ns  faulting address   bytes moved*   ID running  access  DEEPUM_FAULT_F_*
 *  ALLOC       ns  range start        range length   0           0       0
 *  FREE        ns  range start        range length   0           0       0
 *  ITERATION   ns  0                  0              0           index   DEEPUM_ITER_F_*
 *
 *  * 0 when the source does not know.  A LAUNCH's duration is the kernel's
 *    measured run time (in an access-set trace it includes fault stalls);
 *    a FAULT's bytes are all the launch moved in that block.  exec_id of a FAULT may be
 *    DEEPUM_EXEC_NONE: the core then uses the exec ID of the last LAUNCH.
 *  "access" is one of DEEPUM_ACCESS_* (what the GPU fault buffer reports).
 * ------------------------------------------------------------------------ */
#define DEEPUM_REC_LAUNCH	1	/* a kernel with this exec ID is about to run */
#define DEEPUM_REC_FAULT	2	/* the GPU touched a non-resident UM block */
#define DEEPUM_REC_ALLOC	3	/* a range became live (allocator gave it out) */
#define DEEPUM_REC_FREE		4	/* a range is dead: invalidate, never write back */
#define DEEPUM_REC_ITERATION	5	/* a training iteration begins (or the trace ends) */
#define DEEPUM_REC_TYPE_MAX	5

#define DEEPUM_ACCESS_READ	1
#define DEEPUM_ACCESS_WRITE	2
#define DEEPUM_ACCESS_ATOMIC	3
#define DEEPUM_ACCESS_PREFETCH	4

/* FAULT flags */
#define DEEPUM_FAULT_F_FROM_TRANSFER	(1U << 0)	/* derived from a host-to-device transfer record */
#define DEEPUM_FAULT_F_ALL		((1U << 1) - 1)

/* ITERATION flags */
#define DEEPUM_ITER_F_FLUSHED	(1U << 0)	/* all managed memory was moved to the host here */
#define DEEPUM_ITER_F_END	(1U << 1)	/* closes the trace: no iteration follows */
#define DEEPUM_ITER_F_ALL	((1U << 2) - 1)

struct deepum_record {
	__u64 ts;
	__u64 addr;
	__u64 len;
	__u32 exec_id;
	__u32 aux;
	__u32 type;
	__u32 flags;
};

/* ------------------------------------------------------------------------
 * Commands: what the prefetch core asks its migration backend to do.
 * ------------------------------------------------------------------------ */
#define DEEPUM_CMD_PREFETCH	1	/* migrate the block to the GPU */
#define DEEPUM_CMD_EVICT	2	/* migrate the block to the host (data is live) */
#define DEEPUM_CMD_DISCARD	3	/* drop the block's GPU copy without write-back (data is dead) */

/*
 * DEEPUM_CMD_F_DEMAND marks an eviction the driver itself performs on the
 * fault path when a fault finds no free GPU memory (least recently migrated
 * first, as nvidia-uvm does).  The core reports it so that its residency
 * model stays in step; backends do not execute it, replay counts it as the
 * cost pre-eviction exists to avoid.
 */
#define DEEPUM_CMD_F_DEMAND	(1U << 0)

struct deepum_cmd {
	__u64 addr;		/* block start address */
	__u32 exec_id;		/* PREFETCH: exec ID predicted to use the block */
	__u32 op;		/* DEEPUM_CMD_* */
	__u32 flags;		/* DEEPUM_CMD_F_* */
	__u32 reserved;
};

/* ------------------------------------------------------------------------
 * Configuration of one prefetch core instance (one per process).
 *
 * Every field has DEEPUM_CFG_<FIELD>_{MIN,MAX,DEFAULT}.  A zero field on
 * input means "the default"; anything outside [MIN, MAX] is -EINVAL.
 * Table memory is allocated once, at init, from these numbers.
 * ------------------------------------------------------------------------ */
struct deepum_config {
	__u32 block_shift;		/* log2 of the UM block size */
	__u32 corr_sets;		/* block correlation table: sets (power of two) */
	__u32 corr_ways;		/* ... ways per set, replaced LRU */
	__u32 corr_levels;		/* ... successor levels per entry (ULMT "replicated") */
	__u32 corr_succs;		/* ... MRU successors per level */
	__u32 exec_max;			/* exec IDs tracked: 0 .. exec_max - 1 */
	__u32 exec_succs;		/* MRU successor exec IDs per exec ID */
	__u32 exec_starts;		/* MRU start blocks per exec ID */
	__u32 block_max;		/* UM blocks tracked by the residency model */
	__u32 lookahead_kernels;	/* predicted kernels in the prefetch window */
	__u32 lookahead_blocks;		/* predicted blocks in the prefetch window */
	__u32 walk_max;			/* table entries one walk may visit (bounded work) */
	__u32 evict_scan;		/* LRM entries one victim search may inspect */
	__u32 watermark_blocks;		/* pre-evict to keep this many blocks free */
	__u32 flags;			/* DEEPUM_CFG_F_* */
	__u32 reserved0;
	__u64 capacity_blocks;		/* GPU memory for UM, in blocks; 0: unlimited */
	__u64 reserved[4];
};

#define DEEPUM_CFG_F_NO_PREFETCH	(1U << 0)	/* model residency only: the demand-paging baseline */
#define DEEPUM_CFG_F_NO_PREEVICT	(1U << 1)	/* prefetch, but leave eviction to the fault path */
#define DEEPUM_CFG_F_HORIZON		(1U << 2)	/* victims by predicted next use (see docs/CORE.md) */
#define DEEPUM_CFG_F_HISTORY		(1U << 3)	/* victims by next use as the last iteration had it */
#define DEEPUM_CFG_F_NO_POSITIONAL	(1U << 4)	/* predict kernels by the exec-ID table only, not by position */
#define DEEPUM_CFG_F_LRM_VICTIMS	(1U << 5)	/* victims least recently migrated (outside the window) */
#define DEEPUM_CFG_F_FORGET_UNSETTLED	(1U << 6)	/* forget the block tables after an iteration with many new exec IDs */
#define DEEPUM_CFG_F_VICTIM_RUNS	(1U << 7)	/* victims by next use in address runs where nearly as good */
#define DEEPUM_CFG_F_ALL		((1U << 8) - 1)
/* An iteration in which over 1 launch in this many had an exec ID the core had
 * never seen has not settled (its program's memory still moves): what
 * DEEPUM_CFG_F_FORGET_UNSETTLED acts on. */
#define DEEPUM_UNSETTLED_SHARE		8
/* The victim choice: at most one of these; none means DEEPUM_CFG_F_HISTORY. */
#define DEEPUM_CFG_F_VICTIMS		(DEEPUM_CFG_F_HORIZON | DEEPUM_CFG_F_HISTORY | DEEPUM_CFG_F_LRM_VICTIMS)

#define DEEPUM_CFG_BLOCK_SHIFT_MIN		16
#define DEEPUM_CFG_BLOCK_SHIFT_MAX		30
#define DEEPUM_CFG_BLOCK_SHIFT_DEFAULT		DEEPUM_DEFAULT_BLOCK_SHIFT
#define DEEPUM_CFG_CORR_SETS_MIN		16
#define DEEPUM_CFG_CORR_SETS_MAX		(1U << 22)
/* 128 Ki (exec, block) pairs in 4 ways: a quarter of it overflowed with GPT-2 XL (docs/BENCHMARKS.md) */
#define DEEPUM_CFG_CORR_SETS_DEFAULT		(1U << 15)
#define DEEPUM_CFG_CORR_WAYS_MIN		1
#define DEEPUM_CFG_CORR_WAYS_MAX		16
#define DEEPUM_CFG_CORR_WAYS_DEFAULT		4
#define DEEPUM_CFG_CORR_LEVELS_MIN		1
#define DEEPUM_CFG_CORR_LEVELS_MAX		4
#define DEEPUM_CFG_CORR_LEVELS_DEFAULT		3
#define DEEPUM_CFG_CORR_SUCCS_MIN		1
#define DEEPUM_CFG_CORR_SUCCS_MAX		8
#define DEEPUM_CFG_CORR_SUCCS_DEFAULT		2
#define DEEPUM_CFG_EXEC_MAX_MIN			16
#define DEEPUM_CFG_EXEC_MAX_MAX			(1U << 22)
#define DEEPUM_CFG_EXEC_MAX_DEFAULT		(1U << 15)
#define DEEPUM_CFG_EXEC_SUCCS_MIN		1
#define DEEPUM_CFG_EXEC_SUCCS_MAX		8
#define DEEPUM_CFG_EXEC_SUCCS_DEFAULT		4
#define DEEPUM_CFG_EXEC_STARTS_MIN		1
#define DEEPUM_CFG_EXEC_STARTS_MAX		8
#define DEEPUM_CFG_EXEC_STARTS_DEFAULT		4
#define DEEPUM_CFG_BLOCK_MAX_MIN		64
#define DEEPUM_CFG_BLOCK_MAX_MAX		(1U << 26)
#define DEEPUM_CFG_BLOCK_MAX_DEFAULT		(1U << 18)
#define DEEPUM_CFG_LOOKAHEAD_KERNELS_MIN	1
#define DEEPUM_CFG_LOOKAHEAD_KERNELS_MAX	65536
#define DEEPUM_CFG_LOOKAHEAD_KERNELS_DEFAULT	512
#define DEEPUM_CFG_LOOKAHEAD_BLOCKS_MIN		1
#define DEEPUM_CFG_LOOKAHEAD_BLOCKS_MAX		(1U << 20)
#define DEEPUM_CFG_LOOKAHEAD_BLOCKS_DEFAULT	1024	/* with a capacity, at most a quarter of it */
#define DEEPUM_CFG_WALK_MAX_MIN			1
#define DEEPUM_CFG_WALK_MAX_MAX			(1U << 20)
#define DEEPUM_CFG_WALK_MAX_DEFAULT		8192
#define DEEPUM_CFG_EVICT_SCAN_MIN		1
#define DEEPUM_CFG_EVICT_SCAN_MAX		65536
#define DEEPUM_CFG_EVICT_SCAN_DEFAULT		64
/* With DEEPUM_CFG_F_HISTORY: all of the GPU is worth looking at (the scan keeps its best). */
#define DEEPUM_CFG_EVICT_SCAN_HISTORY_DEFAULT	4096
#define DEEPUM_CFG_WATERMARK_BLOCKS_MIN		1
#define DEEPUM_CFG_WATERMARK_BLOCKS_MAX		(1U << 20)
#define DEEPUM_CFG_WATERMARK_BLOCKS_DEFAULT	8
#define DEEPUM_CFG_CAPACITY_BLOCKS_MAX		(1ULL << 40)

/* ------------------------------------------------------------------------
 * Counters of one core instance.  All monotonic, all in units named.
 * ------------------------------------------------------------------------ */
struct deepum_stats {
	__u64 records;			/* records consumed */
	__u64 launches;			/* LAUNCH records */
	__u64 faults;			/* FAULT records */
	__u64 faults_resident;		/* ... on a block the model had resident (late or partial) */
	__u64 prefetches;		/* PREFETCH commands emitted */
	__u64 prefetch_bytes;
	__u64 evictions;		/* EVICT commands emitted by pre-eviction */
	__u64 demand_evictions;		/* evictions the fault path had to do (DEEPUM_CMD_F_DEMAND) */
	__u64 discards;			/* DISCARD commands emitted */
	__u64 invalidated_bytes;	/* bytes of FREE ranges, in whole blocks */
	__u64 revived_dead;		/* dead blocks predicted again: alive, fetched or kept */
	__u64 window_resets;		/* launches the exec-ID table did not predict */
	__u64 exec_stand_ins;		/* unknown exec IDs predicted as the one expected there */
	__u64 walks;			/* block-table walks */
	__u64 walk_entries;		/* table entries those walks visited */
	__u64 walk_truncated;		/* walks stopped by walk_max or the command buffer */
	__u64 window_full;		/* window extensions stopped for lack of GPU memory */
	__u64 corr_inserts;		/* block-table entries allocated */
	__u64 corr_replacements;	/* ... of which replaced a valid entry (LRU) */
	__u64 exec_ignored;		/* records with exec ID >= exec_max */
	__u64 blocks_untracked;		/* blocks the residency model had no room for */
	__u64 resident_blocks;		/* gauge: blocks the model holds resident now */
	__u64 core_ns;			/* time spent in the core, measured by its caller */
	/* Kept by the pipeline around the core (kernel module, libdeepum): */
	__u64 records_dropped;		/* records lost to a full fault queue, or launches overwritten in the launch page before they were read */
	__u64 cmds_dropped;		/* commands lost to a full command queue */
	__u64 prefetch_late;		/* faults on a block whose prefetch was not done yet */
	/* The core again (1.1, in what was the reserved tail): */
	__u64 window_skips;		/* launches that skipped window kernels to match one */
	__u64 window_waits;		/* unexpected launches the window waited through */
};

/* ------------------------------------------------------------------------
 * Trace files (".dut"): a header, record_count struct deepum_record, then
 * meta_len bytes of UTF-8 JSON (provenance, exec ID -> kernel name, ...).
 * Little-endian.  Readers reject a magic, version, header_size or
 * record_size they do not know, and files shorter than the header claims.
 * ------------------------------------------------------------------------ */
#define DEEPUM_TRACE_MAGIC	0x31545544U	/* "DUT1" read as little-endian bytes */
#define DEEPUM_TRACE_VERSION	1

#define DEEPUM_TRACE_F_ACCESS_SET	(1U << 0)	/* memory moved to the host at every iteration */
#define DEEPUM_TRACE_F_SYNTHETIC	(1U << 1)	/* generated, not captured on a GPU */
#define DEEPUM_TRACE_F_PER_LAUNCH	(1U << 2)	/* and after every launch: every launch's
							 * accesses, not only first touches */
#define DEEPUM_TRACE_F_ALL		((1U << 3) - 1)

struct deepum_trace_header {
	__u32 magic;
	__u32 version;
	__u32 header_size;	/* sizeof(struct deepum_trace_header) */
	__u32 record_size;	/* sizeof(struct deepum_record) */
	__u64 record_count;
	__u32 block_shift;	/* UM block size the trace was taken with */
	__u32 flags;		/* DEEPUM_TRACE_F_* */
	__u64 meta_len;		/* bytes of JSON after the records */
	__u64 reserved[3];
};

/* ------------------------------------------------------------------------
 * /dev/deepum ioctls.  Magic 0xDE is not in ioctl-number.rst's table.
 * ------------------------------------------------------------------------ */
#define DEEPUM_IOC_MAGIC 0xDE

/**
 * DEEPUM_IOC_API - handshake; must precede every other ioctl on a file
 * (which otherwise fail with -EPROTO).
 * @api:      (in) DEEPUM_API_VERSION the caller was built with;
 *            (out) the version the module speaks.
 * @flags:    (in) zero.
 * @features: (in) DEEPUM_FEATURE_* the caller needs; (out) all supported.
 * @ioctls:   (out) bit n set: ioctl number n is available.
 *
 * Context: process context.
 * Return: 0; -EINVAL for an unknown major version, non-zero @flags or
 * reserved fields, or a requested feature the module lacks; -EFAULT for a
 * bad pointer.
 */
struct deepum_api {
	__u32 api;
	__u32 flags;
	__u64 features;
	__u64 ioctls;
	__u64 reserved[4];
};

#define DEEPUM_FEATURE_PREFETCH		(1ULL << 0)	/* correlation prefetcher */
#define DEEPUM_FEATURE_PREEVICT		(1ULL << 1)	/* pre-eviction */
#define DEEPUM_FEATURE_INVALIDATE	(1ULL << 2)	/* dead-range invalidation */
#define DEEPUM_FEATURE_UVM		(1ULL << 3)	/* GPU faults from nvidia-uvm, commands carried out there */
#define DEEPUM_FEATURE_LAUNCH_PAGE	(1ULL << 4)	/* mmap() gives the context's launch page */

/**
 * DEEPUM_IOC_ATTACH - bind this file to the calling process.
 * @flags:   (in) zero.
 * @pid:     (out) the process (thread group ID) the file is now bound to.
 * @context: (out) the context's number, unique while the module is loaded.
 *
 * A file binds once, to the memory (mm) of the process that attaches.  Every
 * later ioctl but DEEPUM_IOC_API needs the binding, and only threads of that
 * process may use it; the context, its tables and its counters go away when
 * the file is released.
 *
 * Context: process context.
 * Return: 0; -EINVAL for non-zero @flags or reserved fields; -EBUSY if the
 * file is already attached; -EPROTO before DEEPUM_IOC_API; -ENOMEM if the
 * context's queues cannot be allocated (without memory for its prefetch core
 * the context still attaches, and does not prefetch).
 */
struct deepum_attach {
	__u32 flags;
	__u32 pid;
	__u64 context;
	__u64 reserved[2];
};

/**
 * DEEPUM_IOC_SET_EXEC_ID - the kernel with this exec ID is about to run.
 * @exec_id:   (in) dense execution ID (libdeepum assigns them).
 * @stream:    (in) the stream it runs on.
 * @name_hash: (in) kernel-name hash, as in LAUNCH records (0: unknown).
 * @ts:        (in) timestamp in ns; 0: the module reads its own clock.
 *
 * Enters the context's pipeline as a LAUNCH record.  Issued in stream order
 * (from a host callback, or by the engine that watches the streams).
 *
 * Context: process context, attached file.
 * Return: 0; -EINVAL for reserved fields; -ENOTCONN if not attached; -EPERM
 * from another process; -EPROTO before DEEPUM_IOC_API.  A full fault queue
 * drops the record (counted in records_dropped), never fails the call.
 */
struct deepum_set_exec_id {
	__u32 exec_id;
	__u32 stream;
	__u64 name_hash;
	__u64 ts;
	__u64 reserved[2];
};

/**
 * DEEPUM_IOC_CONFIG, DEEPUM_IOC_GET_CONFIG - prefetch core configuration.
 * @scope:  (in) DEEPUM_SCOPE_CONTEXT: this file's context; DEEPUM_SCOPE_DEFAULTS:
 *          what contexts attached from now on start with.
 * @flags:  (in) zero.
 * @config: (in) CONFIG: the new configuration, zero fields meaning defaults;
 *          (out) GET_CONFIG, and CONFIG too: the configuration in force, every
 *          field filled in.
 *
 * CONFIG on a context replaces its prefetch core: tables start empty.  If the
 * new tables cannot be allocated the old core stays and -ENOMEM is returned.
 *
 * Context: process context; DEEPUM_SCOPE_CONTEXT needs an attached file.
 * Return: 0; -EINVAL for an unknown scope, non-zero flags or reserved fields,
 * or any configuration field outside its DEEPUM_CFG_*_MIN..MAX; -EPERM for
 * DEEPUM_SCOPE_DEFAULTS without CAP_SYS_ADMIN (CONFIG only) or for a context
 * of another process; -ENOTCONN, -EPROTO as for SET_EXEC_ID; -ENOMEM.
 */
struct deepum_config_req {
	__u32 scope;
	__u32 flags;
	__u64 reserved[2];
	struct deepum_config config;	/* last: it may grow */
};

#define DEEPUM_SCOPE_CONTEXT	0
#define DEEPUM_SCOPE_DEFAULTS	1	/* CONFIG, GET_CONFIG */
#define DEEPUM_SCOPE_GLOBAL	2	/* STATS: every context, live and gone */

/**
 * DEEPUM_IOC_INVALIDATE - a range of the process's memory holds dead data.
 * @addr: (in) range start.
 * @len:  (in) range length.
 *
 * Enters the pipeline as a FREE record: whole blocks in the range are
 * discarded without write-back and not prefetched until touched again.
 *
 * Context: process context, attached file.
 * Return: 0; -EINVAL for reserved fields or a range that wraps around;
 * -ENOTCONN, -EPERM, -EPROTO as for SET_EXEC_ID.
 */
struct deepum_range {
	__u64 addr;
	__u64 len;
	__u64 reserved[2];
};

/**
 * DEEPUM_IOC_STATS - counters, one consistent snapshot.
 * @scope: (in) DEEPUM_SCOPE_CONTEXT or DEEPUM_SCOPE_GLOBAL.
 * @flags: (in) zero.
 * @stats: (out) the counters; for GLOBAL, summed over every context since
 *         the module loaded (gauges over live contexts only).
 *
 * Context: process context; DEEPUM_SCOPE_CONTEXT needs an attached file.
 * Return: 0; -EINVAL for an unknown scope, non-zero flags or reserved fields;
 * -ENOTCONN, -EPERM, -EPROTO as for SET_EXEC_ID.
 */
struct deepum_stats_req {
	__u32 scope;
	__u32 flags;
	__u64 reserved[2];
	struct deepum_stats stats;	/* last: it may grow */
};

/**
 * DEEPUM_IOC_TEST_INJECT - feed records into the context's pipeline, as the
 * fault hook would.  Refused unless the module parameter enable_test_ioctls=1.
 * @records:  (in) user pointer to @count struct deepum_record.
 * @count:    (in) how many, at most DEEPUM_TEST_BATCH_MAX.
 * @flags:    (in) zero.
 * @accepted: (out) how many entered the queue, in order; the rest did not
 *            fit and may be offered again.
 *
 * Context: process context, attached file.
 * Return: 0; -EPERM without enable_test_ioctls or from another process;
 * -EINVAL for flags, reserved fields, @count, or a malformed record (none of
 * the batch is queued then); -EFAULT; -ENOTCONN, -EPROTO as above.
 */
struct deepum_test_inject {
	__u64 records;
	__u32 count;
	__u32 flags;
	__u32 accepted;
	__u32 reserved0;
	__u64 reserved[2];
};

#define DEEPUM_TEST_BATCH_MAX 4096

/**
 * DEEPUM_IOC_TEST_DRAIN - read back the commands the pipeline produced, in
 * order, from the recording backend.  Refused unless enable_test_ioctls=1.
 * @cmds:  (in) user pointer to room for @max struct deepum_cmd.
 * @max:   (in) at most DEEPUM_TEST_BATCH_MAX.
 * @flags: (in) DEEPUM_DRAIN_F_WAIT: first wait until every record queued so
 *         far has been processed (interruptible).
 * @count: (out) commands written.
 *
 * Context: process context, attached file; may sleep with DEEPUM_DRAIN_F_WAIT.
 * Return: 0; -EPERM, -EINVAL, -EFAULT, -ENOTCONN, -EPROTO as above;
 * -EINTR if a signal interrupted the wait.
 */
struct deepum_test_drain {
	__u64 cmds;
	__u32 max;
	__u32 flags;
	__u32 count;
	__u32 reserved0;
	__u64 reserved[2];
};

#define DEEPUM_DRAIN_F_WAIT	(1U << 0)

/**
 * DEEPUM_IOC_BIND_UVM - take the GPU faults of the caller's nvidia-uvm VA
 * space into the attached context, and carry out its commands there.
 * @fd:       (in) a /dev/nvidia-uvm file descriptor of this process that the
 *            CUDA driver initialised (UVM_INITIALIZE).
 * @flags:    (in) zero.
 *
 * The context keeps a reference on that file (and so the VA space) until it
 * is released.  Without a binding a module with the UVM backend prefetches
 * nothing.  One binding per context, one context per VA space.
 *
 * Context: process context.
 * Return: 0; -ENODEV if the module was built without the UVM backend
 * (DEEPUM_FEATURE_UVM absent) or loaded with enable_test_ioctls (commands
 * then go to the test ioctls' recording backend); -EBADF if @fd is not an open nvidia-uvm file;
 * -EINVAL for an uninitialised one, non-zero @flags or reserved fields;
 * -EBUSY if the context or the VA space is already bound; -ENOMEM;
 * -ENOTCONN, -EPERM, -EPROTO as for DEEPUM_IOC_SET_EXEC_ID.
 */
struct deepum_bind_uvm {
	__u32 fd;
	__u32 flags;
	__u64 reserved[2];
};

/*
 * The launch page: how a watcher (the module's context, or libdeepum's
 * user-mode engine in memory of its own) learns, in stream order, which
 * kernel runs now, without a system call per launch.
 *
 * Each stream the launching process uses owns a slot, with two parts:
 *
 *   ring[slot][s % DEEPUM_RING_DEPTH] = (u64)s << 32 | exec_id
 *       written by the launching thread, before it enqueues the stream's
 *       s-th launch (s = 1, 2, ...): which launch is which;
 *   position[slot] = (u64)s << 32 | exec_id
 *       written in stream order, when everything enqueued before launch s
 *       on that stream has completed (the GPU stores it: a stream memory
 *       write into this page, mapped for the GPU): how far the stream got.
 *
 * A reader that sees position s reads launches last + 1 .. s from the ring.
 * Each entry carries its own s, so a torn pair is impossible and an entry
 * the launching thread has already reused (it ran more than
 * DEEPUM_RING_DEPTH launches ahead of the reader) is recognised, never
 * misread.  s wraps at 2^32; exec_id may be DEEPUM_EXEC_NONE, or
 * DEEPUM_EXEC_ITERATION for an iteration mark between two launches.
 * name_hash[e] is the kernel-name hash of exec ID e (< DEEPUM_PAGE_EXEC_IDS),
 * written before the first ring entry that carries e; 0: unknown.
 *
 * From the module (DEEPUM_FEATURE_LAUNCH_PAGE): mmap() of an attached file,
 * offset 0, MAP_SHARED, length sizeof(struct deepum_launch_page) rounded up
 * to the page size: the context's page, zeroed but for magic, version,
 * streams and depth; every mapping in the process shows the same page.  It
 * is not inherited by fork().  Errors: -ENOTCONN before ATTACH, -EPERM from
 * another process, -EINVAL for another offset or length or a private
 * mapping, -ENOMEM.
 */
#define DEEPUM_PAGE_MAGIC	0x4c50554dU	/* "MUPL" read as little-endian bytes */
#define DEEPUM_PAGE_VERSION	3
#define DEEPUM_PAGE_STREAMS	128
/* How far the host may run ahead of the reader: CUDA queues ~1,000
 * launches per stream before a launch blocks, so 4,096 leaves room. */
#define DEEPUM_RING_DEPTH	4096
#define DEEPUM_PAGE_EXEC_IDS	32768

struct deepum_launch_page {
	__u32 magic;
	__u32 version;
	__u32 streams;		/* DEEPUM_PAGE_STREAMS */
	__u32 depth;		/* DEEPUM_RING_DEPTH */
	/* The CUstream handle of each slot (0: free slot; 0x1: legacy default
	 * stream; 0x2: a per-thread default stream), set before first use. */
	__u64 stream[DEEPUM_PAGE_STREAMS];
	__u64 position[DEEPUM_PAGE_STREAMS];
	__u64 ring[DEEPUM_PAGE_STREAMS][DEEPUM_RING_DEPTH];
	__u64 name_hash[DEEPUM_PAGE_EXEC_IDS];
};

/* Public ioctls count up from 0x00, test ioctls from 0x20; all stay below 64
 * so that struct deepum_api's ioctls mask can name each. */
#define DEEPUM_IOC_NR_API		0x00
#define DEEPUM_IOC_NR_ATTACH		0x01
#define DEEPUM_IOC_NR_SET_EXEC_ID	0x02
#define DEEPUM_IOC_NR_CONFIG		0x03
#define DEEPUM_IOC_NR_GET_CONFIG	0x04
#define DEEPUM_IOC_NR_INVALIDATE	0x05
#define DEEPUM_IOC_NR_STATS		0x06
#define DEEPUM_IOC_NR_BIND_UVM		0x07
#define DEEPUM_IOC_NR_TEST_INJECT	0x20
#define DEEPUM_IOC_NR_TEST_DRAIN	0x21

#define DEEPUM_IOC_API		_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_API, struct deepum_api)
#define DEEPUM_IOC_ATTACH	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_ATTACH, struct deepum_attach)
#define DEEPUM_IOC_SET_EXEC_ID	_IOW(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_SET_EXEC_ID, struct deepum_set_exec_id)
#define DEEPUM_IOC_CONFIG	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_CONFIG, struct deepum_config_req)
#define DEEPUM_IOC_GET_CONFIG	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_GET_CONFIG, struct deepum_config_req)
#define DEEPUM_IOC_INVALIDATE	_IOW(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_INVALIDATE, struct deepum_range)
#define DEEPUM_IOC_STATS	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_STATS, struct deepum_stats_req)
#define DEEPUM_IOC_BIND_UVM	_IOW(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_BIND_UVM, struct deepum_bind_uvm)
#define DEEPUM_IOC_TEST_INJECT	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_TEST_INJECT, struct deepum_test_inject)
#define DEEPUM_IOC_TEST_DRAIN	_IOWR(DEEPUM_IOC_MAGIC, DEEPUM_IOC_NR_TEST_DRAIN, struct deepum_test_drain)

#endif /* _UAPI_DEEPUM_H */
