// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The hash behind kernel-name hashes and execution IDs.  libdeepum hashes a
 * launch's name, shape and argument bytes with it; trace importers hash
 * kernel names with it; so a name hashes the same everywhere.  FNV-1a, 64 bit:
 * byte-at-a-time and chainable, which is what hashing a launch piece by piece
 * needs.  Not cryptographic: collisions only merge two exec IDs.
 */
#include "core.h"

#define FNV64_PRIME 0x100000001b3ULL

u64 deepum_hash_bytes(u64 hash, const void *data, u64 len)
{
	const unsigned char *p = data;
	u64 i;

	for (i = 0; i < len; i++) {
		hash ^= p[i];
		hash *= FNV64_PRIME;
	}
	return hash;
}
