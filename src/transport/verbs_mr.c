/*
 * verbs_mr.c - memory registration cache of one protection domain.  Registrations are rounded
 * to whole pages and shared by every buffer inside them; each holds a reference count and is
 * deregistered when the last reference goes, so a freed and reused address is never served
 * from a stale registration.  The memory type is recorded (host now; CUDA/dma-buf later).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/verbs.h"
#include "util/status.h"

struct rcoll_vrb_mr_cache {
    struct ibv_pd *pd;
    pthread_mutex_t lock;
    rcoll_vrb_mr_t *head;
    int count;
};

rcoll_vrb_mr_cache_t *rcoll_vrb_mr_cache_new(struct ibv_pd *pd)
{
    rcoll_vrb_mr_cache_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->pd = pd;
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

rcoll_status_t rcoll_vrb_mr_get(rcoll_vrb_mr_cache_t *c, const void *addr, size_t len,
                               int mem_type, rcoll_vrb_mr_t **out)
{
    if (mem_type != RCOLL_PTR_HOST)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "verbs: memory type %d cannot be "
                             "registered yet (host memory only until the CUDA path lands)",
                             mem_type);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1);
    uintptr_t end = ((uintptr_t)addr + (len ? len : 1) + page - 1) & ~(page - 1);
    pthread_mutex_lock(&c->lock);
    for (rcoll_vrb_mr_t *m = c->head; m; m = m->next) {
        if (m->start <= start && end <= m->end && m->mem_type == mem_type) {
            m->refs++;
            pthread_mutex_unlock(&c->lock);
            *out = m;
            return RCOLL_OK;
        }
    }
    rcoll_vrb_mr_t *m = calloc(1, sizeof(*m));
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (m) m->mr = rcoll_ibv->reg_mr(c->pd, (void *)start, end - start, access);
    if (!m || !m->mr) {
        int err = errno;
        free(m);
        pthread_mutex_unlock(&c->lock);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, err ? err : ENOMEM,
                                   "verbs: cannot register %zu bytes at %p",
                                   (size_t)(end - start), (void *)start);
    }
    m->start = start;
    m->end = end;
    m->refs = 1;
    m->mem_type = mem_type;
    m->next = c->head;
    c->head = m;
    c->count++;
    pthread_mutex_unlock(&c->lock);
    *out = m;
    return RCOLL_OK;
}

void rcoll_vrb_mr_put(rcoll_vrb_mr_cache_t *c, rcoll_vrb_mr_t *m)
{
    if (!m) return;
    pthread_mutex_lock(&c->lock);
    if (--m->refs > 0) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    for (rcoll_vrb_mr_t **pp = &c->head; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    c->count--;
    pthread_mutex_unlock(&c->lock);
    rcoll_ibv->dereg_mr(m->mr);
    free(m);
}
