/* SPDX-License-Identifier: MIT */
/*
 * rdma/ops.h - the verbs calls the transport makes, as a table.
 *
 * Exactly the calls rdma/device.c and rdma/stream.c use, with libibverbs'
 * own types, so the two implementations are interchangeable: verbs.c loads
 * libibverbs.so.1 at run time and passes each call through; fake.c is an
 * in-process fabric that enforces what hardware would (see rdma/fake.h).
 * Every function has the libibverbs contract of the call it is named
 * after (NULL or -1/errno, or a positive errno for the int-returning
 * queue calls).
 */
#ifndef KVF_RDMA_OPS_H
#define KVF_RDMA_OPS_H

#include <infiniband/verbs.h>

struct kvf__verbs_ops {
	const char *name;
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr);
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port,
			    uint32_t index, struct ibv_gid_entry *entry);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
				 int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(
		struct ibv_context *ctx);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *ch, int vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq,
			    void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
};

/**
 * kvf__verbs_ibv() - the libibverbs implementation, loaded on first use.
 * @why: receives the reason when the library cannot be loaded.
 * @len: size of @why.
 *
 * Context: any thread (loads once under pthread_once).
 * Return: the table, or NULL when libibverbs.so.1 (or one of its symbols)
 * is missing; the library stays loaded for the life of the process.
 */
const struct kvf__verbs_ops *kvf__verbs_ibv(char *why, size_t len);

/**
 * kvf__verbs_fake() - the in-process fake fabric (rdma/fake.c).
 *
 * Return: the table; state is process-wide, see rdma/fake.h.
 */
const struct kvf__verbs_ops *kvf__verbs_fake(void);

#endif /* KVF_RDMA_OPS_H */
