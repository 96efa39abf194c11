/*
 * cpath.c - the critical-path clock (cpath.h).
 */
#include <time.h>

#include "util/cpath.h"

/* Per thread: the count at the last merge and the thread's CPU time then, and the CPU time
 * since then that was waiting (left out).  A thread starts at its own CPU time (a process's
 * first thread: the start of the process, loading included). */
static __thread uint64_t path_base_ns, path_cpu_ns, path_skipped_ns;
static __thread int path_started, path_creating;

uint64_t rcoll_cpath_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t path_at(uint64_t cpu)
{
    if (!path_started) {
        path_started = 1;
        path_base_ns = cpu;
        path_cpu_ns = cpu;
        path_skipped_ns = 0;
    }
    uint64_t ran = cpu >= path_cpu_ns ? cpu - path_cpu_ns : 0;
    return path_base_ns + (ran > path_skipped_ns ? ran - path_skipped_ns : 0);
}

uint64_t rcoll_cpath_ns(void) { return path_at(rcoll_cpath_cpu_ns()); }

uint32_t rcoll_cpath_stamp(void)
{
    uint64_t us = rcoll_cpath_ns() / 1000u;
    return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void rcoll_cpath_merge(uint32_t stamp_us)
{
    uint64_t cpu = rcoll_cpath_cpu_ns();
    uint64_t now = path_at(cpu), theirs = (uint64_t)stamp_us * 1000u;
    if (theirs <= now) return;
    path_base_ns = theirs;
    path_cpu_ns = cpu;
    path_skipped_ns = 0;
}

void rcoll_cpath_set_creating(int on) { path_creating = on; }

void rcoll_cpath_restart(void)
{
    path_started = 1;
    path_base_ns = 0;
    path_cpu_ns = rcoll_cpath_cpu_ns();
    path_skipped_ns = 0;
}

int rcoll_cpath_creating(void) { return path_creating; }

void rcoll_cpath_skip_since(uint64_t since_cpu_ns)
{
    uint64_t cpu = rcoll_cpath_cpu_ns();
    path_at(cpu);
    uint64_t from = since_cpu_ns > path_cpu_ns ? since_cpu_ns : path_cpu_ns;
    if (cpu > from) path_skipped_ns += cpu - from;
}
