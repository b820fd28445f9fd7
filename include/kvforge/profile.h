/* SPDX-License-Identifier: MIT */
/*
 * kvforge/profile.h - per-stage counters of the batch hot path.
 *
 * Each engine owns a profiler (kvf_engine_profiler()). When enabled, every
 * batch call is divided into named stages, and each stage accumulates
 * calls, keys, elapsed nanoseconds and the counters of the best tier this
 * machine offers (hardware, software, or clock only).
 */
#ifndef KVFORGE_PROFILE_H
#define KVFORGE_PROFILE_H

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvf_profiler;

/**
 * kvf_profile_enable() - switch profiling on or off at run time.
 * @p: the profiler.
 * @on: new state.
 *
 * Context: any thread; lock-free. Batches already running finish in the
 * state they started with.
 */
void kvf_profile_enable(struct kvf_profiler *p, bool on);

/**
 * kvf_profile_reset() - zero every accumulated figure.
 * @p: the profiler.
 */
void kvf_profile_reset(struct kvf_profiler *p);

/**
 * kvf_profile_render_text() - print the stage table.
 * @p: the profiler.
 * @f: output stream.
 *
 * Return: %KVF_OK or %KVF_ERR_IO.
 */
int kvf_profile_render_text(struct kvf_profiler *p, FILE *f);

/**
 * kvf_profile_render_json() - print the stage table as one JSON object.
 * @p: the profiler.
 * @f: output stream.
 *
 * Return: %KVF_OK or %KVF_ERR_IO.
 */
int kvf_profile_render_json(struct kvf_profiler *p, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_PROFILE_H */
