/*
 * shmseg.c - host-shared segments (see shmseg.h).  Only memory management: no layout, no
 * synchronisation; the users of a segment define those.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/shmseg.h"
#include "util/status.h"

rcoll_status_t rcoll_shmseg_create(size_t size, const char *name, rcoll_shmseg_t *seg,
                                   rcoll_shmseg_ref_t *ref)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return rcoll_err_set_errno(RCOLL_ERR_UNSUPPORTED, errno, "memfd_create");
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc != 0) {
        close(fd);
        return rcoll_err_set_errno(RCOLL_ERR_NO_MEMORY, rc,
                                   "cannot reserve %zu bytes of shared memory (in a container, "
                                   "raise --shm-size or the memory limit)", size);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, e, "mmap of a %zu-byte segment", size);
    }
    seg->base = p;
    seg->size = size;
    seg->fd = fd;
    ref->pid = (int32_t)getpid();
    ref->fd = fd;
    ref->size = size;
    return RCOLL_OK;
}

rcoll_status_t rcoll_shmseg_attach(const rcoll_shmseg_ref_t *ref, rcoll_shmseg_t *seg)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)ref->pid, (int)ref->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return rcoll_err_set_errno(RCOLL_ERR_UNSUPPORTED, errno, "cannot open %s", path);
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || (uint64_t)end < ref->size) {
        close(fd);
        return rcoll_err_set(RCOLL_ERR_PROTOCOL, "%s is %lld bytes, expected %llu", path,
                             (long long)end, (unsigned long long)ref->size);
    }
    void *p = mmap(NULL, ref->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, e, "mmap of %s", path);
    seg->base = p;
    seg->size = ref->size;
    seg->fd = -1;
    return RCOLL_OK;
}

void rcoll_shmseg_detach(rcoll_shmseg_t *seg)
{
    if (seg->base) munmap(seg->base, seg->size);
    if (seg->fd >= 0) close(seg->fd);
    seg->base = NULL;
    seg->fd = -1;
}
