// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The rtld-audit half of libdeepum (rtld-audit(7); `deepumctl run` sets
 * LD_AUDIT and LD_PRELOAD to this same file).
 *
 * Why: the CUDA runtime (and so PyTorch) does not find the driver through the
 * global symbol scope.  It dlopen()s libcuda.so.1 and asks that handle for
 * cuGetProcAddress_v2, then fetches every other entry point through it.  A
 * dlsym() on a handle searches that library and its dependencies only, so an
 * LD_PRELOADed cuGetProcAddress is never seen and no launch is intercepted
 * (checked with CUDA 13.0's libcudart_static, see userlib/README.md).  The
 * dynamic linker's audit interface is told of every binding, dlsym()'s
 * included, and may change its result: bindings from the application to a
 * hooked symbol of libcuda are pointed at the preloaded libdeepum's
 * trampoline instead.  dlsym itself is not overridden.
 *
 * CUPTI (which the tracer loads) is a tool inside the process, not part of
 * the program: its lookups of the driver are left alone, so its own calls
 * never reach the hooks.
 *
 * The auditor is a second copy of this file in a namespace of its own: it
 * runs only the la_* functions below and translates a trampoline's address
 * in its own copy to the preloaded copy by their load addresses.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>

#include "deepum_user.h"

enum { COOKIE_OTHER, COOKIE_LIBCUDA, COOKIE_LIBDEEPUM };

static uintptr_t auditor_base;		/* this copy's load address */
static struct stat auditor_file;
static uintptr_t preloaded_base;	/* the application's copy's, once loaded */

/* Whether @path names the library @soname_prefix ("libcuda.so"), any version. */
static bool is_library(const char *path, const char *soname_prefix)
{
	const char *base = strrchr(path, '/');

	return strncmp(base ? base + 1 : path, soname_prefix, strlen(soname_prefix)) == 0;
}

static bool is_this_library(const char *path)
{
	struct stat st;

	return auditor_base && path[0] && stat(path, &st) == 0 && st.st_dev == auditor_file.st_dev &&
	       st.st_ino == auditor_file.st_ino;
}

DEEPUM_EXPORT unsigned int la_version(unsigned int version)
{
	Dl_info info;
	struct link_map *self = NULL;

	if (dladdr1((void *)la_version, &info, (void **)&self, RTLD_DL_LINKMAP) && self &&
	    stat(info.dli_fname, &auditor_file) == 0)
		auditor_base = self->l_addr;
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

DEEPUM_EXPORT unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	*cookie = COOKIE_OTHER;
	if (lmid != LM_ID_BASE)
		return 0;
	if (is_library(map->l_name, "libcuda.so")) {
		*cookie = COOKIE_LIBCUDA;
		return LA_FLG_BINDTO;
	}
	if (is_library(map->l_name, "libcupti.so"))
		return 0;
	if (!preloaded_base && is_this_library(map->l_name)) {
		/* Its own lookups of the driver must reach the driver. */
		*cookie = COOKIE_LIBDEEPUM;
		preloaded_base = map->l_addr;
		return 0;
	}
	return LA_FLG_BINDFROM;
}

DEEPUM_EXPORT uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
				     uintptr_t *defcook, unsigned int *flags, const char *symname)
{
	void *hook;

	(void)ndx;
	*flags |= LA_SYMB_NOPLTENTER | LA_SYMB_NOPLTEXIT;
	/* glibc audits dlsym() by the definer's flags alone: libdeepum's own
	 * lookups are recognised by its cookie. */
	if (*defcook != COOKIE_LIBCUDA || *refcook == COOKIE_LIBDEEPUM || !preloaded_base)
		return sym->st_value;
	hook = deepum_hook_address(symname);
	return hook ? preloaded_base + ((uintptr_t)hook - auditor_base) : sym->st_value;
}
