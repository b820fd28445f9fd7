/* SPDX-License-Identifier: MIT */
/*
 * base/prefetch.h - loading a line ahead for a write.
 *
 * __builtin_prefetch(p, 1) asks for a line in a state that can be written,
 * but GCC emits that (PREFETCHW) only when told the CPU has it
 * (-mprfchw); for the default x86-64 target it emits the read prefetch,
 * and the line arrives shared. A locked instruction on a shared line then
 * waits for ownership on its own, one miss that nothing overlaps: with two
 * threads reading, a get's lease compare-and-swap did that for every key.
 * So on x86 the instruction is emitted here, where the CPU reports it
 * (CPUID 0x80000001 ECX bit 8, checked once at load: older Intel cores
 * lack it); elsewhere the builtin already emits a write prefetch (arm64's
 * PRFM PSTL1KEEP).
 */
#ifndef KVF_BASE_PREFETCH_H
#define KVF_BASE_PREFETCH_H

#include <stdbool.h>

/* The CPU has PREFETCHW (x86); set before main, read-only after. */
extern bool kvf__cpu_prefetchw;

/*
 * kvf__prefetch_for_write() - start loading @p's line, to be written.
 * @p: any address; nothing is dereferenced and an invalid one does not
 *     fault.
 *
 * A hint only. Lock-free, never blocks.
 */
static inline void kvf__prefetch_for_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	if (__builtin_expect(kvf__cpu_prefetchw, 1)) {
		__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
		return;
	}
#endif
	__builtin_prefetch(p, 1, 3);
}

#endif /* KVF_BASE_PREFETCH_H */
