/*
 * oneshot_proto.h - the one-kernel all-reduce's synchronisation (oneshot.h states the
 * protocol), written once: a block's meet with the peers on the flags and its stop.  The
 * kernel (reduce.cu), the scripted driver (tests/common/cuda_script_lib.c) and the host-thread
 * test (tests/unit/test_oneshot_proto.c, also under ThreadSanitizer) run this same code.
 * Plain C, no CUDA header; nothing here touches slot data, only the header's words.
 *
 * The memory-ordering operations are four primitives, the only place that differs:
 *                      device (__CUDA_ARCH__)            host
 *   rcoll_os_ld_acquire  ld.acquire.sys.global.u64       __atomic_load_n(ACQUIRE)
 *   rcoll_os_st_release  st.release.sys.global.u64       __atomic_store_n(RELEASE)
 *   rcoll_os_fence       __threadfence_system()          __atomic_thread_fence(SEQ_CST)
 *   rcoll_os_now_ns      %globaltimer                    clock_gettime(CLOCK_MONOTONIC)
 * and rcoll_os_pause(spins), called between two looks at a peer's flag: nothing on the device,
 * a short sleep now and then on the host (ranks there are processes or threads sharing CPUs).
 * A test may replace the clock and the pause (define RCOLL_OS_NOW_NS / RCOLL_OS_PAUSE to a
 * function of its own before including this header) to make time jump or to add delays; the
 * memory-ordering primitives are never replaced.
 */
#ifndef RCOLL_CUDA_ONESHOT_PROTO_H
#define RCOLL_CUDA_ONESHOT_PROTO_H

#include <stdint.h>
#include <time.h>

#include "cuda/oneshot.h"

RCOLL_ONESHOT_HD uint64_t rcoll_os_ld_acquire(const uint64_t *p)
{
#ifdef __CUDA_ARCH__
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

RCOLL_ONESHOT_HD void rcoll_os_st_release(uint64_t *p, uint64_t v)
{
#ifdef __CUDA_ARCH__
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* Every write before it reaches the system (peers, the host) before any write after it. */
RCOLL_ONESHOT_HD void rcoll_os_fence(void)
{
#ifdef __CUDA_ARCH__
    __threadfence_system();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

RCOLL_ONESHOT_HD uint64_t rcoll_os_now_ns(void)
{
#ifdef __CUDA_ARCH__
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

RCOLL_ONESHOT_HD void rcoll_os_pause(unsigned spins)
{
#ifdef __CUDA_ARCH__
    (void)spins;
#else
    if (spins > 100) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
#endif
}

#ifndef RCOLL_OS_NOW_NS
#define RCOLL_OS_NOW_NS rcoll_os_now_ns
#endif
#ifndef RCOLL_OS_PAUSE
#define RCOLL_OS_PAUSE rcoll_os_pause
#endif

/* The 64-bit word at byte offset off of a workspace (an address as the args hold it). */
RCOLL_ONESHOT_HD uint64_t *rcoll_os_word(uint64_t ws, unsigned off)
{
    return (uint64_t *)(uintptr_t)(ws + off);
}

/* flag[b][p] of the flag set at byte offset off (0 or RCOLL_ONESHOT_FLAG2) of workspace ws:
 * the word block b of rank p pushes into ws (cuda/oneshot.h, the layout). */
RCOLL_ONESHOT_HD uint64_t *rcoll_os_flag(uint64_t ws, unsigned off, unsigned b, int p)
{
    return rcoll_os_word(ws, off) + (uint64_t)b * RCOLL_ONESHOT_MAX_RANKS + (unsigned)p;
}

/* What a peer's flag f says to a block of the call whose flag is mine. */
enum {
    RCOLL_OS_WAIT = 0, /* an earlier call's (or none yet): look again */
    RCOLL_OS_MET = 1,  /* this call's, or a later one (it met this rank's flag, so they matched) */
    RCOLL_OS_OTHER = 2 /* this call's number with another signature: a different call */
};
RCOLL_ONESHOT_HD int rcoll_os_judge(uint64_t f, uint64_t mine)
{
    const int32_t ahead = (int32_t)((uint32_t)(f >> 32) - (uint32_t)(mine >> 32));
    if (ahead > 0) return RCOLL_OS_MET; /* gone on: it met this rank's flag of this call */
    if (ahead == 0) return f == mine ? RCOLL_OS_MET : RCOLL_OS_OTHER;
    return RCOLL_OS_WAIT;
}

/* Block b stops: its report (peer p, whose flag or abort word read f; a record that already
 * holds a failure keeps it, so that the meets of a pieced call, one report for all, say what
 * failed first), and this rank's abort word set, so that every later call, here and at the
 * peers waiting for this rank, stops at once.  Returns 1. */
RCOLL_ONESHOT_HD int rcoll_os_stop(const rcoll_oneshot_args_t *a, unsigned b, uint32_t code,
                                   int p, uint64_t f)
{
    volatile rcoll_oneshot_err_t *e = (volatile rcoll_oneshot_err_t *)(uintptr_t)a->err + b;
    if (e->code == RCOLL_ONESHOT_OK) { /* the first failure stays (several meets, one report) */
        e->peer = p;
        e->flag = f;
        e->code = code;
    }
    rcoll_os_st_release(rcoll_os_word(a->peer[a->rank], RCOLL_ONESHOT_ABORT),
                        a->flag ? a->flag : 1);
    rcoll_os_fence();
    return 1;
}

/* The meet of block b on the flags at byte offset off, in two halves (a driver that carries
 * the blocks out one after another publishes every block's flag before it waits for any).
 * Publishing: unless this rank's abort word is set (then the block stops: 1), the flag
 * pushed into flag[b][rank] of every rank's header, this rank's own included, after the
 * block's writes (the caller orders them before this thread, e.g. __syncthreads; the fence
 * then orders them, cumulatively, before every store of the flag, and each store is a release
 * of its own); 0.  A peer that loads the flag with acquire then sees the block's data. */
RCOLL_ONESHOT_HD int rcoll_os_publish(const rcoll_oneshot_args_t *a, unsigned b, unsigned off)
{
    const uint64_t own_abort = rcoll_os_ld_acquire(rcoll_os_word(a->peer[a->rank],
                                                                 RCOLL_ONESHOT_ABORT));
    if (own_abort) return rcoll_os_stop(a, b, RCOLL_ONESHOT_ABORTED, a->rank, own_abort);
    rcoll_os_fence(); /* the block's writes first */
    for (int p = 0; p < a->nranks; p++)
        rcoll_os_st_release(rcoll_os_flag(a->peer[p], off, b, a->rank), a->flag);
    return 0;
}

/* Waiting, from start (the clock read after publishing, always a reading: 0 is a time like
 * any other), for every peer p's flag[b][p] at off in this rank's own header (a local load:
 * the peers pushed their flags here): 0 when the block may go on; else 1, the block's record
 * in a->err saying why.  The peer's abort word (in the peer's memory: a load over the link)
 * and the deadline are looked at every 32nd look at its flag only (the flag's load is the
 * hot one), so never before a full poll interval.  A peer that published another call's flag
 * and then stopped between the look at its flag and the one at its abort word is named as a
 * mismatch, not as stopped: the flag is looked at once more after the abort word.  And a
 * deadline that has passed is a
 * timeout only if the flag, looked at once more after the clock, still says wait: a block held between its last look and the clock (a
 * thread descheduled, a block off a time-sliced GPU) must not time out a peer that arrived
 * meanwhile. */
RCOLL_ONESHOT_HD int rcoll_os_wait(const rcoll_oneshot_args_t *a, unsigned b, unsigned off,
                                   uint64_t start)
{
    for (int p = 0; p < a->nranks; p++) {
        if (p == a->rank) continue;
        const uint64_t *pf = rcoll_os_flag(a->peer[a->rank], off, b, p);
        const uint64_t *pa = rcoll_os_word(a->peer[p], RCOLL_ONESHOT_ABORT);
        for (unsigned spins = 1;; spins++) {
            const uint64_t f = rcoll_os_ld_acquire(pf);
            const int v = rcoll_os_judge(f, a->flag);
            if (v == RCOLL_OS_MET) break;
            if (v == RCOLL_OS_OTHER) return rcoll_os_stop(a, b, RCOLL_ONESHOT_MISMATCH, p, f);
            RCOLL_OS_PAUSE(spins);
            if (spins % 32) continue;
            const uint64_t ab = rcoll_os_ld_acquire(pa);
            if (ab) { /* the peer stopped; its flag, looked at again, may say why */
                const uint64_t g = rcoll_os_ld_acquire(pf);
                const int w = rcoll_os_judge(g, a->flag);
                if (w == RCOLL_OS_MET) break; /* it met this block first */
                if (w == RCOLL_OS_OTHER) return rcoll_os_stop(a, b, RCOLL_ONESHOT_MISMATCH, p, g);
                return rcoll_os_stop(a, b, RCOLL_ONESHOT_ABORTED, p, ab);
            }
            if (RCOLL_OS_NOW_NS() - start <= a->timeout_ns) continue;
            const uint64_t g = rcoll_os_ld_acquire(pf); /* the last look */
            const int w = rcoll_os_judge(g, a->flag);
            if (w == RCOLL_OS_MET) break;
            return rcoll_os_stop(a, b, w == RCOLL_OS_OTHER ? RCOLL_ONESHOT_MISMATCH
                                                           : RCOLL_ONESHOT_TIMEOUT, p, g);
        }
    }
    return 0;
}

/* Block b pushes its flag at off into every rank's header, then waits for every peer's in
 * its own: 0 when the block may go on; else 1, its record in a->err saying why. */
RCOLL_ONESHOT_HD int rcoll_os_meet(const rcoll_oneshot_args_t *a, unsigned b, unsigned off)
{
    if (rcoll_os_publish(a, b, off)) return 1;
    return rcoll_os_wait(a, b, off, RCOLL_OS_NOW_NS());
}

#endif
