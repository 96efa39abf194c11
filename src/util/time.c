/*
 * time.c - the polite wait of every poll loop: spin, then yield, then nap, so that ranks on
 * oversubscribed cores hand the CPU to the peer they are waiting for.
 */
#include <sched.h>
#include <time.h>

#include "util/time.h"

#define BACKOFF_YIELDS 2000u /* sched_yield calls before short naps */

void rcoll_backoff_init(rcoll_backoff_t *b, uint32_t spin_limit)
{
    b->iter = 0;
    b->spin_limit = spin_limit;
}

void rcoll_backoff_wait(rcoll_backoff_t *b)
{
    if (b->iter < b->spin_limit) {
        b->iter++;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    if (b->iter < b->spin_limit + BACKOFF_YIELDS) {
        b->iter++;
        sched_yield();
        return;
    }
    /* Long idle: a 50 us nap keeps an idle rank near 0% CPU while adding little latency. */
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}
