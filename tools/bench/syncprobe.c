/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/syncprobe.c - the group-commit ceiling of this machine.
 *
 * What the durability workload's strict_2t_vs_1t can reach at best here,
 * measured beside it: synchronous callers that each do @work_ns of CPU work
 * per batch (a busy loop standing in for the engine's put path), then write
 * a frame of the engine's size with pwrite() and wait for an fdatasync()
 * that covers it, with the cheapest group commit there is: a caller that
 * finds no sync running waits (condition variable) until every thread has
 * appended or a cap has passed, and the caller completing the group syncs
 * at once; the others sleep until that sync returns. No encoding, no
 * index, no journal bookkeeping: only the work, the write, the sync and
 * the hand-off between two threads.
 *
 * Why it exists: with one thread a batch costs work + sync; with two, one
 * sync carries both batches, but the thread that did not sync must be
 * woken when it ends, so a 2-thread cycle is sync + wake-up + work for two
 * batches. On the 2-vCPU guests here the wake-up of a sleeping vCPU is
 * ~40 us, which caps the ratio well below 2 whatever the engine does;
 * spinning instead of sleeping slowed the sync itself (docs/journal.md).
 * The probe puts a number on that cap in the same run and on the same
 * file system as the engine's figures.
 *
 * The file (DIR/syncprobe.dat) is allocated and written with zeros once,
 * then synced, like the side log (writes into unwritten extents would make
 * each fdatasync commit an extent conversion); frames wrap around it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench/syncprobe.h"

#define PROBE_FILE_BYTES (16ull << 20)
/* Longest a caller waits for the others to append before it syncs. */
#define GATHER_CAP_NS 300000ull
#define MAX_THREADS 8

struct probe {
	int fd;
	size_t frame_bytes;
	uint8_t *frame;
	uint64_t work_ns;
	unsigned threads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* under @mu */
	uint64_t off;
	uint64_t written; /* frames written */
	uint64_t synced;  /* frames covered by a finished sync */
	int syncing;
	int err; /* first errno of a write or sync */
	uint64_t nr_syncs;
	uint64_t sync_ns;
};

struct probe_worker {
	pthread_t thread;
	struct probe *p;
	uint64_t batches;
	pthread_barrier_t *start;
};

static void spin_for(uint64_t ns)
{
	uint64_t end = bench_now_ns() + ns;

	while (bench_now_ns() < end)
		;
}

/* With @mu held: sync everything written so far, as the group's leader. */
static void lead_sync(struct probe *p)
{
	uint64_t target = p->written, t0;
	int rc;

	p->syncing = 1;
	pthread_mutex_unlock(&p->mu);
	t0 = bench_now_ns();
	rc = fdatasync(p->fd) ? errno : 0;
	t0 = bench_now_ns() - t0;
	pthread_mutex_lock(&p->mu);
	if (rc && !p->err)
		p->err = rc;
	p->synced = target;
	p->syncing = 0;
	p->nr_syncs++;
	p->sync_ns += t0;
	pthread_cond_broadcast(&p->cv);
}

/* Write one frame and return once a sync covering it has finished. */
static int append_and_wait(struct probe *p)
{
	uint64_t me, deadline;
	struct timespec ts;
	int err;

	pthread_mutex_lock(&p->mu);
	if (p->off + p->frame_bytes > PROBE_FILE_BYTES)
		p->off = 0;
	if (pwrite(p->fd, p->frame, p->frame_bytes, (off_t)p->off) !=
		    (ssize_t)p->frame_bytes &&
	    !p->err)
		p->err = errno ? errno : EIO;
	p->off += p->frame_bytes;
	me = ++p->written;
	deadline = bench_now_ns() + GATHER_CAP_NS;
	while (p->synced < me && !p->err) {
		if (p->syncing) {
			pthread_cond_wait(&p->cv, &p->mu);
		} else if (p->written - p->synced < p->threads &&
			   bench_now_ns() < deadline) {
			ts.tv_sec = (time_t)(deadline / 1000000000ull);
			ts.tv_nsec = (long)(deadline % 1000000000ull);
			pthread_cond_timedwait(&p->cv, &p->mu, &ts);
		} else {
			lead_sync(p);
		}
	}
	err = p->err;
	pthread_mutex_unlock(&p->mu);
	return err;
}

static void *probe_worker_main(void *arg)
{
	struct probe_worker *w = arg;

	pthread_barrier_wait(w->start);
	for (uint64_t i = 0; i < w->batches; i++) {
		spin_for(w->p->work_ns);
		if (append_and_wait(w->p))
			break;
	}
	return NULL;
}

static void probe_path(const char *dir, char *path, size_t cap)
{
	snprintf(path, cap, "%s/syncprobe.dat", dir);
}

static void probe_unlink(const char *dir)
{
	char path[4096];

	probe_path(dir, path, sizeof(path));
	unlink(path);
}

/* Create and fill the probe file: see the note at the top. */
static int probe_file(const char *dir, int *fd)
{
	char path[4096];
	uint8_t *zeros;
	int rc = 0;

	probe_path(dir, path, sizeof(path));
	*fd = open(path, O_RDWR | O_CREAT, 0644);
	if (*fd < 0)
		return errno;
	zeros = calloc(1, 1 << 20);
	if (!zeros)
		return ENOMEM;
	for (uint64_t off = 0; off < PROBE_FILE_BYTES && !rc; off += 1 << 20)
		if (pwrite(*fd, zeros, 1 << 20, (off_t)off) != 1 << 20)
			rc = errno ? errno : EIO;
	free(zeros);
	if (!rc && fsync(*fd))
		rc = errno;
	return rc;
}

int bench_syncprobe_run(const char *dir, unsigned threads, uint64_t work_ns,
			size_t frame_bytes, uint64_t batches,
			struct bench_syncprobe *out)
{
	struct probe p = {.fd = -1,
			  .frame_bytes = frame_bytes,
			  .work_ns = work_ns,
			  .threads = threads};
	struct probe_worker w[MAX_THREADS];
	pthread_condattr_t ca;
	pthread_barrier_t start;
	uint64_t t0;
	int rc;

	if (!threads || threads > MAX_THREADS || !frame_bytes ||
	    frame_bytes > PROBE_FILE_BYTES)
		return EINVAL;
	p.frame = malloc(frame_bytes);
	if (!p.frame)
		return ENOMEM;
	memset(p.frame, 0x5a, frame_bytes);
	rc = probe_file(dir, &p.fd);
	if (rc)
		goto out;
	pthread_mutex_init(&p.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* bench_now_ns() */
	pthread_cond_init(&p.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_barrier_init(&start, NULL, threads + 1);
	for (unsigned t = 0; t < threads; t++) {
		w[t] = (struct probe_worker){
			.p = &p,
			.batches = batches * (t + 1) / threads -
				   batches * t / threads,
			.start = &start,
		};
		pthread_create(&w[t].thread, NULL, probe_worker_main, &w[t]);
	}
	t0 = bench_now_ns();
	pthread_barrier_wait(&start);
	for (unsigned t = 0; t < threads; t++)
		pthread_join(w[t].thread, NULL);
	out->ns = bench_now_ns() - t0;
	out->batches = batches;
	out->syncs = p.nr_syncs;
	out->sync_ns = p.nr_syncs ? p.sync_ns / p.nr_syncs : 0;
	rc = p.err;
	pthread_barrier_destroy(&start);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
out:
	if (p.fd >= 0)
		close(p.fd);
	probe_unlink(dir);
	free(p.frame);
	return rc;
}
