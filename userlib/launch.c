// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Launches: execution IDs and the launch hooks.
 *
 * An execution ID names "this kernel, with this shape, on these arguments":
 * a hash of the kernel name, grid, block, dynamic shared memory and the
 * argument bytes, turned into a dense small integer by a bounded table.
 * Pointer arguments are hashed on purpose: PyTorch's caching allocator hands
 * a layer the same addresses every iteration, so the same launch in the next
 * iteration gets the same ID, while the same kernel on other tensors does not.
 *
 * Two lock-free tables, both fixed at start-up, both open addressing with a
 * bounded probe: CUfunction -> name hash and parameter layout (asked of the
 * driver once per function), and launch hash -> exec ID.  A slot is claimed
 * by CAS on its key and published by a release store; a reader that finds a
 * claimed but unpublished slot waits for the claimer, which makes no
 * blocking call in between.  A full table (or probe) gives DEEPUM_EXEC_NONE:
 * the launch still runs, it is just not tracked.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "../kmod/core/core.h"
#include "deepum_user.h"

enum {
	PROBE_MAX = 64,
	FUNC_SLOTS = 1 << 14,		/* distinct kernels, twice over */
	PARAM_POOL = 1 << 17,		/* parameters of all of them */
	PARAMS_MAX = 4096,		/* CUDA's 32 KiB of parameters, 8 bytes each */
	EXTRA_PAIRS_MAX = 16,
};

enum func_state { FUNC_CLAIMED, FUNC_READY, FUNC_UNNAMED, FUNC_NO_ROOM };

struct param_layout {
	u32 offset;
	u32 size;
};

struct func_info {
	_Atomic uintptr_t func;		/* CUfunction; 0: free */
	_Atomic u32 state;		/* enum func_state */
	u32 nparams;
	u32 first_param;		/* into param_pool */
	u64 name_hash;
};

/* An exec slot's id field: 0 while being claimed, EXEC_SLOT_NONE once the
 * IDs ran out, else the exec ID plus one. */
#define EXEC_SLOT_NONE 0xffffffffU

struct exec_slot {
	_Atomic u64 key;		/* launch hash; 0: free */
	_Atomic u32 id;
};

static struct func_info *funcs;
static struct param_layout *param_pool;
static _Atomic u32 param_pool_used;
static struct exec_slot *exec_slots;
static u32 exec_mask;
static u32 exec_max;
static _Atomic u32 exec_next;
static u64 *exec_name_hash;		/* by exec ID, for SET_EXEC_ID */

bool launch_tables_init(u32 max)
{
	u32 slots = 1;

	while (slots < 2 * max)
		slots <<= 1;
	exec_mask = slots - 1;
	/* An injected full table: every new launch is refused an ID. */
	exec_max = deepum_inject("table-full") ? 0 : max;
	funcs = deepum_calloc(FUNC_SLOTS, sizeof(*funcs));
	param_pool = deepum_calloc(PARAM_POOL, sizeof(*param_pool));
	exec_slots = deepum_calloc(slots, sizeof(*exec_slots));
	exec_name_hash = deepum_calloc(max, sizeof(*exec_name_hash));
	return funcs && param_pool && exec_slots && exec_name_hash;
}

u64 launch_name_hash(u32 exec_id)
{
	return exec_id < exec_max ? exec_name_hash[exec_id] : 0;
}

static u32 pointer_slot(uintptr_t p, u32 mask)
{
	return (u32)((p * 0x9e3779b97f4a7c15ULL) >> 40) & mask;	/* Fibonacci hashing */
}

/* A CUkernel may be launched as a CUfunction; the driver names it only
 * through the cuKernel* calls. */
static CUresult param_info(CUfunction f, bool is_kernel, u32 index, size_t *offset, size_t *size)
{
	if (is_kernel)
		return REAL(cuKernelGetParamInfo)((CUkernel)f, index, offset, size);
	return REAL(cuFuncGetParamInfo)(f, index, offset, size);
}

static enum func_state describe(CUfunction f, struct func_info *fi)
{
	const char *name = NULL;
	bool is_kernel = false;
	size_t offset, size;
	u32 n, first;

	if (REAL(cuFuncGetName)(&name, f) != CUDA_SUCCESS || !name) {
		is_kernel = deepum_real[ENTRY_cuKernelGetName] && deepum_real[ENTRY_cuKernelGetParamInfo];
		if (!is_kernel || REAL(cuKernelGetName)(&name, (CUkernel)f) != CUDA_SUCCESS || !name)
			return FUNC_UNNAMED;
	}
	/* The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter. */
	for (n = 0; n < PARAMS_MAX; n++)
		if (param_info(f, is_kernel, n, &offset, &size) != CUDA_SUCCESS)
			break;
	first = atomic_fetch_add_explicit(&param_pool_used, n, memory_order_relaxed);
	if (first > PARAM_POOL - n)
		return FUNC_NO_ROOM;
	for (u32 i = 0; i < n; i++) {
		if (param_info(f, is_kernel, i, &offset, &size) != CUDA_SUCCESS)
			return FUNC_UNNAMED;
		param_pool[first + i] = (struct param_layout){ (u32)offset, (u32)size };
	}
	fi->nparams = n;
	fi->first_param = first;
	fi->name_hash = deepum_hash_bytes(DEEPUM_HASH_INIT, name, strlen(name));
	return FUNC_READY;
}

static enum func_state published_state(struct func_info *fi)
{
	u32 state;

	while ((state = atomic_load_explicit(&fi->state, memory_order_acquire)) == FUNC_CLAIMED)
		sched_yield();
	return state;
}

/* The function's description, or NULL (counted) if it has none. */
static const struct func_info *function_info(CUfunction f)
{
	u32 i = pointer_slot((uintptr_t)f, FUNC_SLOTS - 1);

	for (int probe = 0; probe < PROBE_MAX; probe++, i = (i + 1) & (FUNC_SLOTS - 1)) {
		struct func_info *fi = &funcs[i];
		uintptr_t key = atomic_load_explicit(&fi->func, memory_order_acquire);
		enum func_state state;

		if (key == 0 && atomic_compare_exchange_strong(&fi->func, &key, (uintptr_t)f)) {
			state = describe(f, fi);
			atomic_store_explicit(&fi->state, state, memory_order_release);
		} else if (key == (uintptr_t)f) {
			state = published_state(fi);
		} else {
			continue;
		}
		if (state == FUNC_READY)
			return fi;
		if (state == FUNC_UNNAMED)
			COUNT(launches_unidentified, 1);
		else
			COUNT(exec_untracked, 1);
		return NULL;
	}
	COUNT(exec_untracked, 1);
	return NULL;
}

/* The argument buffer of the "extra" launch form, or false if malformed. */
static bool extra_buffer(void **extra, const char **buffer, size_t *size)
{
	*buffer = NULL;
	*size = 0;
	for (int i = 0; i < 2 * EXTRA_PAIRS_MAX; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_END)
			return true;
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			*buffer = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
			*size = *(size_t *)extra[i + 1];
		else
			return false;
	}
	return false;
}

/*
 * Only the parameters' own bytes are hashed, located through the driver's
 * layout: the "extra" buffer's padding may hold anything, and the same
 * arguments give the same ID through either launch form.
 */
static bool launch_hash(const struct func_info *fi, const struct launch *l, u64 *ret)
{
	const struct param_layout *p = &param_pool[fi->first_param];
	u64 h = deepum_hash_bytes(fi->name_hash, l->shape, sizeof(l->shape));
	const char *buffer = NULL;
	size_t buffer_size = 0;

	if (!l->params && l->extra && !extra_buffer(l->extra, &buffer, &buffer_size))
		return false;
	for (u32 i = 0; i < fi->nparams; i++) {
		if (l->params)
			h = deepum_hash_bytes(h, l->params[i], p[i].size);
		else if (buffer && p[i].offset + (size_t)p[i].size <= buffer_size)
			h = deepum_hash_bytes(h, buffer + p[i].offset, p[i].size);
		else
			return false;
	}
	*ret = h ? h : 1;	/* 0 marks a free slot */
	return true;
}

static u32 published_id(struct exec_slot *slot)
{
	u32 id;

	while ((id = atomic_load_explicit(&slot->id, memory_order_acquire)) == 0)
		sched_yield();
	return id == EXEC_SLOT_NONE ? DEEPUM_EXEC_NONE : id - 1;
}

static u32 exec_id_for(u64 key, u64 name_hash)
{
	u32 i = (u32)key & exec_mask;

	for (int probe = 0; probe < PROBE_MAX; probe++, i = (i + 1) & exec_mask) {
		struct exec_slot *slot = &exec_slots[i];
		u64 found = atomic_load_explicit(&slot->key, memory_order_acquire);
		u32 id;

		if (found == key) {
			COUNT(exec_hits, 1);
			return published_id(slot);
		}
		if (found != 0)
			continue;
		if (atomic_load_explicit(&exec_next, memory_order_relaxed) >= exec_max)
			break;	/* IDs are spent: do not fill the table with refusals */
		if (!atomic_compare_exchange_strong(&slot->key, &found, key)) {
			if (found == key) {
				COUNT(exec_hits, 1);
				return published_id(slot);
			}
			continue;
		}
		id = atomic_fetch_add_explicit(&exec_next, 1, memory_order_relaxed);
		if (id >= exec_max) {
			atomic_store_explicit(&slot->id, EXEC_SLOT_NONE, memory_order_release);
			break;
		}
		exec_name_hash[id] = name_hash;
		atomic_store_explicit(&slot->id, id + 1, memory_order_release);
		COUNT(exec_new, 1);
		return id;
	}
	COUNT(exec_untracked, 1);
	return DEEPUM_EXEC_NONE;
}

/* Identify the launch, deliver its exec ID in stream order, record it. */
static void launch_before(const struct launch *l)
{
	const struct func_info *fi = function_info(l->func);
	u32 exec_id = DEEPUM_EXEC_NONE;
	u64 name_hash = 0;
	u64 key;
	u32 slot;

	COUNT(launches, 1);
	if (fi) {
		name_hash = fi->name_hash;
		if (launch_hash(fi, l, &key))
			exec_id = exec_id_for(key, name_hash);
		else
			COUNT(launches_unidentified, 1);
	}
	slot = delivery_enqueue(l, exec_id);
	ring_push(DEEPUM_REC_LAUNCH, name_hash, 0, exec_id, slot);
}

CUresult on_launch_kernel(enum deepum_entry which, cuLaunchKernel_fn real,
			  UNPAREN(LAUNCH_KERNEL_PARAMS))
{
	struct launch l = {
		.func = f,
		.shape = { grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes },
		.stream = stream,
		.per_thread_stream = deepum_entry_stream[which] == STREAM_PER_THREAD,
		.params = params,
		.extra = extra,
	};

	launch_before(&l);
	return real(UNPAREN(LAUNCH_KERNEL_ARGS));
}

CUresult on_launch_kernel_ex(enum deepum_entry which, cuLaunchKernelEx_fn real,
			     UNPAREN(LAUNCH_KERNEL_EX_PARAMS))
{
	if (config) {
		struct launch l = {
			.func = f,
			.shape = { config->gridDimX, config->gridDimY, config->gridDimZ,
				   config->blockDimX, config->blockDimY, config->blockDimZ,
				   config->sharedMemBytes },
			.stream = config->hStream,
			.per_thread_stream = deepum_entry_stream[which] == STREAM_PER_THREAD,
			.params = params,
			.extra = extra,
		};

		launch_before(&l);
	}
	return real(UNPAREN(LAUNCH_KERNEL_EX_ARGS));
}

CUresult on_launch_cooperative(enum deepum_entry which, cuLaunchCooperativeKernel_fn real,
			       UNPAREN(LAUNCH_COOPERATIVE_PARAMS))
{
	struct launch l = {
		.func = f,
		.shape = { grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes },
		.stream = stream,
		.per_thread_stream = deepum_entry_stream[which] == STREAM_PER_THREAD,
		.params = params,
	};

	launch_before(&l);
	return real(UNPAREN(LAUNCH_COOPERATIVE_ARGS));
}
