/* SPDX-License-Identifier: MIT */
/*
 * base/rcu.c - transparent RCU registration of calling threads.
 *
 * Every public entry point calls kvf__rcu_ensure_registered(). The first
 * call on a thread that nobody registered registers it with urcu-memb and
 * arms a pthread key whose destructor unregisters the thread when it
 * exits, so a thread that never heard of kvf_thread_register() is still
 * registered exactly while it exists.
 *
 * The host may use urcu-memb itself. liburcu keeps one registration per
 * thread (registering twice links the thread into its reader list twice;
 * unregistering someone else's registration leaves their later read-side
 * sections invisible to grace periods), so the library only ever
 * unregisters a registration it made: engine_owned records that. A thread
 * the host registered is left alone, and re-checked on every call so that
 * a host that unregisters it later gets it registered by the engine
 * instead. The fast path is one thread-local load for threads the engine
 * registered, one more (liburcu's own reader flag) for the host's.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>

#include <kvforge/engine.h>

#include "base/die.h"
#include "base/rcu.h"

char kvf__rcu_gp_token;

static __thread bool engine_owned; /* this thread's registration is ours */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static bool liburcu_registered(void)
{
	return URCU_TLS(urcu_memb_reader).registered;
}

/* Drop the engine's registration, if the thread still holds it. */
static void release_own_registration(void)
{
	if (!engine_owned)
		return;
	engine_owned = false;
	/* The host may have unregistered it behind our back: never twice. */
	if (liburcu_registered())
		urcu_memb_unregister_thread();
}

static void unregister_at_exit(void *arg)
{
	(void)arg;
	release_own_registration();
}

static void make_exit_key(void)
{
	if (pthread_key_create(&exit_key, unregister_at_exit))
		kvf__die("pthread_key_create failed");
}

static void register_slow(void)
{
	if (liburcu_registered())
		return; /* the host's registration: use it, never undo it */
	pthread_once(&exit_key_once, make_exit_key);
	urcu_memb_register_thread();
	engine_owned = true;
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(exit_key, &engine_owned);
}

void kvf__rcu_ensure_registered(void)
{
	if (__builtin_expect(!engine_owned, 0))
		register_slow();
}

enum kvf_status kvf_thread_register(void)
{
	kvf__rcu_ensure_registered();
	return KVF_OK;
}

void kvf_thread_unregister(void)
{
	if (!engine_owned)
		return;
	if (urcu_memb_read_ongoing())
		kvf__die("kvf_thread_unregister() inside an RCU read-side "
			 "section");
	release_own_registration();
	pthread_setspecific(exit_key, NULL);
}
