// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Interception: the driver's real entry points, the exported trampolines,
 * the cuGetProcAddress substitution, and start-up (configuration, tables,
 * attach), done once on the first CUDA call rather than in a constructor:
 * a process that never calls CUDA (a shell, a forked data-loader worker)
 * then pays nothing and prints nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deepum_user.h"
#include "engine_defaults.h"

struct deepum_state deepum = { .device_fd = -1 };
void *deepum_real[ENTRY_COUNT];

enum entry_kind { KIND_HOOK, KIND_FREE, KIND_USE, KIND_MAYBE };

static const char *const entry_name[ENTRY_COUNT] = {
#define ENTRY_NAME(kind, name, handler, stream, params, args) [ENTRY_##name] = #name,
	DEEPUM_ENTRY_POINTS(ENTRY_NAME)
#undef ENTRY_NAME
};

static const enum entry_kind entry_kind[ENTRY_COUNT] = {
#define ENTRY_KIND(kind, name, handler, stream, params, args) [ENTRY_##name] = KIND_##kind,
	DEEPUM_ENTRY_POINTS(ENTRY_KIND)
#undef ENTRY_KIND
};

const enum entry_stream deepum_entry_stream[ENTRY_COUNT] = {
#define ENTRY_STREAM(kind, name, handler, stream, params, args) [ENTRY_##name] = STREAM_##stream,
	DEEPUM_ENTRY_POINTS(ENTRY_STREAM)
#undef ENTRY_STREAM
};

/*
 * The trampolines.  A hook runs only once deepum is active; before that, and
 * for ever after a failure, the call goes straight to the driver.  An entry
 * point the driver lacks can only have been found through libdeepum's own
 * export (dlsym(RTLD_DEFAULT, ...)): it answers as the driver would for an
 * unknown function.  FREE hooks always run their handler: memory libdeepum
 * handed out must come back to it, whatever happened since.
 */
#define TRAMPOLINE_WHILE(name, handler, params, args, hooked)                               \
	DEEPUM_EXPORT CUresult name params                                                    \
	{                                                                                     \
		deepum_init_once();                                                           \
		if (!deepum_real[ENTRY_##name])                                               \
			return CUDA_ERROR_NOT_FOUND;                                          \
		if (!(hooked))                                                                \
			return REAL(name) args;                                               \
		return on_##handler(ENTRY_##name, REAL(name), EXPAND args);                   \
	}
#define TRAMPOLINE_HOOK(name, handler, params, args) \
	TRAMPOLINE_WHILE(name, handler, params, args, deepum_active())
#define TRAMPOLINE_FREE(name, handler, params, args) TRAMPOLINE_WHILE(name, handler, params, args, true)
#define TRAMPOLINE_USE(name, handler, params, args)
#define TRAMPOLINE_MAYBE(name, handler, params, args)
#define TRAMPOLINE(kind, name, handler, stream, params, args) \
	TRAMPOLINE_##kind(name, handler, params, args)
DEEPUM_ENTRY_POINTS(TRAMPOLINE)
#undef TRAMPOLINE

static void *const hook_address[ENTRY_COUNT] = {
#define HOOK_ADDRESS_HOOK(name) [ENTRY_##name] = (void *)name,
#define HOOK_ADDRESS_FREE(name) [ENTRY_##name] = (void *)name,
#define HOOK_ADDRESS_USE(name)
#define HOOK_ADDRESS_MAYBE(name)
#define HOOK_ADDRESS(kind, name, handler, stream, params, args) HOOK_ADDRESS_##kind(name)
	DEEPUM_ENTRY_POINTS(HOOK_ADDRESS)
#undef HOOK_ADDRESS
};

void *deepum_hook_address(const char *symbol)
{
	for (int e = 0; e < ENTRY_COUNT; e++)
		if (hook_address[e] && strcmp(symbol, entry_name[e]) == 0)
			return hook_address[e];
	return NULL;
}

/* cuGetProcAddress takes an API's base name ("cuMemAlloc") and returns one
 * of its ABI versions ("cuMemAlloc_v2", "cuLaunchKernel_ptsz"). */
static bool names_same_api(const char *requested, const char *entry)
{
	size_t n = strlen(requested);

	return strncmp(requested, entry, n) == 0 && (entry[n] == '\0' || entry[n] == '_');
}

/*
 * Swap a driver function for its trampoline.  Matching is by address, not by
 * name: only the exact function libdeepum wraps (same ABI, same stream
 * semantics) is replaced, so a version or variant it does not know keeps the
 * driver's.  Those are counted (getproc_unmatched): on a new driver, a
 * non-zero count means launches are being missed, or captures begun unseen,
 * so capture tracking stops trusting its count (capture.c).
 */
static void *trampoline_for(void *driver_fn, const char *symbol)
{
	for (int e = 0; e < ENTRY_COUNT; e++) {
		if (hook_address[e] && deepum_real[e] == driver_fn) {
			COUNT(getproc_hooked, 1);
			return hook_address[e];
		}
	}
	for (int e = 0; e < ENTRY_COUNT; e++) {
		if (hook_address[e] && names_same_api(symbol, entry_name[e])) {
			COUNT(getproc_unmatched, 1);
			capture_tracking_lost();
			break;
		}
	}
	return driver_fn;
}

CUresult on_get_proc_address(enum deepum_entry which, cuGetProcAddress_fn real,
			     UNPAREN(GET_PROC_ADDRESS_PARAMS))
{
	CUresult rc = real(symbol, pfn, cuda_version, flags);

	(void)which;
	if (rc == CUDA_SUCCESS && symbol && pfn && *pfn)
		*pfn = trampoline_for(*pfn, symbol);
	return rc;
}

CUresult on_get_proc_address_v2(enum deepum_entry which, cuGetProcAddress_v2_fn real,
				UNPAREN(GET_PROC_ADDRESS_V2_PARAMS))
{
	CUresult rc = real(symbol, pfn, cuda_version, flags, status);

	(void)which;
	if (rc == CUDA_SUCCESS && symbol && pfn && *pfn)
		*pfn = trampoline_for(*pfn, symbol);
	return rc;
}

void deepum_warn(const char *message)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "deepum: %s\n", message);

	if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		return;	/* nowhere left to complain */
}

void deepum_disable(const char *reason)
{
	const char *none = NULL;

	atomic_store_explicit(&deepum.active, false, memory_order_release);
	if (atomic_compare_exchange_strong(&deepum.disabled_reason, &none, reason))
		deepum_warn(reason);
}

#ifdef DEEPUM_FAULT_INJECTION
bool deepum_inject(const char *what)
{
	const char *list = getenv("DEEPUM_TEST_FAIL");
	size_t n = strlen(what);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, what, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}
#endif

void *deepum_calloc(size_t n, size_t size)
{
	return deepum_inject("alloc") ? NULL : calloc(n, size);
}

int deepum_thread_start(pthread_t *thread, void *(*main)(void *), void *arg)
{
	sigset_t all, saved;
	int err;

	/* The program's signals are for the program's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	err = pthread_create(thread, NULL, main, arg);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return err;
}

bool deepum_expand_pid(const char *template, char *out, size_t size)
{
	size_t used = 0;
	int n;

	for (const char *p = template; *p; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			n = snprintf(out + used, size - used, "%d", (int)getpid());
			if (n < 0 || (size_t)n >= size - used)
				return false;
			used += (size_t)n;
			p++;
		} else if (used + 1 < size) {
			out[used++] = *p;
		} else {
			return false;
		}
	}
	out[used] = '\0';
	return true;
}

/* Reasons built at start-up, written once under pthread_once. */
static char startup_reason[256];

/*
 * The driver's functions, from the libcuda the process uses.  dlopen of the
 * soname returns the copy already loaded; dlsym(RTLD_NEXT) would not do:
 * the CUDA runtime loads libcuda RTLD_LOCAL, outside the global scope.
 */
static bool resolve_entry_points(void)
{
	void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);

	if (!libcuda) {
		snprintf(startup_reason, sizeof(startup_reason),
			 "libcuda.so.1 cannot be loaded; CUDA calls pass straight through");
		return false;
	}
	for (int e = 0; e < ENTRY_COUNT; e++)
		deepum_real[e] = dlsym(libcuda, entry_name[e]);
	for (int e = 0; e < ENTRY_COUNT; e++) {
		if (entry_kind[e] == KIND_USE && !deepum_real[e]) {
			snprintf(startup_reason, sizeof(startup_reason),
				 "the driver lacks %s (CUDA 12.4 or newer is needed); "
				 "CUDA calls pass straight through", entry_name[e]);
			return false;
		}
	}
	return true;
}

/* Index of getenv(@name) in @choices (NULL-terminated), @fallback if unset, -1 if invalid. */
static int env_choice(const char *name, const char *const *choices, int fallback)
{
	const char *value = getenv(name);

	if (!value || !*value)
		return fallback;
	for (int i = 0; choices[i]; i++)
		if (strcmp(value, choices[i]) == 0)
			return i;
	snprintf(startup_reason, sizeof(startup_reason),
		 "%s=%s is not a valid setting; CUDA calls pass straight through", name, value);
	return -1;
}

/* An unsigned number from getenv(@name) in [@min, @max] into *@ret (left
 * alone if unset); false if invalid. */
static bool env_number(const char *name, unsigned long min, unsigned long max, u32 *ret)
{
	const char *value = getenv(name);
	unsigned long n;
	char *end;

	if (!value || !*value)
		return true;
	n = strtoul(value, &end, 0);
	if (*end || n < min || n > max) {
		snprintf(startup_reason, sizeof(startup_reason),
			 "%s=%s is outside [%lu, %lu]; CUDA calls pass straight through", name, value, min, max);
		return false;
	}
	*ret = (u32)n;
	return true;
}

/* A byte count from getenv(@name), with an optional K, M, G or T (binary)
 * suffix, into *@ret (left alone if unset); false if invalid. */
static bool env_bytes(const char *name, u64 *ret)
{
	static const char suffixes[] = "KMGT";
	const char *value = getenv(name), *unit;
	unsigned long long n;
	char *end;

	if (!value || !*value)
		return true;
	if (value[0] == '-')
		goto invalid;
	n = strtoull(value, &end, 0);
	unit = *end ? strchr(suffixes, *end) : NULL;
	if (unit && !end[1]) {
		for (const char *u = suffixes; u <= unit; u++) {
			if (n > UINT64_MAX >> 10)
				goto invalid;
			n <<= 10;
		}
	} else if (*end || end == value) {
		goto invalid;
	}
	*ret = n;
	return true;
invalid:
	snprintf(startup_reason, sizeof(startup_reason),
		 "%s=%s is not a byte count; CUDA calls pass straight through", name, value);
	return false;
}

/* A path from getenv(@name), "%p" expanded, into @out (@fallback if unset). */
static bool env_path(const char *name, char *out, size_t size, const char *fallback)
{
	const char *value = getenv(name);

	if (!value)
		value = fallback;
	if (deepum_expand_pid(value, out, size))
		return true;
	snprintf(startup_reason, sizeof(startup_reason),
		 "%s is too long a path; CUDA calls pass straight through", name);
	return false;
}

static bool read_config(void)
{
	static const char *const modes[] = { "off", "auto", "observe", "user", "demand", NULL };
	static const char *const deliveries[] = { "write", "callback", NULL };
	static const char *const booleans[] = { "0", "1", NULL };
	static const char *const fault_sources[] = { "auto", "uvm-tools", "cupti", NULL };
	static const char *const access_sets[] = { "0", "1", "launch", NULL };	/* enum access_set_choice */
	int mode, delivery, managed, access_set, faults;

	/* First, so that the statistics can report any other bad setting. */
	if (!env_path("DEEPUM_STATS", deepum.stats_path, sizeof(deepum.stats_path), ""))
		return false;
	mode = env_choice("DEEPUM_MODE", modes, MODE_AUTO);
	delivery = env_choice("DEEPUM_DELIVERY", deliveries, DELIVERY_WRITE);
	managed = env_choice("DEEPUM_MANAGED", booleans, 0);
	access_set = env_choice("DEEPUM_TRACE_ACCESS_SET", access_sets, ACCESS_SET_ITERATION);
	faults = env_choice("DEEPUM_FAULTS", fault_sources, FAULTS_AUTO);
	if (mode < 0 || delivery < 0 || managed < 0 || access_set < 0 || faults < 0)
		return false;
	deepum.mode = mode;
	deepum.delivery = delivery;
	deepum.managed = managed;
	deepum.trace_access_set = access_set;
	deepum.faults = faults;
	deepum.exec_max = DEEPUM_CFG_EXEC_MAX_DEFAULT;
	deepum.write_every = 8;
	deepum.issuer = 1;
	deepum.positional = 1;
	deepum.forget_unsettled = !!(DEEPUM_ENGINE_FLAGS_DEFAULT & DEEPUM_CFG_F_FORGET_UNSETTLED);
	deepum.history_scan = SETTING_UNSET;
	deepum.victim_runs = SETTING_UNSET;
	return env_number("DEEPUM_EXEC_MAX", DEEPUM_CFG_EXEC_MAX_MIN, DEEPUM_CFG_EXEC_MAX_MAX, &deepum.exec_max) &&
	       env_number("DEEPUM_WRITE_EVERY", 1, DEEPUM_RING_DEPTH / 2, &deepum.write_every) &&
	       env_number("DEEPUM_TRACE_ITERATIONS", 0, UINT32_MAX, &deepum.trace_iterations) &&
	       env_number("DEEPUM_WATERMARK", 0, DEEPUM_CFG_WATERMARK_BLOCKS_MAX, &deepum.watermark_blocks) &&
	       env_number("DEEPUM_LOOKAHEAD_BLOCKS", 0, DEEPUM_CFG_LOOKAHEAD_BLOCKS_MAX, &deepum.lookahead_blocks) &&
	       env_number("DEEPUM_CORR_SETS", DEEPUM_CFG_CORR_SETS_MIN, DEEPUM_CFG_CORR_SETS_MAX, &deepum.corr_sets) &&
	       env_number("DEEPUM_HORIZON_KERNELS", 0, DEEPUM_CFG_EVICT_SCAN_MAX, &deepum.horizon_kernels) &&
	       env_number("DEEPUM_HISTORY_SCAN", 0, DEEPUM_CFG_EVICT_SCAN_MAX, &deepum.history_scan) &&
	       env_number("DEEPUM_OBSERVE_US", 0, 100000, &deepum.observe_us) &&
	       env_number("DEEPUM_EXEC_BY_PLACE", 0, 1, &deepum.exec_by_place) &&
	       env_number("DEEPUM_ISSUER", 0, 1, &deepum.issuer) &&
	       env_number("DEEPUM_WRITER", 0, 1, &deepum.writer) &&
	       env_number("DEEPUM_POSITIONAL", 0, 1, &deepum.positional) &&
	       env_number("DEEPUM_FORGET_UNSETTLED", 0, 1, &deepum.forget_unsettled) &&
	       env_number("DEEPUM_VICTIM_RUNS", 0, 1, &deepum.victim_runs) &&
	       env_bytes("DEEPUM_CAPACITY", &deepum.capacity) &&
	       env_bytes("DEEPUM_MANAGED_LIMIT", &deepum.managed_limit) &&
	       env_path("DEEPUM_TRACE", deepum.trace_path, sizeof(deepum.trace_path), "") &&
	       env_path("DEEPUM_CUPTI", deepum.cupti_path, sizeof(deepum.cupti_path), "") &&
	       env_path("DEEPUM_ENGINE_LOG", deepum.engine_log_path, sizeof(deepum.engine_log_path), "") &&
	       env_path("DEEPUM_UVM_TOOLS", deepum.uvm_tools_path, sizeof(deepum.uvm_tools_path),
			"/dev/nvidia-uvm-tools") &&
	       env_path("DEEPUM_UVM_DEVICE", deepum.uvm_device_path, sizeof(deepum.uvm_device_path),
			"/dev/nvidia-uvm");
}

/* With no module: the engine if there is managed memory to prefetch. */
static bool choose_without_module(const char *attach_failure)
{
	if (deepum.managed) {
		deepum.mode = MODE_USER;
		return true;
	}
	snprintf(startup_reason, sizeof(startup_reason),
		 "%s; with no kernel module, and managed memory off for the user-mode engine "
		 "(DEEPUM_MANAGED=0), CUDA calls pass straight through", attach_failure);
	return false;
}

static void deepum_init(void)
{
	const char *device = getenv("DEEPUM_DEVICE");
	const char *attach_failure = NULL;
	bool resolved;

	deepum.init_pid = getpid();
	/* The trampolines need the driver's functions even when deepum is off. */
	resolved = resolve_entry_points();
	if (!read_config()) {
		deepum_disable(startup_reason);
		return;
	}
	if (deepum.mode == MODE_OFF)
		return;
	if (!resolved) {
		deepum_disable(startup_reason);
		return;
	}
	if (engine_wanted() && (deepum.capacity >> DEEPUM_DEFAULT_BLOCK_SHIFT) > DEEPUM_CFG_CAPACITY_BLOCKS_MAX) {
		deepum_disable("DEEPUM_CAPACITY is beyond what the core can model; CUDA calls pass straight through");
		return;
	}
	if (!launch_tables_init(deepum.exec_max) || !delivery_tables_init()) {
		deepum_disable("cannot allocate its tables; CUDA calls pass straight through");
		return;
	}
	/* The engine stands in for the module: it is not attached then. */
	if (!engine_wanted() &&
	    !delivery_attach(device && *device ? device : "/dev/deepum", &attach_failure) &&
	    deepum.mode == MODE_AUTO && !choose_without_module(attach_failure)) {
		deepum_disable(startup_reason);
		return;
	}
	atomic_store_explicit(&deepum.active, true, memory_order_release);
}

void deepum_init_once(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, deepum_init);
}
