/*
 * verbs_mr.c - memory registration cache of one protection domain, and GPUDirect RDMA.
 * Registrations are rounded to whole pages and shared by every buffer inside them (of the same
 * memory type); each holds a reference count.  Host memory is deregistered when the last
 * reference goes: nothing tells a freed and reused host address apart, so a host registration
 * is never trusted past its use.  CUDA memory has the driver's buffer id for that: an
 * allocation is registered whole, kept after its last reference (up to RCOLL_IB_MR_CACHE
 * entries, least recently used idle ones replaced first), and used again only while the
 * driver still reports the same buffer id at the address.
 *
 * CUDA memory (RCOLL_PTR_CUDA) is registered so that the NIC reads and writes the GPU's memory
 * itself: by dma-buf (the CUDA driver exports the range, cuda/mem.c, and the NIC driver
 * registers the dma-buf, ibv_reg_dmabuf_mr) or through nvidia-peermem (ibv_reg_mr on the
 * device pointer, which that kernel module resolves).  Which are tried is RCOLL_IB_GDR and
 * what the device's probe found; see docs/transports.md.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "transport/verbs.h"
#include "util/log.h"
#include "util/status.h"

struct rcoll_vrb_mr_cache {
    struct ibv_pd *pd;
    char name[64];
    rcoll_vrb_gdr_probe_t gdr;
    int gdr_logged;
    pthread_mutex_t lock;
    rcoll_vrb_mr_t *head; /* every live registration: cached, in use, stale and in use */
    int count;            /* registrations in the list */
    int ncached;          /* of them, cache entries (in use or idle), at most bound */
    int bound;            /* RCOLL_IB_MR_CACHE */
    uint64_t clock;       /* ticks at every get and put: the entries' `used` */
};

/* ---------------------------------------------------------------------------------------------
 * GPUDirect RDMA
 * ------------------------------------------------------------------------------------------ */

static int peermem_loaded(void)
{
    static const char *const paths[] = {"/sys/kernel/mm/memory_peers/nv_mem/version",
                                        "/sys/module/nvidia_peermem/version",
                                        "/sys/module/nv_peer_mem/version"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], F_OK) == 0) return 1;
    return 0;
}

void rcoll_vrb_gdr_probe(struct ibv_pd *pd, rcoll_vrb_gdr_probe_t *out)
{
    memset(out, 0, sizeof(*out));
    if (rcoll_ibv->reg_dmabuf_mr) {
        errno = 0;
        struct ibv_mr *mr = rcoll_ibv->reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
        out->dmabuf_errno = mr ? 0 : errno;
        if (mr) rcoll_ibv->dereg_mr(mr); /* no driver should take fd -1; nothing to keep */
        out->dmabuf = !mr && errno != EOPNOTSUPP && errno != EPROTONOSUPPORT && errno != 0;
    }
    out->peermem = peermem_loaded();
}

int rcoll_vrb_gdr_methods(const rcoll_vrb_gdr_probe_t *p, int mode, const char *dev, char *why,
                         size_t len)
{
    char dmabuf_no[112];
    if (p->dmabuf_errno == 0 && !p->dmabuf)
        snprintf(dmabuf_no, sizeof(dmabuf_no), "libibverbs has no ibv_reg_dmabuf_mr (rdma-core "
                 "34 or newer has)");
    else
        snprintf(dmabuf_no, sizeof(dmabuf_no), "its kernel driver takes no dma-buf (%s)",
                 strerror(p->dmabuf_errno));
    int m = 0;
    switch (mode) {
    case RCOLL_IB_GDR_OFF: break;
    case RCOLL_IB_GDR_DMABUF: m = p->dmabuf ? RCOLL_VRB_GDR_DMABUF : 0; break;
    case RCOLL_IB_GDR_PEERMEM: m = RCOLL_VRB_GDR_PEERMEM; break;
    default:
        m = (p->dmabuf ? RCOLL_VRB_GDR_DMABUF : 0) | (p->peermem ? RCOLL_VRB_GDR_PEERMEM : 0);
        break;
    }
    if (!why || !len) return m;
    if (m)
        snprintf(why, len, "%s registers CUDA memory by %s%s%s", dev,
                 m & RCOLL_VRB_GDR_DMABUF ? "dma-buf" : "",
                 m == (RCOLL_VRB_GDR_DMABUF | RCOLL_VRB_GDR_PEERMEM) ? ", else by " : "",
                 m & RCOLL_VRB_GDR_PEERMEM
                     ? (p->peermem ? "nvidia-peermem" : "nvidia-peermem (RCOLL_IB_GDR=peermem; "
                                                        "the module was not seen)")
                     : "");
    else if (mode == RCOLL_IB_GDR_OFF)
        snprintf(why, len, "%s registers no CUDA memory: RCOLL_IB_GDR=off", dev);
    else if (mode == RCOLL_IB_GDR_DMABUF)
        snprintf(why, len, "%s registers no CUDA memory: RCOLL_IB_GDR=dmabuf, and %s", dev,
                 dmabuf_no);
    else
        snprintf(why, len, "%s registers no CUDA memory: %s, and nvidia-peermem is not loaded "
                 "(no /sys/module/nvidia_peermem)", dev, dmabuf_no);
    return m;
}

int rcoll_vrb_mr_gdr(const rcoll_vrb_mr_cache_t *c, char *why, size_t len)
{
    return rcoll_vrb_gdr_methods(&c->gdr, rcoll_vrb_cfg ? rcoll_vrb_cfg->ib_gdr
                                                       : RCOLL_IB_GDR_AUTO,
                                c->name, why, len);
}

/* Register [start, end) of CUDA memory by the first method that works (*out). */
static rcoll_status_t reg_cuda(rcoll_vrb_mr_cache_t *c, uintptr_t start, uintptr_t end,
                               int access, int *method, struct ibv_mr **out)
{
    char why[256];
    int m = rcoll_vrb_mr_gdr(c, why, sizeof(why));
    if (!m)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "verbs: %s (GPUDirect RDMA; RCOLL_IB_GDR, "
                             "docs/transports.md)", why);
    size_t len = end - start;
    char notes[RCOLL_ERR_TEXT_MAX / 2] = "";
    size_t n = 0;
    struct ibv_mr *mr = NULL;
    if (m & RCOLL_VRB_GDR_DMABUF) {
        int fd = -1;
        rcoll_status_t st = rcoll_gpu_dmabuf_fd((const void *)start, len, &fd);
        if (st == RCOLL_OK) {
            errno = 0;
            mr = rcoll_ibv->reg_dmabuf_mr(c->pd, 0, len, (uint64_t)start, fd, access);
            int err = errno;
            close(fd); /* the registration holds the dma-buf */
            if (!mr)
                n += (size_t)snprintf(notes + n, sizeof(notes) - n, "dma-buf: ibv_reg_dmabuf_mr "
                                      "failed: %s", strerror(err ? err : EINVAL));
        } else {
            n += (size_t)snprintf(notes + n, sizeof(notes) - n, "dma-buf: %s", rcoll_err_get());
        }
        if (mr) *method = RCOLL_VRB_GDR_DMABUF;
    }
    if (!mr && (m & RCOLL_VRB_GDR_PEERMEM)) {
        errno = 0;
        mr = rcoll_ibv->reg_mr(c->pd, (void *)start, len, access);
        int err = errno;
        if (mr)
            *method = RCOLL_VRB_GDR_PEERMEM;
        else if (n < sizeof(notes))
            snprintf(notes + n, sizeof(notes) - n, "%snvidia-peermem: ibv_reg_mr on the device "
                     "pointer failed: %s", n ? "; " : "", strerror(err ? err : EINVAL));
    }
    if (!mr)
        return rcoll_err_set(RCOLL_ERR_SYSTEM, "verbs: cannot register %zu bytes of CUDA memory "
                             "at %p on %s: %s", len, (void *)start, c->name, notes);
    if (!c->gdr_logged) {
        c->gdr_logged = 1;
        RCOLL_INFO(VERBS, "%s: GPUDirect RDMA: CUDA memory registered by %s", c->name,
                   *method == RCOLL_VRB_GDR_DMABUF ? "dma-buf" : "nvidia-peermem (ibv_reg_mr)");
    }
    *out = mr;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The cache
 * ------------------------------------------------------------------------------------------ */

rcoll_vrb_mr_cache_t *rcoll_vrb_mr_cache_new(struct ibv_pd *pd, const char *name)
{
    rcoll_vrb_mr_cache_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->pd = pd;
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->bound = rcoll_vrb_cfg ? rcoll_vrb_cfg->ib_mr_cache : 64;
    rcoll_vrb_gdr_probe(pd, &c->gdr);
    char why[256];
    rcoll_vrb_gdr_methods(&c->gdr, rcoll_vrb_cfg ? rcoll_vrb_cfg->ib_gdr : RCOLL_IB_GDR_AUTO,
                         name, why, sizeof(why));
    RCOLL_INFO(VERBS, "GPUDirect RDMA: %s", why);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void rcoll_vrb_mr_cache_free(rcoll_vrb_mr_cache_t *c)
{
    if (!c) return;
    for (rcoll_vrb_mr_t *m = c->head, *next; m; m = next) {
        next = m->next;
        rcoll_ibv->dereg_mr(m->mr);
        free(m);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int rcoll_vrb_mr_count(const rcoll_vrb_mr_cache_t *c) { return c ? c->count : 0; }
int rcoll_vrb_mr_cached(const rcoll_vrb_mr_cache_t *c) { return c ? c->ncached : 0; }

/* Take m out of the list (lock held) and onto *dead, deregistered once the lock is dropped. */
static void unlink_mr(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m, rcoll_vrb_mr_t **dead)
{
    for (rcoll_vrb_mr_t **pp = &c->head; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    c->count--;
    if (m->cached) c->ncached--;
    m->cached = 0;
    m->next = *dead;
    *dead = m;
}

static void dereg_dead(rcoll_vrb_mr_t *dead)
{
    for (rcoll_vrb_mr_t *next; dead; dead = next) {
        next = dead->next;
        rcoll_ibv->dereg_mr(dead->mr);
        if (dead->alt) rcoll_vrb_mr_put(dead->alt->cache, dead->alt); /* another device's */
        free(dead);
    }
}

rcoll_status_t rcoll_vrb_mr_on(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m, rcoll_vrb_mr_t **out)
{
    /* m->alt is set once and held by m until m goes, so it can be taken outside m's lock
     * (two caches' locks are never held together) */
    pthread_mutex_lock(&m->cache->lock);
    rcoll_vrb_mr_t *a = m->alt;
    pthread_mutex_unlock(&m->cache->lock);
    if (a && a->cache == c) {
        rcoll_vrb_mr_ref(c, a);
        *out = a;
        return RCOLL_OK;
    }
    rcoll_status_t st = rcoll_vrb_mr_get(c, (const void *)m->start, m->end - m->start,
                                         m->mem_type, out);
    if (st != RCOLL_OK || a) return st; /* a third device: this message's own */
    pthread_mutex_lock(&m->cache->lock);
    int keep = !m->alt;
    if (keep) m->alt = *out;
    pthread_mutex_unlock(&m->cache->lock);
    if (keep) rcoll_vrb_mr_ref(c, *out); /* m's reference */
    return RCOLL_OK;
}

/* The allocation of CUDA memory at addr as the driver sees it now, when it can be cached:
 * *id its buffer id and [*start, *end) its range, page-aligned (a dma-buf is whole pages of
 * one allocation) and holding the message's pages [*start, *end) as given.  Else *id 0 and
 * the message's pages stay. */
static void cuda_alloc(const void *addr, uintptr_t page, uintptr_t *start, uintptr_t *end,
                       unsigned long long *id)
{
    uintptr_t base;
    size_t size;
    *id = 0;
    if (rcoll_gpu_ptr_buffer_id(addr, &base, &size, id) != RCOLL_OK) return;
    if (base % page || size % page || *start < base || *end > base + size) {
        *id = 0; /* sub-page allocation: its pages hold others, whose ids this cannot check */
        return;
    }
    *start = base;
    *end = base + size;
}

/* The least recently used idle cache entry, or NULL when every one is in use (lock held). */
static rcoll_vrb_mr_t *lru_idle(rcoll_vrb_mr_cache_t *c)
{
    rcoll_vrb_mr_t *best = NULL;
    for (rcoll_vrb_mr_t *m = c->head; m; m = m->next)
        if (m->cached && m->refs == 0 && (!best || m->used < best->used)) best = m;
    return best;
}

rcoll_status_t rcoll_vrb_mr_get(rcoll_vrb_mr_cache_t *c, const void *addr, size_t len,
                               int mem_type, rcoll_vrb_mr_t **out)
{
    if (mem_type != RCOLL_PTR_HOST && mem_type != RCOLL_PTR_CUDA)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "verbs: memory type %d cannot be "
                             "registered (host or CUDA memory; a dma-buf is made from the CUDA "
                             "pointer by the transport itself)", mem_type);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1);
    uintptr_t end = ((uintptr_t)addr + (len ? len : 1) + page - 1) & ~(page - 1);
    /* CUDA memory: the driver's word on what lies at addr now, outside the lock (the one
     * driver call of a cache hit; a registration costs hundreds of microseconds) */
    uintptr_t rstart = start, rend = end;
    unsigned long long id = 0;
    if (mem_type == RCOLL_PTR_CUDA && c->bound > 0 && rcoll_gpu_active())
        cuda_alloc(addr, page, &rstart, &rend, &id);
    rcoll_vrb_mr_t *dead = NULL;
    pthread_mutex_lock(&c->lock);
    c->clock++;
    for (rcoll_vrb_mr_t *m = c->head, *next; m; m = next) {
        next = m->next;
        if (m->mem_type != mem_type || m->stale) continue;
        /* a registration of another allocation over this one's range: that one was freed
         * (live allocations never overlap); dropped now, or at its last reference */
        if (id && m->buffer_id && m->buffer_id != id && m->start < rend && rstart < m->end) {
            m->stale = 1;
            if (m->refs == 0) {
                unlink_mr(c, m, &dead);
            } else if (m->cached) {
                m->cached = 0;
                c->ncached--;
            }
            continue;
        }
        if (m->buffer_id == id && m->start <= start && end <= m->end) {
            m->refs++;
            m->used = c->clock;
            pthread_mutex_unlock(&c->lock);
            dereg_dead(dead);
            *out = m;
            return RCOLL_OK;
        }
    }
    /* a new cache entry in place of the least recently used idle one; with every entry in
     * use, a registration of its own, deregistered with its last reference */
    int cache = id != 0;
    if (cache && c->ncached >= c->bound) {
        rcoll_vrb_mr_t *victim = lru_idle(c);
        if (victim)
            unlink_mr(c, victim, &dead);
        else
            cache = 0;
    }
    rcoll_vrb_mr_t *m = calloc(1, sizeof(*m));
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (m && mem_type == RCOLL_PTR_CUDA) {
        rcoll_status_t st = reg_cuda(c, rstart, rend, access, &m->method, &m->mr);
        if (st != RCOLL_OK) {
            free(m);
            pthread_mutex_unlock(&c->lock);
            dereg_dead(dead);
            return st;
        }
    } else if (m) {
        m->mr = rcoll_ibv->reg_mr(c->pd, (void *)rstart, rend - rstart, access);
    }
    if (!m || !m->mr) {
        int err = errno;
        free(m);
        pthread_mutex_unlock(&c->lock);
        dereg_dead(dead);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, err ? err : ENOMEM,
                                   "verbs: cannot register %zu bytes at %p",
                                   (size_t)(rend - rstart), (void *)rstart);
    }
    m->cache = c;
    m->start = rstart;
    m->end = rend;
    m->refs = 1;
    m->mem_type = mem_type;
    m->buffer_id = id;
    m->cached = cache;
    m->used = c->clock;
    m->next = c->head;
    c->head = m;
    c->count++;
    c->ncached += cache;
    pthread_mutex_unlock(&c->lock);
    dereg_dead(dead);
    *out = m;
    return RCOLL_OK;
}

void rcoll_vrb_mr_ref(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m)
{
    c = m->cache; /* its own device's (a comm that moved passes its new device's) */
    pthread_mutex_lock(&c->lock);
    m->refs++;
    pthread_mutex_unlock(&c->lock);
}

void rcoll_vrb_mr_put(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m)
{
    if (!m) return;
    c = m->cache; /* its own device's (a comm that moved passes its new device's) */
    rcoll_vrb_mr_t *dead = NULL;
    pthread_mutex_lock(&c->lock);
    m->used = ++c->clock;
    if (--m->refs == 0 && !m->cached) unlink_mr(c, m, &dead);
    pthread_mutex_unlock(&c->lock);
    dereg_dead(dead);
}
