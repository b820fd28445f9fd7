/* SPDX-License-Identifier: MIT */
/*
 * profiling/render.c - the profiler's tables, as text and as JSON.
 *
 * Rendering works only from a snapshot (kvforge/profile.h), so it takes
 * the profiler's mutex once, briefly, and never touches live counters.
 * Counters are shown per key over the sampled calls (text) or as raw sums
 * with the sampled call and key counts beside them (JSON), because they
 * are read in sampled batches only.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <kvforge/profile.h>
#include <kvforge/status.h>

static double ratio(double num, uint64_t den)
{
	return den ? num / (double)den : 0.0;
}

static int finish(FILE *f, struct kvf_profile_snapshot *s)
{
	kvf_profile_snapshot_free(s);
	return ferror(f) ? KVF_ERR_IO : KVF_OK;
}

static void text_header(FILE *f, const struct kvf_profile_snapshot *s)
{
	fprintf(f, "profile: tier %s%s, clock %s (%.3f GHz), sampling %s",
		s->tier, s->user_only ? " (user-only)" : "", s->clock,
		s->clock_ghz, s->sample_every ? "every" : "adaptive");
	if (s->sample_every)
		fprintf(f, " %u", s->sample_every);
	fprintf(f, ", %llu thread(s)\n", (unsigned long long)s->threads);
	fprintf(f, "%-10s %-9s %10s %12s %10s %8s %6s", "op", "stage", "calls",
		"keys", "ns/call", "ns/key", "%");
	for (unsigned i = 0; i < s->n_counters; i++)
		fprintf(f, " %16s", s->counter_names[i]);
	if (s->n_counters)
		fprintf(f, "  (counters per key, sampled)");
	fputc('\n', f);
}

static void text_row(FILE *f, const struct kvf_profile_snapshot *s,
		     const char *op, const char *stage,
		     const struct kvf_profile_cell *c, uint64_t total_ns)
{
	fprintf(f, "%-10s %-9s %10llu %12llu %10.1f %8.2f %6.1f", op, stage,
		(unsigned long long)c->calls, (unsigned long long)c->keys,
		ratio((double)c->ns, c->calls), ratio((double)c->ns, c->keys),
		100.0 * ratio((double)c->ns, total_ns));
	for (unsigned i = 0; i < s->n_counters; i++)
		fprintf(f, " %16.3f",
			ratio((double)c->counters[i], c->sampled_keys));
	fputc('\n', f);
}

enum kvf_status kvf_profile_render_text(struct kvf_profiler *p, FILE *f)
{
	struct kvf_profile_snapshot *s;
	int ret = kvf_profile_snapshot(p, &s);

	if (ret)
		return ret;
	text_header(f, s);
	for (unsigned o = 0; o < s->n_ops; o++) {
		const struct kvf_profile_cell *tot =
			kvf_profile_snapshot_cell(s, o, s->n_stages);

		if (!tot->calls)
			continue;
		for (unsigned st = 0; st < s->n_stages; st++) {
			const struct kvf_profile_cell *c =
				kvf_profile_snapshot_cell(s, o, st);

			if (c->calls)
				text_row(f, s, s->op_names[o],
					 s->stage_names[st], c, tot->ns);
		}
		text_row(f, s, s->op_names[o], "TOTAL", tot, tot->ns);
	}
	return finish(f, s);
}

/* JSON string with the escapes RFC 8259 requires. */
static void json_str(FILE *f, const char *str)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

static void json_cell(FILE *f, const struct kvf_profile_snapshot *s,
		      const struct kvf_profile_cell *c)
{
	fprintf(f,
		"{\"calls\":%llu,\"keys\":%llu,\"ns\":%llu,"
		"\"ns_per_call\":%.3f,\"ns_per_key\":%.3f,"
		"\"sampled_calls\":%llu,\"sampled_keys\":%llu,\"counters\":{",
		(unsigned long long)c->calls, (unsigned long long)c->keys,
		(unsigned long long)c->ns, ratio((double)c->ns, c->calls),
		ratio((double)c->ns, c->keys),
		(unsigned long long)c->sampled_calls,
		(unsigned long long)c->sampled_keys);
	for (unsigned i = 0; i < s->n_counters; i++) {
		fputs(i ? "," : "", f);
		json_str(f, s->counter_names[i]);
		fprintf(f, ":%llu", (unsigned long long)c->counters[i]);
	}
	fputs("}}", f);
}

static void json_tiers(FILE *f, const struct kvf_profile_snapshot *s)
{
	fputs("\"tiers\":[", f);
	for (unsigned i = 0; i < KVF_PROFILE_TIER_COUNT; i++) {
		const struct kvf_profile_tier_info *t = &s->tiers[i];

		fprintf(f, "%s{\"name\":", i ? "," : "");
		json_str(f, t->name);
		fprintf(f, ",\"tried\":%s,\"available\":%s,\"reason\":",
			t->tried ? "true" : "false",
			t->available ? "true" : "false");
		json_str(f, t->reason);
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_op(FILE *f, const struct kvf_profile_snapshot *s, unsigned o)
{
	bool first = true;

	json_str(f, s->op_names[o]);
	fputs(":{\"total\":", f);
	json_cell(f, s, kvf_profile_snapshot_cell(s, o, s->n_stages));
	fputs(",\"stages\":{", f);
	for (unsigned st = 0; st < s->n_stages; st++) {
		const struct kvf_profile_cell *c =
			kvf_profile_snapshot_cell(s, o, st);

		if (!c->calls)
			continue;
		fputs(first ? "" : ",", f);
		first = false;
		json_str(f, s->stage_names[st]);
		fputc(':', f);
		json_cell(f, s, c);
	}
	fputs("}}", f);
}

enum kvf_status kvf_profile_render_json(struct kvf_profiler *p, FILE *f)
{
	struct kvf_profile_snapshot *s;
	int ret = kvf_profile_snapshot(p, &s);
	bool first = true;

	if (ret)
		return ret;
	fputs("{\"tier\":", f);
	json_str(f, s->tier);
	fputs(",\"clock\":{\"source\":", f);
	json_str(f, s->clock);
	fprintf(f, ",\"ghz\":%.6f},\"sampling\":{\"every\":%u}", s->clock_ghz,
		s->sample_every);
	fprintf(f, ",\"user_only\":%s,\"threads\":%llu,\"counters\":[",
		s->user_only ? "true" : "false",
		(unsigned long long)s->threads);
	for (unsigned i = 0; i < s->n_counters; i++) {
		fputs(i ? "," : "", f);
		json_str(f, s->counter_names[i]);
	}
	fputs("],", f);
	json_tiers(f, s);
	fputs(",\"ops\":{", f);
	for (unsigned o = 0; o < s->n_ops; o++) {
		if (!kvf_profile_snapshot_cell(s, o, s->n_stages)->calls)
			continue;
		fputs(first ? "" : ",", f);
		first = false;
		json_op(f, s, o);
	}
	fputs("}}", f);
	return finish(f, s);
}

enum kvf_status kvf_profile_render_tiers(struct kvf_profiler *p, FILE *f)
{
	struct kvf_profile_snapshot *s;
	int ret = kvf_profile_snapshot(p, &s);

	if (ret)
		return ret;
	for (unsigned i = 0; i < KVF_PROFILE_TIER_COUNT; i++) {
		const struct kvf_profile_tier_info *t = &s->tiers[i];
		const char *state = !t->tried	   ? "not tried"
				    : t->available ? "available"
						   : "unavailable";

		fprintf(f, "%s: %s%s%s%s\n", t->name, state,
			t->reason[0] ? ": " : "", t->reason,
			!strcmp(s->tier, t->name) ? " (active)" : "");
	}
	return finish(f, s);
}
