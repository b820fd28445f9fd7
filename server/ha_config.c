// SPDX-License-Identifier: MIT
/*
 * server/ha_config.c - validate the HA flags and build the election's
 * options, so a master that cannot take part correctly refuses to start
 * with a message instead of publishing an address nobody can use.
 * Called once from main before any thread starts.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvforge/status.h>

#include "ha/etcd.h"
#include "server/ha_config.h"

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
