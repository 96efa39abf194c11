/*
 * ncclnet_data.c - the "plugin" transport's comms, requests and data path (set-up is in
 * ncclnet.c): reg_mr/dereg_mr, isend/irecv/iflush/test and closing comms.  NCCL plugins need a
 * registration for every buffer, while rcoll's core passes unregistered ones, so each comm
 * registers those itself (nn_cache_*).  It never blocks, and never keeps a registration of
 * memory it cannot know to be alive (see nn_cache_get).
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ncclnet_int.h"
#include "util/log.h"
#include "util/status.h"

#define NN_MAX_REQS 64   /* requests in flight per comm (NCCL plugins accept at least 32) */
#define NN_CACHE 64      /* registrations a comm holds at most (see nn_cache_get) */

/* ---------------------------------------------------------------------------------------------
 * Comms, requests and the registration cache
 * ------------------------------------------------------------------------------------------ */

/* One registration a comm made itself, for buffers passed without mhandle. */
typedef struct {
    int in_use;
    int refs;  /* requests using it */
    int keep;  /* inside a reg_mr registration: kept after use, until evicted or closed */
    uintptr_t start, end;
    uint64_t used; /* LRU stamp */
    void *pmh;
} nn_ent_t;

typedef struct {
    nn_comm_t *comm;
    void *preq;
    int n;    /* sizes test reports */
    int nent; /* registrations the request holds */
    nn_ent_t *ent[RCOLL_TRANSPORT_MAX_RECVS];
} nn_req_t;

struct nn_comm {
    uint32_t magic; /* NN_SEND_MAGIC or NN_RECV_MAGIC */
    void *pc;       /* the plugin's comm */
    int max_recvs;
    rcoll_status_t failed; /* after an error: every later call fails with it */
    char errtext[RCOLL_ERR_TEXT_MAX];
    uint64_t clock;
    nn_ent_t ent[NN_CACHE];
    int nfree;
    nn_req_t *free_reqs[NN_MAX_REQS];
    nn_req_t reqs[NN_MAX_REQS];
};

/* Mark c failed with st, whose text rcoll_err_set has just recorded. */
static rcoll_status_t nn_fail(nn_comm_t *c, rcoll_status_t st)
{
    c->failed = st;
    snprintf(c->errtext, sizeof(c->errtext), "%s", rcoll_err_get());
    return st;
}

static rcoll_status_t nn_failed(const nn_comm_t *c)
{
    return rcoll_err_set(c->failed, "%s", c->errtext);
}

nn_comm_t *nn_comm_new(void *pc, uint32_t magic, int dev)
{
    nn_comm_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->magic = magic;
    c->pc = pc;
    c->max_recvs = nn.props[dev].max_recvs;
    for (int i = 0; i < NN_MAX_REQS; i++) {
        c->reqs[i].comm = c;
        c->free_reqs[i] = &c->reqs[NN_MAX_REQS - 1 - i];
    }
    c->nfree = NN_MAX_REQS;
    return c;
}

static void nn_ent_drop(nn_comm_t *c, nn_ent_t *e)
{
    ncclResult_t r = nn.dereg_mr(c->pc, e->pmh);
    if (r != ncclSuccess)
        RCOLL_WARN(NET, "net plugin %s: deregMr of %zu bytes at %p failed with %s", nn.path,
                   (size_t)(e->end - e->start), (void *)e->start, nn_result_name(r));
    memset(e, 0, sizeof(*e));
}

/* The reg_mr registration that covers [a, b), if any: its range, in *start_p and *end_p. */
static int nn_covered(uintptr_t a, uintptr_t b, uintptr_t *start_p, uintptr_t *end_p)
{
    int found = 0;
    pthread_mutex_lock(&nn.lock);
    for (nn_mr_t *m = nn.mrs; m && !found; m = m->next) {
        if (m->start <= a && b <= m->end) {
            *start_p = m->start;
            *end_p = m->end;
            found = 1;
        }
    }
    pthread_mutex_unlock(&nn.lock);
    return found;
}

/*
 * A registration of c covering [data, data + size), with one more reference; *out NULL when
 * all NN_CACHE are in use by requests (the caller retries later).
 *
 * Inside memory the core registered with reg_mr (its staging, alive as long as the comms),
 * the whole registered range is registered on c too and kept after use (least recently used
 * out first when the cache is full), so the staging costs one registration per comm.  Other
 * buffers (the user's) are registered exactly and deregistered when their last request
 * completes: rcoll cannot know when the user frees them, and a registration kept past a free
 * and a new allocation at the same address would, on an RDMA plugin, move the old pages.
 */
static rcoll_status_t nn_cache_get(nn_comm_t *c, void *data, size_t size, nn_ent_t **out)
{
    uintptr_t a = (uintptr_t)data, b = a + size;
    nn_ent_t *slot = NULL, *victim = NULL;
    *out = NULL;
    for (int i = 0; i < NN_CACHE; i++) {
        nn_ent_t *e = &c->ent[i];
        if (!e->in_use) {
            if (!slot) slot = e;
            continue;
        }
        if (e->start <= a && b <= e->end) {
            e->refs++;
            e->used = ++c->clock;
            *out = e;
            return RCOLL_OK;
        }
        if (!e->refs && (!victim || e->used < victim->used)) victim = e;
    }
    uintptr_t ra = a, rb = b;
    int keep = nn_covered(a, b, &ra, &rb);
    if (!slot && !victim) return RCOLL_OK; /* every registration is in use: later */
    if (!slot) {
        nn_ent_drop(c, victim);
        slot = victim;
    }
    void *pmh = NULL;
    ncclResult_t r = nn.reg_mr(c->pc, (void *)ra, (size_t)(rb - ra), NCCL_PTR_HOST, &pmh);
    if (r != ncclSuccess) return nn_fail(c, nn_err(r, "regMr"));
    *slot = (nn_ent_t){.in_use = 1, .refs = 1, .keep = keep, .start = ra, .end = rb,
                       .used = ++c->clock, .pmh = pmh};
    *out = slot;
    return RCOLL_OK;
}

static void nn_cache_put(nn_comm_t *c, nn_ent_t *e)
{
    /* a failed comm's registrations stay until close: the plugin may still hold them */
    if (--e->refs > 0 || e->keep || c->failed) return;
    nn_ent_drop(c, e);
}

/* Give back r's registrations (and r itself when it was taken from the pool). */
static void nn_req_release(nn_comm_t *c, nn_req_t *r, int pooled)
{
    for (int i = 0; i < r->nent; i++) nn_cache_put(c, r->ent[i]);
    r->nent = 0;
    r->preq = NULL;
    if (pooled) c->free_reqs[c->nfree++] = r;
}

/* Any registration of c (a zero-byte message needs one for plugins that read it, never its
 * memory), or NULL. */
static void *nn_any_mh(const nn_comm_t *c)
{
    for (int i = 0; i < NN_CACHE; i++)
        if (c->ent[i].in_use) return c->ent[i].pmh;
    return NULL;
}

/* The plugin's mhandle for a buffer: the caller's (reg_mr), else one of c's own, held by r.
 * *later_p = 1 when no registration slot is free now. */
static rcoll_status_t nn_mh(nn_comm_t *c, nn_req_t *r, void *data, size_t size, void *mhandle,
                            void **pmh_p, int *later_p)
{
    *later_p = 0;
    if (mhandle) {
        const nn_mr_t *m = mhandle;
        if (m->magic != NN_MR_MAGIC)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin transport: an mhandle "
                                 "that its reg_mr did not make");
        *pmh_p = m->pmh;
        return RCOLL_OK;
    }
    if (size == 0) {
        *pmh_p = nn_any_mh(c);
        return RCOLL_OK;
    }
    nn_ent_t *e = NULL;
    rcoll_status_t st = nn_cache_get(c, data, size, &e);
    if (st != RCOLL_OK) return st;
    if (!e) {
        *later_p = 1;
        return RCOLL_OK;
    }
    r->ent[r->nent++] = e;
    *pmh_p = e->pmh;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Registration, data path, close
 * ------------------------------------------------------------------------------------------ */

rcoll_status_t nn_reg_mr(void *comm, void *data, size_t size, int mem_type, void **mhandle)
{
    nn_comm_t *c = comm;
    if (mem_type != RCOLL_PTR_HOST && mem_type != RCOLL_PTR_CUDA)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "net plugin transport: memory type %d "
                             "(dma-buf needs regMrDmaBuf, not used yet)", mem_type);
    if (c->failed) return nn_failed(c);
    nn_mr_t *m = calloc(1, sizeof(*m));
    if (!m) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "net plugin: no memory to register");
    ncclResult_t r = nn.reg_mr(c->pc, data, size, mem_type, &m->pmh); /* same values */
    if (r != ncclSuccess) {
        free(m);
        return nn_err(r, "regMr");
    }
    m->magic = NN_MR_MAGIC;
    m->start = (uintptr_t)data;
    m->end = (uintptr_t)data + size;
    pthread_mutex_lock(&nn.lock);
    m->next = nn.mrs;
    nn.mrs = m;
    pthread_mutex_unlock(&nn.lock);
    *mhandle = m;
    return RCOLL_OK;
}

rcoll_status_t nn_dereg_mr(void *comm, void *mhandle)
{
    nn_comm_t *c = comm;
    nn_mr_t *m = mhandle;
    if (!m) return RCOLL_OK;
    pthread_mutex_lock(&nn.lock);
    for (nn_mr_t **pp = &nn.mrs; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    pthread_mutex_unlock(&nn.lock);
    ncclResult_t r = nn.dereg_mr(c->pc, m->pmh);
    m->magic = 0;
    free(m);
    return r == ncclSuccess ? RCOLL_OK : nn_err(r, "deregMr");
}

rcoll_status_t nn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                        void **request)
{
    nn_comm_t *c = send_comm;
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (nn.version == 8 && size > INT_MAX)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s (ncclNetPlugin_v8) sends at "
                             "most INT_MAX bytes per message, not %zu", nn.path, size);
    if (c->nfree == 0) return RCOLL_OK; /* full: later */
    nn_req_t *r = c->free_reqs[c->nfree - 1];
    void *pmh = NULL, *preq = NULL;
    int later;
    rcoll_status_t st = nn_mh(c, r, data, size, mhandle, &pmh, &later);
    if (st != RCOLL_OK || later) return st;
    ncclResult_t res;
    switch (nn.version) {
    case 8: res = nn.v8->isend(c->pc, data, (int)size, tag, pmh, &preq); break;
    case 9: res = nn.v9->isend(c->pc, data, size, tag, pmh, &preq); break;
    case 10: res = nn.v10->isend(c->pc, data, size, tag, pmh, NULL, &preq); break;
    default: res = nn.cx_isend(c->pc, data, size, tag, pmh, NULL, &preq); break;
    }
    if (res != ncclSuccess) {
        st = nn_fail(c, nn_err(res, "isend"));
        nn_req_release(c, r, 0);
        return st;
    }
    if (!preq) {
        nn_req_release(c, r, 0);
        return RCOLL_OK;
    }
    c->nfree--;
    r->preq = preq;
    r->n = 1;
    *request = r;
    return RCOLL_OK;
}

rcoll_status_t nn_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request)
{
    nn_comm_t *c = recv_comm;
    void *pmh[RCOLL_TRANSPORT_MAX_RECVS], *preq = NULL;
    int isz[RCOLL_TRANSPORT_MAX_RECVS];
    size_t zsz[RCOLL_TRANSPORT_MAX_RECVS];
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (n < 1 || n > c->max_recvs)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s: a receive of %d buffers; "
                             "its maxRecvs is %d", nn.path, n, c->max_recvs);
    for (int i = 0; i < n; i++) {
        if (nn.version == 8 && sizes[i] > INT_MAX)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin %s (ncclNetPlugin_v8) "
                                 "receives at most INT_MAX bytes per message, not %zu", nn.path,
                                 sizes[i]);
        isz[i] = (int)sizes[i];
        zsz[i] = sizes[i];
    }
    if (c->nfree == 0) return RCOLL_OK;
    nn_req_t *r = c->free_reqs[c->nfree - 1];
    rcoll_status_t st = RCOLL_OK;
    int later = 0;
    for (int i = 0; i < n && st == RCOLL_OK && !later; i++)
        st = nn_mh(c, r, data[i], sizes[i], mhandles ? mhandles[i] : NULL, &pmh[i], &later);
    if (st != RCOLL_OK || later) {
        nn_req_release(c, r, 0);
        return st;
    }
    ncclResult_t res;
    switch (nn.version) {
    case 8: res = nn.v8->irecv(c->pc, n, data, isz, tags, pmh, &preq); break;
    case 9: res = nn.v9->irecv(c->pc, n, data, zsz, tags, pmh, &preq); break;
    case 10: res = nn.v10->irecv(c->pc, n, data, zsz, tags, pmh, NULL, &preq); break;
    default: res = nn.cx_irecv(c->pc, n, data, zsz, tags, pmh, NULL, &preq); break;
    }
    if (res != ncclSuccess) {
        st = nn_fail(c, nn_err(res, "irecv"));
        nn_req_release(c, r, 0);
        return st;
    }
    if (!preq) {
        nn_req_release(c, r, 0);
        return RCOLL_OK;
    }
    c->nfree--;
    r->preq = preq;
    r->n = n;
    *request = r;
    return RCOLL_OK;
}

rcoll_status_t nn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                         void **request)
{
    nn_comm_t *c = recv_comm;
    void *pmh[RCOLL_TRANSPORT_MAX_RECVS], *preq = NULL;
    *request = NULL;
    if (c->failed) return nn_failed(c);
    if (!nn.iflush) return RCOLL_OK; /* nothing to flush */
    if (n < 1 || n > RCOLL_TRANSPORT_MAX_RECVS)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "net plugin: a flush of %d buffers", n);
    for (int i = 0; i < n; i++) {
        const nn_mr_t *m = mhandles ? mhandles[i] : NULL;
        pmh[i] = m && m->magic == NN_MR_MAGIC ? m->pmh : NULL;
    }
    if (c->nfree == 0) /* NULL means "done" here: never leave a flush undone */
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "net plugin: iflush with every request "
                             "slot of the comm in use");
    ncclResult_t res = nn.iflush(c->pc, n, data, sizes, pmh, &preq);
    if (res != ncclSuccess) return nn_fail(c, nn_err(res, "iflush"));
    if (!preq) return RCOLL_OK;
    nn_req_t *r = c->free_reqs[--c->nfree];
    r->preq = preq;
    r->n = 0;
    r->nent = 0;
    *request = r;
    return RCOLL_OK;
}

rcoll_status_t nn_test(void *request, int *done, size_t *sizes)
{
    nn_req_t *r = request;
    nn_comm_t *c = r->comm;
    int d = 0, got[RCOLL_TRANSPORT_MAX_RECVS];
    *done = 0;
    if (c->failed) { /* the comm failed on another request: this one fails with it */
        nn_req_release(c, r, 1);
        return nn_failed(c);
    }
    memset(got, 0, sizeof(got));
    ncclResult_t res = nn.test(r->preq, &d, got);
    if (res != ncclSuccess) {
        rcoll_status_t st = nn_fail(c, nn_err(res, "test"));
        nn_req_release(c, r, 1);
        return st;
    }
    if (!d) return RCOLL_OK;
    for (int i = 0; sizes && i < r->n; i++) sizes[i] = got[i] > 0 ? (size_t)got[i] : 0;
    nn_req_release(c, r, 1);
    *done = 1;
    return RCOLL_OK;
}

static rcoll_status_t nn_close_comm(nn_comm_t *c, int is_recv)
{
    for (int i = 0; i < NN_CACHE; i++)
        if (c->ent[i].in_use) nn_ent_drop(c, &c->ent[i]);
    ncclResult_t r = is_recv ? nn.close_recv(c->pc) : nn.close_send(c->pc);
    c->magic = 0;
    free(c);
    return r == ncclSuccess ? RCOLL_OK : nn_err(r, is_recv ? "closeRecv" : "closeSend");
}

rcoll_status_t nn_close_send(void *send_comm) { return nn_close_comm(send_comm, 0); }

rcoll_status_t nn_close_recv(void *recv_comm) { return nn_close_comm(recv_comm, 1); }
