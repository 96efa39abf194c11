/*
 * bell.h - a process's doorbell: a futex word in a small shared segment that the process's
 * threads sleep on and that other processes of the host ring, so a rank waiting for a local
 * peer can sleep in the kernel instead of polling, and still wake within microseconds when the
 * peer moves (docs/api.md, "Waiting").
 *
 * Protocol.  A sleeper arms (sleepers += 1, a full barrier), looks once more for what it waits
 * for, and only then sleeps while seq still holds the value read before arming.  A producer
 * publishes its data, issues a full barrier (rcoll_bell_fence), and wakes the bell if sleepers
 * is non-zero.  Either the producer sees the sleeper armed (and bumps seq, so the futex wait
 * returns at once or is woken), or the sleeper's last look sees the data: no wakeup is lost.
 * Waking costs a system call only when someone sleeps; looking costs one load.
 */
#ifndef RCOLL_UTIL_BELL_H
#define RCOLL_UTIL_BELL_H

#include <stdatomic.h>
#include <stdint.h>
#include "rcoll.h"

#define RCOLL_BELL_MAGIC 0x7263424cu /* "rcBL" */

typedef struct {
    uint32_t magic; /* RCOLL_BELL_MAGIC */
    int32_t pid;    /* the owner */
    char pad[56];
    _Atomic uint32_t seq;      /* bumped by every wake */
    _Atomic uint32_t sleepers; /* the owner's threads armed or asleep on seq */
} rcoll_bell_t;

/* This process's bell (made on first use; a forked child makes its own) and the descriptor
 * other processes open it by (/proc/<pid>/fd/<fd>). */
rcoll_status_t rcoll_bell_self(rcoll_bell_t **bell, int32_t *fd);
/* Map another process's bell; NULL (and the error set) when it cannot be opened or is not a
 * bell of that process. */
rcoll_bell_t *rcoll_bell_attach(int32_t pid, int32_t fd);
void rcoll_bell_detach(rcoll_bell_t *bell);

/* Producers: the full barrier between publishing and looking at sleepers (once per batch of
 * rcoll_bell_ring calls), then a ring per bell. */
static inline void rcoll_bell_fence(void) { atomic_thread_fence(memory_order_seq_cst); }
void rcoll_bell_wake(rcoll_bell_t *bell);
static inline void rcoll_bell_ring(rcoll_bell_t *bell)
{
    if (__builtin_expect(atomic_load_explicit(&bell->sleepers, memory_order_relaxed) != 0, 0))
        rcoll_bell_wake(bell);
}

/* Sleepers: arm (returns the seq to sleep on), look once more, sleep at most max_ns unless a
 * ring came since arming, disarm. */
static inline uint32_t rcoll_bell_arm(rcoll_bell_t *bell)
{
    uint32_t seen = atomic_load_explicit(&bell->seq, memory_order_acquire);
    atomic_fetch_add_explicit(&bell->sleepers, 1, memory_order_seq_cst);
    return seen;
}
void rcoll_bell_sleep(rcoll_bell_t *bell, uint32_t seen, uint64_t max_ns);
static inline void rcoll_bell_disarm(rcoll_bell_t *bell)
{
    atomic_fetch_sub_explicit(&bell->sleepers, 1, memory_order_relaxed);
}

#endif
