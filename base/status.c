/* SPDX-License-Identifier: MIT */
/*
 * base/status.c - messages and names generated from KVF_STATUS_TABLE.
 */
#include "config.h"

#include <kvforge/status.h>

const char *kvf_strerror(int status)
{
	switch (status) {
#define KVF__X(name, value, msg)                                               \
	case KVF_##name:                                                       \
		return msg;
		KVF_STATUS_TABLE(KVF__X)
#undef KVF__X
	}
	return "unknown status";
}

const char *kvf_status_name(int status)
{
	switch (status) {
#define KVF__X(name, value, msg)                                               \
	case KVF_##name:                                                       \
		return "KVF_" #name;
		KVF_STATUS_TABLE(KVF__X)
#undef KVF__X
	}
	return "KVF_UNKNOWN";
}
