/* SPDX-License-Identifier: MIT */
/*
 * profiling/tier_perf_sw.c - software perf events, and the perf group
 * plumbing every counter tier shares.
 *
 * A tier's events are opened as one group per thread (pid 0, any CPU): the
 * first event leads, the others join it, and the leader is read with
 * PERF_FORMAT_GROUP so that one read() (~1 us, a system call) returns all
 * counters at the same instant. Groups count only the thread that opened
 * them, so each thread opens its own (see profile.c).
 *
 * Probing: with perf_event_paranoid=2 a non-root caller may not count the
 * kernel, which perf reports as EACCES; the probe then sets exclude_kernel
 * (and exclude_hv) on every event and retries. A member that cannot be
 * opened (an event this CPU lacks) is dropped rather than losing the tier;
 * only a leader that cannot be opened makes the tier unavailable.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "profiling/tier.h"

static void sw_event(struct kvf__ctr_set *set, const char *name,
		     uint64_t config)
{
	struct kvf__ctr_event *e = &set->ev[set->n];

	memset(e, 0, sizeof(*e));
	e->type = PERF_TYPE_SOFTWARE;
	e->config = config;
	set->names[set->n++] = name;
}

int kvf__tier_sw_events(struct kvf__ctr_set *set, char *why, size_t cap)
{
	memset(set, 0, sizeof(*set));
	sw_event(set, "task-clock", PERF_COUNT_SW_TASK_CLOCK);
	sw_event(set, "page-faults", PERF_COUNT_SW_PAGE_FAULTS);
	sw_event(set, "context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES);
	if (cap)
		why[0] = '\0';
	return 0;
}

/* Open one event counting the calling thread on any CPU. */
static int perf_open(const struct kvf__ctr_set *set, unsigned i, int group)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = set->ev[i].type;
	a.config = set->ev[i].config;
	a.config1 = set->ev[i].config1;
	a.config2 = set->ev[i].config2;
	a.read_format = group < 0 ? PERF_FORMAT_GROUP : 0;
	a.exclude_kernel = set->user_only;
	a.exclude_hv = set->user_only;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, group,
			    PERF_FLAG_FD_CLOEXEC);
}

int kvf__ctr_open(const struct kvf__ctr_set *set, int *fds)
{
	for (unsigned i = 0; i < set->n; i++) {
		fds[i] = perf_open(set, i, i ? fds[0] : -1);
		if (fds[i] < 0) {
			int err = errno;

			kvf__ctr_close(fds, i);
			return -err;
		}
	}
	return fds[0];
}

int kvf__ctr_read(int leader, unsigned n, uint64_t *vals)
{
	uint64_t buf[1 + KVF__PROF_MAX_COUNTERS];
	ssize_t want = (ssize_t)((1 + n) * sizeof(uint64_t));

	if (read(leader, buf, (size_t)want) != want || buf[0] != n)
		return -1;
	memcpy(vals, buf + 1, n * sizeof(uint64_t));
	return 0;
}

void kvf__ctr_close(int *fds, unsigned n)
{
	for (unsigned i = n; i-- > 0;) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

static void drop_member(struct kvf__ctr_set *set, unsigned i)
{
	for (unsigned j = i; j + 1 < set->n; j++) {
		set->ev[j] = set->ev[j + 1];
		set->names[j] = set->names[j + 1];
	}
	set->n--;
}

static void append(char *why, size_t cap, const char *fmt, const char *name,
		   int err)
{
	size_t len = strnlen(why, cap);

	if (len + 1 < cap)
		snprintf(why + len, cap - len, fmt, name, strerror(err));
}

int kvf__ctr_probe(struct kvf__ctr_set *set, char *why, size_t cap)
{
	int fds[KVF__PROF_MAX_COUNTERS];
	uint64_t vals[KVF__PROF_MAX_COUNTERS];
	unsigned i = 0;

	why[0] = '\0';
	while (i < set->n) {
		fds[i] = perf_open(set, i, i ? fds[0] : -1);
		if (fds[i] >= 0) {
			i++;
			continue;
		}
		if (errno == EACCES && !set->user_only) {
			/* Kernel counting refused: restart user-only. */
			kvf__ctr_close(fds, i);
			set->user_only = true;
			i = 0;
			continue;
		}
		if (i == 0) {
			int err = errno;

			why[0] = '\0';
			append(why, cap, "%s: %s", set->names[0], err);
			return -err;
		}
		append(why, cap, "%s dropped (%s); ", set->names[i], errno);
		drop_member(set, i);
	}
	if (kvf__ctr_read(fds[0], set->n, vals)) {
		kvf__ctr_close(fds, set->n);
		snprintf(why, cap, "%s: group read failed", set->names[0]);
		return -EIO;
	}
	kvf__ctr_close(fds, set->n);
	if (set->user_only) {
		size_t len = strnlen(why, cap);

		snprintf(why + len, cap - len, "user-only (kernel excluded)");
	}
	return 0;
}
