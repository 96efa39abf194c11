/*
 * handles.c - the set of live communicators, so that a destroyed (or never created) handle
 * passed to the API is refused with RCOLL_ERR_INVALID_ARG instead of being dereferenced.
 * Lookups take no lock and write nothing (they sit on every call's path): an open-addressing
 * table of pointers read with acquire loads.  Creation and destruction insert and remove under
 * a mutex (a removed entry becomes a tombstone); a table more than half used is replaced by a
 * fresh one, and replaced tables are kept, since a lookup may still be reading one (the sizes
 * double, so all of them together stay below twice the current one).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/comm.h"
#include "util/status.h"

#define TOMB ((uintptr_t)1)

typedef struct handle_table {
    size_t mask;                     /* slots - 1 (a power of two minus one) */
    size_t used;                     /* live entries and tombstones */
    struct handle_table *older;      /* replaced tables, kept for lookups in flight */
    _Atomic uintptr_t slot[];
} handle_table_t;

static _Atomic(handle_table_t *) live;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

int rcoll_comm_is_live(const struct rcoll_comm *c)
{
    handle_table_t *t = atomic_load_explicit(&live, memory_order_acquire);
    if (!t || !c) return 0;
    for (size_t i = hash(c) & t->mask, n = 0; n <= t->mask; i = (i + 1) & t->mask, n++) {
        uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (v == (uintptr_t)c) return 1;
        if (!v) return 0;
    }
    return 0;
}

static void put(handle_table_t *t, uintptr_t v)
{
    size_t i = hash((const void *)v) & t->mask;
    for (;;) {
        uintptr_t s = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (!s || s == TOMB) break;
        i = (i + 1) & t->mask;
    }
    if (!atomic_load_explicit(&t->slot[i], memory_order_relaxed)) t->used++;
    atomic_store_explicit(&t->slot[i], v, memory_order_release);
}

rcoll_status_t rcoll_comm_register(struct rcoll_comm *c)
{
    pthread_mutex_lock(&lock);
    handle_table_t *t = atomic_load_explicit(&live, memory_order_relaxed);
    if (!t || 2 * (t->used + 1) > t->mask + 1) {
        size_t nlive = 0;
        for (size_t i = 0; t && i <= t->mask; i++) {
            uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            nlive += v && v != TOMB;
        }
        size_t slots = 64;
        while (slots < 4 * (nlive + 1)) slots *= 2;
        handle_table_t *nt = calloc(1, sizeof(*nt) + slots * sizeof(nt->slot[0]));
        if (!nt) {
            pthread_mutex_unlock(&lock);
            return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for the communicator table");
        }
        nt->mask = slots - 1;
        nt->older = t;
        for (size_t i = 0; t && i <= t->mask; i++) {
            uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (v && v != TOMB) put(nt, v);
        }
        atomic_store_explicit(&live, nt, memory_order_release);
        t = nt;
    }
    put(t, (uintptr_t)c);
    pthread_mutex_unlock(&lock);
    return RCOLL_OK;
}

void rcoll_comm_unregister(struct rcoll_comm *c)
{
    pthread_mutex_lock(&lock);
    handle_table_t *t = atomic_load_explicit(&live, memory_order_relaxed);
    for (size_t i = t ? hash(c) & t->mask : 0, n = 0; t && n <= t->mask;
         i = (i + 1) & t->mask, n++) {
        uintptr_t v = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (!v) break;
        if (v == (uintptr_t)c) {
            atomic_store_explicit(&t->slot[i], TOMB, memory_order_release);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}
