/* SPDX-License-Identifier: MIT */
/*
 * engine/rcu.c - transparent RCU registration of calling threads.
 *
 * Every public entry point calls kvf__rcu_ensure_registered(). The first
 * call on a thread registers it with urcu-memb and arms a pthread key whose
 * destructor unregisters the thread when it exits, so a thread that never
 * heard of kvf_thread_register() is still registered exactly while it
 * exists. The fast path is one thread-local load.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>

#include <kvforge/engine.h>

#include "engine/die.h"
#include "engine/rcu.h"

char kvf__rcu_gp_token;

static __thread bool rcu_registered;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void unregister_at_exit(void *arg)
{
	(void)arg;
	if (rcu_registered) {
		urcu_memb_unregister_thread();
		rcu_registered = false;
	}
}

static void make_exit_key(void)
{
	if (pthread_key_create(&exit_key, unregister_at_exit))
		kvf__die("pthread_key_create failed");
}

static void register_slow(void)
{
	pthread_once(&exit_key_once, make_exit_key);
	urcu_memb_register_thread();
	rcu_registered = true;
	/* Any non-NULL value makes the destructor run at thread exit. */
	pthread_setspecific(exit_key, &rcu_registered);
}

void kvf__rcu_ensure_registered(void)
{
	if (__builtin_expect(!rcu_registered, 0))
		register_slow();
}

int kvf_thread_register(void)
{
	kvf__rcu_ensure_registered();
	return KVF_OK;
}

void kvf_thread_unregister(void)
{
	if (!rcu_registered)
		return;
	urcu_memb_unregister_thread();
	rcu_registered = false;
	pthread_setspecific(exit_key, NULL);
}
