// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stream-ordered allocations on managed memory: cuMemAllocAsync and
 * cuMemFreeAsync served by libdeepum.
 *
 * Why: a caching allocator that keeps what the program frees (PyTorch's
 * default one) never tells anyone that a tensor died, so under a budget its
 * dead activations are written back and faulted in again as if they were
 * live.  A program that allocates in stream order (PyTorch with
 * PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, which `deepumctl run`
 * sets) says so on every free.  With managed memory on, libdeepum answers
 * those calls from managed segments, caches what is freed as the driver's
 * pool would (per stream: memory freed on a stream is reused by later
 * allocations on that stream without waiting), and reports each 2 MiB block
 * the moment no allocation lives in it any more (deepum_report_free): the
 * engine or the module discards it in stream order, so its dead data is
 * never copied either way again.  In demand mode nothing is reported: the
 * baseline is the stock driver, which cannot know.
 *
 * Layout, after PyTorch's caching allocator (what such programs are tuned
 * for): requests rounded up to 512 bytes; up to 1 MiB from 2 MiB segments,
 * up to 10 MiB from 20 MiB segments, larger ones from a segment of their own
 * rounded up to 2 MiB; best fit (the smallest free chunk, then the lowest
 * address) from bins by power of two, each kept sorted; split when what is
 * left is worth keeping; coalesced with free neighbours on free.  The same
 * calls give the same addresses, which keeps exec IDs (they hash pointer
 * arguments) stable across iterations.
 *
 * Left to the driver (its pool, device memory): allocations on a per-thread
 * default stream (one handle names many streams), during a capture of their
 * stream (they become graph nodes), from explicit pools
 * (cuMemAllocFromPoolAsync), beyond DEEPUM_MANAGED_LIMIT or beyond the
 * streams this file keeps pools for; and frees of what the driver allocated.
 * Memory freed on one stream is never handed to another: when an allocation
 * finds no room, the context is synchronized, wholly free segments go back
 * to the driver, and the allocation is tried once more.
 *
 * Locking: one mutex over all pools, held while dead blocks' discard is
 * enqueued, so that no allocation can hand them out before it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "deepum_user.h"

enum {
	ROUND = 512,			/* every request is a multiple of this */
	SMALL_MAX = 1 << 20,		/* requests up to this come from small segments */
	SMALL_SEGMENT = 2 << 20,
	MEDIUM_MAX = 10 << 20,		/* ... up to this from medium ones */
	MEDIUM_SEGMENT = 20 << 20,
	LARGE_SPLIT_MIN = 1 << 20,	/* a large chunk is split only if more is left */
	BINS = 64,			/* by floor(log2(size)) */
	STREAM_POOLS = 32,
	PENDING_BLOCKS = 512,		/* dead blocks a stream gathers before reporting them */
	LIVE_BUCKET_BITS = 14,
	LIVE_BUCKETS = 1 << LIVE_BUCKET_BITS,
};

#define BLOCK_BYTES (1ULL << DEEPUM_DEFAULT_BLOCK_SHIFT)

struct chunk {
	u64 addr;
	u64 size;
	struct chunk *prev, *next;	/* neighbours in the segment, by address */
	struct chunk *link;		/* free: next in its bin; live: next in its hash chain */
	struct stream_pool *pool;
	bool large;			/* from a medium or large segment */
	bool free;
};

/* Segments of one stream, small and large kept apart (as PyTorch does) so
 * that small tensors do not pin large segments. */
struct stream_pool {
	CUstream stream;		/* CU_STREAM_LEGACY for the legacy stream */
	struct chunk *bins[2][BINS];	/* [large][bin]: free chunks by (size, address) */
	u64 pending[PENDING_BLOCKS];	/* dead blocks not reported yet (block numbers) */
	u32 npending;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_pool pools[STREAM_POOLS];
static u32 npools;
static struct chunk *live[LIVE_BUCKETS];

static u32 bin_of(u64 size)
{
	return 63 - (u32)__builtin_clzll(size);
}

static struct chunk **live_bucket(u64 addr)
{
	return &live[(addr / ROUND * 0x9e3779b97f4a7c15ULL) >> (64 - LIVE_BUCKET_BITS)];
}

static struct chunk *live_find(u64 addr)
{
	struct chunk *c = *live_bucket(addr);

	while (c && c->addr != addr)
		c = c->link;
	return c;
}

static void live_remove(struct chunk *c)
{
	struct chunk **p = live_bucket(c->addr);

	while (*p != c)
		p = &(*p)->link;
	*p = c->link;
}

static void live_add(struct chunk *c)
{
	struct chunk **p = live_bucket(c->addr);

	c->free = false;
	c->link = *p;
	*p = c;
}

static struct chunk **bin_head(const struct chunk *c)
{
	return &c->pool->bins[c->large][bin_of(c->size)];
}

static void bin_insert(struct chunk *c)
{
	struct chunk **p = bin_head(c);

	c->free = true;
	while (*p && ((*p)->size < c->size || ((*p)->size == c->size && (*p)->addr < c->addr)))
		p = &(*p)->link;
	c->link = *p;
	*p = c;
}

static void bin_remove(struct chunk *c)
{
	struct chunk **p = bin_head(c);

	while (*p != c)
		p = &(*p)->link;
	*p = c->link;
}

static struct stream_pool *pool_of(CUstream stream)
{
	for (u32 i = 0; i < npools; i++)
		if (pools[i].stream == stream)
			return &pools[i];
	if (npools == STREAM_POOLS)
		return NULL;
	pools[npools].stream = stream;
	return &pools[npools++];
}

/* The best fit for @size in @pool: the smallest free chunk, lowest address first. */
static struct chunk *best_fit(struct stream_pool *pool, bool large, u64 size)
{
	for (u32 bin = bin_of(size); bin < BINS; bin++)
		for (struct chunk *c = pool->bins[large][bin]; c; c = c->link)
			if (c->size >= size)
				return c;
	return NULL;
}

/* Blocks of [@addr, @addr + @len) are in use again: not dead after all. */
static void revive(struct stream_pool *pool, u64 addr, u64 len)
{
	u64 first = addr / BLOCK_BYTES, end = (addr + len + BLOCK_BYTES - 1) / BLOCK_BYTES;

	for (u32 i = 0; i < pool->npending;) {
		if (pool->pending[i] >= first && pool->pending[i] < end)
			pool->pending[i] = pool->pending[--pool->npending];
		else
			i++;
	}
}

static int by_block(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* Report @pool's pending dead blocks, as runs, in one call. */
static void report_pending(struct stream_pool *pool)
{
	u64 addr[PENDING_BLOCKS], len[PENDING_BLOCKS];
	u32 n = 0;

	if (!pool->npending)
		return;
	qsort(pool->pending, pool->npending, sizeof(pool->pending[0]), by_block);
	for (u32 i = 0; i < pool->npending; i++) {
		if (n && addr[n - 1] + len[n - 1] == pool->pending[i] * BLOCK_BYTES) {
			len[n - 1] += BLOCK_BYTES;
		} else {
			addr[n] = pool->pending[i] * BLOCK_BYTES;
			len[n++] = BLOCK_BYTES;
		}
	}
	COUNT(pool_dead_blocks, pool->npending);
	pool->npending = 0;
	report_free_ranges(addr, len, n, pool->stream);
}

/* Carve @size off the free chunk @c and make that part live. */
static struct chunk *take(struct chunk *c, u64 size)
{
	u64 left = c->size - size;

	bin_remove(c);
	if (c->large ? left > LARGE_SPLIT_MIN : left >= ROUND) {
		struct chunk *rest = calloc(1, sizeof(*rest));

		if (rest) {	/* without it, the whole chunk goes */
			*rest = (struct chunk){ .addr = c->addr + size, .size = left, .prev = c, .next = c->next,
						.pool = c->pool, .large = c->large };
			if (c->next)
				c->next->prev = rest;
			c->next = rest;
			c->size = size;
			bin_insert(rest);
		}
	}
	live_add(c);
	revive(c->pool, c->addr, c->size);
	return c;
}

static u64 segment_size(u64 size)
{
	if (size <= SMALL_MAX)
		return SMALL_SEGMENT;
	if (size <= MEDIUM_MAX)
		return MEDIUM_SEGMENT;
	return (size + BLOCK_BYTES - 1) & ~(BLOCK_BYTES - 1);
}

/* A new managed segment for @pool, as one free chunk in its bin. */
static struct chunk *grow(struct stream_pool *pool, bool large, u64 size)
{
	struct chunk *c = calloc(1, sizeof(*c));
	CUdeviceptr base;

	if (!c)
		return NULL;
	size = segment_size(size);
	if (!managed_alloc(&base, size)) {
		free(c);
		return NULL;
	}
	COUNT(pool_segments, 1);
	*c = (struct chunk){ .addr = base, .size = size, .pool = pool, .large = large };
	bin_insert(c);
	return c;
}

/* Give every wholly free segment back to the driver (the context is idle). */
static void shrink(void)
{
	for (u32 i = 0; i < npools; i++) {
		for (int large = 0; large < 2; large++) {
			for (u32 bin = 0; bin < BINS; bin++) {
				struct chunk **p = &pools[i].bins[large][bin];

				while (*p) {
					struct chunk *c = *p;

					if (c->prev || c->next) {
						p = &c->link;
						continue;
					}
					*p = c->link;
					revive(&pools[i], c->addr, c->size);	/* going as a whole */
					managed_free(c->addr, c->size);
					COUNT(pool_segments_released, 1);
					free(c);
				}
			}
		}
	}
}

/* The blocks of free chunk @c that [@addr, @addr + @len), just freed in it,
 * touches were the last live data of: dead from this point of the pool's
 * stream on, reported later unless used again. */
static void note_dead(struct chunk *c, u64 addr, u64 len)
{
	struct stream_pool *pool = c->pool;
	u64 lo = addr & ~(BLOCK_BYTES - 1), hi = (addr + len + BLOCK_BYTES - 1) & ~(BLOCK_BYTES - 1);
	u64 first = (c->addr + BLOCK_BYTES - 1) & ~(BLOCK_BYTES - 1), end = (c->addr + c->size) & ~(BLOCK_BYTES - 1);

	if (lo < first)
		lo = first;
	if (hi > end)
		hi = end;
	if (deepum.mode == MODE_DEMAND)
		return;
	for (; lo < hi; lo += BLOCK_BYTES) {
		if (pool->npending == PENDING_BLOCKS)
			report_pending(pool);
		pool->pending[pool->npending++] = lo / BLOCK_BYTES;
	}
}

/* Merge @c's next neighbour (out of its bin) into @c. */
static void absorb_next(struct chunk *c)
{
	struct chunk *n = c->next;

	c->size += n->size;
	c->next = n->next;
	if (n->next)
		n->next->prev = c;
	free(n);
}

/* The live chunk @c is free from this point of its pool's stream on. */
static void release(struct chunk *c)
{
	u64 addr = c->addr, len = c->size;

	live_remove(c);
	if (c->prev && c->prev->free) {
		c = c->prev;
		bin_remove(c);
		absorb_next(c);
	}
	if (c->next && c->next->free) {
		bin_remove(c->next);
		absorb_next(c);
	}
	bin_insert(c);
	note_dead(c, addr, len);
}

/* A chunk of @size for @stream, or NULL (the driver's pool serves it). */
static struct chunk *pool_alloc(CUstream stream, u64 size)
{
	bool large = size > SMALL_MAX;
	struct stream_pool *pool;
	struct chunk *c = NULL;

	pthread_mutex_lock(&pool_lock);
	pool = pool_of(stream);
	if (pool) {
		c = best_fit(pool, large, size);
		if (!c)
			c = grow(pool, large, size);
		if (!c) {
			/* Room may be cached on other streams: let it go, once. */
			COUNT(pool_shrinks, 1);
			if (REAL(cuCtxSynchronize)() == CUDA_SUCCESS) {
				shrink();
				c = grow(pool, large, size);
			}
		}
		if (c)
			c = take(c, size);
	}
	pthread_mutex_unlock(&pool_lock);
	return c;
}

/* What a stream handle of entry point @which names: the legacy stream as
 * CU_STREAM_LEGACY; NULL for a per-thread default stream (not pooled). */
static CUstream pooled_stream(enum deepum_entry which, CUstream stream)
{
	if (stream == CU_STREAM_PER_THREAD || (!stream && deepum_entry_stream[which] == STREAM_PER_THREAD))
		return NULL;
	return stream ? stream : CU_STREAM_LEGACY;
}

CUresult on_mem_alloc_async(enum deepum_entry which, cuMemAllocAsync_fn real, CUdeviceptr *dptr, size_t size,
			    CUstream stream)
{
	CUstream pooled = pooled_stream(which, stream);
	struct chunk *c;

	if (!deepum.managed || !deepum_active() || !dptr || !size || size > (1ULL << 48) || !pooled ||
	    (capture_possible() && capture_stream_capturing(pooled)))
		return real(dptr, size, stream);
	c = pool_alloc(pooled, (size + ROUND - 1) & ~(u64)(ROUND - 1));
	if (!c) {
		COUNT(pool_fallback, 1);
		return real(dptr, size, stream);
	}
	COUNT(pool_allocs, 1);
	*dptr = c->addr;
	return CUDA_SUCCESS;
}

CUresult on_mem_free_async(enum deepum_entry which, cuMemFreeAsync_fn real, CUdeviceptr dptr, CUstream stream)
{
	CUstream pooled = pooled_stream(which, stream);
	struct chunk *c;
	CUresult rc = CUDA_SUCCESS;

	pthread_mutex_lock(&pool_lock);
	c = dptr ? live_find(dptr) : NULL;
	if (!c) {
		pthread_mutex_unlock(&pool_lock);
		return real(dptr, stream);
	}
	if (pooled && capture_possible() && capture_stream_capturing(pooled)) {
		/* A free inside a graph happens when the graph runs: this
		 * memory stays allocated instead. */
		COUNT(pool_frees_kept, 1);
	} else {
		/* Reuse follows in the pool's stream order, so a free on another
		 * stream must have happened before anything runs there next. */
		if (pooled != c->pool->stream) {
			COUNT(pool_frees_synchronized, 1);
			rc = pooled ? REAL(cuStreamSynchronize)(pooled) : REAL(cuCtxSynchronize)();
		}
		if (rc == CUDA_SUCCESS)
			release(c);
	}
	pthread_mutex_unlock(&pool_lock);
	return rc;
}

void pool_report_dead(void)
{
	pthread_mutex_lock(&pool_lock);
	for (u32 i = 0; i < npools; i++)
		report_pending(&pools[i]);
	pthread_mutex_unlock(&pool_lock);
}

bool pool_free_now(CUdeviceptr dptr, CUresult *rc)
{
	struct chunk *c;

	pthread_mutex_lock(&pool_lock);
	c = live_find(dptr);
	if (c) {
		/* cuMemFree of a stream-ordered allocation: the driver synchronizes. */
		*rc = REAL(cuCtxSynchronize)();
		if (*rc == CUDA_SUCCESS)
			release(c);
	}
	pthread_mutex_unlock(&pool_lock);
	return c != NULL;
}
