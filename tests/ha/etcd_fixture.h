/* SPDX-License-Identifier: MIT */
/*
 * tests/ha/etcd_fixture.h - a real etcd for the HA tests: one member on
 * loopback ports picked at start, in a temporary data directory under
 * $KVF_TEST_TMPDIR, started, stopped, frozen and restarted by the test.
 * A test whose machine has no etcd binary exits 77 (SKIP).
 */
#ifndef KVF_TESTS_HA_ETCD_FIXTURE_H
#define KVF_TESTS_HA_ETCD_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct etcd_fixture {
	char dir[256];	   /* data directory and log */
	char endpoint[64]; /* "127.0.0.1:PORT" */
	uint16_t client_port, peer_port;
	pid_t pid;
};

/* Skip the whole test binary (exit 77) when no etcd binary exists. */
void etcd_fixture_require(void);

/* Start a fresh member and wait until it answers; aborts on failure. */
void etcd_fixture_start(struct etcd_fixture *f);

/* Kill it (SIGKILL) and wait; the data directory stays. */
void etcd_fixture_kill(struct etcd_fixture *f);

/* Start it again on the same ports and data directory, and wait. */
void etcd_fixture_restart(struct etcd_fixture *f);

/* Freeze (SIGSTOP) or thaw (SIGCONT) it. */
void etcd_fixture_freeze(struct etcd_fixture *f, bool frozen);

/* Kill it and remove its directory. */
void etcd_fixture_stop(struct etcd_fixture *f);

/* The binary's one member, started and stopped by the group setup and
 * teardown below (cmocka_run_group_tests()). */
extern struct etcd_fixture etcd_fx;
int etcd_fixture_setup(void **state);
int etcd_fixture_teardown(void **state);

/* A loopback port nothing listens on, below the ephemeral range. */
uint16_t etcd_fixture_free_port(void);

#endif /* KVF_TESTS_HA_ETCD_FIXTURE_H */
