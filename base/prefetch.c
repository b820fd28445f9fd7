/* SPDX-License-Identifier: MIT */
/*
 * base/prefetch.c - whether the CPU can prefetch for writing.
 *
 * Read once, before main (a constructor), so the hot paths test a plain
 * flag that no thread writes afterwards (base/prefetch.h says why).
 */
#include "config.h"

#include "base/prefetch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

bool kvf__cpu_prefetchw;

__attribute__((constructor)) static void detect_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned int a, b, c, d;

	if (__get_cpuid(0x80000001, &a, &b, &c, &d))
		kvf__cpu_prefetchw = (c & bit_PRFCHW) != 0;
#endif
}
