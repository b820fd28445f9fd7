// SPDX-License-Identifier: MIT
/*
 * master/flags.c - mooncake_master's flags, KVForge's own, and the JSON
 * config file.
 *
 * Design: one static table, one row per flag (name, kind, where it lives
 * in struct kvf_master_flags, its default as text, help). Defaults are
 * applied by parsing the default text through the same code as a user's
 * value, the config file goes through the same setter as the command
 * line, and --help prints the table; so a flag's spelling, unit and
 * default exist in exactly one place.
 *
 * Units follow upstream: --default_kv_lease_ttl and the soft pin TTLs are
 * milliseconds, --client_ttl and the put timeouts seconds. A duration
 * also accepts a unit suffix (ms, s, m, h), converted to the flag's unit;
 * a value that does not convert to a whole number of units is refused.
 *
 * Unknown flags: launch scripts written for mooncake_master carry flags
 * for features KVForge has no use for (HA, offload, CXL, snapshots). They
 * are accepted, their names collected, and one warning names them all
 * after parsing. "--name value" of an unknown flag consumes the next
 * argument when it does not start with '-' (its type is unknown; the
 * master takes no positional arguments, so nothing is lost).
 *
 * Not thread-safe: called once from main before any thread starts.
 */
#include "config.h"

#include "master/flags.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvforge/status.h>

enum flag_kind {
	FLAG_STR,
	FLAG_I64,
	FLAG_U64,
	FLAG_DBL,
	FLAG_BOOL,
	FLAG_MS,  /* u64 milliseconds, suffixes accepted */
	FLAG_SEC, /* u64 seconds, suffixes accepted */
};

struct flag_def {
	const char *name;
	enum flag_kind kind;
	size_t off;
	ssize_t set_off; /* offset of a "given" bool, or -1 */
	const char *def;
	const char *help;
};

#define F(field) offsetof(struct kvf_master_flags, field)
#define NOSET ((ssize_t)-1)

static const struct flag_def flag_table[] = {
	/* upstream mooncake_master */
	{"rpc_address", FLAG_STR, F(rpc_address), NOSET, "127.0.0.1",
	 "address the RPC server binds (upstream: 0.0.0.0)"},
	{"rpc_port", FLAG_I64, F(rpc_port), F(rpc_port_set), "50051",
	 "RPC port; 0 picks an ephemeral port, printed on stdout; below 0 = "
	 "use --port"},
	{"port", FLAG_I64, F(port), NOSET, "50051",
	 "deprecated spelling of --rpc_port (used when --rpc_port is not "
	 "given)"},
	{"rpc_thread_num", FLAG_I64, F(rpc_thread_num), F(rpc_thread_num_set),
	 "0",
	 "RPC event-loop threads, at most 256; 0 or less = min(online CPUs, "
	 "--max_threads)"},
	{"max_threads", FLAG_I64, F(max_threads), NOSET, "4",
	 "deprecated: thread cap when --rpc_thread_num is 0"},
	{"rpc_conn_timeout_seconds", FLAG_I64, F(rpc_conn_timeout_seconds),
	 NOSET, "0",
	 "idle connection timeout in seconds; 0 or less = use "
	 "--idle_timeout_sec"},
	{"rpc_enable_tcp_no_delay", FLAG_BOOL, F(rpc_enable_tcp_no_delay),
	 NOSET, "true", "set TCP_NODELAY on RPC connections"},
	{"enable_metric_reporting", FLAG_BOOL, F(enable_metric_reporting),
	 NOSET, "true", "serve /metrics, /metrics/summary and /health"},
	{"metrics_port", FLAG_I64, F(metrics_port), NOSET, "9003",
	 "HTTP metrics port; 0 picks an ephemeral port"},
	{"metrics_host", FLAG_STR, F(metrics_host), F(metrics_host_set),
	 "127.0.0.1",
	 "address the metrics server binds (default: --rpc_address)"},
	{"default_kv_lease_ttl", FLAG_MS, F(default_kv_lease_ttl_ms), NOSET,
	 "10000", "read lease granted by Get/Exist, ms; 0 = none"},
	{"default_kv_soft_pin_ttl", FLAG_MS, F(default_kv_soft_pin_ttl_ms),
	 NOSET, "1800000", "soft pin lifetime, ms"},
	{"max_kv_soft_pin_ttl", FLAG_MS, F(max_kv_soft_pin_ttl_ms), NOSET,
	 "86400000", "largest soft_pin_ttl_ms a put may ask for, ms"},
	{"allow_evict_soft_pinned_objects", FLAG_BOOL,
	 F(allow_evict_soft_pinned_objects), NOSET, "true",
	 "soft-pinned objects may be evicted (always last)"},
	{"eviction_ratio", FLAG_DBL, F(eviction_ratio), NOSET, "0.05",
	 "fraction of capacity one eviction pass frees, 0..1; 0 = no eviction"},
	{"eviction_high_watermark_ratio", FLAG_DBL,
	 F(eviction_high_watermark_ratio), NOSET, "0.90",
	 "eviction starts above this used/total ratio, 0..1"},
	{"client_ttl", FLAG_SEC, F(client_ttl_s), NOSET, "10",
	 "a client without Ping this long is dead, s"},
	{"allocation_strategy", FLAG_STR, F(allocation_strategy),
	 F(allocation_strategy_set), "random",
	 "upstream placement name: random | free_ratio_first"},
	{"memory_allocator", FLAG_STR, F(memory_allocator), NOSET, "offset",
	 "accepted for compatibility; KVForge has one allocator"},
	{"put_start_discard_timeout_sec", FLAG_SEC,
	 F(put_start_discard_timeout_sec), NOSET, "30",
	 "a put unfinished this long may be pre-empted, s"},
	{"put_start_release_timeout_sec", FLAG_SEC,
	 F(put_start_release_timeout_sec), NOSET, "600",
	 "buffers of a pre-empted put are freed after this, s"},
	{"enable_http_metadata_server", FLAG_BOOL,
	 F(enable_http_metadata_server), NOSET, "false",
	 "serve the transfer engine's HTTP metadata store"},
	{"http_metadata_server_port", FLAG_I64, F(http_metadata_server_port),
	 NOSET, "8080", "HTTP metadata server port"},
	{"http_metadata_server_host", FLAG_STR, F(http_metadata_server_host),
	 NOSET, "127.0.0.1",
	 "address the metadata server binds (upstream: 0.0.0.0)"},
	{"http_metadata_server_max_bytes", FLAG_U64,
	 F(http_metadata_server_max_bytes), NOSET, "268435456",
	 "metadata store's keys + values at most, bytes (0: no limit)"},
	{"root_fs_dir", FLAG_STR, F(root_fs_dir), NOSET, "",
	 "storage root reported by GetFsdir/GetStorageConfig"},
	{"cluster_id", FLAG_STR, F(cluster_id), NOSET, "mooncake_cluster",
	 "cluster id, appended to --root_fs_dir in GetFsdir"},
	{"enable_disk_eviction", FLAG_BOOL, F(enable_disk_eviction), NOSET,
	 "true", "reported by GetStorageConfig"},
	{"quota_bytes", FLAG_U64, F(quota_bytes), NOSET, "0",
	 "reported by GetStorageConfig"},
	{"config_path", FLAG_STR, F(config_path), NOSET, "",
	 "JSON file of the same keys; the command line overrides it"},
	{"enable_ha", FLAG_BOOL, F(enable_ha), NOSET, "false",
	 "elect one leader among masters through etcd (docs/ha.md)"},
	{"etcd_endpoints", FLAG_STR, F(etcd_endpoints), NOSET, "",
	 "etcd endpoints host:port, ';' or ',' separated"},
	{"ha_backend_type", FLAG_STR, F(ha_backend_type), NOSET, "etcd",
	 "HA backend; only etcd"},
	{"ha_backend_connstring", FLAG_STR, F(ha_backend_connstring), NOSET,
	 "", "HA backend endpoints (default: --etcd_endpoints)"},
	/* KVForge's own */
	{"data-dir", FLAG_STR, F(data_dir), NOSET, "",
	 "journal directory; empty = metadata in memory only"},
	{"durability", FLAG_STR, F(durability), NOSET, "bounded",
	 "bounded | strict | none (none without --data-dir)"},
	{"index", FLAG_STR, F(index), NOSET, "bucket", "bucket | lfht"},
	{"placement", FLAG_STR, F(placement), F(placement_set),
	 "fragmentation_aware",
	 "fragmentation_aware | random | free_ratio_first"},
	{"mooncake-abi", FLAG_STR, F(mooncake_abi), NOSET, "",
	 "Mooncake revision spoken; empty = the newest tabled"},
	{"max_request_bytes", FLAG_U64, F(max_request_bytes), NOSET, "8388608",
	 "largest request body + attachment accepted, bytes"},
	{"max_connections", FLAG_U64, F(max_connections), NOSET, "4096",
	 "open RPC connections at most; more are closed at accept"},
	{"idle_timeout_sec", FLAG_U64, F(idle_timeout_sec), NOSET, "3600",
	 "close a connection silent this long, s"},
	{"request_timeout_sec", FLAG_U64, F(request_timeout_sec), NOSET, "30",
	 "close a connection whose request stays half-sent this long, s"},
	{"expected_objects", FLAG_U64, F(expected_objects), NOSET, "1000000",
	 "objects the index is presized for"},
	{"checkpoint_records", FLAG_U64, F(checkpoint_records), NOSET, "0",
	 "fold the journal's log into its image at this many records, or "
	 "half the image's objects if more; 0 = 1000000"},
	{"enable_rdma", FLAG_BOOL, F(enable_rdma), NOSET, "false",
	 "also accept RDMA handshakes on the RPC port (as MC_RPC_PROTOCOL=rdma)"},
	{"ha_lease_ttl", FLAG_SEC, F(ha_lease_ttl_s), NOSET, "5",
	 "TTL of the leader's etcd lease, s"},
	{"ha_advertise_address", FLAG_STR, F(ha_advertise_address), NOSET, "",
	 "host:port published as the leader (default: --rpc_address:port)"},
	{"ha_replication_port", FLAG_I64, F(ha_replication_port), NOSET, "0",
	 "port standbys fetch the journal from (on --rpc_address); 0 = any, "
	 "published in etcd"},
	{"ha_token_file", FLAG_STR, F(ha_token_file), NOSET, "",
	 "file holding the secret every master of the cluster shares"},
	{"ha_sync_standbys", FLAG_U64, F(ha_sync_standbys), NOSET, "1",
	 "standbys that must have a record before it is acknowledged; 0 = async"},
	{"ha_sync_timeout_ms", FLAG_U64, F(ha_sync_timeout_ms), NOSET, "10000",
	 "longest a mutation waits for its sync standbys, ms"},
	{"ha_sync_degrade", FLAG_BOOL, F(ha_sync_degrade), NOSET, "false",
	 "past the timeout acknowledge without them (else: refuse mutations)"},
	{"ha_replication_backlog_bytes", FLAG_U64,
	 F(ha_replication_backlog_bytes), NOSET, "268435456",
	 "records kept in memory for standbys that reconnect, bytes"},
	{"ha_publish_legacy_key", FLAG_BOOL, F(ha_publish_legacy_key), NOSET,
	 "false",
	 "also publish the leader under mooncake-store/master_view "
	 "(clients <= v0.3.7)"},
	{"help", FLAG_BOOL, F(help), NOSET, "false", "print this list"},
};

#define NFLAGS (sizeof(flag_table) / sizeof(flag_table[0]))

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* gflags treats '-' and '_' in names as distinct; so do we, except that
 * KVForge's own dashed names are also accepted with underscores. */
static bool name_eq(const char *def, const char *s, size_t n)
{
	size_t i;

	if (strlen(def) != n)
		return false;
	for (i = 0; i < n; i++) {
		char a = def[i], b = s[i];

		if (a == '-' && b == '_')
			continue;
		if (a != b)
			return false;
	}
	return true;
}

static const struct flag_def *find_flag(const char *name, size_t n)
{
	for (size_t i = 0; i < NFLAGS; i++)
		if (name_eq(flag_table[i].name, name, n))
			return &flag_table[i];
	if (name_eq("client_live_ttl_sec", name, n))
		return find_flag("client_ttl", strlen("client_ttl"));
	return NULL;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"true", "1", "yes", "t", "y"};
	static const char *const no[] = {"false", "0", "no", "f", "n"};

	for (size_t i = 0; i < 5; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static int parse_i64(const char *v, int64_t *out)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || end == v || *end)
		return -1;
	*out = x;
	return 0;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;

	while (isspace((unsigned char)*v))
		v++;
	if (*v == '-')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end)
		return -1;
	*out = x;
	return 0;
}

/*
 * A duration: digits and an optional suffix (ms, s, m, h); a bare number is
 * in @unit_ms units. Stores the value in @unit_ms units, refusing values
 * that are not whole units or overflow.
 */
static int parse_duration(const char *v, uint64_t unit_ms, uint64_t *out)
{
	static const struct {
		const char *sfx;
		uint64_t ms;
	} sfx[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
	uint64_t n, mult = unit_ms, ms;
	char digits[32];
	size_t len = strspn(v, "0123456789");

	if (!len || len >= sizeof(digits))
		return -1;
	memcpy(digits, v, len);
	digits[len] = 0;
	if (parse_u64(digits, &n))
		return -1;
	if (v[len]) {
		size_t i;

		for (i = 0; i < 4; i++)
			if (!strcmp(v + len, sfx[i].sfx))
				break;
		if (i == 4)
			return -1;
		mult = sfx[i].ms;
	}
	if (n && mult > UINT64_MAX / n)
		return -1;
	ms = n * mult;
	/* The engine counts in ns: refuse what would wrap there (over 584
	 * years; upstream's chrono arithmetic wraps there too). */
	if (ms % unit_ms || ms > UINT64_MAX / 1000000)
		return -1;
	*out = ms / unit_ms;
	return 0;
}

static int set_value(struct kvf_master_flags *f, const struct flag_def *d,
		     const char *v, char *err, size_t errlen)
{
	char *base = (char *)f + d->off;
	int bad = 0;

	switch (d->kind) {
	case FLAG_STR:
		if (strlen(v) >= KVF_FLAGS_STR_MAX) {
			set_err(err, errlen, "--%s: value longer than %d bytes",
				d->name, KVF_FLAGS_STR_MAX - 1);
			return KVF_ERR_INVALID_ARGUMENT;
		}
		strcpy(base, v);
		break;
	case FLAG_I64:
		bad = parse_i64(v, (int64_t *)base);
		break;
	case FLAG_U64:
		bad = parse_u64(v, (uint64_t *)base);
		break;
	case FLAG_DBL: {
		char *end;
		double x;

		errno = 0;
		x = strtod(v, &end);
		bad = errno || end == v || *end || !isfinite(x);
		if (!bad)
			*(double *)base = x;
		break;
	}
	case FLAG_BOOL:
		bad = parse_bool(v, (bool *)base);
		break;
	case FLAG_MS:
		bad = parse_duration(v, 1, (uint64_t *)base);
		break;
	case FLAG_SEC:
		bad = parse_duration(v, 1000, (uint64_t *)base);
		break;
	}
	if (bad) {
		set_err(err, errlen, "--%s: invalid value '%s'", d->name, v);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (d->set_off != NOSET)
		*(bool *)((char *)f + d->set_off) = true;
	return KVF_OK;
}

void kvf_flags_defaults(struct kvf_master_flags *f)
{
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag_def *d = &flag_table[i];

		if (set_value(f, d, d->def, NULL, 0))
			abort(); /* a bad default is a build bug; tested */
		if (d->set_off != NOSET)
			*(bool *)((char *)f + d->set_off) = false;
	}
}

/* The names of unknown flags, reported once after parsing. */
struct ignored {
	char names[1024];
	size_t len;
	unsigned count;
};

static void note_ignored(struct ignored *ig, const char *name, size_t n)
{
	ig->count++;
	if (ig->len + n + 3 >= sizeof(ig->names))
		return;
	if (ig->len) {
		memcpy(ig->names + ig->len, ", ", 2);
		ig->len += 2;
	}
	memcpy(ig->names + ig->len, name, n);
	ig->len += n;
	ig->names[ig->len] = 0;
}

static void report_ignored(const struct ignored *ig, const char *where)
{
	if (ig->count)
		fprintf(stderr,
			"kvforge-master: warning: %s: ignoring %u flag%s "
			"KVForge does not use: %s\n",
			where, ig->count, ig->count > 1 ? "s" : "", ig->names);
}

/* ---- JSON config file --------------------------------------------------- */

/*
 * A strict reader for one flat JSON object: keys are strings, values are
 * strings, numbers, true or false. Numbers are kept as their text and go
 * through the flag's own parser, so 0.05 and 10000 mean what they mean on
 * the command line.
 */
struct json {
	const char *p;
	const char *start;
	char *err;
	size_t errlen;
};

static void json_ws(struct json *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static int json_fail(struct json *j, const char *what)
{
	set_err(j->err, j->errlen, "config: %s at offset %zu", what,
		(size_t)(j->p - j->start));
	return KVF_ERR_INVALID_ARGUMENT;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A JSON string into @out (at most @cap - 1 bytes, NUL-terminated). */
static int json_string(struct json *j, char *out, size_t cap)
{
	size_t n = 0;

	if (*j->p != '"')
		return json_fail(j, "expected a string");
	j->p++;
	for (;;) {
		unsigned c = (unsigned char)*j->p++;

		if (c == '"')
			break;
		if (c < 0x20)
			return json_fail(j, "unterminated string");
		if (c == '\\') {
			char e = *j->p++;
			static const char from[] = "\"\\/bfnrt";
			static const char to[] = "\"\\/\b\f\n\r\t";
			const char *k = e ? strchr(from, e) : NULL;

			if (k) {
				c = (unsigned char)to[k - from];
			} else if (e == 'u') {
				int h[4];

				c = 0;
				for (int i = 0; i < 4; i++) {
					h[i] = hexval(j->p[i]);
					if (h[i] < 0)
						return json_fail(j, "bad \\u");
					c = c * 16 + (unsigned)h[i];
				}
				j->p += 4;
				/* Flag values are ASCII; refuse the rest
				 * rather than half-decode surrogates. */
				if (c == 0 || c > 0x7f)
					return json_fail(j, "non-ASCII \\u");
			} else {
				return json_fail(j, "bad escape");
			}
		}
		if (n + 1 >= cap)
			return json_fail(j, "string too long");
		out[n++] = (char)c;
	}
	out[n] = 0;
	return KVF_OK;
}

/* A scalar value's text (a string's contents, a number, true/false). */
static int json_scalar(struct json *j, char *out, size_t cap, bool *is_str)
{
	size_t n;

	*is_str = *j->p == '"';
	if (*is_str)
		return json_string(j, out, cap);
	if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
		n = j->p[0] == 't' ? 4 : 5;
	} else {
		n = strspn(j->p, "+-0123456789.eE");
		if (!n)
			return json_fail(j, "expected a value");
	}
	if (n >= cap)
		return json_fail(j, "value too long");
	memcpy(out, j->p, n);
	out[n] = 0;
	j->p += n;
	return KVF_OK;
}

static int json_member(struct kvf_master_flags *f, struct json *j,
		       struct ignored *ig)
{
	char key[128], val[KVF_FLAGS_STR_MAX];
	const struct flag_def *d;
	bool is_str;
	int ret;

	ret = json_string(j, key, sizeof(key));
	if (ret)
		return ret;
	json_ws(j);
	if (*j->p++ != ':')
		return json_fail(j, "expected ':'");
	json_ws(j);
	ret = json_scalar(j, val, sizeof(val), &is_str);
	if (ret)
		return ret;
	d = find_flag(key, strlen(key));
	if (!d || !strcmp(d->name, "config_path") || !strcmp(d->name, "help")) {
		note_ignored(ig, key, strlen(key));
		return KVF_OK;
	}
	/* Kinds must match: strings for text flags, bare true/false for
	 * booleans; numbers may also be quoted ("10s" needs quotes). */
	if ((d->kind == FLAG_STR && !is_str) ||
	    (d->kind == FLAG_BOOL && is_str)) {
		set_err(j->err, j->errlen,
			"config: key '%s' has the wrong type", key);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	ret = set_value(f, d, val, j->err, j->errlen);
	return ret;
}

int kvf_flags_load_json(struct kvf_master_flags *f, const char *text, char *err,
			size_t errlen)
{
	struct json j = {
		.p = text, .start = text, .err = err, .errlen = errlen};
	struct ignored ig = {.len = 0};
	int ret;

	json_ws(&j);
	if (*j.p++ != '{')
		return json_fail(&j, "expected '{'");
	json_ws(&j);
	if (*j.p == '}') {
		j.p++;
	} else {
		for (;;) {
			json_ws(&j);
			ret = json_member(f, &j, &ig);
			if (ret)
				return ret;
			json_ws(&j);
			if (*j.p == ',') {
				j.p++;
				continue;
			}
			if (*j.p++ != '}')
				return json_fail(&j, "expected ',' or '}'");
			break;
		}
	}
	json_ws(&j);
	if (*j.p)
		return json_fail(&j, "trailing characters");
	report_ignored(&ig, "config file");
	return KVF_OK;
}

static int load_config_file(struct kvf_master_flags *f, const char *path,
			    char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	char *text = NULL;
	long size;
	int ret = KVF_ERR_IO;

	if (!fp) {
		set_err(err, errlen, "--config_path %s: %s", path,
			strerror(errno));
		return KVF_ERR_IO;
	}
	if (fseek(fp, 0, SEEK_END) || (size = ftell(fp)) < 0 ||
	    size > (1 << 20) || fseek(fp, 0, SEEK_SET)) {
		set_err(err, errlen,
			"--config_path %s: unreadable or over 1 MiB", path);
		goto out;
	}
	text = malloc((size_t)size + 1);
	if (!text || fread(text, 1, (size_t)size, fp) != (size_t)size) {
		set_err(err, errlen, "--config_path %s: read failed", path);
		goto out;
	}
	text[size] = 0;
	if (strlen(text) != (size_t)size) {
		set_err(err, errlen, "--config_path %s: NUL byte in file",
			path);
		ret = KVF_ERR_INVALID_ARGUMENT;
		goto out;
	}
	ret = kvf_flags_load_json(f, text, err, errlen);
out:
	free(text);
	fclose(fp);
	return ret;
}

/* ---- command line ------------------------------------------------------- */

/*
 * Split argv[*i] ("--name", "--name=value", "-name") into name and inline
 * value. Returns false for a positional argument.
 */
static bool split_arg(const char *a, const char **name, size_t *n,
		      const char **val)
{
	const char *eq;

	if (a[0] != '-' || !a[1])
		return false;
	a += a[1] == '-' ? 2 : 1;
	eq = strchr(a, '=');
	*name = a;
	*n = eq ? (size_t)(eq - a) : strlen(a);
	*val = eq ? eq + 1 : NULL;
	return *n > 0;
}

/* Apply one flag; *i advances past a separate value argument. */
static int apply_arg(struct kvf_master_flags *f, int argc, char **argv, int *i,
		     struct ignored *ig, char *err, size_t errlen)
{
	const char *name, *val;
	const struct flag_def *d;
	size_t n;

	if (!split_arg(argv[*i], &name, &n, &val)) {
		set_err(err, errlen, "unexpected argument '%s'", argv[*i]);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	d = find_flag(name, n);
	if (!d && !val && n > 2 && !strncmp(name, "no", 2)) {
		d = find_flag(name + 2, n - 2);
		if (d && d->kind == FLAG_BOOL)
			return set_value(f, d, "false", err, errlen);
		d = NULL;
	}
	if (!d) {
		note_ignored(ig, name, n);
		if (!val && *i + 1 < argc && argv[*i + 1][0] != '-')
			(*i)++;
		return KVF_OK;
	}
	if (!val && d->kind == FLAG_BOOL)
		val = "true";
	if (!val) {
		if (*i + 1 >= argc) {
			set_err(err, errlen, "--%s needs a value", d->name);
			return KVF_ERR_INVALID_ARGUMENT;
		}
		val = argv[++(*i)];
	}
	return set_value(f, d, val, err, errlen);
}

/* Find --config_path anywhere on the line (it is applied first). */
static const char *find_config_path(int argc, char **argv)
{
	const char *path = NULL;

	for (int i = 1; i < argc; i++) {
		const char *name, *val;
		size_t n;

		if (!split_arg(argv[i], &name, &n, &val) ||
		    !name_eq("config_path", name, n))
			continue;
		if (!val && i + 1 < argc)
			val = argv[++i];
		path = val;
	}
	return path;
}

static int check_ranges(const struct kvf_master_flags *f, char *err,
			size_t errlen)
{
	if (f->rpc_port < INT32_MIN || f->rpc_port > 65535 || f->port < 0 ||
	    f->port > 65535 || f->metrics_port < 0 || f->metrics_port > 65535 ||
	    f->http_metadata_server_port < 0 ||
	    f->http_metadata_server_port > 65535) {
		set_err(err, errlen,
			"a port is outside 0..65535 (--rpc_port: below 0 "
			"means --port)");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (f->rpc_thread_num < INT32_MIN || f->rpc_thread_num > 256 ||
	    f->max_threads < 1) {
		set_err(err, errlen,
			"--rpc_thread_num must be at most 256 (0 or less: "
			"--max_threads), --max_threads at least 1");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (f->eviction_ratio < 0 || f->eviction_ratio > 1 ||
	    f->eviction_high_watermark_ratio < 0 ||
	    f->eviction_high_watermark_ratio > 1) {
		set_err(err, errlen, "eviction ratios must be within 0..1");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (!f->client_ttl_s) {
		set_err(err, errlen, "--client_ttl must be positive");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	/* As upstream: a pre-empted put's buffers must outlive its discard
	 * timeout, or a slow writer could still be writing into them. */
	if (f->put_start_release_timeout_sec <=
	    f->put_start_discard_timeout_sec) {
		set_err(err, errlen,
			"--put_start_release_timeout_sec must be larger than "
			"--put_start_discard_timeout_sec");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (f->max_request_bytes < 4096 || f->max_request_bytes > (1u << 30)) {
		set_err(err, errlen, "--max_request_bytes must be 4096..1 GiB");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (!f->max_connections || !f->idle_timeout_sec ||
	    !f->request_timeout_sec || f->rpc_conn_timeout_seconds < INT32_MIN ||
	    f->rpc_conn_timeout_seconds > INT32_MAX) {
		set_err(err, errlen,
			"--max_connections and the timeouts must "
			"be positive");
		return KVF_ERR_INVALID_ARGUMENT;
	}
	return KVF_OK;
}

int kvf_flags_parse(struct kvf_master_flags *f, int argc, char **argv,
		    char *err, size_t errlen)
{
	struct ignored ig = {.len = 0};
	const char *cfg = find_config_path(argc, argv);
	int ret;

	if (cfg && *cfg) {
		ret = load_config_file(f, cfg, err, errlen);
		if (ret)
			return ret;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		ret = apply_arg(f, argc, argv, &i, &ig, err, errlen);
		if (ret)
			return ret;
	}
	report_ignored(&ig, "command line");
	return check_ranges(f, err, errlen);
}

/* ---- translation -------------------------------------------------------- */

static int pick(const char *v, const char *const *names, const int *vals,
		size_t n, int *out)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v, names[i])) {
			*out = vals[i];
			return 0;
		}
	return -1;
}

static int engine_placement(const struct kvf_master_flags *f, int *out,
			    char *err, size_t errlen)
{
	static const char *const names[] = {"fragmentation_aware", "random",
					    "free_ratio_first"};
	static const int vals[] = {KVF_PLACEMENT_FRAGMENTATION_AWARE,
				   KVF_PLACEMENT_RANDOM,
				   KVF_PLACEMENT_FREE_RATIO_FIRST};
	const char *v = f->placement;

	if (!f->placement_set && f->allocation_strategy_set)
		v = f->allocation_strategy;
	if (pick(v, names, vals, 3, out)) {
		set_err(err, errlen,
			"unknown placement '%s' (fragmentation_aware, random, "
			"free_ratio_first)",
			v);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	return KVF_OK;
}

int kvf_flags_engine_config(const struct kvf_master_flags *f,
			    struct kvf_config *cfg, char *err, size_t errlen)
{
	static const char *const dnames[] = {"bounded", "strict", "none"};
	static const int dvals[] = {KVF_DURABILITY_BOUNDED,
				    KVF_DURABILITY_STRICT, KVF_DURABILITY_NONE};
	static const char *const inames[] = {"bucket", "lfht"};
	static const int ivals[] = {KVF_INDEX_BUCKET, KVF_INDEX_LFHT};
	int durability, index, placement, ret;

	kvf_config_init(cfg);
	if (pick(f->durability, dnames, dvals, 3, &durability)) {
		set_err(err, errlen, "unknown --durability '%s'",
			f->durability);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	if (pick(f->index, inames, ivals, 2, &index)) {
		set_err(err, errlen, "unknown --index '%s'", f->index);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	ret = engine_placement(f, &placement, err, errlen);
	if (ret)
		return ret;
	/* Without a data directory the metadata can only live in memory. */
	if (!f->data_dir[0])
		durability = KVF_DURABILITY_NONE;
	cfg->data_dir = f->data_dir[0] ? f->data_dir : NULL;
	cfg->durability = (enum kvf_durability)durability;
	cfg->index = (enum kvf_index_kind)index;
	cfg->placement = (enum kvf_placement_strategy)placement;
	cfg->lease_ttl_ms = f->default_kv_lease_ttl_ms;
	cfg->client_ttl_ms = f->client_ttl_s * 1000;
	cfg->put_discard_timeout_ms = f->put_start_discard_timeout_sec * 1000;
	cfg->put_release_timeout_ms = f->put_start_release_timeout_sec * 1000;
	cfg->soft_pin_ttl_ms = f->default_kv_soft_pin_ttl_ms;
	cfg->eviction_ratio = f->eviction_ratio;
	cfg->eviction_high_watermark = f->eviction_high_watermark_ratio;
	if (f->expected_objects)
		cfg->expected_objects = f->expected_objects;
	cfg->journal_checkpoint_records = f->checkpoint_records;
	return KVF_OK;
}

unsigned kvf_flags_rpc_threads(const struct kvf_master_flags *f)
{
	long cpus;

	if (f->rpc_thread_num > 0)
		return (unsigned)f->rpc_thread_num;
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 1)
		cpus = 1;
	return (unsigned)(cpus < f->max_threads ? cpus : f->max_threads);
}

uint16_t kvf_flags_rpc_port(const struct kvf_master_flags *f)
{
	/* Upstream takes --rpc_port only above 0; KVForge also takes an
	 * explicit 0 (an ephemeral port), but below 0 means --port too. */
	return (uint16_t)(f->rpc_port_set && f->rpc_port >= 0 ? f->rpc_port
							       : f->port);
}

void kvf_flags_help(FILE *out)
{
	static const char *const kind[] = {"string", "int", "uint", "double",
					   "bool",   "ms",  "s"};

	fprintf(out, "usage: kvforge-master [--flag=value ...]\n\n"
		     "Flags (gflags syntax: --name=value, --name value, "
		     "--bool / --nobool):\n");
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag_def *d = &flag_table[i];

		fprintf(out, "  --%-32s %-6s default \"%s\"\n      %s\n",
			d->name, kind[d->kind], d->def, d->help);
	}
	fprintf(out, "\nDurations (ms, s) also take a suffix: 500ms, 10s, 30m, "
		     "24h.\nFlags of mooncake_master not listed are accepted "
		     "and ignored with a warning.\n");
}
