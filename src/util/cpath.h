/*
 * cpath.h - the critical-path clock: CPU time along the longest chain of dependent work.
 *
 * On a machine with fewer cores than ranks (this project's 2-core VM running 1024 ranks) the
 * wall time of a bootstrap measures the machine's queue of runnable processes, not the
 * protocol.  This clock measures the protocol: each thread counts its own CPU time
 * (CLOCK_THREAD_CPUTIME_ID); every bootstrap message carries its sender's count (the header's
 * `path` field, microseconds); a receiver whose count is behind the message's takes the
 * message's.  A thread's count is then the CPU time of the longest chain of work, through the
 * messages it depends on, from the start of some process to now: what the wall time would be
 * if every thread had a CPU of its own and messages took no time (Lamport's clock over CPU
 * time instead of events).  Blocking, sleeping and waiting for a CPU do not count, nor do
 * the fruitless iterations of a poll loop during creation (below).
 */
#ifndef RCOLL_UTIL_CPATH_H
#define RCOLL_UTIL_CPATH_H

#include <stdint.h>

/* This thread's count, in nanoseconds. */
uint64_t rcoll_cpath_ns(void);

/* The count to put in a message this thread sends: microseconds, saturated at UINT32_MAX. */
uint32_t rcoll_cpath_stamp(void);

/* A message stamped `stamp_us` arrived: this thread's work from now on depends on it. */
void rcoll_cpath_merge(uint32_t stamp_us);

/* Restart this thread's count at 0: a creation's own path (RCOLL_SETUP_PATH=call), without
 * what the process did before (starting, loading, the caller's own work). */
void rcoll_cpath_restart(void);

/* Waiting is not work: while this thread creates a communicator (set around the creation
 * call), the CPU of poll loops that found nothing - a rank yielding while it waits for a
 * peer to connect (util/time.c's rcoll_backoff_wait, in its yield and nap phases) - is left
 * out of its count.  Outside creation nothing is read: the data path's waits stay cheap. */
void rcoll_cpath_set_creating(int on);
int rcoll_cpath_creating(void);
/* This thread's CPU time (ns), and: leave out the CPU time since that reading. */
uint64_t rcoll_cpath_cpu_ns(void);
void rcoll_cpath_skip_since(uint64_t since_cpu_ns);

#endif
