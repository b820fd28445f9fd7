/* SPDX-License-Identifier: MIT */
/*
 * http/http.h - kvforge-master's two small HTTP/1.1 servers.
 *
 * The metrics server answers GET /metrics (Prometheus text), GET
 * /metrics/summary and GET /health on --metrics_port. The metadata server
 * is the transfer engine's HTTP metadata key-value service that upstream's
 * mooncake_master serves with --enable_http_metadata_server on
 * --http_metadata_server_port: GET, PUT and DELETE of /metadata?key=K,
 * and GET /health (docs/metrics.md gives the status codes and bodies).
 *
 * Each server runs its own thread with a non-blocking poll() loop:
 * keep-alive, bounded request line, header count, body size, connection
 * count and idle time, and 400/404/405/413/417/431/501/503 answers for
 * what it refuses (http/http.c says which when). Neither touches the
 * RPC workers, so a slow scraper never delays an RPC.
 *
 * Contract between the server and the HTTP side: change only additively.
 */
#ifndef KVF_SERVER_HTTP_H
#define KVF_SERVER_HTTP_H

#include <stdint.h>

struct kvf_http_server;
struct kvf_metrics;
struct kvf_metastore;

/**
 * struct kvf_http_options - where to listen.
 * @host: address to bind: numeric IPv4 or IPv6 ("127.0.0.1", "0.0.0.0",
 *	"::") or a host name (its first address, e.g. "localhost"); NULL
 *	or "" means "127.0.0.1".
 * @port: TCP port; 0 picks an ephemeral port (read it with
 *	kvf_http_port()).
 * @idle_timeout_ms: a connection with no traffic for this long (idle
 *	between requests, or stuck in the middle of one) is closed; 0 means
 *	60000. Added after the first version of this contract (additive:
 *	initialisers that leave it out get the default).
 * @max_store_bytes: the metadata server's limit on keys plus values
 *	stored; a PUT that would exceed it is answered 507 and changes
 *	nothing. 0: no limit. Ignored by the metrics server.
 * @on_change: the metadata server calls it (with @on_change_ctx) after
 *	every PUT or DELETE that changed its store, on the server's thread
 *	(kvf__metastore_set_hook()); NULL: none. Ignored by the metrics
 *	server.
 */
struct kvf_http_options {
	const char *host;
	uint16_t port;
	uint32_t idle_timeout_ms;
	uint64_t max_store_bytes;
	void (*on_change)(void *ctx);
	void *on_change_ctx;
};

/**
 * kvf_http_metrics_start() - serve /metrics, /metrics/summary, /health.
 * @opts: listen address; copied.
 * @metrics: registry to render; must outlive the server.
 * @out: receives the running server; untouched on failure.
 *
 * Binds and listens before returning, so a client may connect as soon as
 * this returns.
 *
 * Context: any thread; may block briefly (socket setup, thread start).
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT (unresolvable host or NULL
 * pointer),
 * %KVF_ERR_BUSY (address in use), %KVF_ERR_IO (other socket errors),
 * %KVF_ERR_NO_MEMORY.
 */
int kvf_http_metrics_start(const struct kvf_http_options *opts,
			   struct kvf_metrics *metrics,
			   struct kvf_http_server **out);

/**
 * kvf_http_metadata_start() - serve the transfer engine's metadata store.
 * @opts: listen address; copied.
 * @out: receives the running server, which owns an empty in-memory
 *	key-value store; untouched on failure.
 *
 * Context and return values: as kvf_http_metrics_start().
 */
int kvf_http_metadata_start(const struct kvf_http_options *opts,
			    struct kvf_http_server **out);

/**
 * kvf_http_metadata_store() - the store a metadata server serves (it
 * owns it: valid until kvf_http_stop()). kvforge-master exports and
 * imports it (http/metastore.h) to replicate it to its standbys.
 * Context: any thread; never blocks.
 */
struct kvf_metastore *kvf_http_metadata_store(struct kvf_http_server *srv);

/**
 * kvf_http_port() - the port a server listens on.
 * @srv: a running server.
 *
 * Return: the bound port (the ephemeral one if 0 was asked for).
 * Context: any thread; never blocks.
 */
uint16_t kvf_http_port(const struct kvf_http_server *srv);

/**
 * kvf_http_stop() - stop a server and release it.
 * @srv: the server, or NULL.
 *
 * Wakes the server's thread, joins it, closes the listening socket and
 * every open connection, and frees the server (and, for the metadata
 * server, its store). Connections being answered are cut off.
 *
 * Context: any thread but the server's own; blocks until its thread
 * exits (at most one poll() round).
 */
void kvf_http_stop(struct kvf_http_server *srv);

#endif /* KVF_SERVER_HTTP_H */
