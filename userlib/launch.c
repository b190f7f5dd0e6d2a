// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Launches: execution IDs and the launch hooks.
 *
 * An execution ID names "this kernel, with this shape, on this data": a
 * hash of the kernel name, grid, block, dynamic shared memory, and those
 * argument words that point into device memory, turned into a dense small
 * integer by a bounded table.  PyTorch's caching allocator hands a layer the
 * same addresses every iteration, so the same launch in the next iteration
 * gets the same ID, while the same kernel on other tensors does not.
 * Scalars are left out on purpose: an optimizer step, an RNG seed or offset,
 * a learning-rate schedule change every iteration and would make every
 * launch that carries them new (measured on the H200: only 72% of GPT-2's
 * launches hit a known ID when all argument bytes were hashed).
 *
 * Which words are pointers.  The argument buffer is read as 8-byte words at
 * 8-aligned offsets (CUDA aligns pointers, and structs holding them, to 8;
 * the layout comes from cuFuncGetParamInfo, so padding is never read).  A
 * word is a pointer when its value lies in the address window
 * [lowest start, highest end) of every device allocation libdeepum has
 * seen (cuMemAlloc, cuMemAllocPitch; managed or not).  The window is two
 * atomics, grown with CAS on each allocation and never shrunk (freed
 * addresses are reused by the allocator), read with two relaxed loads per
 * launch: no lock, no table walk per word.  A sorted range table would be
 * exact but costs a search per word and safe reclamation on every free.
 *
 * False positives of the window: a scalar word is taken for a pointer only
 * if its value falls inside it.  Device allocations live in the UVA range
 * (0x7fxx_xxxx_xxxx on x86-64), so a window spanning W bytes catches a
 * uniformly random 64-bit value (a seed) with odds W / 2^64, 2^-28 for
 * W = 64 GiB; counters, sizes and ordinary float or double bit patterns
 * never land there (a double would be a ~1e-310 denormal, two packed
 * floats would need a denormal high half, two packed int32 would need the
 * high one in [lo >> 32, hi >> 32], about 32512..32767).  A false positive
 * only costs a new ID when the value also changes between iterations.
 * Host pointers and memory from pools or cuMemCreate, outside the window,
 * are ignored like scalars: libdeepum cannot prefetch them anyway.
 *
 * The word's index is mixed in with its value, so moving a pointer from one
 * argument to another is a different launch.  The hash itself is a
 * multiply-xorshift per 64-bit word (exec IDs are private to the process;
 * only the name hash, FNV-1a, must match the other components).
 *
 * Tensors that move.  Some launches get new addresses every iteration
 * (PyTorch's dropout masks: most of the new IDs the H200 traces show after
 * the second iteration), so their hash is new each time.  With
 * DEEPUM_EXEC_BY_PLACE=1, once iterations are marked (by the program or
 * iterations.c), each launch also has a place:
 * the k-th launch of this kernel and shape in the iteration.  A launch whose
 * hash is new takes the ID of the launch that had its place in an earlier
 * iteration, if any (counted as exec_by_place); its hash then names that ID
 * too.  Places are recorded for new IDs, and for known ones during the first
 * two marked iterations; after that only a new hash costs the extra lookup.
 * A program whose launches change order between iterations gets IDs of
 * other launches of the same kernel and shape for the moved ones.  Off by
 * default: on the H200 (BERT at a 50% budget) it doubled the blocks the
 * engine prefetched and the iteration time.  Likely reasons, not told apart
 * yet: an iteration with extra launches of a shape (the first one's
 * optimizer set-up, the second's gradient accumulations) shifts the places
 * after them, so a new hash can take the ID of another launch that still
 * runs by its own hash (two launches, one table); and an ID kept across
 * iterations keeps a table that learns every iteration's new addresses on
 * top of the old ones, where a new ID starts from the one it stands in for.
 *
 * Two lock-free tables, both fixed at start-up, both open addressing with a
 * bounded probe: CUfunction -> name hash and argument words (asked of the
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
	WORD_POOL = 1 << 19,		/* their aligned argument words (4 MiB): a
					 * multi-tensor-apply kernel alone has ~750 */
	PARAMS_MAX = 4096,		/* CUDA's 32 KiB of parameters, 8 bytes each */
	PLACE_SLOTS = 1 << 14,		/* kernel-and-shape counters, twice the kernels */
	PLACES_RECORDED_UNTIL = 2,	/* the marked iteration up to which known IDs record their place */
	EXTRA_PAIRS_MAX = 16,
};

enum func_state { FUNC_CLAIMED, FUNC_READY, FUNC_UNNAMED, FUNC_NO_ROOM };

/* An 8-aligned word of the argument buffer, inside one parameter. */
struct arg_word {
	u32 buffer_offset;		/* in the "extra" argument buffer */
	uint16_t param;			/* in kernelParams */
	uint16_t within;			/* bytes into that parameter */
};

struct func_info {
	_Atomic uintptr_t func;		/* CUfunction; 0: free */
	_Atomic u32 state;		/* enum func_state */
	u32 nwords;
	u32 first_word;			/* into word_pool */
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
static struct arg_word *word_pool;
static _Atomic u32 word_pool_used;
static struct exec_slot *exec_slots;
static u32 exec_mask;
static u32 exec_max;
static _Atomic u32 exec_next;
static u64 *exec_name_hash;		/* by exec ID, for SET_EXEC_ID */

/* Launches of one kernel and shape so far in the current iteration. */
struct place_slot {
	_Atomic u64 key;		/* the kernel-and-shape hash; 0: free */
	_Atomic u64 count;		/* iteration << 32 | launches in it */
};

static struct place_slot *places;
static _Atomic u32 iteration;		/* marks so far: places count from the first */

/* Every device allocation seen lies in [window_lo, window_hi). */
static _Atomic u64 window_lo = UINT64_MAX;
static _Atomic u64 window_hi;

bool launch_tables_init(u32 max)
{
	u32 slots = 1;

	/* Room for twice the IDs; as much again for places (launches of an iteration). */
	while (slots < (deepum.exec_by_place ? 4 : 2) * max)
		slots <<= 1;
	exec_mask = slots - 1;
	/* An injected full table: every new launch is refused an ID. */
	exec_max = deepum_inject("table-full") ? 0 : max;
	funcs = deepum_calloc(FUNC_SLOTS, sizeof(*funcs));
	word_pool = deepum_calloc(WORD_POOL, sizeof(*word_pool));
	exec_slots = deepum_calloc(slots, sizeof(*exec_slots));
	exec_name_hash = deepum_calloc(max, sizeof(*exec_name_hash));
	places = deepum.exec_by_place ? deepum_calloc(PLACE_SLOTS, sizeof(*places)) : NULL;
	return funcs && word_pool && exec_slots && exec_name_hash && (places || !deepum.exec_by_place);
}

void launch_new_iteration(void)
{
	atomic_fetch_add_explicit(&iteration, 1, memory_order_relaxed);
}

u64 launch_name_hash(u32 exec_id)
{
	return exec_id < exec_max ? exec_name_hash[exec_id] : 0;
}

void launch_note_allocation(u64 base, u64 size)
{
	u64 lo = atomic_load_explicit(&window_lo, memory_order_relaxed);
	u64 hi = atomic_load_explicit(&window_hi, memory_order_relaxed);

	while (base < lo && !atomic_compare_exchange_weak(&window_lo, &lo, base))
		;
	while (base + size > hi && !atomic_compare_exchange_weak(&window_hi, &hi, base + size))
		;
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

/* The first 8-aligned offset at or after @offset. */
static size_t aligned_word(size_t offset)
{
	return (offset + 7) & ~(size_t)7;
}

static enum func_state describe(CUfunction f, struct func_info *fi)
{
	const char *name = NULL;
	bool is_kernel = false;
	size_t offset, size;
	u32 n, words = 0, first, at;

	if (REAL(cuFuncGetName)(&name, f) != CUDA_SUCCESS || !name) {
		is_kernel = deepum_real[ENTRY_cuKernelGetName] && deepum_real[ENTRY_cuKernelGetParamInfo];
		if (!is_kernel || REAL(cuKernelGetName)(&name, (CUkernel)f) != CUDA_SUCCESS || !name)
			return FUNC_UNNAMED;
	}
	/* The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter. */
	for (n = 0; n < PARAMS_MAX; n++) {
		if (param_info(f, is_kernel, n, &offset, &size) != CUDA_SUCCESS)
			break;
		for (size_t w = aligned_word(offset); w + 8 <= offset + size; w += 8)
			words++;
	}
	first = atomic_fetch_add_explicit(&word_pool_used, words, memory_order_relaxed);
	if (first > WORD_POOL - words)
		return FUNC_NO_ROOM;
	at = first;
	for (u32 i = 0; i < n; i++) {
		if (param_info(f, is_kernel, i, &offset, &size) != CUDA_SUCCESS)
			return FUNC_UNNAMED;
		for (size_t w = aligned_word(offset); w + 8 <= offset + size && at < first + words; w += 8)
			word_pool[at++] = (struct arg_word){ (u32)w, (uint16_t)i, (uint16_t)(w - offset) };
	}
	fi->nwords = at - first;
	fi->first_word = first;
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

static u64 mix(u64 h, u64 word)
{
	h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/*
 * The launch's hash; false if its arguments cannot be read.  Words are read
 * through the driver's layout, so either launch form (kernelParams or the
 * "extra" buffer) gives the same hash.
 */
static bool launch_key(const struct func_info *fi, const struct launch *l, u64 *ret, u64 *shape_ret)
{
	const struct arg_word *w = &word_pool[fi->first_word];
	u64 lo = atomic_load_explicit(&window_lo, memory_order_relaxed);
	u64 hi = atomic_load_explicit(&window_hi, memory_order_relaxed);
	const unsigned int *s = l->shape;
	u64 h = fi->name_hash;
	const char *buffer = NULL;
	size_t buffer_size = 0;

	h = mix(h, s[0] | (u64)s[1] << 32);
	h = mix(h, s[2] | (u64)s[3] << 32);
	h = mix(h, s[4] | (u64)s[5] << 32);
	h = mix(h, s[6]);
	*shape_ret = h ? h : 1;
	if (!l->params && l->extra && !extra_buffer(l->extra, &buffer, &buffer_size))
		return false;
	for (u32 i = 0; i < fi->nwords; i++) {
		u64 value;

		if (l->params)
			memcpy(&value, (const char *)l->params[w[i].param] + w[i].within, sizeof(value));
		else if (buffer && w[i].buffer_offset + sizeof(value) <= buffer_size)
			memcpy(&value, buffer + w[i].buffer_offset, sizeof(value));
		else
			return false;
		if (value >= lo && value < hi)
			h = mix(h, value ^ (u64)i << 48);	/* which word holds it matters */
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

enum exec_how { EXEC_KNOWN, EXEC_BOUND, EXEC_NEW, EXEC_NONE };

/* The ID a slot holding the looked-up key names (EXEC_NONE: the IDs had run out). */
static u32 known_id(struct exec_slot *slot, enum exec_how *how)
{
	u32 id = published_id(slot);

	*how = id == DEEPUM_EXEC_NONE ? EXEC_NONE : EXEC_KNOWN;
	return id;
}

/*
 * The exec ID @key names (EXEC_KNOWN); else, with @create, @key is made to
 * name @reuse (EXEC_BOUND) or, if that is DEEPUM_EXEC_NONE, a new ID
 * (EXEC_NEW).  DEEPUM_EXEC_NONE (EXEC_NONE) without it or without room.
 */
static u32 exec_id_for(u64 key, u64 name_hash, bool create, u32 reuse, enum exec_how *how)
{
	u32 i = (u32)key & exec_mask;

	*how = EXEC_NONE;
	for (int probe = 0; probe < PROBE_MAX; probe++, i = (i + 1) & exec_mask) {
		struct exec_slot *slot = &exec_slots[i];
		u64 found = atomic_load_explicit(&slot->key, memory_order_acquire);
		u32 id;

		if (found == key)
			return known_id(slot, how);
		if (found != 0)
			continue;
		if (!create || (reuse == DEEPUM_EXEC_NONE &&
				atomic_load_explicit(&exec_next, memory_order_relaxed) >= exec_max))
			break;	/* IDs are spent: do not fill the table with refusals */
		if (!atomic_compare_exchange_strong(&slot->key, &found, key)) {
			if (found == key)
				return known_id(slot, how);
			continue;
		}
		if (reuse != DEEPUM_EXEC_NONE) {
			atomic_store_explicit(&slot->id, reuse + 1, memory_order_release);
			*how = EXEC_BOUND;
			return reuse;
		}
		id = atomic_fetch_add_explicit(&exec_next, 1, memory_order_relaxed);
		if (id >= exec_max) {
			atomic_store_explicit(&slot->id, EXEC_SLOT_NONE, memory_order_release);
			break;
		}
		exec_name_hash[id] = name_hash;
		atomic_store_explicit(&slot->id, id + 1, memory_order_release);
		*how = EXEC_NEW;
		return id;
	}
	return DEEPUM_EXEC_NONE;
}

/*
 * The launch's place: a hash of its kernel-and-shape hash @shape and how many
 * launches of those came before it in the current iteration; false when
 * places are off, before the first mark or without room.  @iter gets the
 * marks so far.
 */
static bool place_key(u64 shape, u64 *ret, u32 *iter)
{
	u32 i = (u32)shape & (PLACE_SLOTS - 1);

	*iter = atomic_load_explicit(&iteration, memory_order_relaxed);
	if (!*iter || !deepum.exec_by_place)
		return false;
	for (int probe = 0; probe < PROBE_MAX; probe++, i = (i + 1) & (PLACE_SLOTS - 1)) {
		struct place_slot *p = &places[i];
		u64 found = atomic_load_explicit(&p->key, memory_order_acquire);
		u64 count, next;

		if (found == 0 && !atomic_compare_exchange_strong(&p->key, &found, shape) && found != shape)
			continue;
		if (found != 0 && found != shape)
			continue;
		count = atomic_load_explicit(&p->count, memory_order_relaxed);
		do
			next = count >> 32 == *iter ? count + 1 : (u64)*iter << 32 | 1;
		while (!atomic_compare_exchange_weak(&p->count, &count, next));
		*ret = mix(mix(shape, (u32)(next - 1)), 0x706c616365ULL);	/* "place" */
		if (!*ret)
			*ret = 1;
		return true;
	}
	return false;
}

/* The launch's exec ID (see "Tensors that move" above), counted. */
static u32 exec_id_of(const struct func_info *fi, u64 key, u64 shape)
{
	u64 place = 0;	/* (set when placed; -O1 cannot tell) */
	u32 iter, id, stand_in = DEEPUM_EXEC_NONE;
	bool placed = place_key(shape, &place, &iter);
	enum exec_how how, place_how;

	id = exec_id_for(key, fi->name_hash, false, DEEPUM_EXEC_NONE, &how);
	if (how == EXEC_NONE) {
		if (placed)
			stand_in = exec_id_for(place, fi->name_hash, false, DEEPUM_EXEC_NONE, &place_how);
		id = exec_id_for(key, fi->name_hash, true, stand_in, &how);
	}
	if (placed && id != DEEPUM_EXEC_NONE && stand_in == DEEPUM_EXEC_NONE &&
	    (how == EXEC_NEW || iter <= PLACES_RECORDED_UNTIL))
		exec_id_for(place, fi->name_hash, true, id, &place_how);
	switch (how) {
	case EXEC_KNOWN:
		COUNT(exec_hits, 1);
		break;
	case EXEC_BOUND:
		COUNT(exec_hits, 1);
		COUNT(exec_by_place, 1);
		break;
	case EXEC_NEW:
		COUNT(exec_new, 1);
		break;
	case EXEC_NONE:
		COUNT(exec_untracked, 1);
		break;
	}
	return id;
}

/* Identify the launch and deliver its exec ID in stream order. */
static void launch_before(struct launch *l)
{
	const struct func_info *fi = function_info(l->func);
	u64 key, shape;

	COUNT(launches, 1);
	l->exec_id = DEEPUM_EXEC_NONE;
	l->name_hash = 0;
	if (fi) {
		l->name_hash = fi->name_hash;
		if (launch_key(fi, l, &key, &shape))
			l->exec_id = exec_id_of(fi, key, shape);
		else
			COUNT(launches_unidentified, 1);
	}
	iterations_launch(l->exec_id);	/* a detected mark goes before the launch */
	delivery_enqueue(l);
	engine_lockstep();
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
	CUresult rc;
	u64 trace;

	launch_before(&l);
	trace = trace_launch_enter(&l);
	rc = real(UNPAREN(LAUNCH_KERNEL_ARGS));
	trace_launch_exit(&l, trace, rc);
	return rc;
}

CUresult on_launch_kernel_ex(enum deepum_entry which, cuLaunchKernelEx_fn real,
			     UNPAREN(LAUNCH_KERNEL_EX_PARAMS))
{
	CUresult rc;
	u64 trace;

	if (!config)
		return real(UNPAREN(LAUNCH_KERNEL_EX_ARGS));	/* the driver's error */

	struct launch l = {
		.func = f,
		.shape = { config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
			   config->blockDimY, config->blockDimZ, config->sharedMemBytes },
		.stream = config->hStream,
		.per_thread_stream = deepum_entry_stream[which] == STREAM_PER_THREAD,
		.params = params,
		.extra = extra,
	};

	launch_before(&l);
	trace = trace_launch_enter(&l);
	rc = real(UNPAREN(LAUNCH_KERNEL_EX_ARGS));
	trace_launch_exit(&l, trace, rc);
	return rc;
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
	CUresult rc;
	u64 trace;

	launch_before(&l);
	trace = trace_launch_enter(&l);
	rc = real(UNPAREN(LAUNCH_COOPERATIVE_ARGS));
	trace_launch_exit(&l, trace, rc);
	return rc;
}
