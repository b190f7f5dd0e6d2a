// SPDX-License-Identifier: GPL-2.0 OR MIT
#include "residency.h"
#include "table.h"

static u32 bucket_of(const struct dum_residency *r, u64 blk)
{
	return (u32)(dum_hash64(blk) >> r->bucket_shift);
}

u64 dum_residency_mem_bytes(u32 capacity)
{
	u64 buckets = (u64)1 << dum_log2_ceil(capacity);

	return (u64)capacity * sizeof(struct dum_block) + buckets * sizeof(u32);
}

int dum_residency_init(struct dum_residency *r, u32 capacity)
{
	u32 order = dum_log2_ceil(capacity);

	memset(r, 0, sizeof(*r));
	r->blocks = dum_calloc(capacity, sizeof(*r->blocks));
	r->buckets = dum_calloc((size_t)1 << order, sizeof(*r->buckets));
	if (!r->blocks || !r->buckets) {
		dum_residency_destroy(r);
		return -ENOMEM;
	}
	memset(r->buckets, 0xff, ((size_t)1 << order) * sizeof(*r->buckets));
	r->bucket_shift = 64 - order;
	r->capacity = capacity;
	r->lrm_head = DUM_NIL;
	r->lrm_tail = DUM_NIL;
	return 0;
}

void dum_residency_destroy(struct dum_residency *r)
{
	dum_free(r->blocks);
	dum_free(r->buckets);
	r->blocks = NULL;
	r->buckets = NULL;
}

u32 dum_residency_find(const struct dum_residency *r, u64 blk)
{
	u32 slot = r->buckets[bucket_of(r, blk)];

	while (slot != DUM_NIL && r->blocks[slot].blk != blk)
		slot = r->blocks[slot].hash_next;
	return slot;
}

u32 dum_residency_get(struct dum_residency *r, u64 blk)
{
	u32 bucket = bucket_of(r, blk);
	u32 slot = r->buckets[bucket];
	struct dum_block *b;

	while (slot != DUM_NIL && r->blocks[slot].blk != blk)
		slot = r->blocks[slot].hash_next;
	if (slot != DUM_NIL || r->used == r->capacity)
		return slot;

	slot = r->used++;
	b = &r->blocks[slot];
	b->blk = blk;
	b->hash_next = r->buckets[bucket];
	b->lrm_prev = DUM_NIL;
	b->lrm_next = DUM_NIL;
	r->buckets[bucket] = slot;
	return slot;
}

static void lrm_unlink(struct dum_residency *r, struct dum_block *b)
{
	if (b->lrm_prev != DUM_NIL)
		r->blocks[b->lrm_prev].lrm_next = b->lrm_next;
	else
		r->lrm_head = b->lrm_next;
	if (b->lrm_next != DUM_NIL)
		r->blocks[b->lrm_next].lrm_prev = b->lrm_prev;
	else
		r->lrm_tail = b->lrm_prev;
	b->lrm_prev = DUM_NIL;
	b->lrm_next = DUM_NIL;
}

void dum_residency_touch(struct dum_residency *r, u32 slot)
{
	struct dum_block *b = &r->blocks[slot];

	if (dum_block_resident(b)) {
		if (r->lrm_tail == slot)
			return;
		lrm_unlink(r, b);
	} else {
		b->flags |= DUM_BLOCK_RESIDENT;
		r->resident++;
	}
	b->lrm_prev = r->lrm_tail;
	if (r->lrm_tail != DUM_NIL)
		r->blocks[r->lrm_tail].lrm_next = slot;
	else
		r->lrm_head = slot;
	r->lrm_tail = slot;
}

void dum_residency_remove(struct dum_residency *r, u32 slot)
{
	struct dum_block *b = &r->blocks[slot];

	if (!dum_block_resident(b))
		return;
	lrm_unlink(r, b);
	b->flags &= ~DUM_BLOCK_RESIDENT;
	r->resident--;
}

void dum_residency_clear(struct dum_residency *r)
{
	u32 slot = r->lrm_head;

	while (slot != DUM_NIL) {
		struct dum_block *b = &r->blocks[slot];

		slot = b->lrm_next;
		b->flags &= ~DUM_BLOCK_RESIDENT;
		b->lrm_prev = DUM_NIL;
		b->lrm_next = DUM_NIL;
	}
	r->lrm_head = DUM_NIL;
	r->lrm_tail = DUM_NIL;
	r->resident = 0;
}
