// SPDX-License-Identifier: MIT
/*
 * tests/ha/etcd_fixture.c - start and stop a real etcd for the HA tests.
 * The binary is $KVF_ETCD, else the one configure found, else "etcd" on
 * $PATH. Readiness is a successful range through ha/etcd.c itself.
 */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ha/etcd.h"
#include "tests/ha/etcd_fixture.h"

#ifndef KVF_ETCD_PATH
#define KVF_ETCD_PATH ""
#endif

static const char *etcd_binary(void)
{
	static char found[512];
	const char *env = getenv("KVF_ETCD"), *path;

	if (env && *env)
		return access(env, X_OK) ? NULL : env;
	if (KVF_ETCD_PATH[0] && !access(KVF_ETCD_PATH, X_OK))
		return KVF_ETCD_PATH;
	path = getenv("PATH");
	while (path && *path) {
		const char *end = strchr(path, ':');
		int n = end ? (int)(end - path) : (int)strlen(path);

		snprintf(found, sizeof(found), "%.*s/etcd", n, path);
		if (!access(found, X_OK))
			return found;
		path = end ? end + 1 : NULL;
	}
	return NULL;
}

void etcd_fixture_require(void)
{
	if (!etcd_binary()) {
		printf("1..0 # SKIP no etcd binary (Debian: etcd-server)\n");
		exit(77);
	}
}

/* The lowest port of the kernel's ephemeral range (32768 if unknown). */
static unsigned ephemeral_low(void)
{
	unsigned lo = 32768, hi;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

/* Whether @port can be bound on loopback right now. */
static bool bindable(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = !bind(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return ok;
}

/*
 * A random port below the ephemeral range, free when picked. etcd binds
 * it later (and again after a restart): a port from bind(0) could be
 * handed meanwhile to any socket the other tests running beside this one
 * bind or connect, one below that range only to another such pick.
 */
uint16_t etcd_fixture_free_port(void)
{
	static unsigned seed;
	unsigned lo = ephemeral_low(),
		 base = lo > 16384 + 1024 ? lo - 16384 : 1024;

	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (int i = 0; lo > base && i < 10000; i++) {
		unsigned port = base + (unsigned)rand_r(&seed) % (lo - base);

		if (bindable(port))
			return (uint16_t)port;
	}
	fprintf(stderr, "etcd fixture: no free port below %u\n", lo);
	abort();
}

static void spawn(struct etcd_fixture *f)
{
	char client[64], peer[64], cluster[96], data[300], log[300];
	const char *bin = etcd_binary();
	struct kvf_etcd *e;
	pid_t pid;

	snprintf(client, sizeof(client), "http://127.0.0.1:%u", f->client_port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%u", f->peer_port);
	snprintf(cluster, sizeof(cluster), "t=%s", peer);
	snprintf(data, sizeof(data), "%s/data", f->dir);
	snprintf(log, sizeof(log), "%s/log", f->dir);
	pid = fork();
	if (pid < 0)
		abort();
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, bin, "--name", "t", "--data-dir", data,
		      "--listen-client-urls", client, "--advertise-client-urls",
		      client, "--listen-peer-urls", peer,
		      "--initial-advertise-peer-urls", peer,
		      "--initial-cluster", cluster, "--log-level", "error",
		      (char *)NULL);
		_exit(127);
	}
	f->pid = pid;
	if (kvf_etcd_new(f->endpoint, 500, &e))
		abort();
	for (int i = 0; i < 200; i++) { /* 20 s at most */
		struct kvf_etcd_kv kv;
		struct timespec ts = {0, 100000000};
		bool found;

		if (!kvf_etcd_get(e, "ready?", 6, &kv, &found)) {
			if (found)
				kvf_etcd_kv_clear(&kv);
			kvf_etcd_free(e);
			return;
		}
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "etcd fixture: etcd did not start (see %s)\n", log);
	abort();
}

void etcd_fixture_start(struct etcd_fixture *f)
{
	const char *tmp = getenv("KVF_TEST_TMPDIR");

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "%s/kvf-etcd-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		abort();
	f->client_port = etcd_fixture_free_port();
	f->peer_port = etcd_fixture_free_port();
	snprintf(f->endpoint, sizeof(f->endpoint), "127.0.0.1:%u",
		 f->client_port);
	spawn(f);
}

void etcd_fixture_kill(struct etcd_fixture *f)
{
	if (f->pid <= 0)
		return;
	kill(f->pid, SIGCONT);
	kill(f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
	f->pid = 0;
}

void etcd_fixture_restart(struct etcd_fixture *f)
{
	etcd_fixture_kill(f);
	spawn(f);
}

void etcd_fixture_freeze(struct etcd_fixture *f, bool frozen)
{
	kill(f->pid, frozen ? SIGSTOP : SIGCONT);
}

void etcd_fixture_stop(struct etcd_fixture *f)
{
	char cmd[300];

	etcd_fixture_kill(f);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd))
		fprintf(stderr, "etcd fixture: could not remove %s\n", f->dir);
}

struct etcd_fixture etcd_fx;

int etcd_fixture_setup(void **state)
{
	(void)state;
	etcd_fixture_start(&etcd_fx);
	return 0;
}

int etcd_fixture_teardown(void **state)
{
	(void)state;
	etcd_fixture_stop(&etcd_fx);
	return 0;
}
