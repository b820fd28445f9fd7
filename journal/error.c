/* SPDX-License-Identifier: MIT */
/*
 * journal/error.c - refusal reasons and status mapping, shared by every
 * part of the journal (the store, the side log files, the pipeline).
 *
 * A refusal's reason is thread-local: the thread that opened (or, for
 * kvforge-inspect, scanned) a directory reads it right after the call
 * that refused, and concurrent opens of other directories do not mix
 * their reasons.
 */
#include "config.h"

#include <errno.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>

#include "journal/error.h"
#include "journal/journal.h"

static __thread char jerr_buf[256];

void kvf__jerr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(jerr_buf, sizeof(jerr_buf), fmt, ap);
	va_end(ap);
}

const char *kvf__journal_error(void)
{
	return jerr_buf;
}

int kvf__journal_status(int rc)
{
	/* Already a kvf_status (-1..-99; LMDB's codes are below -30000). */
	if (rc < 0 && rc > -1000)
		return rc;
	switch (rc) {
	case 0:
		return KVF_OK;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return KVF_ERR_JOURNAL_NO_SPACE;
	case EIO:
	case EROFS:
		return KVF_ERR_IO;
	case ENOMEM:
		return KVF_ERR_NO_MEMORY;
	case MDB_CORRUPTED:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_PAGE_NOTFOUND:
	case MDB_BAD_DBI:
	case MDB_INCOMPATIBLE:
		return KVF_ERR_JOURNAL_CORRUPT;
	default:
		return KVF_ERR_JOURNAL;
	}
}
