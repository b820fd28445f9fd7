// SPDX-License-Identifier: MIT
/*
 * master/port_claim.c - a bound, not listening TCP socket
 * (master/port_claim.h). Bound first without SO_REUSEADDR: on Linux two
 * sockets may share a port that neither listens on when both set it, so
 * a socket with it would not keep out another server that binds with it
 * (most do) and then listens first. A port that still has connections
 * in TIME_WAIT (a master that served on it a moment ago) refuses such a
 * bind; then it is bound with SO_REUSEADDR, as a listener would be.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <kvforge/status.h>

#include "master/port_claim.h"

/* A socket for @ai bound to it; -errno on failure. */
static int bind_one(const struct addrinfo *ai, bool reuse)
{
	int one = 1, fd, err;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!bind(fd, ai->ai_addr, ai->ai_addrlen))
		return fd;
	err = errno;
	close(fd);
	return -err;
}

int kvf_port_claim(const char *address, uint16_t port, int *fd_out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_PASSIVE |
					     AI_NUMERICSERV};
	struct addrinfo *ai;
	char service[8];
	int fd;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(address, service, &hints, &ai))
		return KVF_ERR_INVALID_ARGUMENT;
	fd = bind_one(ai, false);
	if (fd == -EADDRINUSE)
		fd = bind_one(ai, true);
	freeaddrinfo(ai);
	if (fd < 0)
		return fd == -EADDRINUSE ? KVF_ERR_BUSY : KVF_ERR_IO;
	*fd_out = fd;
	return KVF_OK;
}
