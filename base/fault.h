/* SPDX-License-Identifier: MIT */
/*
 * base/fault.h - test-only fault hooks, compiled in only by
 * ./configure --enable-fault-injection (config.h: KVF_FAULT_INJECTION).
 *
 * A production build carries neither the hooks nor a branch on them: a
 * call site wraps its hook in KVF__FAULT(), which is the constant 0
 * without the option, and the hook's definition sits under
 * #ifdef KVF_FAULT_INJECTION. The test tiers configure with the option;
 * a test that needs a hook skips (77, or cmocka's skip()) without it.
 */
#ifndef KVF_BASE_FAULT_H
#define KVF_BASE_FAULT_H

#ifdef KVF_FAULT_INJECTION
/* @expr: a hook returning 0 (no fault pending) or the code to fail with. */
#define KVF__FAULT(expr) (expr)
#else
#define KVF__FAULT(expr) 0
#endif

#endif /* KVF_BASE_FAULT_H */
