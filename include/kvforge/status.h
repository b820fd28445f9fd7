/* SPDX-License-Identifier: MIT */
/*
 * kvforge/status.h - one error space for the whole library.
 *
 * Every public call that can fail returns an enum kvf_status: KVF_OK (0)
 * or a negative code. Codes from LMDB, errno and libraries are translated
 * at the module boundary, so callers only ever see these. Batch calls
 * also fill a per-item status array of the same type, so one variable
 * holds either (C++ callers need no casts). Counts come back through
 * out-parameters, never as a return value.
 */
#ifndef KVFORGE_STATUS_H
#define KVFORGE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * X(name, value, message): the single table that generates the enum,
 * kvf_strerror() and kvf_status_name().
 */
#define KVF_STATUS_TABLE(X)                                                    \
	X(OK, 0, "success")                                                    \
	X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                        \
	X(ERR_INVALID_KEY, -2, "invalid key: empty or longer than the maximum") \
	X(ERR_INVALID_PARAMS, -3, "invalid parameters (size, replica count, ids, alignment)") \
	X(ERR_BATCH_EMPTY, -4, "batch has no items")                           \
	X(ERR_BATCH_TOO_LARGE, -5, "batch larger than the configured maximum") \
	X(ERR_DUPLICATE_KEY, -6, "key appears more than once in the batch")    \
	X(ERR_PARTIAL, -7, "some items of the batch failed: see per-item status") \
	X(ERR_OBJECT_NOT_FOUND, -10, "object not found")                       \
	X(ERR_OBJECT_ALREADY_EXISTS, -11, "object already exists")             \
	X(ERR_OBJECT_HAS_LEASE, -12, "object has a lease")                     \
	X(ERR_OBJECT_NOT_READY, -13, "object is still being written (put not ended)") \
	X(ERR_OBJECT_PINNED, -14, "object is hard-pinned")                     \
	X(ERR_ILLEGAL_CLIENT, -15, "client did not start this put")            \
	X(ERR_NO_SPACE, -20, "no segment can fit the request")                 \
	X(ERR_NOT_ENOUGH_SEGMENTS, -21, "fewer segments mounted than replicas requested") \
	X(ERR_CLIENT_NOT_FOUND, -22, "unknown client")                         \
	X(ERR_SEGMENT_NOT_FOUND, -23, "unknown segment")                       \
	X(ERR_SEGMENT_EXISTS, -24, "segment already mounted")                  \
	X(ERR_SEGMENT_OVERLAP, -25, "segment overlaps a mounted segment")      \
	X(ERR_NO_MEMORY, -30, "out of memory")                                 \
	X(ERR_JOURNAL, -40, "journal write failed")                            \
	X(ERR_JOURNAL_CORRUPT, -41, "journal is damaged")                      \
	X(ERR_JOURNAL_VERSION, -42, "journal was written by an incompatible version") \
	X(ERR_JOURNAL_NO_SPACE, -43, "no space left for the journal")          \
	X(ERR_IO, -44, "input/output error")                                   \
	X(ERR_UNAVAILABLE, -50, "not available on this machine")               \
	X(ERR_BUSY, -51, "resource busy")                                      \
	X(ERR_CLOSED, -52, "engine is closing")                                \
	X(ERR_INTERNAL, -99, "internal error")

/**
 * enum kvf_status - result of every public call.
 *
 * KVF_OK is zero; every error is negative. Use kvf_strerror() for a
 * message and kvf_status_name() for the symbolic name.
 */
enum kvf_status {
#define KVF__STATUS_ENUM(name, value, msg) KVF_##name = (value),
	KVF_STATUS_TABLE(KVF__STATUS_ENUM)
#undef KVF__STATUS_ENUM
};

/**
 * kvf_strerror() - human-readable message for a status.
 * @status: any value; unknown values give "unknown status".
 *
 * Return: a static string. Thread-safe, never blocks.
 */
const char *kvf_strerror(int status);

/**
 * kvf_status_name() - symbolic name of a status ("KVF_ERR_NO_SPACE").
 * @status: any value; unknown values give "KVF_UNKNOWN".
 *
 * Return: a static string. Thread-safe, never blocks.
 */
const char *kvf_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif /* KVFORGE_STATUS_H */
