// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Random ioctls on /dev/deepum: commands (known, resized, redirected,
 * unknown), argument structs (plausible with a few fields mutated, or random
 * bytes), and pointers (valid, NULL, unmapped, read-only, kernel addresses,
 * ending in an inaccessible page), from two processes sharing some files.
 * Every call's errno must be one the header documents for that ioctl (or
 * the dispatcher's ENOTTY, EFAULT, E2BIG); anything else fails the run.
 * Whether the kernel survived is the harness's verdict (panic_on_warn,
 * oops=panic, the dmesg scan).
 *
 *   fuzz_ioctl CALLS [SEED]
 *
 * Needs root (DEFAULTS configuration) and enable_test_ioctls=1.  Keeps every
 * configuration small, so that no call can push the guest into the OOM
 * killer, and puts the defaults back when it is done.
 */
#define _GNU_SOURCE	/* strerrorname_np() */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "deepum.h"

#define NFILES		4
#define PAGE		4096UL
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static uint64_t rng_state;

/* xorshift64*: reproducible from the seed. */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t below(uint64_t n)
{
	return rnd() % n;
}

static int chance(unsigned int percent)
{
	return below(100) < percent;
}

struct ioctl_kind {
	const char *name;
	unsigned long cmd;
	int errnos[4];		/* documented beyond the dispatcher's; 0 ends the list */
};

static const struct ioctl_kind kinds[] = {
	{ "API",	 DEEPUM_IOC_API,	 {} },
	{ "ATTACH",	 DEEPUM_IOC_ATTACH,	 { EBUSY, ENOMEM } },
	{ "SET_EXEC_ID", DEEPUM_IOC_SET_EXEC_ID, { ENOTCONN, EPERM } },
	{ "CONFIG",	 DEEPUM_IOC_CONFIG,	 { ENOTCONN, EPERM, ENOMEM } },
	{ "GET_CONFIG",	 DEEPUM_IOC_GET_CONFIG,	 { ENOTCONN, EPERM } },
	{ "INVALIDATE",	 DEEPUM_IOC_INVALIDATE,	 { ENOTCONN, EPERM } },
	{ "STATS",	 DEEPUM_IOC_STATS,	 { ENOTCONN, EPERM } },
	{ "BIND_UVM",	 DEEPUM_IOC_BIND_UVM,	 { ENOTCONN, EPERM, ENODEV } },
	{ "TEST_INJECT", DEEPUM_IOC_TEST_INJECT, { ENOTCONN, EPERM } },
	{ "TEST_DRAIN",	 DEEPUM_IOC_TEST_DRAIN,	 { ENOTCONN, EPERM } },
};

/* Whether @err is what @kind may return: its own errnos or the dispatcher's. */
static int documented(const struct ioctl_kind *kind, int err)
{
	size_t i;

	/* The dispatcher: copying the argument in or out, its size, a bad field, no handshake. */
	if (!err || err == EFAULT || err == E2BIG || err == EINVAL || err == EPROTO)
		return 1;
	for (i = 0; i < ARRAY_SIZE(kind->errnos) && kind->errnos[i]; i++)
		if (err == kind->errnos[i])
			return 1;
	return 0;
}

/* Memory the fuzzer points the kernel at. */
static unsigned char *arena;		/* 4 read-write pages, then an inaccessible one */
static unsigned char *readonly;		/* one read-only page */
static struct deepum_record *records;	/* DEEPUM_TEST_BATCH_MAX + 8 */
static struct deepum_cmd *cmds;		/* DEEPUM_TEST_BATCH_MAX + 8 */

static void *bad_pointer(void)
{
	switch (below(6)) {
	case 0:
		return NULL;
	case 1:
		return (void *)(uintptr_t)(1 + below(PAGE));
	case 2:
		return arena + 4 * PAGE + below(PAGE);		/* PROT_NONE */
	case 3:
		return (void *)(uintptr_t)(0xffff800000000000ULL + below(1ULL << 40));
	case 4:
		return (void *)(uintptr_t)rnd();
	default:
		return readonly + below(PAGE / 2);	/* readable, not writable */
	}
}

/* Somewhere to put an argument of @size bytes: mostly fine, sometimes not. */
static void *arg_pointer(size_t size)
{
	if (chance(8))
		return bad_pointer();
	if (chance(5) && size && size <= PAGE)	/* runs into the inaccessible page */
		return arena + 4 * PAGE - size + 1 + below(size);
	return arena;
}

static void random_bytes(void *p, size_t n)
{
	unsigned char *b = p;

	while (n--)
		*b++ = chance(50) ? 0 : (unsigned char)rnd();
}

/* A value for a field: boundaries more often than chance would pick them. */
static uint64_t field_value(void)
{
	switch (below(6)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return ~0ULL;
	case 3:
		return 1ULL << below(64);
	case 4:
		return (uint32_t)rnd();
	default:
		return rnd();
	}
}

/* Overwrite a few 4-byte words of @p with field values: mutations of a good struct. */
static void mutate(void *p, size_t size)
{
	unsigned int n = below(3);

	while (n-- && size >= 4) {
		uint32_t v = (uint32_t)field_value();

		memcpy((char *)p + 4 * below(size / 4), &v, 4);
	}
}

static uint32_t small(uint32_t lo, uint32_t hi)
{
	return lo + below(hi - lo + 1);
}

/* Push the fields that size the tables out of range if they are large: refused, not allocated. */
static void limit_config(struct deepum_config *cfg)
{
	if (cfg->corr_sets > 256)
		cfg->corr_sets |= 0x80000000U;
	if (cfg->block_max > 4096)
		cfg->block_max |= 0x80000000U;
	if (cfg->exec_max > 1024)
		cfg->exec_max |= 0x80000000U;
	if (cfg->lookahead_blocks > 1024)
		cfg->lookahead_blocks |= 0x80000000U;
	if (cfg->lookahead_kernels > 1024)
		cfg->lookahead_kernels |= 0x80000000U;
	if (cfg->walk_max > 4096)
		cfg->walk_max |= 0x80000000U;
}

/*
 * A configuration whose tables stay under a megabyte, or plain garbage
 * (nearly always refused).  A configuration is allocated on every CONFIG of
 * a context, and zeroing the default's 14 MiB costs 15 ms under TCG: only
 * one in a hundred asks for the defaults (all zero).
 */
static void random_config(struct deepum_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	if (chance(1))
		return;
	if (chance(20)) {
		random_bytes(cfg, sizeof(*cfg));
		limit_config(cfg);
		return;
	}
	cfg->corr_sets = 1U << small(4, 8);
	cfg->corr_ways = small(1, 4);
	cfg->corr_levels = chance(50) ? 0 : small(1, 4);
	cfg->corr_succs = chance(50) ? 0 : small(1, 8);
	cfg->exec_max = small(16, 1024);
	cfg->exec_succs = chance(50) ? 0 : small(1, 8);
	cfg->exec_starts = chance(50) ? 0 : small(1, 8);
	cfg->block_max = small(64, 4096);
	cfg->lookahead_kernels = small(1, 1024);
	cfg->lookahead_blocks = small(1, 1024);
	cfg->walk_max = small(1, 4096);
	cfg->evict_scan = chance(50) ? 0 : small(1, 1024);
	cfg->watermark_blocks = chance(50) ? 0 : small(1, 64);
	cfg->capacity_blocks = chance(50) ? 0 : small(1, 4096);
	cfg->flags = below(DEEPUM_CFG_F_ALL + 1);
	if (chance(30)) {
		mutate(cfg, sizeof(*cfg));
		limit_config(cfg);
	}
}

static void random_record(struct deepum_record *r)
{
	memset(r, 0, sizeof(*r));
	if (chance(5)) {
		random_bytes(r, sizeof(*r));
		return;
	}
	r->type = small(DEEPUM_REC_LAUNCH, DEEPUM_REC_ITERATION);
	r->ts = rnd();
	r->exec_id = chance(80) ? small(0, 64) : (uint32_t)field_value();
	switch (r->type) {
	case DEEPUM_REC_LAUNCH:
		r->addr = rnd();
		r->aux = below(4);
		break;
	case DEEPUM_REC_FAULT:
		r->addr = (small(1, 512) << 21) + below(1 << 21);
		r->aux = small(0, DEEPUM_ACCESS_PREFETCH);
		r->flags = below(DEEPUM_FAULT_F_ALL + 1);
		break;
	case DEEPUM_REC_ALLOC:
	case DEEPUM_REC_FREE:
		r->addr = (uint64_t)small(0, 512) << 21;
		r->len = chance(90) ? (uint64_t)small(0, 64) << 21 : field_value() >> 1;
		break;
	default:
		r->aux = below(16);
		r->flags = below(DEEPUM_ITER_F_ALL + 1);
	}
	if (chance(5))
		mutate(r, sizeof(*r));
}

/* A plausible argument for @cmd in the arena. */
static void plausible_arg(unsigned long cmd, void *arg)
{
	switch (cmd) {
	case DEEPUM_IOC_API: {
		struct deepum_api *a = arg;

		a->api = DEEPUM_API_VERSION;
		a->features = chance(80) ? 0 : DEEPUM_FEATURE_PREFETCH;
		break;
	}
	case DEEPUM_IOC_SET_EXEC_ID: {
		struct deepum_set_exec_id *s = arg;

		s->exec_id = small(0, 64);
		s->stream = below(4);
		s->name_hash = rnd();
		s->ts = chance(50) ? 0 : rnd();
		break;
	}
	case DEEPUM_IOC_CONFIG:
	case DEEPUM_IOC_GET_CONFIG: {
		struct deepum_config_req *c = arg;

		c->scope = chance(90) ? below(2) : (uint32_t)field_value();
		random_config(&c->config);
		break;
	}
	case DEEPUM_IOC_INVALIDATE: {
		struct deepum_range *r = arg;

		r->addr = (uint64_t)small(0, 512) << 21;
		r->len = chance(90) ? (uint64_t)small(0, 64) << 21 : field_value();
		break;
	}
	case DEEPUM_IOC_STATS: {
		struct deepum_stats_req *s = arg;

		s->scope = chance(90) ? (chance(50) ? DEEPUM_SCOPE_CONTEXT : DEEPUM_SCOPE_GLOBAL)
				      : (uint32_t)field_value();
		break;
	}
	case DEEPUM_IOC_TEST_INJECT: {
		struct deepum_test_inject *t = arg;
		uint32_t i;

		t->count = chance(90) ? below(32) : chance(80) ? below(DEEPUM_TEST_BATCH_MAX + 1)
								: (uint32_t)field_value();
		for (i = 0; i < t->count && i < DEEPUM_TEST_BATCH_MAX + 8; i++)
			random_record(&records[i]);
		t->records = (uintptr_t)(chance(90) ? (void *)records : bad_pointer());
		break;
	}
	case DEEPUM_IOC_TEST_DRAIN: {
		struct deepum_test_drain *d = arg;

		d->max = chance(90) ? below(DEEPUM_TEST_BATCH_MAX + 1) : (uint32_t)field_value();
		d->flags = chance(50) ? DEEPUM_DRAIN_F_WAIT : 0;
		d->cmds = (uintptr_t)(chance(90) ? (void *)cmds : bad_pointer());
		break;
	}
	default:	/* ATTACH: all zero */
		break;
	}
	if (chance(15)) {
		mutate(arg, _IOC_SIZE(cmd));
		if (cmd == DEEPUM_IOC_CONFIG)
			limit_config(&((struct deepum_config_req *)arg)->config);
	}
}

/* The table entry @cmd reaches in the module's dispatcher (any size), or NULL: ENOTTY. */
static const struct ioctl_kind *dispatched(unsigned long cmd)
{
	size_t i;

	if (_IOC_TYPE(cmd) != DEEPUM_IOC_MAGIC)
		return NULL;
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (_IOC_NR(cmd) == _IOC_NR(kinds[i].cmd) && _IOC_DIR(cmd) == _IOC_DIR(kinds[i].cmd))
			return &kinds[i];
	return NULL;
}

/* A command: mostly the header's, else resized, redirected or made up. */
static unsigned long random_command(void)
{
	unsigned long cmd = kinds[below(ARRAY_SIZE(kinds))].cmd;
	unsigned int roll = below(100);

	/*
	 * CONFIG allocates and zeroes a core, 100 times the cost of any other
	 * call under TCG: ask for it a third as often, or it takes most of the run.
	 */
	while (cmd == DEEPUM_IOC_CONFIG && below(3))
		cmd = kinds[below(ARRAY_SIZE(kinds))].cmd;

	if (roll < 75)
		return cmd;
	if (roll < 85)	/* an older or newer struct size */
		return (cmd & ~((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)) |
		       (below(PAGE / 8) << _IOC_SIZESHIFT);
	if (roll < 90)	/* another direction */
		return (cmd & ~((unsigned long)_IOC_DIRMASK << _IOC_DIRSHIFT)) |
		       (below(4) << _IOC_DIRSHIFT);
	if (roll < 95)
		return _IOC(below(4), DEEPUM_IOC_MAGIC, below(256), below(512));
	return (uint32_t)rnd();
}

static int fds[NFILES];

static void reopen(int i)
{
	if (fds[i] >= 0)
		close(fds[i]);
	fds[i] = open("/dev/deepum", O_RDWR | O_CLOEXEC);
	if (fds[i] < 0) {
		perror("open /dev/deepum");
		exit(1);
	}
	/* Most files get through the handshake; some stay fresh. */
	if (chance(85)) {
		struct deepum_api api = { .api = DEEPUM_API_VERSION };

		ioctl(fds[i], DEEPUM_IOC_API, &api);
		if (chance(70)) {
			struct deepum_attach at = {};

			ioctl(fds[i], DEEPUM_IOC_ATTACH, &at);
		}
	}
}

static unsigned long counts[4096];
static uint64_t kind_ns[ARRAY_SIZE(kinds) + 1];	/* the last: commands outside the table */
static unsigned long kind_calls[ARRAY_SIZE(kinds) + 1];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* One line per process: how the calls ended, by errno. */
static void report(const char *who, unsigned long calls)
{
	int i;

	printf("fuzz_ioctl %s: %lu calls:", who, calls);
	for (i = 0; i < 4096; i++)
		if (counts[i])
			printf(" %s %lu", i ? strerrorname_np(i) : "ok", counts[i]);
	printf("\nfuzz_ioctl %s: calls and ms in the kernel:", who);
	for (i = 0; i <= (int)ARRAY_SIZE(kinds); i++)
		printf(" %s %lu/%llu", i < (int)ARRAY_SIZE(kinds) ? kinds[i].name : "other", kind_calls[i],
		       (unsigned long long)(kind_ns[i] / 1000000));
	printf("\n");
	fflush(stdout);
}

static int fuzz(unsigned long calls, const char *who)
{
	unsigned long i;
	int i_fd;

	for (i = 0; i < calls; i++) {
		const struct ioctl_kind *kind;
		uint64_t start;
		unsigned long cmd;
		size_t k;
		size_t size;
		void *arg;
		int ret, err;

		if (chance(1) && below(10) == 0)
			reopen(below(NFILES));
		i_fd = below(NFILES);
		cmd = random_command();
		kind = dispatched(cmd);
		size = _IOC_SIZE(cmd);
		/* Clear what the kernel may read: the argument, a newer struct's tail. */
		memset(arena, 0, size + 64 < 4 * PAGE ? size + 64 : 4 * PAGE);
		if (kind && chance(85))
			plausible_arg(kind->cmd, arena);
		else
			random_bytes(arena, size < 4 * PAGE ? size : 4 * PAGE);
		arg = arg_pointer(size);
		if ((unsigned char *)arg > arena && (unsigned char *)arg < arena + 4 * PAGE)
			memmove(arg, arena, arena + 4 * PAGE - (unsigned char *)arg);

		start = now_ns();
		ret = ioctl(fds[i_fd], cmd, arg);
		err = ret ? errno : 0;
		k = kind ? (size_t)(kind - kinds) : ARRAY_SIZE(kinds);
		kind_ns[k] += now_ns() - start;
		kind_calls[k]++;
		counts[err < 4096 ? err : 4095]++;
		if (kind ? !documented(kind, err) : err != ENOTTY) {
			fprintf(stderr, "%s: call %lu: %s (cmd %#lx) returned %s, not documented\n",
				who, i, kind ? kind->name : "a command outside the table", cmd,
				err ? strerror(err) : "success");
			return 1;
		}
	}
	report(who, calls);
	return 0;
}

static void set_small_defaults(int restore)
{
	struct deepum_config_req req = { .scope = DEEPUM_SCOPE_DEFAULTS };
	int fd = open("/dev/deepum", O_RDWR | O_CLOEXEC);
	struct deepum_api api = { .api = DEEPUM_API_VERSION };

	if (!restore) {
		/* Every attach allocates a core: keep that cheap. */
		req.config.corr_sets = 64;
		req.config.exec_max = 256;
		req.config.block_max = 1024;
		req.config.lookahead_kernels = 64;
		req.config.lookahead_blocks = 256;
		req.config.walk_max = 1024;
	}
	if (fd < 0 || ioctl(fd, DEEPUM_IOC_API, &api) || ioctl(fd, DEEPUM_IOC_CONFIG, &req)) {
		perror("setting the default configuration");
		exit(1);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	unsigned long calls;
	int status, child_status, i;
	uint64_t seed;
	pid_t child;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CALLS [SEED]\n", argv[0]);
		return 2;
	}
	calls = strtoul(argv[1], NULL, 0);
	seed = argc > 2 ? strtoull(argv[2], NULL, 0) : 0x5eed;
	rng_state = seed | 1;

	arena = mmap(NULL, 5 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	readonly = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	records = calloc(DEEPUM_TEST_BATCH_MAX + 8, sizeof(*records));
	cmds = calloc(DEEPUM_TEST_BATCH_MAX + 8, sizeof(*cmds));
	if (arena == MAP_FAILED || readonly == MAP_FAILED || !records || !cmds ||
	    mprotect(arena + 4 * PAGE, PAGE, PROT_NONE)) {
		perror("fuzz_ioctl: memory");
		return 1;
	}

	set_small_defaults(0);
	for (i = 0; i < NFILES; i++) {
		fds[i] = -1;
		reopen(i);
	}

	/* Two processes: the child shares the parent's files (EPERM on its contexts) and opens its own. */
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		rng_state = rng_state * 3 + 1;
		for (i = 0; i < NFILES / 2; i++)
			reopen(i);
		_exit(fuzz(calls / 2, "child"));
	}
	status = fuzz(calls - calls / 2, "parent");
	if (waitpid(child, &child_status, 0) != child || !WIFEXITED(child_status) ||
	    WEXITSTATUS(child_status))
		status = 1;

	for (i = 0; i < NFILES; i++)
		close(fds[i]);
	set_small_defaults(1);

	printf("fuzz_ioctl: seed %#llx, %s\n", (unsigned long long)seed, status ? "FAILED" : "passed");
	return status;
}
