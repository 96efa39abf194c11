/*
 * shmseg.h - a shared memory segment for the processes of one host: created from a memfd
 * (nothing is left in /dev/shm, whatever happens), its pages reserved up front (no SIGBUS),
 * and attached by other processes of the same user through /proc/<pid>/fd/<fd>.
 */
#ifndef RCOLL_UTIL_SHMSEG_H
#define RCOLL_UTIL_SHMSEG_H

#include <stddef.h>
#include <stdint.h>
#include "rcoll.h"

typedef struct {
    void *base;
    size_t size;
    int fd;       /* the creator's memfd (-1 in attachers once mapped) */
} rcoll_shmseg_t;

/* Where other processes find a segment. */
typedef struct {
    int32_t pid;
    int32_t fd;
    uint64_t size;
} rcoll_shmseg_ref_t;

/* Create a zeroed segment of size bytes.  Errors name /dev/shm-style limits when the pages
 * cannot be reserved. */
rcoll_status_t rcoll_shmseg_create(size_t size, const char *name, rcoll_shmseg_t *seg,
                                   rcoll_shmseg_ref_t *ref);
/* Map the segment another process created. */
rcoll_status_t rcoll_shmseg_attach(const rcoll_shmseg_ref_t *ref, rcoll_shmseg_t *seg);
void rcoll_shmseg_detach(rcoll_shmseg_t *seg);

#endif
