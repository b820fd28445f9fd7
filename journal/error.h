/* SPDX-License-Identifier: MIT */
/*
 * journal/error.h - the helpers every part of the journal shares for
 * reporting (error.c): the reason of a refusal, and one mapping of
 * errno and LMDB codes to kvf_status.
 */
#ifndef KVF_JOURNAL_ERROR_H
#define KVF_JOURNAL_ERROR_H

/*
 * kvf__jerr() - record why the directory is refused, for this thread's
 * kvf__journal_error() (journal.h). printf format.
 */
void kvf__jerr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Map an errno or LMDB code to a kvf_status (a kvf_status passes as is). */
int kvf__journal_status(int mdb_or_errno);

#endif /* KVF_JOURNAL_ERROR_H */
