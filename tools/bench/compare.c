/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/compare.c - kvforge-bench compare: A/B runs, interleaved.
 *
 *   kvforge-bench compare [--rounds R] [--threshold 5%] [--conf 0.95]
 *       [--bootstrap N] [--a "ARGS"] [--b "ARGS"] [--bin-a PATH]
 *       [--bin-b PATH] [--json] [--fail-on-regression] -- COMMON ARGS
 *
 * Each run is a subprocess "BIN COMMON... VARIANT... --json" whose stdout
 * is one bench JSON object; every number under "results" becomes a metric
 * ("get.keys_per_sec"). Runs go A B B A A B B A ...: memory speed on these
 * VMs drifts over minutes, and the ABBA order cancels a linear drift
 * within each pair of rounds, while each round yields one paired
 * difference b - a (tools/lib/stats.c computes the interval). A metric
 * clears the threshold only if its whole confidence interval lies beyond
 * it; the direction of "better" is guessed from the metric's name.
 *
 * The subprocess inherits stderr; its stdout is read through a pipe to
 * EOF before waiting, so a large JSON cannot deadlock it.
 *
 * Also here: bench_latency_dump(), the per-batch latency CDF that
 * profiling/scripts/plots.sh draws (it belongs to the same "compare and
 * picture runs" tooling, and keeps main.c free of file handling).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/lib/json_read.h"
#include "tools/lib/stats.h"
#include "tools/bench/bench.h"

struct cmp_metric {
	char *name;
	double *v[2]; /* [variant][round] */
	unsigned seen[2];
};

struct cmp_variant {
	const char *bin;
	char **args; /* split --a / --b */
	int nargs;
	char *words; /* storage of args */
};

struct cmp {
	unsigned rounds;
	double threshold;
	double conf;
	unsigned bootstrap;
	uint64_t seed;
	bool json;
	bool fail_on_regression;
	struct cmp_variant var[2];
	char **common;
	int ncommon;
	struct cmp_metric *m;
	size_t nm;
	char self[4096];
};

static void usage(FILE *f)
{
	fputs("usage: kvforge-bench compare [--rounds R] [--threshold PCT%]\n"
	      "         [--conf 0.95] [--bootstrap N] [--seed S]\n"
	      "         [--a \"ARGS\"] [--b \"ARGS\"] [--bin-a PATH] [--bin-b "
	      "PATH]\n"
	      "         [--json] [--fail-on-regression] -- COMMON ARGS...\n"
	      "Runs BIN COMMON... VARIANT... --json for A and B in the order\n"
	      "A B B A ... and reports the mean paired difference B-A of each\n"
	      "result with its confidence interval.\n",
	      f);
}

/* Split @s into words on blanks, honouring '...' and "..." quoting. */
static int split_words(const char *s, struct cmp_variant *v)
{
	size_t len = strlen(s);
	char *o;
	int n = 0;

	v->words = malloc(len + 1);
	v->args = calloc(len / 2 + 2, sizeof(char *));
	if (!v->words || !v->args)
		return -1;
	o = v->words;
	while (*s) {
		char quote = 0;

		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		v->args[n++] = o;
		for (; *s && (quote || (*s != ' ' && *s != '\t')); s++) {
			if (quote && *s == quote)
				quote = 0;
			else if (!quote && (*s == '\'' || *s == '"'))
				quote = *s;
			else
				*o++ = *s;
		}
		*o++ = '\0';
		if (quote)
			return -1;
	}
	v->nargs = n;
	return 0;
}

static int parse_args(struct cmp *c, int argc, char **argv)
{
	const char *a = "", *b = "";
	int i;

	c->rounds = 10;
	c->threshold = 5.0;
	c->conf = 0.95;
	c->seed = 42;
	for (i = 1; i < argc; i++) {
		const char *o = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--")) {
			i++;
			break;
		} else if (!strcmp(o, "--json")) {
			c->json = true;
			continue;
		} else if (!strcmp(o, "--fail-on-regression")) {
			c->fail_on_regression = true;
			continue;
		} else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!val)
			goto err_usage;
		i++;
		if (!strcmp(o, "--rounds"))
			c->rounds = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(o, "--threshold"))
			c->threshold = strtod(val, NULL); /* "5%" reads 5 */
		else if (!strcmp(o, "--conf"))
			c->conf = strtod(val, NULL);
		else if (!strcmp(o, "--bootstrap"))
			c->bootstrap = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(o, "--seed"))
			c->seed = strtoull(val, NULL, 10);
		else if (!strcmp(o, "--a"))
			a = val;
		else if (!strcmp(o, "--b"))
			b = val;
		else if (!strcmp(o, "--bin-a"))
			c->var[0].bin = val;
		else if (!strcmp(o, "--bin-b"))
			c->var[1].bin = val;
		else
			goto err_usage;
	}
	c->common = argv + i;
	c->ncommon = argc - i;
	if (c->rounds < 2 || !(c->conf > 0 && c->conf < 1)) {
		fputs("compare: need --rounds >= 2 and 0 < --conf < 1\n",
		      stderr);
		return -1;
	}
	if (split_words(a, &c->var[0]) || split_words(b, &c->var[1])) {
		fputs("compare: bad quoting in --a/--b\n", stderr);
		return -1;
	}
	for (int v = 0; v < 2; v++) {
		if (c->var[v].bin)
			continue;
		ssize_t n = readlink("/proc/self/exe", c->self,
				     sizeof(c->self) - 1);
		if (n <= 0)
			return -1;
		c->self[n] = '\0';
		c->var[v].bin = c->self;
	}
	return 0;

err_usage:
	fprintf(stderr, "compare: bad option %s\n", argv[i]);
	usage(stderr);
	return -1;
}

/* Run one variant; return its stdout (NUL-terminated) or NULL. */
static char *run_once(const struct cmp *c, const struct cmp_variant *v,
		      size_t *len)
{
	char **argv =
		calloc((size_t)(c->ncommon + v->nargs + 3), sizeof(char *));
	int fd[2], n = 0, status;
	size_t cap = 1 << 16, used = 0;
	char *out = malloc(cap);
	pid_t pid;

	if (!argv || !out || pipe(fd))
		goto err_free;
	argv[n++] = (char *)v->bin;
	for (int i = 0; i < c->ncommon; i++)
		argv[n++] = c->common[i];
	for (int i = 0; i < v->nargs; i++)
		argv[n++] = v->args[i];
	argv[n++] = (char *)"--json";
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		goto err_pipe;
	if (pid == 0) {
		dup2(fd[1], STDOUT_FILENO);
		close(fd[0]);
		close(fd[1]);
		execv(v->bin, argv);
		fprintf(stderr, "compare: exec %s: %s\n", v->bin,
			strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	for (;;) {
		ssize_t r;

		if (used + 1 >= cap) {
			char *bigger = realloc(out, cap * 2);

			if (!bigger)
				break;
			out = bigger;
			cap *= 2;
		}
		r = read(fd[0], out + used, cap - used - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		used += (size_t)r;
	}
	close(fd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	free(argv);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "compare: %s failed (status %d)\n", v->bin,
			status);
		free(out);
		return NULL;
	}
	out[used] = '\0';
	*len = used;
	return out;

err_pipe:
	close(fd[0]);
	close(fd[1]);
err_free:
	free(argv);
	free(out);
	return NULL;
}

struct collect {
	struct cmp *c;
	int var;
	unsigned round;
};

static struct cmp_metric *metric_find(struct cmp *c, const char *name, bool add)
{
	struct cmp_metric *m;

	for (size_t i = 0; i < c->nm; i++)
		if (!strcmp(c->m[i].name, name))
			return &c->m[i];
	if (!add)
		return NULL;
	m = realloc(c->m, (c->nm + 1) * sizeof(*m));
	if (!m)
		return NULL;
	c->m = m;
	m = &c->m[c->nm];
	memset(m, 0, sizeof(*m));
	m->name = strdup(name);
	m->v[0] = calloc(c->rounds, sizeof(double));
	m->v[1] = calloc(c->rounds, sizeof(double));
	if (!m->name || !m->v[0] || !m->v[1]) {
		free(m->name);
		free(m->v[0]);
		free(m->v[1]);
		return NULL;
	}
	c->nm++;
	return m;
}

static int collect_cb(void *ctx, const char *path, enum kvf__json_kind kind,
		      double num, const char *str)
{
	struct collect *col = ctx;
	struct cmp_metric *m;

	if (kind != KVF__JSON_NUMBER || strncmp(path, "results.", 8))
		return 0;
	/* Metrics are those of the first run; later extras are ignored. */
	m = metric_find(col->c, path + 8, col->round == 0 && col->var == 0);
	if (!m)
		return 0;
	m->v[col->var][col->round] = num;
	m->seen[col->var]++;
	return 0;
}

static int run_rounds(struct cmp *c)
{
	for (unsigned r = 0; r < c->rounds; r++) {
		for (int k = 0; k < 2; k++) {
			/* ABBA: even rounds A then B, odd rounds B then A. */
			int var = (r % 2 == 0) ? k : 1 - k;
			struct collect col = {c, var, r};
			size_t len, off = 0;
			char *out = run_once(c, &c->var[var], &len);
			int ret;

			if (!out)
				return -1;
			ret = kvf__json_flatten(out, len, collect_cb, &col,
						&off);
			free(out);
			if (ret) {
				fprintf(stderr,
					"compare: run %u%c: bad JSON at byte "
					"%zu\n",
					r, 'A' + var, off);
				return -1;
			}
		}
		if (!c->json)
			fprintf(stderr, "compare: round %u/%u done\n", r + 1,
				c->rounds);
	}
	return 0;
}

static void print_cmdline(FILE *f, const struct cmp *c,
			  const struct cmp_variant *v)
{
	fputs(v->bin, f);
	for (int i = 0; i < c->ncommon; i++)
		fprintf(f, " %s", c->common[i]);
	for (int i = 0; i < v->nargs; i++)
		fprintf(f, " %s", v->args[i]);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v, bool comma)
{
	json_str(f, key);
	if (isfinite(v))
		fprintf(f, ":%.6g%s", v, comma ? "," : "");
	else
		fprintf(f, ":null%s", comma ? "," : "");
}

/* Statistics of one metric; false if it was missing from some run. */
static bool metric_stats(const struct cmp *c, const struct cmp_metric *m,
			 struct kvf__stats_paired *st)
{
	if (m->seen[0] != c->rounds || m->seen[1] != c->rounds)
		return false;
	if (c->bootstrap)
		return !kvf__stats_bootstrap(m->v[0], m->v[1], c->rounds,
					     c->conf, c->bootstrap, c->seed,
					     st);
	return !kvf__stats_paired(m->v[0], m->v[1], c->rounds, c->conf, st);
}

static int report(const struct cmp *c, FILE *f)
{
	int regressions = 0;

	if (c->json) {
		fprintf(f, "{\"rounds\":%u,\"order\":\"ABBA\",", c->rounds);
		json_num(f, "threshold_pct", c->threshold, true);
		json_num(f, "conf", c->conf, true);
		fprintf(f, "\"method\":\"%s\",\"a\":",
			c->bootstrap ? "bootstrap" : "student-t");
	} else {
		fprintf(f, "A: ");
	}
	for (int v = 0; v < 2; v++) {
		if (c->json) {
			fprintf(f, "%s{\"bin\":", v ? ",\"b\":" : "");
			json_str(f, c->var[v].bin);
			fputs(",\"args\":[", f);
			for (int i = 0; i < c->var[v].nargs; i++) {
				fputs(i ? "," : "", f);
				json_str(f, c->var[v].args[i]);
			}
			fputs("]}", f);
		} else {
			print_cmdline(f, c, &c->var[v]);
			fprintf(f, v ? "\n" : "\nB: ");
		}
	}
	if (c->json)
		fputs(",\"metrics\":{", f);
	else
		fprintf(f,
			"%u rounds (ABBA), %.0f%% CI (%s), threshold %.2f%%\n"
			"%-28s %12s %12s %12s %8s %19s  %s\n",
			c->rounds, c->conf * 100,
			c->bootstrap ? "bootstrap" : "Student t", c->threshold,
			"metric", "mean A", "mean B", "B-A", "rel%", "CI rel%",
			"verdict");
	for (size_t i = 0; i < c->nm; i++) {
		const struct cmp_metric *m = &c->m[i];
		struct kvf__stats_paired st;
		enum kvf__stats_verdict vd;
		bool ok = metric_stats(c, m, &st);

		vd = ok ? kvf__stats_judge(&st, c->threshold,
					   kvf__stats_direction(m->name))
			: KVF__STATS_NO_CHANGE;
		regressions += ok && vd == KVF__STATS_REGRESSED;
		if (c->json) {
			fputs(i ? "," : "", f);
			json_str(f, m->name);
			if (!ok) {
				fputs(":null", f);
				continue;
			}
			fputc(':', f);
			fputc('{', f);
			json_num(f, "mean_a", st.mean_a, true);
			json_num(f, "mean_b", st.mean_b, true);
			json_num(f, "diff", st.mean_diff, true);
			json_num(f, "lo", st.lo, true);
			json_num(f, "hi", st.hi, true);
			json_num(f, "rel_pct", st.rel, true);
			json_num(f, "rel_lo_pct", st.rel_lo, true);
			json_num(f, "rel_hi_pct", st.rel_hi, true);
			fprintf(f, "\"verdict\":\"%s\"}",
				kvf__stats_verdict_name(vd));
		} else if (!ok) {
			fprintf(f, "%-28s missing in some runs\n", m->name);
		} else {
			fprintf(f,
				"%-28s %12.4g %12.4g %+12.4g %+7.2f%% "
				"[%+7.2f,%+7.2f]%%  %s\n",
				m->name, st.mean_a, st.mean_b, st.mean_diff,
				st.rel, st.rel_lo, st.rel_hi,
				kvf__stats_verdict_name(vd));
		}
	}
	if (c->json)
		fputs("}}\n", f);
	return regressions;
}

static void cmp_free(struct cmp *c)
{
	for (size_t i = 0; i < c->nm; i++) {
		free(c->m[i].name);
		free(c->m[i].v[0]);
		free(c->m[i].v[1]);
	}
	free(c->m);
	for (int v = 0; v < 2; v++) {
		free(c->var[v].args);
		free(c->var[v].words);
	}
	free(c);
}

int bench_compare_main(int argc, char **argv)
{
	struct cmp *c = calloc(1, sizeof(*c));
	int ret = 1, regressions;

	if (!c)
		return 1;
	if (parse_args(c, argc, argv) || run_rounds(c))
		goto out;
	if (!c->nm) {
		fputs("compare: no numbers under \"results\"\n", stderr);
		goto out;
	}
	regressions = report(c, stdout);
	ret = c->fail_on_regression && regressions ? 3 : 0;
	if (fflush(stdout))
		ret = 1;
out:
	cmp_free(c);
	return ret;
}

/* ---- latency dump for profiling/scripts/plots.sh ---- */

static const char *latency_path;
static bool latency_started;

void bench_latency_dump_to(const char *path)
{
	latency_path = path;
}

/*
 * Append up to 500 points of @op's latency CDF to the dump file as TSV
 * "op<TAB>latency_us<TAB>fraction": evenly spaced quantiles of the sorted
 * samples, plus the maximum. The file is truncated by the first dump of
 * the process. Single-threaded (called after a phase).
 */
void bench_latency_dump(const char *op, const double *sorted_us, size_t n)
{
	const char *path =
		latency_path ? latency_path : getenv("KVF_BENCH_LATENCY_DUMP");
	size_t points = n < 500 ? n : 500;
	FILE *f;

	if (!path || !*path || !n)
		return;
	f = fopen(path, latency_started ? "a" : "w");
	if (!f) {
		fprintf(stderr, "kvforge-bench: %s: %s\n", path,
			strerror(errno));
		return;
	}
	if (!latency_started)
		fputs("# op\tlatency_us\tfraction\n", f);
	latency_started = true;
	for (size_t k = 1; k <= points; k++) {
		size_t i = (k * n + points - 1) / points - 1;

		fprintf(f, "%s\t%.4f\t%.6f\n", op, sorted_us[i],
			(double)(i + 1) / (double)n);
	}
	fclose(f);
}
