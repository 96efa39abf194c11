/*
 * cpath.c - the critical-path clock (cpath.h).
 */
#include <time.h>

#include "util/cpath.h"

/* Per thread: the count at the last merge, and the thread's CPU time then.  A thread starts
 * at its own CPU time (a process's first thread: the start of the process, loading included). */
static __thread uint64_t path_base_ns, path_cpu_ns;
static __thread int path_started;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rcoll_cpath_ns(void)
{
    uint64_t cpu = thread_cpu_ns();
    if (!path_started) {
        path_started = 1;
        path_base_ns = cpu;
        path_cpu_ns = cpu;
    }
    return path_base_ns + (cpu >= path_cpu_ns ? cpu - path_cpu_ns : 0);
}

uint32_t rcoll_cpath_stamp(void)
{
    uint64_t us = rcoll_cpath_ns() / 1000u;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void rcoll_cpath_merge(uint32_t stamp_us)
{
    uint64_t now = rcoll_cpath_ns(), theirs = (uint64_t)stamp_us * 1000u;
    if (theirs <= now) return;
    path_base_ns = theirs;
    path_cpu_ns = thread_cpu_ns();
}
