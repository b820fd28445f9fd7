/* SPDX-License-Identifier: MIT */
/*
 * engine/replication.h - what a replication layer above the engine needs
 * of it (ha/replication.c): the engine's journal, to install a tap on.
 */
#ifndef KVF_ENGINE_REPLICATION_H
#define KVF_ENGINE_REPLICATION_H

#include <kvforge/engine.h>

struct kvf__journal;

/**
 * kvf__engine_journal_of() - the engine's journal, or NULL when it runs
 * without one (%KVF_DURABILITY_NONE). Owned by the engine: valid until
 * kvf_engine_close(). Context: any thread.
 */
struct kvf__journal *kvf__engine_journal_of(struct kvf_engine *e);

#endif /* KVF_ENGINE_REPLICATION_H */
