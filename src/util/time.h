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

/* State of a poll loop: spins for a while, then yields the CPU, then sleeps briefly, so that
 * oversubscribed runs (more ranks than cores) keep moving. Reset it whenever progress is made. */
typedef struct {
    uint32_t iter;
    uint32_t spin_limit; /* iterations of pure spinning before yielding (RCOLL_SPIN) */
} rcoll_backoff_t;

void rcoll_backoff_init(rcoll_backoff_t *b, uint32_t spin_limit);
static inline void rcoll_backoff_reset(rcoll_backoff_t *b) { b->iter = 0; }
/* Called once per fruitless poll iteration. */
void rcoll_backoff_wait(rcoll_backoff_t *b);

#endif
