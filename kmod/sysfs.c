// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /sys/class/misc/deepum/, read-only:
 *
 *   stats/<counter>  one file per counter of struct deepum_stats, one value
 *                    each: the module-wide totals (DEEPUM_IOC_STATS with
 *                    DEEPUM_SCOPE_GLOBAL)
 *   snapshot         the same counters on one line, space-separated, taken
 *                    at one instant
 *   contexts         the number of attached contexts
 *   backend          the migration backend new contexts get
 *
 * snapshot's columns are struct deepum_stats' counters in header order,
 * reserved fields left out:
 *
 *   records launches faults faults_resident prefetches prefetch_bytes
 *   evictions demand_evictions discards invalidated_bytes revived_dead
 *   window_resets exec_stand_ins walks walk_entries walk_truncated
 *   window_full corr_inserts corr_replacements exec_ignored blocks_untracked
 *   resident_blocks core_ns records_dropped cmds_dropped prefetch_late
 *   window_skips window_waits
 *
 * Like the struct, it only ever grows at the end (zram's mm_stat rule), so
 * a parser written today keeps working.  tests/kernel/test_sysfs.py checks
 * the order against the header.
 */
#include <linux/device.h>
#include <linux/stddef.h>
#include <linux/sysfs.h>

#include "context.h"
#include "sysfs.h"

/* The counters, in header order: stats/ and snapshot's columns come from this one list. */
#define DEEPUM_STATS_COLUMNS(X)							\
	X(records) X(launches) X(faults) X(faults_resident) X(prefetches)	\
	X(prefetch_bytes) X(evictions) X(demand_evictions) X(discards)		\
	X(invalidated_bytes) X(revived_dead) X(window_resets)		\
	X(exec_stand_ins) X(walks) X(walk_entries) X(walk_truncated)		\
	X(window_full) X(corr_inserts) X(corr_replacements) X(exec_ignored)	\
	X(blocks_untracked) X(resident_blocks) X(core_ns) X(records_dropped)	\
	X(cmds_dropped) X(prefetch_late) X(window_skips) X(window_waits)

struct deepum_stat_attribute {
	struct device_attribute attr;
	size_t offset;			/* in struct deepum_stats */
};

static u64 deepum_stat_value(const struct deepum_stats *stats,
			     const struct deepum_stat_attribute *sa)
{
	return *(const u64 *)((const char *)stats + sa->offset);
}

/* Locking: takes what deepum_contexts_stats() takes.  Sleeps. */
static ssize_t deepum_stat_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	const struct deepum_stat_attribute *sa =
		container_of(attr, struct deepum_stat_attribute, attr);
	struct deepum_stats stats;

	deepum_contexts_stats(&stats);
	return sysfs_emit(buf, "%llu\n", deepum_stat_value(&stats, sa));
}

#define DEEPUM_STAT_ATTR(field)							\
	static struct deepum_stat_attribute deepum_stat_##field = {		\
		.attr = __ATTR(field, 0444, deepum_stat_show, NULL),		\
		.offset = offsetof(struct deepum_stats, field),			\
	};
DEEPUM_STATS_COLUMNS(DEEPUM_STAT_ATTR)

#define DEEPUM_STAT_COLUMN(field) &deepum_stat_##field,
static const struct deepum_stat_attribute *const deepum_stat_columns[] = {
	DEEPUM_STATS_COLUMNS(DEEPUM_STAT_COLUMN)
};

#define DEEPUM_STAT_FILE(field) &deepum_stat_##field.attr.attr,
static struct attribute *deepum_stat_files[] = {
	DEEPUM_STATS_COLUMNS(DEEPUM_STAT_FILE)
	NULL
};

static const struct attribute_group deepum_stats_group = {
	.name	= "stats",
	.attrs	= deepum_stat_files,
};

/* Locking: takes what deepum_contexts_stats() takes.  Sleeps. */
static ssize_t snapshot_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct deepum_stats stats;
	ssize_t len = 0;
	size_t i;

	/* Every counter is a column. */
	BUILD_BUG_ON(ARRAY_SIZE(deepum_stat_columns) * sizeof(u64) != sizeof(struct deepum_stats));

	deepum_contexts_stats(&stats);
	for (i = 0; i < ARRAY_SIZE(deepum_stat_columns); i++)
		len += sysfs_emit_at(buf, len, "%s%llu", i ? " " : "",
				     deepum_stat_value(&stats, deepum_stat_columns[i]));
	len += sysfs_emit_at(buf, len, "\n");
	return len;
}
static DEVICE_ATTR_RO(snapshot);

/* Locking: none. */
static ssize_t contexts_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", deepum_contexts_attached());
}
static DEVICE_ATTR_RO(contexts);

/* Locking: none. */
static ssize_t backend_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", deepum_contexts_backend());
}
static DEVICE_ATTR_RO(backend);

static struct attribute *deepum_files[] = {
	&dev_attr_snapshot.attr,
	&dev_attr_contexts.attr,
	&dev_attr_backend.attr,
	NULL
};

static const struct attribute_group deepum_group = {
	.attrs	= deepum_files,
};

const struct attribute_group *deepum_sysfs_groups[] = {
	&deepum_group,
	&deepum_stats_group,
	NULL
};
