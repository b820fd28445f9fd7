// SPDX-License-Identifier: MIT
/*
 * master/ha_config.c - validate the HA flags and build the election's
 * options, so a master that cannot take part correctly refuses to start
 * with a message instead of publishing an address nobody can use.
 * Called once from main before any thread starts.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/engine.h>
#include <kvforge/status.h>

#include "ha/etcd.h"
#include "ha/replication.h"
#include "master/ha_config.h"

#define HA_TTL_MAX 3600 /* an hour: anything longer is a typo */

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return KVF_ERR_INVALID_ARGUMENT;
}

static bool wildcard(const char *host, size_t len)
{
	static const char *const any[] = {"0.0.0.0", "::", "[::]", "*", ""};

	for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++)
		if (strlen(any[i]) == len && !strncmp(host, any[i], len))
			return true;
	return false;
}

/* "host:port" with a usable host and a port in 1..65535. */
static int check_advertise(const char *a, char *err, size_t errlen)
{
	const char *colon = strrchr(a, ':');
	char *end;
	long port;

	if (!colon || (strchr(a, ':') != colon && a[0] != '['))
		return fail(err, errlen,
			    "--ha_advertise_address '%s' is not HOST:PORT "
			    "(an IPv6 host goes in brackets)",
			    a);
	port = strtol(colon + 1, &end, 10);
	if (*end || colon[1] == '\0' || port < 1 || port > 65535)
		return fail(err, errlen,
			    "the published leader address '%s' has no usable "
			    "port: clients could not dial it (give "
			    "--rpc_port or --ha_advertise_address=HOST:PORT)",
			    a);
	if (wildcard(a, (size_t)(colon - a)))
		return fail(err, errlen,
			    "the published leader address '%s' is a wildcard: "
			    "remote clients could not dial it; bind a real "
			    "address with --rpc_address or publish one with "
			    "--ha_advertise_address=HOST:PORT",
			    a);
	return KVF_OK;
}

int kvf_flags_ha_options(const struct kvf_master_flags *f,
			 struct kvf_ha_options *o, char *advertise, char *err,
			 size_t errlen)
{
	const char *ep = f->ha_backend_connstring[0] ? f->ha_backend_connstring
						     : f->etcd_endpoints;

	memset(o, 0, sizeof(*o));
	if (strcmp(f->ha_backend_type, "etcd"))
		return fail(err, errlen,
			    "--ha_backend_type=%s: only etcd is supported",
			    f->ha_backend_type);
	if (!strncmp(ep, "etcd://", 7))
		ep += 7;
	if (!ep[0])
		return fail(err, errlen,
			    "--enable_ha needs --etcd_endpoints (or "
			    "--ha_backend_connstring)");
	{
		struct kvf_etcd *e;

		if (kvf_etcd_new(ep, 0, &e))
			return fail(err, errlen,
				    "etcd endpoints '%s': expected "
				    "HOST:PORT[;HOST:PORT...] (plain http)",
				    ep);
		kvf_etcd_free(e);
	}
	if (f->ha_lease_ttl_s < 1 || f->ha_lease_ttl_s > HA_TTL_MAX)
		return fail(err, errlen, "--ha_lease_ttl must be 1..%d seconds",
			    HA_TTL_MAX);
	if (f->ha_advertise_address[0])
		snprintf(advertise, KVF_HA_ADDR_MAX, "%s",
			 f->ha_advertise_address);
	else if (strchr(f->rpc_address, ':'))
		snprintf(advertise, KVF_HA_ADDR_MAX, "[%s]:%u", f->rpc_address,
			 kvf_flags_rpc_port(f));
	else
		snprintf(advertise, KVF_HA_ADDR_MAX, "%s:%u", f->rpc_address,
			 kvf_flags_rpc_port(f));
	if (check_advertise(advertise, err, errlen))
		return KVF_ERR_INVALID_ARGUMENT;
	o->endpoints = ep;
	o->cluster_id = f->cluster_id;
	o->advertise = advertise;
	o->ttl_s = (unsigned)f->ha_lease_ttl_s;
	o->legacy_key = f->ha_publish_legacy_key;
	return KVF_OK;
}

/* The token file's contents, trailing whitespace (a newline) dropped. */
static int read_token(const char *path, char *token, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	size_t n;

	if (!fp)
		return fail(err, errlen, "--ha_token_file %s: %s", path,
			    strerror(errno));
	n = fread(token, 1, KVF_HA_TOKEN_MAX, fp);
	fclose(fp);
	if (n >= KVF_HA_TOKEN_MAX)
		return fail(err, errlen,
			    "--ha_token_file %s: longer than %d bytes", path,
			    KVF_HA_TOKEN_MAX - 1);
	while (n && isspace((unsigned char)token[n - 1]))
		n--;
	token[n] = '\0';
	if (!n || memchr(token, '\0', n))
		return fail(err, errlen,
			    "--ha_token_file %s: empty or not text", path);
	return KVF_OK;
}

int kvf_flags_repl_options(const struct kvf_master_flags *f,
			   const struct kvf_config *cfg,
			   const char *advertise, struct kvf_repl_options *o,
			   char *host, char *token, char *err, size_t errlen)
{
	const char *ep = f->ha_backend_connstring[0] ? f->ha_backend_connstring
						     : f->etcd_endpoints;
	const char *colon = strrchr(advertise, ':');
	size_t hl = colon ? (size_t)(colon - advertise) : 0;

	memset(o, 0, sizeof(*o));
	token[0] = '\0';
	if (!f->data_dir[0] || !cfg->data_dir)
		return fail(err, errlen,
			    "--enable_ha needs --data-dir: a standby keeps the "
			    "leader's records in its own journal");
	if (cfg->durability == KVF_DURABILITY_NONE)
		return fail(err, errlen,
			    "--enable_ha needs a journal: --durability bounded "
			    "or strict");
	if (f->ha_replication_port < 0 || f->ha_replication_port > 65535)
		return fail(err, errlen,
			    "--ha_replication_port must be 0..65535");
	if (f->ha_sync_standbys > 64)
		return fail(err, errlen, "--ha_sync_standbys must be 0..64");
	if (f->ha_sync_timeout_ms < 1 || f->ha_sync_timeout_ms > 3600000)
		return fail(err, errlen,
			    "--ha_sync_timeout_ms must be 1..3600000");
	if (f->ha_token_file[0] &&
	    read_token(f->ha_token_file, token, err, errlen))
		return KVF_ERR_INVALID_ARGUMENT;
	if (!strncmp(ep, "etcd://", 7))
		ep += 7;
	/* the published RPC host, brackets of an IPv6 host dropped */
	if (hl >= 2 && advertise[0] == '[' && advertise[hl - 1] == ']')
		snprintf(host, KVF_HA_ADDR_MAX, "%.*s", (int)(hl - 2),
			 advertise + 1);
	else
		snprintf(host, KVF_HA_ADDR_MAX, "%.*s", (int)hl, advertise);
	o->endpoints = ep;
	o->cluster_id = f->cluster_id;
	o->token = token;
	o->member = advertise;
	o->bind_host = f->rpc_address;
	o->port = (uint16_t)f->ha_replication_port;
	o->advertise_host = host;
	o->data_dir = cfg->data_dir;
	o->jcfg.dir = cfg->data_dir;
	o->jcfg.durability = cfg->durability;
	o->jcfg.sync_interval_ms = cfg->sync_interval_ms;
	o->jcfg.writemap = cfg->journal_writemap;
	o->jcfg.wal_bytes = cfg->journal_wal_bytes;
	o->sync_standbys = (unsigned)f->ha_sync_standbys;
	o->sync_timeout_ms = (unsigned)f->ha_sync_timeout_ms;
	o->sync_degrade = f->ha_sync_degrade;
	o->backlog_bytes = f->ha_replication_backlog_bytes;
	return KVF_OK;
}
