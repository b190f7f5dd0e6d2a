/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The part of nvidia-uvm's tools interface that libdeepum's UVM fault
 * source (faults.c) and its test double (tests/fakecuda/fakedev.c) use: the
 * event queue a process may attach to its own VA space through
 * /dev/nvidia-uvm-tools, with no driver change and no capability.  Declared
 * from NVIDIA/open-gpu-kernel-modules 580.142 (kernel-open/nvidia-uvm/
 * uvm_ioctl.h, uvm_types.h; described in ../shared/reference/
 * nvidia-uvm-map.md section 5), as the driver lays it out on x86-64 Linux.
 *
 * On Linux an ioctl's request is its bare number (UVM_IOCTL_BASE(i) = i),
 * and every parameter block ends in the driver's status (0: NV_OK), to be
 * checked besides the ioctl's own result.
 */
#ifndef _DEEPUM_UVM_TOOLS_ABI_H
#define _DEEPUM_UVM_TOOLS_ABI_H

#include <stddef.h>
#include <stdint.h>

enum {
	/* On the /dev/nvidia-uvm-tools file. */
	UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS = 58,
	UVM_TOOLS_INIT_EVENT_TRACKER_V2 = 76,	/* UvmEventEntry_V2 entries */
	/* On the process's /dev/nvidia-uvm file: deliver delayed events now. */
	UVM_TOOLS_FLUSH_EVENTS = 67,
};

/* UvmEventType values used here, and the size of the dropped[] array. */
enum {
	UVM_EVENT_TYPE_MIGRATION = 2,
	UVM_EVENT_TYPE_GPU_FAULT = 3,
	UVM_EVENT_TYPE_THRASHING_DETECTED = 10,
	UVM_EVENT_TYPE_THROTTLING_START = 11,
	UVM_EVENT_TYPE_MAP_REMOTE = 13,
	UVM_EVENT_TYPES_ALL = 64,
	UVM_EVENT_ENTRY_BYTES = 72,		/* sizeof(UvmEventEntry_V2) */
};

/* UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS: a queue of @queue_entries (a power of
 * two) entries at @queue_buffer and its control block at @control_buffer,
 * both in the caller's memory (the driver pins them), on the VA space of
 * @uvm_fd, the caller's own /dev/nvidia-uvm file. */
struct uvm_init_event_tracker {
	uint64_t queue_buffer;
	uint64_t queue_entries;
	uint64_t control_buffer;
	uint8_t processor[16];
	uint32_t all_processors;
	uint32_t uvm_fd;
	uint32_t rm_status;
	uint32_t padding;
};

/* UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS_PARAMS: 1 << UvmEventType each. */
struct uvm_enable_events {
	uint64_t event_types;
	uint32_t rm_status;
	uint32_t padding;
};

/* UVM_TOOLS_FLUSH_EVENTS_PARAMS */
struct uvm_flush_events {
	uint32_t rm_status;
};

/* UvmToolsEventControlData.  Indices are kept masked to the queue's size;
 * the driver writes put_* (both equal outside its lock), the reader get_*.
 * The queue is full when one free entry is left. */
struct uvm_control {
	_Atomic uint32_t get_ahead;
	_Atomic uint32_t get_behind;
	_Atomic uint32_t put_ahead;
	_Atomic uint32_t put_behind;
	uint64_t dropped[UVM_EVENT_TYPES_ALL];
};

/* UvmEventGpuFaultInfo_V2: queued while the fault is serviced. */
struct uvm_gpu_fault {
	uint8_t event_type;
	uint8_t fault_type;
	uint16_t gpu_index;
	uint16_t gpc_id;
	uint16_t client_id;
	uint64_t address;
	uint64_t cpu_ns;		/* CLOCK_MONOTONIC_RAW when servicing began */
	uint64_t gpu_ns;
	uint32_t batch_id;
	uint8_t client_type;
	uint8_t access_type;		/* 1 read, 2 write, 3 atomic, 4 prefetch */
	uint16_t padding;
};

/* UvmEventMigrationInfo_V2: queued once the copy is done (or flushed). */
struct uvm_migration {
	uint8_t event_type;
	uint8_t cause;			/* 1 user, 2 fault, 3 driver prefetch, 4 eviction */
	uint16_t padding;
	uint16_t src_index;		/* 0: the CPU */
	uint16_t dst_index;
	int32_t src_nid;
	int32_t dst_nid;
	uint64_t address;
	uint64_t bytes;
	uint64_t begin_cpu_ns;
	uint64_t end_cpu_ns;		/* 0 for asynchronous migrations */
	uint64_t range_group;
	uint64_t begin_gpu_ns;
	uint64_t end_gpu_ns;
};

/* The driver's thrashing heuristics (uvm_perf_thrashing.c), which can keep
 * a page from migrating: UvmEventThrashingDetectedInfo_V2 (the processor mask
 * that follows is not read), */
struct uvm_thrashing {
	uint8_t event_type;
	uint8_t padding8;
	uint16_t padding16;
	uint32_t padding32;
	uint64_t address;
	uint64_t size;
	uint64_t cpu_ns;
};

/* UvmEventThrottlingStartInfo_V2: a page's faults held back for a while, */
struct uvm_throttling {
	uint8_t event_type;
	uint8_t padding8;
	uint16_t processor_index;
	uint32_t padding32;
	uint64_t address;		/* one page */
	uint64_t cpu_ns;
};

/* UvmEventMapRemoteInfo_V2: pages mapped where they are instead of moved. */
struct uvm_map_remote {
	uint8_t event_type;
	uint8_t cause;
	uint16_t padding16;
	uint16_t src_index;		/* the processor that maps them */
	uint16_t dst_index;		/* the one whose memory holds them */
	uint64_t address;
	uint64_t size;
	uint64_t cpu_ns;
	uint64_t gpu_ns;
};

_Static_assert(sizeof(struct uvm_init_event_tracker) == 56, "UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS");
_Static_assert(sizeof(struct uvm_enable_events) == 16, "UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS_PARAMS");
_Static_assert(sizeof(struct uvm_control) == 528, "UvmToolsEventControlData");
_Static_assert(offsetof(struct uvm_gpu_fault, address) == 8 && offsetof(struct uvm_gpu_fault, cpu_ns) == 16 &&
	       offsetof(struct uvm_gpu_fault, batch_id) == 32 && offsetof(struct uvm_gpu_fault, access_type) == 37,
	       "UvmEventGpuFaultInfo_V2");
_Static_assert(offsetof(struct uvm_migration, dst_index) == 6 && offsetof(struct uvm_migration, address) == 16 &&
	       offsetof(struct uvm_migration, bytes) == 24 && offsetof(struct uvm_migration, begin_gpu_ns) == 56 &&
	       sizeof(struct uvm_migration) == UVM_EVENT_ENTRY_BYTES, "UvmEventMigrationInfo_V2");
_Static_assert(offsetof(struct uvm_thrashing, address) == 8 && offsetof(struct uvm_thrashing, size) == 16 &&
	       offsetof(struct uvm_thrashing, cpu_ns) == 24, "UvmEventThrashingDetectedInfo_V2");
_Static_assert(offsetof(struct uvm_throttling, processor_index) == 2 && offsetof(struct uvm_throttling, address) == 8 &&
	       sizeof(struct uvm_throttling) == 24, "UvmEventThrottlingStartInfo_V2");
_Static_assert(offsetof(struct uvm_map_remote, src_index) == 4 && offsetof(struct uvm_map_remote, address) == 8 &&
	       offsetof(struct uvm_map_remote, size) == 16 && sizeof(struct uvm_map_remote) == 40,
	       "UvmEventMapRemoteInfo_V2");

#endif /* _DEEPUM_UVM_TOOLS_ABI_H */
