/*
 * time.h - monotonic clock helpers and deadlines, and the polite wait used by every poll loop.
 */
#ifndef RCOLL_UTIL_TIME_H
#define RCOLL_UTIL_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t rcoll_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double rcoll_now_s(void) { return (double)rcoll_now_ns() * 1e-9; }

/* State of a poll loop: spins for a while, then yields the CPU until poll_ns have passed
 * since the wait began, then sleeps in short naps, so that oversubscribed runs (more ranks
 * than cores) keep moving and a long-idle rank costs little CPU, while a wait that ends
 * within poll_ns (a peer a few ms late) is noticed at once.  Reset it on progress. */
typedef struct {
    uint32_t iter;
    uint32_t spin_limit; /* iterations of pure spinning before yielding (RCOLL_SPIN) */
    uint64_t poll_ns;    /* from the first yield: keep polling this long (RCOLL_POLL_US) */
    uint64_t nap_at_ns;  /* when the yield phase ends; 0 before it is known, UINT64_MAX after */
    uint64_t cpu_mark;   /* during creation: the thread's CPU time after the last yield or nap
                          * (util/cpath.h: the fruitless iterations between are left out) */
} rcoll_backoff_t;

void rcoll_backoff_init(rcoll_backoff_t *b, uint32_t spin_limit, uint64_t poll_ns);
static inline void rcoll_backoff_reset(rcoll_backoff_t *b)
{
    b->iter = 0;
    b->nap_at_ns = 0;
}
/* Called once per fruitless poll iteration. */
void rcoll_backoff_wait(rcoll_backoff_t *b);
/* Whether the polling time is up (the next rcoll_backoff_wait would nap): where a waiter can
 * sleep on something better than a nap, now is the time. */
static inline int rcoll_backoff_idle(const rcoll_backoff_t *b) { return b->nap_at_ns == UINT64_MAX; }

#endif
