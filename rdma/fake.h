/* SPDX-License-Identifier: MIT */
/*
 * rdma/fake.h - the in-process fake fabric: one device ("fakeib0"), one
 * port, every QP reachable from every other, and the knobs tests use to
 * inject faults. The fabric's table comes from kvf__verbs_fake().
 *
 * Port 1 of the device has LID 0, active MTU 1024 and two GIDs: index 0
 * the link-local fe80::1 (RoCE v1) and index 1 ::ffff:10.0.0.1 (RoCE v2),
 * so the "best GID" choice (index 1) is exercised.
 *
 * Time is virtual: a retry that would take seconds on hardware (a peer
 * that vanished, receiver-not-ready with a finite rnr_retry) is decided
 * at the next fabric event, without waiting.
 */
#ifndef KVF_RDMA_FAKE_H
#define KVF_RDMA_FAKE_H

#include <stdint.h>

#include <infiniband/verbs.h>

/**
 * kvf__fake_set_device_errno() - make ibv_get_device_list fail.
 * @err: errno to fail with (ENOSYS: a kernel without RDMA), 0 to list the
 *       device again.
 */
void kvf__fake_set_device_errno(int err);

/**
 * kvf__fake_set_inline_cap() - the largest max_inline_data create_qp
 * accepts (default 256; 0 models a device without inline support).
 */
void kvf__fake_set_inline_cap(uint32_t cap);

/**
 * kvf__fake_vanish() - the host of QP @qpn disappears: SENDs to it end in
 * IBV_WC_RETRY_EXC_ERR (after the virtual retry timeout), its own work
 * requests never complete. Return: 0, or ENOENT for an unknown QPN.
 */
int kvf__fake_vanish(uint32_t qpn);

/**
 * kvf__fake_fail_next_send() - the next SEND QP @qpn would deliver is
 * not delivered: it completes with @status and the QP goes to error.
 * Return: 0, or ENOENT.
 */
int kvf__fake_fail_next_send(uint32_t qpn, enum ibv_wc_status status);

/**
 * kvf__fake_clip_recvs() - RECVs posted on QP @qpn hold only @len bytes
 * (a peer whose buffers are shorter than it advertised). Return: 0, ENOENT.
 */
int kvf__fake_clip_recvs(uint32_t qpn, uint32_t len);

/**
 * kvf__fake_force_error() - move QP @qpn to the error state (flushing its
 * work requests). Return: 0, ENOENT.
 */
int kvf__fake_force_error(uint32_t qpn);

/**
 * kvf__fake_qp_state() - the state of QP @qpn, or -1 for an unknown QPN.
 */
int kvf__fake_qp_state(uint32_t qpn);

/**
 * kvf__fake_live_objects() - fabric objects (contexts, PDs, MRs, channels,
 * CQs, QPs) created and not yet destroyed; 0 when everything was released.
 */
long kvf__fake_live_objects(void);

#endif /* KVF_RDMA_FAKE_H */
