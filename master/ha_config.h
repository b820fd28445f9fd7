/* SPDX-License-Identifier: MIT */
/*
 * master/ha_config.h - kvforge-master's HA flags turned into an election.
 */
#ifndef KVF_SERVER_HA_CONFIG_H
#define KVF_SERVER_HA_CONFIG_H

#include <stddef.h>

#include "ha/election.h"
#include "master/flags.h"

/* Room for "[v6 address]:port" or "host:port". */
#define KVF_HA_ADDR_MAX (KVF_FLAGS_STR_MAX + 16)

/**
 * kvf_flags_ha_options() - the election options --enable_ha asks for.
 * @f: parsed flags (--enable_ha set).
 * @o: filled; its strings point into @f and @advertise.
 * @advertise: receives the "host:port" to publish (KVF_HA_ADDR_MAX).
 * @err, @errlen: a message on failure.
 *
 * The endpoints are --ha_backend_connstring, else --etcd_endpoints (an
 * "etcd://" prefix is dropped, as upstream's client form). The published
 * address is --ha_advertise_address, else --rpc_address and the RPC
 * port; a wildcard host (0.0.0.0, ::) or port 0 is refused, since no
 * client could dial it.
 *
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT with @err filled.
 */
int kvf_flags_ha_options(const struct kvf_master_flags *f,
			 struct kvf_ha_options *o, char *advertise, char *err,
			 size_t errlen);

struct kvf_config;
struct kvf_repl_options;

/* Room for the token (a file's contents, trailing whitespace dropped). */
#define KVF_HA_TOKEN_MAX 1024

/**
 * kvf_flags_repl_options() - the replication options --enable_ha asks for.
 * @f: parsed flags (--enable_ha set). @cfg: the engine configuration the
 *	flags give (its journal settings are the standby's).
 * @advertise: the published RPC address (kvf_flags_ha_options()).
 * @o: filled; strings point into @f, @advertise, @host and @token.
 * @host: receives the host standbys dial (KVF_HA_ADDR_MAX).
 * @token: receives --ha_token_file's contents (KVF_HA_TOKEN_MAX).
 * @err, @errlen: a message on failure.
 *
 * --data-dir is required (a standby keeps the leader's records in its
 * own journal); the token file must be readable and hold at most
 * KVF_HA_TOKEN_MAX - 1 bytes.
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT with @err filled.
 */
int kvf_flags_repl_options(const struct kvf_master_flags *f,
			   const struct kvf_config *cfg,
			   const char *advertise, struct kvf_repl_options *o,
			   char *host, char *token, char *err, size_t errlen);

#endif /* KVF_SERVER_HA_CONFIG_H */
