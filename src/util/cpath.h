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
 * time instead of events).  Waiting, sleeping and waiting for a CPU do not count.
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

#endif
