/* SPDX-License-Identifier: MIT */
/*
 * profiling/profile.c - placeholder profiler (being replaced by the
 * per-stage counter implementation: issue "Profile first").
 */
#include "config.h"

#include <stdlib.h>

#include <kvforge/status.h>

#include "profiling/stage.h"

struct kvf_profiler {
	struct kvf__prof_head head;
};

int kvf__prof_create(struct kvf_profiler **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? KVF_OK : KVF_ERR_NO_MEMORY;
}

void kvf__prof_destroy(struct kvf_profiler *p)
{
	free(p);
}

void kvf__prof_begin_slow(struct kvf__prof_span *sp) { (void)sp; }
void kvf__prof_mark_slow(struct kvf__prof_span *sp, enum kvf__stage st) { (void)sp; (void)st; }
void kvf__prof_end_slow(struct kvf__prof_span *sp) { (void)sp; }
void kvf_profile_enable(struct kvf_profiler *p, bool on) { (void)p; (void)on; }
void kvf_profile_reset(struct kvf_profiler *p) { (void)p; }
int kvf_profile_render_text(struct kvf_profiler *p, FILE *f) { (void)p; (void)f; return KVF_OK; }
int kvf_profile_render_json(struct kvf_profiler *p, FILE *f) { (void)p; fputs("{}", f); return KVF_OK; }
