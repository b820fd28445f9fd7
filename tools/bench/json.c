/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/json.c - collecting results and rendering them.
 *
 * Results keep insertion order, so the table and the JSON read in the
 * order the workload measured them. Grouped metrics print as one table
 * row per group; ungrouped ones as "name value" lines.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/bench/results.h"

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 16;
	p = realloc(p, *cap * size);
	if (!p) {
		fprintf(stderr, "kvforge-bench: out of memory\n");
		exit(1);
	}
	return p;
}

void bench_result(struct bench_results *r, const char *group,
		  const char *metric, double value)
{
	r->res = grow(r->res, &r->cap_res, r->nr_res, sizeof(*r->res));
	r->res[r->nr_res++] = (struct bench_entry){
		.group = group ? strdup(group) : NULL,
		.name = strdup(metric),
		.value = value,
	};
}

double bench_result_get(const struct bench_results *r, const char *group,
			const char *metric)
{
	for (size_t i = r->nr_res; i-- > 0;) {
		const struct bench_entry *e = &r->res[i];

		if (!strcmp(e->name, metric) &&
		    (group ? e->group && !strcmp(e->group, group) : !e->group))
			return e->value;
	}
	return NAN;
}

void bench_extra(struct bench_results *r, const char *name, double value)
{
	r->extra = grow(r->extra, &r->cap_extra, r->nr_extra,
			sizeof(*r->extra));
	r->extra[r->nr_extra++] = (struct bench_entry){ .name = strdup(name),
							.value = value };
}

void bench_config(struct bench_results *r, const char *name,
		  const char *value)
{
	r->config = grow(r->config, &r->cap_config, r->nr_config,
			 sizeof(*r->config));
	r->config[r->nr_config++] = (struct bench_entry){
		.name = strdup(name), .text = strdup(value) };
}

void bench_note(struct bench_results *r, const char *fmt, ...)
{
	va_list ap;
	char *line;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return;
	r->notes = grow(r->notes, &r->cap_notes, r->nr_notes,
			sizeof(*r->notes));
	r->notes[r->nr_notes++] = line;
}

static char *render_profile(struct kvf_profiler *p, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (json)
		kvf_profile_render_json(p, f);
	else
		kvf_profile_render_text(p, f);
	fclose(f);
	return buf;
}

void bench_capture_profile(struct bench_results *r, struct kvf_profiler *p)
{
	free(r->profile_json);
	free(r->profile_text);
	r->profile_json = render_profile(p, true);
	r->profile_text = render_profile(p, false);
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_number(FILE *f, double v)
{
	if (!isfinite(v))
		fputs("null", f);
	else if (v == (double)(long long)v && fabs(v) < 1e15)
		fprintf(f, "%lld", (long long)v);
	else
		fprintf(f, "%.6g", v);
}

static bool same_group(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* Whether an entry before @i has the group of entry @i (already written). */
static bool group_seen(const struct bench_results *r, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (same_group(r->res[j].group, r->res[i].group))
			return true;
	return false;
}

static void json_member(FILE *f, const char *name, double value)
{
	json_string(f, name);
	fputs(": ", f);
	json_number(f, value);
}

/*
 * "results": one member per ungrouped entry and one object per group, in
 * order of first appearance. A group's entries may be added at different
 * times (the floor's vs_floor after every timed phase), and a JSON object
 * must not name a member twice, so each group gathers all of its entries.
 */
static void json_results(const struct bench_results *r, FILE *f)
{
	bool first = true;

	fputs("\"results\": {", f);
	for (size_t i = 0; i < r->nr_res; i++) {
		const struct bench_entry *e = &r->res[i];

		if (e->group && group_seen(r, i))
			continue;
		fputs(first ? "" : ", ", f);
		first = false;
		if (!e->group) {
			json_member(f, e->name, e->value);
			continue;
		}
		json_string(f, e->group);
		fputs(": {", f);
		for (size_t k = i; k < r->nr_res; k++) {
			if (!same_group(r->res[k].group, e->group))
				continue;
			fputs(k == i ? "" : ", ", f);
			json_member(f, r->res[k].name, r->res[k].value);
		}
		fputc('}', f);
	}
	fputc('}', f);
}

void bench_render_json(const struct bench_results *r, FILE *f)
{
	fputs("{\"workload\": ", f);
	json_string(f, r->workload);
	fputs(", \"config\": {", f);
	for (size_t i = 0; i < r->nr_config; i++) {
		fputs(i ? ", " : "", f);
		json_string(f, r->config[i].name);
		fputs(": ", f);
		json_string(f, r->config[i].text);
	}
	fputs("}, ", f);
	json_results(r, f);
	for (size_t i = 0; i < r->nr_extra; i++) {
		fputs(", ", f);
		json_member(f, r->extra[i].name, r->extra[i].value);
	}
	if (r->profile_json) {
		fputs(", \"profile\": ", f);
		fputs(r->profile_json, f);
	}
	fputs("}\n", f);
}

static void text_value(FILE *f, double v)
{
	if (!isfinite(v))
		fprintf(f, " %14s", "-");
	else if (fabs(v) >= 1e6)
		fprintf(f, " %14.0f", v);
	else if (fabs(v) >= 100)
		fprintf(f, " %14.1f", v);
	else
		fprintf(f, " %14.4g", v);
}

/* End of the run of entries sharing entry @i's group. */
static size_t group_end(const struct bench_results *r, size_t i)
{
	size_t j = i;

	while (j < r->nr_res && same_group(r->res[j].group, r->res[i].group))
		j++;
	return j;
}

static bool same_metrics(const struct bench_results *r, size_t a, size_t a_end,
			 size_t b, size_t b_end)
{
	if (a_end - a != b_end - b)
		return false;
	for (; a < a_end; a++, b++)
		if (strcmp(r->res[a].name, r->res[b].name))
			return false;
	return true;
}

/* Groups print as table rows; a header whenever the metric set changes. */
void bench_render_text(const struct bench_results *r, FILE *f)
{
	size_t hdr = 0, hdr_end = 0;

	fprintf(f, "kvforge-bench: workload %s\n", r->workload);
	for (size_t i = 0; i < r->nr_config; i++)
		fprintf(f, "  %-22s %s\n", r->config[i].name, r->config[i].text);
	fputc('\n', f);
	for (size_t i = 0; i < r->nr_res;) {
		size_t end;

		if (!r->res[i].group) {
			fprintf(f, "  %-56s", r->res[i].name);
			text_value(f, r->res[i].value);
			fputc('\n', f);
			hdr_end = hdr = 0;
			i++;
			continue;
		}
		end = group_end(r, i);
		if (hdr_end == hdr || !same_metrics(r, hdr, hdr_end, i, end)) {
			fprintf(f, "\n  %-20s", "");
			for (size_t k = i; k < end; k++)
				fprintf(f, " %14s", r->res[k].name);
			fputc('\n', f);
			hdr = i;
			hdr_end = end;
		}
		fprintf(f, "  %-20s", r->res[i].group);
		for (; i < end; i++)
			text_value(f, r->res[i].value);
		fputc('\n', f);
	}
	fputc('\n', f);
	for (size_t i = 0; i < r->nr_extra; i++) {
		fprintf(f, "  %-56s", r->extra[i].name);
		text_value(f, r->extra[i].value);
		fputc('\n', f);
	}
	for (size_t i = 0; i < r->nr_notes; i++)
		fprintf(f, "%s\n", r->notes[i]);
	if (r->profile_text)
		fprintf(f, "\n%s", r->profile_text);
}

void bench_results_free(struct bench_results *r)
{
	for (size_t i = 0; i < r->nr_res; i++) {
		free(r->res[i].group);
		free(r->res[i].name);
	}
	for (size_t i = 0; i < r->nr_extra; i++)
		free(r->extra[i].name);
	for (size_t i = 0; i < r->nr_config; i++) {
		free(r->config[i].name);
		free(r->config[i].text);
	}
	for (size_t i = 0; i < r->nr_notes; i++)
		free(r->notes[i]);
	free(r->res);
	free(r->extra);
	free(r->config);
	free(r->notes);
	free(r->profile_json);
	free(r->profile_text);
}
