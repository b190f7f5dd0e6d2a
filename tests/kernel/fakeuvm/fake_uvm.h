/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The test provider's ioctls (/dev/deepum_fake_uvm), for tests/kernel only.
 * An open file is one VA space.  FAULTS calls the registered fault_batch
 * hook as nvidia-uvm would; CALLS reads back (and forgets) the helper calls
 * the external module made, in order, for every VA space.
 */
#ifndef _FAKE_UVM_H
#define _FAKE_UVM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define FAKE_UVM_CHUNK	16

struct fake_uvm_faults {
	__u8 gpu_uuid[16];
	__u32 count;		/* at most FAKE_UVM_CHUNK */
	__u32 access_type;	/* UVM_EXT_ACCESS_* of every fault */
	__u64 addrs[FAKE_UVM_CHUNK];
};

#define FAKE_UVM_OP_MIGRATE	1
#define FAKE_UVM_OP_EVICT	2
#define FAKE_UVM_OP_DISCARD	3

struct fake_uvm_call {
	__u32 op;		/* FAKE_UVM_OP_* */
	__u32 va_space;		/* the calling file's number, from 1 */
	__u64 addr;
	__u64 len;		/* 0 for EVICT */
	__u8 gpu_uuid[16];	/* MIGRATE only */
};

struct fake_uvm_calls {
	__u64 buf;		/* user pointer to max struct fake_uvm_call */
	__u32 max;
	__u32 count;		/* (out) */
};

#define FAKE_UVM_IOC_FAULTS	_IOW('U', 1, struct fake_uvm_faults)
#define FAKE_UVM_IOC_CALLS	_IOWR('U', 2, struct fake_uvm_calls)
#define FAKE_UVM_IOC_ID		_IOR('U', 3, __u32)

#endif /* _FAKE_UVM_H */
