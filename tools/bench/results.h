/* SPDX-License-Identifier: MIT */
/* tools/bench/results.h - the result set behind bench_result(). */
#ifndef KVF_TOOLS_BENCH_RESULTS_H
#define KVF_TOOLS_BENCH_RESULTS_H

#include <stddef.h>
#include <stdio.h>

struct bench_entry {
	char *group;
	char *name;
	char *text;
	double value;
};

struct bench_results {
	const char *workload;
	struct bench_entry *res, *extra, *config;
	size_t nr_res, cap_res, nr_extra, cap_extra, nr_config, cap_config;
	char **notes;
	size_t nr_notes, cap_notes;
	char *profile_json;
	char *profile_text;
};

void bench_render_json(const struct bench_results *r, FILE *f);
void bench_render_text(const struct bench_results *r, FILE *f);
void bench_results_free(struct bench_results *r);

#endif /* KVF_TOOLS_BENCH_RESULTS_H */
