/*
 * bell.c - the process doorbell (bell.h): one page of a memfd, shared with the host's other
 * processes through /proc/<pid>/fd, slept on and woken with FUTEX_WAIT / FUTEX_WAKE (shared,
 * not private: the word lives in a mapping several processes have).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/bell.h"
#include "util/shmseg.h"
#include "util/status.h"

#define BELL_BYTES 4096

static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_shmseg_t self_seg = {NULL, 0, -1};
static pid_t self_pid;

rcoll_status_t rcoll_bell_self(rcoll_bell_t **bell, int32_t *fd)
{
    pthread_mutex_lock(&self_lock);
    pid_t pid = getpid();
    if (self_seg.base && self_pid != pid) {
        /* A forked child: the parent's bell is not its own.  The mapping stays (the parent's
         * memory), the child makes a fresh one. */
        self_seg.base = NULL;
        self_seg.fd = -1;
    }
    rcoll_status_t st = RCOLL_OK;
    if (!self_seg.base) {
        rcoll_shmseg_ref_t ref;
        st = rcoll_shmseg_create(BELL_BYTES, "rcoll-bell", &self_seg, &ref);
        if (st == RCOLL_OK) {
            rcoll_bell_t *b = self_seg.base;
            b->magic = RCOLL_BELL_MAGIC;
            b->pid = (int32_t)pid;
            self_pid = pid;
        }
    }
    if (st == RCOLL_OK) {
        *bell = self_seg.base;
        *fd = (int32_t)self_seg.fd;
    }
    pthread_mutex_unlock(&self_lock);
    return st;
}

rcoll_bell_t *rcoll_bell_attach(int32_t pid, int32_t fd)
{
    if (pid <= 0 || fd < 0) {
        rcoll_err_set(RCOLL_ERR_PROTOCOL, "no bell (pid %d, fd %d)", (int)pid, (int)fd);
        return NULL;
    }
    rcoll_shmseg_ref_t ref = {.pid = pid, .fd = fd, .size = BELL_BYTES};
    rcoll_shmseg_t seg;
    if (rcoll_shmseg_attach(&ref, &seg) != RCOLL_OK) return NULL;
    rcoll_bell_t *b = seg.base;
    if (b->magic != RCOLL_BELL_MAGIC || b->pid != pid) {
        rcoll_err_set(RCOLL_ERR_PROTOCOL, "/proc/%d/fd/%d is not the bell of process %d",
                      (int)pid, (int)fd, (int)pid);
        rcoll_shmseg_detach(&seg);
        return NULL;
    }
    return b;
}

void rcoll_bell_detach(rcoll_bell_t *bell)
{
    if (!bell) return;
    rcoll_shmseg_t seg = {.base = bell, .size = BELL_BYTES, .fd = -1};
    rcoll_shmseg_detach(&seg);
}

void rcoll_bell_wake(rcoll_bell_t *bell)
{
    atomic_fetch_add_explicit(&bell->seq, 1, memory_order_release);
    syscall(SYS_futex, &bell->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void rcoll_bell_sleep(rcoll_bell_t *bell, uint32_t seen, uint64_t max_ns)
{
    struct timespec ts = {(time_t)(max_ns / 1000000000ull), (long)(max_ns % 1000000000ull)};
    /* EAGAIN: rung since arming; EINTR: a signal; ETIMEDOUT: the slice is up.  The caller
     * looks again in every case. */
    syscall(SYS_futex, &bell->seq, FUTEX_WAIT, seen, &ts, NULL, 0);
}
