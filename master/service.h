/* SPDX-License-Identifier: MIT */
/*
 * master/service.h - the Mooncake master's RPCs on the KVForge engine.
 *
 * One call per request frame: decode the body (keys in place), run the
 * engine call (a batch RPC is one kvf_batch_*() call), encode exactly one
 * response frame. Handlers never block on the network; they may block on
 * the engine's journal (mounts, PutEnd under strict durability).
 */
#ifndef KVF_SERVER_SERVICE_H
#define KVF_SERVER_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include <kvforge/engine.h>

#include "wire/abi.h"
#include "master/flags.h"
#include "wire/frame.h"
#include "master/registry.h"
#include "wire/spack.h"

struct kvf_ha;

struct kvf_metrics;
struct kvf_service;
struct kvf_service_scratch;

/** The version string ServiceReady answers (the client compares it). */
#define KVF_SERVICE_VERSION "2.0.0"

/**
 * KVF_SERVICE_MAX_PREFERRED - most names a ReplicateConfig's
 * preferred_segments may list; a put listing more is answered
 * INVALID_PARAMS (changes nothing). At most 64 distinct mounted segments
 * are used as preferences anyway.
 */
#define KVF_SERVICE_MAX_PREFERRED 1024

/**
 * KVF_SERVICE_MAX_REMOUNT - most segments one ReMountSegment may list; a
 * longer list is answered INVALID_PARAMS and mounts nothing. Mounting is
 * journaled segment by segment, so this bounds how long one request
 * holds its loop thread (a client remounts the few buffers it has).
 */
#define KVF_SERVICE_MAX_REMOUNT 1024

/**
 * KVF_SERVICE_MAX_QUERY_IDS - most client ids one BatchQueryIp may list
 * (the engine's batch limit, as for keys); more is answered
 * INVALID_PARAMS. Repeated ids are answered once (the answer is a map).
 */
#define KVF_SERVICE_MAX_QUERY_IDS 65536

/**
 * struct kvf_service_options - what the handlers run on.
 * @abi: the Mooncake revision spoken.
 * @engine: the engine. @registry: its client/segment registry.
 * @metrics: where every RPC is recorded (may be NULL).
 * @flags: the master's flags (storage config answers, pin limits).
 * @ha: the election (ha/election.h) when HA is on, else NULL: every
 *	request is then answered only while kvf_ha_may_serve() (otherwise
 *	the connection is closed unanswered), and Ping carries its view
 *	version.
 * All must outlive the service.
 */
struct kvf_service_options {
	const struct kvf_abi *abi;
	struct kvf_engine *engine;
	struct kvf_registry *registry;
	struct kvf_metrics *metrics;
	const struct kvf_master_flags *flags;
	const struct kvf_ha *ha;
};

/**
 * kvf_service_new() - create the service.
 * Return: %KVF_OK, %KVF_ERR_INVALID_ARGUMENT or %KVF_ERR_NO_MEMORY.
 */
int kvf_service_new(const struct kvf_service_options *opts,
		    struct kvf_service **out);

/** kvf_service_free() - free the service (no handler may be running). */
void kvf_service_free(struct kvf_service *svc);

/**
 * kvf_service_scratch_new() - per-thread work arrays (keys, statuses,
 * replica lists, descriptors), grown on demand and reused. One per
 * event-loop thread; never shared.
 * Return: the scratch, or NULL when out of memory.
 */
struct kvf_service_scratch *kvf_service_scratch_new(struct kvf_service *svc);

/** kvf_service_scratch_free() - free a scratch (NULL is ignored). */
void kvf_service_scratch_free(struct kvf_service_scratch *s);

/**
 * kvf_service_handle() - answer one request.
 * @svc: the service.
 * @s: the calling thread's scratch.
 * @hdr: the request header (validated by kvf_frame_req_parse()).
 * @body: the body, @hdr->length bytes; keys are decoded in place, so it
 *	must stay put until this returns.
 * @out: the connection's output; exactly one response frame is appended
 *	(unless @out fails to grow, or the master is fenced - HA, see
 *	struct kvf_service_options - : @out->failed is then set and the
 *	connection is closed).
 * @arrival_ns: CLOCK_MONOTONIC time the request was read (for metrics).
 * @hash_logged: per-connection flag: a type-hash mismatch is logged once
 *	per connection, with both hashes.
 *
 * Context: an event-loop thread; may block on the engine's journal.
 */
void kvf_service_handle(struct kvf_service *svc, struct kvf_service_scratch *s,
			const struct kvf_frame_req *hdr, const uint8_t *body,
			struct kvf_wbuf *out, uint64_t arrival_ns,
			bool *hash_logged);

/**
 * kvf_service_mc_error() - Mooncake's ErrorCode for an engine status.
 * @status: an enum kvf_status.
 * Return: the ErrorCode value (0 for %KVF_OK).
 */
int32_t kvf_service_mc_error(int status);

/** kvf_service_now_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t kvf_service_now_ns(void);

#endif /* KVF_SERVER_SERVICE_H */
