/* SPDX-License-Identifier: MIT */
/*
 * master/flags.h - kvforge-master's command line and --config_path file.
 *
 * The flags are mooncake_master's (same names, defaults and units, gflags
 * syntax: --name=value, --name value, -name, booleans --flag / --noflag /
 * --flag=false) plus KVForge's own. One table in flags.c describes every
 * flag once; it drives parsing, the JSON config file, defaults and --help,
 * so the four can never disagree.
 */
#ifndef KVF_SERVER_FLAGS_H
#define KVF_SERVER_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <kvforge/engine.h>

#define KVF_FLAGS_STR_MAX 256

/**
 * struct kvf_master_flags - the parsed configuration.
 *
 * Durations are stored in the unit named by the field's suffix.
 * @placement_set / @allocation_strategy_set record whether the user gave
 * them (the engine's placement follows --placement, else an explicit
 * --allocation_strategy, else KVForge's fragmentation_aware default).
 */
struct kvf_master_flags {
	/* upstream mooncake_master flags */
	char rpc_address[KVF_FLAGS_STR_MAX];
	int64_t rpc_port;
	int64_t port;
	int64_t rpc_thread_num;
	int64_t max_threads;
	int64_t rpc_conn_timeout_seconds;
	bool rpc_enable_tcp_no_delay;
	bool enable_metric_reporting;
	int64_t metrics_port;
	char metrics_host[KVF_FLAGS_STR_MAX];
	uint64_t default_kv_lease_ttl_ms;
	uint64_t default_kv_soft_pin_ttl_ms;
	uint64_t max_kv_soft_pin_ttl_ms;
	bool allow_evict_soft_pinned_objects;
	double eviction_ratio;
	double eviction_high_watermark_ratio;
	uint64_t client_ttl_s;
	char allocation_strategy[KVF_FLAGS_STR_MAX];
	char memory_allocator[KVF_FLAGS_STR_MAX];
	uint64_t put_start_discard_timeout_sec;
	uint64_t put_start_release_timeout_sec;
	bool enable_http_metadata_server;
	int64_t http_metadata_server_port;
	char http_metadata_server_host[KVF_FLAGS_STR_MAX];
	uint64_t http_metadata_server_max_bytes;
	char root_fs_dir[KVF_FLAGS_STR_MAX];
	char cluster_id[KVF_FLAGS_STR_MAX];
	bool enable_disk_eviction;
	uint64_t quota_bytes;
	char config_path[KVF_FLAGS_STR_MAX];
	bool enable_ha;
	char etcd_endpoints[KVF_FLAGS_STR_MAX];
	char ha_backend_type[KVF_FLAGS_STR_MAX];
	char ha_backend_connstring[KVF_FLAGS_STR_MAX];
	/* KVForge's own */
	char data_dir[KVF_FLAGS_STR_MAX];
	char durability[KVF_FLAGS_STR_MAX];
	char index[KVF_FLAGS_STR_MAX];
	char placement[KVF_FLAGS_STR_MAX];
	char mooncake_abi[KVF_FLAGS_STR_MAX];
	uint64_t max_request_bytes;
	uint64_t max_connections;
	uint64_t idle_timeout_sec;
	uint64_t request_timeout_sec;
	uint64_t expected_objects;
	uint64_t checkpoint_records;
	bool enable_rdma;
	uint64_t ha_lease_ttl_s;
	char ha_advertise_address[KVF_FLAGS_STR_MAX];
	int64_t ha_replication_port;
	char ha_token_file[KVF_FLAGS_STR_MAX];
	uint64_t ha_sync_standbys;
	uint64_t ha_sync_timeout_ms;
	bool ha_sync_degrade;
	uint64_t ha_replication_backlog_bytes;
	bool ha_publish_legacy_key;
	bool help;
	/* which of the above were given (not defaults) */
	bool placement_set;
	bool allocation_strategy_set;
	bool rpc_port_set;
	bool rpc_thread_num_set;
	bool metrics_host_set;
};

/**
 * kvf_flags_defaults() - fill @f with every flag's default.
 *
 * Context: any thread; never fails (the defaults are tested to parse).
 */
void kvf_flags_defaults(struct kvf_master_flags *f);

/**
 * kvf_flags_parse() - apply a command line on top of @f.
 * @f: flags, normally from kvf_flags_defaults().
 * @argc: argument count, @argv: arguments (argv[0] is skipped).
 * @err: receives a message on failure (may be NULL).
 * @errlen: size of @err.
 *
 * A --config_path on the line is read first (wherever it appears), then
 * the remaining flags override it, as upstream. Unknown flags (those of
 * mooncake_master that KVForge has no use for: HA, offload, CXL, task
 * manager ...; upstream keeps adding them, so no list is kept) are
 * accepted; their names are collected and reported once on stderr. A
 * bad value, a missing value or a positional argument is an error and
 * @f must be discarded.
 *
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT (with @err filled), or
 * %KVF_ERR_IO when the config file cannot be read.
 */
int kvf_flags_parse(struct kvf_master_flags *f, int argc, char **argv,
		    char *err, size_t errlen);

/**
 * kvf_flags_load_json() - apply a JSON config file's keys on top of @f.
 * @f: flags.
 * @text: the file's contents, NUL-terminated.
 * @err, @errlen: as kvf_flags_parse().
 *
 * The file is one JSON object whose keys are flag names (upstream's
 * config key client_live_ttl_sec is accepted for client_ttl) and whose
 * values are strings, numbers or booleans. Strict about syntax and
 * kinds: a syntax error or a value of the wrong kind is refused; unknown
 * keys are reported once on stderr, as unknown flags are.
 *
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT.
 */
int kvf_flags_load_json(struct kvf_master_flags *f, const char *text, char *err,
			size_t errlen);

/**
 * kvf_flags_engine_config() - translate @f into an engine configuration.
 * @f: parsed flags.
 * @cfg: filled from kvf_config_init() and the flags.
 * @err, @errlen: as kvf_flags_parse().
 *
 * Return: %KVF_OK or %KVF_ERR_INVALID_ARGUMENT (an unknown --durability,
 * --index or --placement name, or a durability that needs --data-dir).
 */
int kvf_flags_engine_config(const struct kvf_master_flags *f,
			    struct kvf_config *cfg, char *err, size_t errlen);

/**
 * kvf_flags_rpc_threads() - the number of RPC event-loop threads to run.
 * Return: --rpc_thread_num if set, else min(online CPUs, --max_threads).
 */
unsigned kvf_flags_rpc_threads(const struct kvf_master_flags *f);

/**
 * kvf_flags_rpc_port() - the port to listen on: --rpc_port if given
 * (0 = ephemeral), else --port (upstream's deprecated spelling).
 */
uint16_t kvf_flags_rpc_port(const struct kvf_master_flags *f);

/** kvf_flags_help() - print every flag, its default and meaning. */
void kvf_flags_help(FILE *out);

#endif /* KVF_SERVER_FLAGS_H */
