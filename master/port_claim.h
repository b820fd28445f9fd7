// SPDX-License-Identifier: MIT
/*
 * master/port_claim.h - hold a TCP port without serving on it.
 *
 * A socket bound to the port and not listening: no other process can
 * bind the port, and a client that dials it is refused, as at a closed
 * port. A standby master holds its RPC port so: the port it will serve
 * on once elected is known to be its own at start-up, instead of found
 * taken after the election, when the master would hold the leadership
 * without serving. The event loop then listens on the same socket
 * (kvf_loop_options.claimed).
 */
#ifndef KVF_MASTER_PORT_CLAIM_H
#define KVF_MASTER_PORT_CLAIM_H

#include <stdint.h>

/**
 * kvf_port_claim() - bind a TCP socket to @address:@port, not listening.
 * @address: a numeric IPv4/IPv6 address ("0.0.0.0", "127.0.0.1")
 * @port: the port; 0 binds an ephemeral one
 * @fd: out: the socket (non-blocking, close-on-exec), the caller's to
 *	close or to hand to kvf_loop_start(). Held exclusively, unless the
 *	port still had connections in TIME_WAIT: then bound with
 *	SO_REUSEADDR, which another socket setting it may share until one
 *	of them listens.
 *
 * Return: %KVF_OK; %KVF_ERR_BUSY when the port is in use;
 * %KVF_ERR_INVALID_ARGUMENT for an address that is not numeric;
 * %KVF_ERR_IO. Context: any thread; does not block.
 */
int kvf_port_claim(const char *address, uint16_t port, int *fd);

#endif /* KVF_MASTER_PORT_CLAIM_H */
