// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A test double of /dev/deepum's ioctls, for libdeepum's side of the
 * contract.  Preloaded ahead of libdeepum, it answers every ioctl of the
 * deepum magic (on whatever file libdeepum opened as DEEPUM_DEVICE) the way
 * the module documents, and logs each to FAKECUDA_LOG next to the fake
 * driver's lines, so tests see both in one order.  Other ioctls go to libc.
 *
 * FAKEDEV_FAIL=API|ATTACH|SET_EXEC_ID|INVALIDATE makes that command fail
 * with EIO.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../kmod/include/uapi/deepum.h"

static void log_line(const char *fmt, ...)
{
	const char *path = getenv("FAKECUDA_LOG");
	char line[512];
	va_list ap;
	int fd, n;

	if (!path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != n)
		abort();
	close(fd);
}

static int refuse_if_asked(const char *command)
{
	const char *fail = getenv("FAKEDEV_FAIL");

	if (fail && strcmp(fail, command) == 0) {
		log_line("ioctl %s -> EIO", command);
		errno = EIO;
		return -1;
	}
	return 0;
}

__attribute__((visibility("default"))) int ioctl(int fd, unsigned long request, ...)
{
	static int (*libc_ioctl)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (_IOC_TYPE(request) != DEEPUM_IOC_MAGIC) {
		if (!libc_ioctl)
			libc_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
		return libc_ioctl(fd, request, arg);
	}
	switch (request) {
	case DEEPUM_IOC_API: {
		struct deepum_api *api = arg;

		if (refuse_if_asked("API"))
			return -1;
		log_line("ioctl API api=0x%x", api->api);
		api->api = DEEPUM_API_VERSION;
		api->features = DEEPUM_FEATURE_PREFETCH | DEEPUM_FEATURE_PREEVICT | DEEPUM_FEATURE_INVALIDATE;
		api->ioctls = 1ULL << DEEPUM_IOC_NR_API | 1ULL << DEEPUM_IOC_NR_ATTACH |
			      1ULL << DEEPUM_IOC_NR_SET_EXEC_ID | 1ULL << DEEPUM_IOC_NR_INVALIDATE;
		return 0;
	}
	case DEEPUM_IOC_ATTACH: {
		struct deepum_attach *attach = arg;

		if (refuse_if_asked("ATTACH"))
			return -1;
		log_line("ioctl ATTACH");
		attach->pid = getpid();
		attach->context = 1;
		return 0;
	}
	case DEEPUM_IOC_SET_EXEC_ID: {
		const struct deepum_set_exec_id *req = arg;

		if (refuse_if_asked("SET_EXEC_ID"))
			return -1;
		log_line("ioctl SET_EXEC_ID exec_id=%u stream=%u name_hash=0x%llx", req->exec_id, req->stream,
			 (unsigned long long)req->name_hash);
		return 0;
	}
	case DEEPUM_IOC_INVALIDATE: {
		const struct deepum_range *range = arg;

		if (refuse_if_asked("INVALIDATE"))
			return -1;
		log_line("ioctl INVALIDATE addr=0x%llx len=%llu", (unsigned long long)range->addr,
			 (unsigned long long)range->len);
		return 0;
	}
	default:
		errno = ENOTTY;
		return -1;
	}
}
