/*
 * verbs_api.h - the one function table through which rcoll calls libibverbs.  The library is
 * never linked: rcoll_ibv_load() dlopen()s it (RCOLL_IBVERBS_LIB) and binds each verb by its
 * symbol version; the verbs that rdma-core's header makes inline (post_send, post_recv,
 * poll_cq, the query_port and reg_mr macros) are wrapped so they go through the table too.
 * Unit tests install a scripted table with rcoll_ibv_set_api() to reach error paths.
 */
#ifndef RCOLL_TRANSPORT_VERBS_API_H
#define RCOLL_TRANSPORT_VERBS_API_H

#include <infiniband/verbs.h>
#include "rcoll.h"

typedef struct rcoll_ibv_api {
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    __be64 (*get_device_guid)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    /* NULL where the library predates rdma-core 32 (then gid types come from sysfs). */
    ssize_t (*query_gid_table)(struct ibv_context *ctx, struct ibv_gid_entry *entries,
                               size_t max_entries, uint32_t flags);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    /* NULL where the library predates rdma-core 34 (no dma-buf registration: IBVERBS_1.12). */
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length,
                                    uint64_t iova, int fd, int access);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
    int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
    int (*poll_cq)(struct ibv_cq *cq, int num, struct ibv_wc *wc);
    int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
    void (*ack_async_event)(struct ibv_async_event *event);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    const char *(*event_type_str)(enum ibv_event_type type);
} rcoll_ibv_api_t;

/* The table in use; NULL until rcoll_ibv_load() succeeded or a test installed one. */
extern const rcoll_ibv_api_t *rcoll_ibv;

/* Load libibverbs from path (RCOLL_IBVERBS_LIB) once per process and fill the table.  A
 * missing library or missing symbols return RCOLL_ERR_UNSUPPORTED with the reason. */
rcoll_status_t rcoll_ibv_load(const char *path);
/* Put a scripted table behind every verb (tests); NULL restores the loaded library's. */
void rcoll_ibv_set_api(const rcoll_ibv_api_t *api);

#endif
