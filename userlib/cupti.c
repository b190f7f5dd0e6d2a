// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * CUPTI, loaded once for whichever part of libdeepum uses it: the tracer
 * (trace.c) or the engine's CUPTI fault source (faults.c).  Never both: one
 * process has one set of CUPTI activity callbacks (engine.c refuses the
 * CUPTI source while a trace is asked for).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "deepum_user.h"

struct deepum_cupti cupti;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_failure[256];

/* The CUPTI the program already loaded (PyTorch links it), which must be
 * the one: two copies cannot share the driver.  Else DEEPUM_CUPTI, else the
 * library path's. */
static void load(void)
{
	static const char *const sonames[] = { "libcupti.so", "libcupti.so.13", "libcupti.so.12", NULL };
	void *lib = NULL;

	for (int i = 0; !lib && sonames[i]; i++)
		lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!lib && deepum.cupti_path[0])
		lib = dlopen(deepum.cupti_path, RTLD_NOW | RTLD_LOCAL);
	for (int i = 0; !lib && !deepum.cupti_path[0] && sonames[i]; i++)
		lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(load_failure, sizeof(load_failure), "cannot load CUPTI (%s); name it with DEEPUM_CUPTI",
			 dlerror());
		return;
	}
#define CUPTI_RESOLVE(kind, name, params)                                                    \
	cupti.name = (__typeof__(cupti.name))dlsym(lib, #name);                               \
	if (!cupti.name && CUPTI_REQUIRED_##kind) {                                           \
		snprintf(load_failure, sizeof(load_failure), "the CUPTI loaded lacks " #name); \
		return;                                                                       \
	}
#define CUPTI_REQUIRED_USE true
#define CUPTI_REQUIRED_MAYBE false
	DEEPUM_CUPTI_FUNCTIONS(CUPTI_RESOLVE)
#undef CUPTI_RESOLVE
}

bool cupti_load(char *why, size_t size)
{
	pthread_once(&load_once, load);
	if (!load_failure[0])
		return true;
	snprintf(why, size, "%s", load_failure);
	return false;
}
