/*
 * time.c - the polite wait of every poll loop: spin, then yield, then nap, so that ranks on
 * oversubscribed cores hand the CPU to the peer they are waiting for.
 */
#include <sched.h>
#include <time.h>

#include "util/cpath.h"
#include "util/time.h"

#define YIELD_CLOCK_EVERY 64u /* yields between clock readings in the yield phase */

void rcoll_backoff_init(rcoll_backoff_t *b, uint32_t spin_limit, uint64_t poll_ns)
{
    b->iter = 0;
    b->spin_limit = spin_limit;
    b->poll_ns = poll_ns;
    b->nap_at_ns = 0;
    b->cpu_mark = 0;
}

static void backoff_yield_or_nap(rcoll_backoff_t *b);

void rcoll_backoff_wait(rcoll_backoff_t *b)
{
    if (b->iter < b->spin_limit) {
        b->iter++;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    /* Creating a communicator: this iteration found nothing, and neither did the one before
     * (no reset between: iter is past the spin phase), so the CPU since that one's wait was
     * waiting, not work (util/cpath.h). */
    if (!rcoll_cpath_creating()) {
        backoff_yield_or_nap(b);
        return;
    }
    if (b->iter > b->spin_limit) rcoll_cpath_skip_since(b->cpu_mark);
    backoff_yield_or_nap(b);
    b->cpu_mark = rcoll_cpath_cpu_ns();
}

static void backoff_yield_or_nap(rcoll_backoff_t *b)
{
    /* Yield until the polling time is up.  The clock is read once per YIELD_CLOCK_EVERY
     * yields only: with ranks sharing cores most waits end within a few yields, and a
     * reading per yield made a small all-reduce on 4 ranks / 2 cores 40% slower here. */
    if (b->nap_at_ns != UINT64_MAX) {
        uint32_t y = ++b->iter - b->spin_limit;
        if (y % YIELD_CLOCK_EVERY == 0) {
            uint64_t now = rcoll_now_ns();
            if (b->nap_at_ns == 0) b->nap_at_ns = now + b->poll_ns;
            else if (now >= b->nap_at_ns) b->nap_at_ns = UINT64_MAX; /* naps from now on */
        }
        if (b->nap_at_ns != UINT64_MAX) {
            sched_yield();
            return;
        }
    }
    /* Long idle: a 50 us nap keeps an idle rank near 0% CPU; a peer that arrives now is
     * noticed up to a nap (plus the kernel's timer slack) late. */
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}
