// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Userspace half of the portability shim.  dum_port_fail_allocs_after lets
 * tests prove that an allocation failure at init is survived: after that many
 * successful allocations every further one fails.
 */
#include <stdlib.h>

#include "port.h"

long dum_port_fail_allocs_after = -1;

void *dum_calloc(size_t n, size_t size)
{
	if (dum_port_fail_allocs_after == 0)
		return NULL;
	if (dum_port_fail_allocs_after > 0)
		dum_port_fail_allocs_after--;
	return calloc(n, size);
}

void dum_free(void *p)
{
	free(p);
}
