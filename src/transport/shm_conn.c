/*
 * shm_conn.c - setting up connections of the shared-memory transport: listen, connect and
 * accept, the handshake over the abstract Unix socket (hello + segment fd, nonce, peer
 * credentials and pidfd), and creating, sealing and validating the connection's segment.
 * The data path that then runs over the segment is in shm.c.
 */
#include "transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "util/log.h"
#include "util/net.h"
#include "util/status.h"

#define SHM_MAX_SEG ((uint64_t)1 << 34)  /* largest segment a receiver maps */
#define SHM_LISTEN_BACKLOG 512
#define SHM_DEVSHM "/dev/shm"

/* ---------------------------------------------------------------------------------------------
 * Segments
 * ------------------------------------------------------------------------------------------ */

size_t shm_seg_size(uint32_t nslots, uint32_t slot_bytes)
{
    size_t b = RCOLL_SHM_SLOTS_OFFSET + (size_t)nslots * (sizeof(rcoll_shm_slot_t) + slot_bytes);
    return (b + 4095) & ~(size_t)4095;
}

/* Bytes free in /dev/shm, or an error when it is missing. */
rcoll_status_t shm_devshm_free(uint64_t *free_p)
{
    struct statvfs sv;
    if (statvfs(SHM_DEVSHM, &sv) != 0)
        return rcoll_err_set_errno(RCOLL_ERR_UNSUPPORTED, errno, "no %s (needed where "
                                   "memfd_create is missing)", SHM_DEVSHM);
    *free_p = (uint64_t)sv.f_bavail * sv.f_frsize;
    return RCOLL_OK;
}

rcoll_status_t shm_devshm_too_small(uint64_t avail, size_t need)
{
    return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "%s too small: %llu bytes free, a shared-memory "
                         "connection needs %zu: run the container with --shm-size=1g (or "
                         "more), or lower RCOLL_BUFFSIZE", SHM_DEVSHM,
                         (unsigned long long)avail, need);
}

/* Touch every page of a connection's slots once at set-up, in each process that maps them:
 * write (the sender, which creates the segment: zeros, before the peer sees it) or read (the
 * receiver).  MAP_POPULATE has the pages mapped already, but under a hypervisor that shadows
 * the guest's page tables (this project's VMs) the first access of each page by a process
 * still traps, ~10 us a page, and happens inside the calls: every message longer than any
 * before on a connection paid it once in each of the 8 slots.  Recursive doubling over shared
 * memory on 2 ranks, 32 KiB in place: 8 calls of ~100 us, then 3-5 us; on a first 256 KiB
 * probe point it read 628 us instead of ~20.  Here it costs nothing measurable at creation
 * (2 ranks 26-33 ms with it, 26-38 without; the pages are one in 4096 bytes). */
static void shm_touch(unsigned char *p, size_t n, int write)
{
    volatile unsigned char *v = p;
    unsigned char sink = 0;
    for (size_t i = 0; i < n; i += 4096) {
        if (write) v[i] = 0;
        else sink ^= v[i];
    }
    (void)sink;
}

/* Open an unnamed segment file: a memfd, else a /dev/shm file unlinked at once (its fd
 * travels by SCM_RIGHTS, so no name is needed once it is open). */
static rcoll_status_t shm_seg_open(int *fd_p, int *posix_p)
{
    int fd = -1;
    if (shm_g.have_memfd) {
        fd = memfd_create("rcoll-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 && errno != ENOSYS && errno != EINVAL)
            return rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                       "shm: memfd_create");
    }
    *posix_p = fd < 0;
    if (fd < 0) { /* no size check here: posix_fallocate is the one that cannot race */
        uint64_t rnd;
        char name[64];
        rcoll_status_t st = rcoll_random_bytes(&rnd, sizeof(rnd));
        if (st != RCOLL_OK)
            return st;
        snprintf(name, sizeof(name), "/rcoll-%d-%016llx", (int)getpid(),
                 (unsigned long long)rnd);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
            return rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                       "shm: shm_open %s", name);
        shm_unlink(name);
    }
    *fd_p = fd;
    return RCOLL_OK;
}

/* Create, back and map the segment of a new send comm.  *fd_p is its fd (to pass on). */
static rcoll_status_t shm_seg_create(shm_comm_t *c, int *fd_p, uint32_t *flags_p)
{
    size_t bytes = shm_seg_size(shm_g.nslots, shm_g.slot_bytes);
    int fd = -1, posix = 0, err;
    rcoll_status_t st = shm_seg_open(&fd, &posix);
    if (st != RCOLL_OK)
        return st;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm: ftruncate of "
                                 "a %zu-byte segment", bytes);
        goto err_close;
    }
    /* Back every page now, so that no later store can meet a full tmpfs (SIGBUS). */
    err = posix_fallocate(fd, 0, (off_t)bytes);
    if (err != 0) {
        uint64_t avail = 0;
        if (err == ENOSPC && posix && shm_devshm_free(&avail) == RCOLL_OK)
            st = shm_devshm_too_small(avail, bytes);
        else if (err == ENOSPC || err == ENOMEM)
            st = rcoll_err_set_errno(RCOLL_ERR_NO_MEMORY, err, "shm: cannot back a %zu-byte "
                                     "segment (memory limit of this container?); lower "
                                     "RCOLL_BUFFSIZE", bytes);
        else
            st = rcoll_err_set_errno(RCOLL_ERR_SYSTEM, err, "shm: fallocate of a %zu-byte "
                                     "segment", bytes);
        goto err_close;
    }
    *flags_p = 0;
    if (!posix && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        *flags_p = RCOLL_SHM_HELLO_SEALED;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm: mmap of a "
                                 "%zu-byte segment", bytes);
        goto err_close;
    }
    c->seg = p;
    c->seg_bytes = bytes;
    c->hdr = p;
    c->slots = c->seg + RCOLL_SHM_SLOTS_OFFSET;
    c->nslots = shm_g.nslots;
    c->slot_bytes = shm_g.slot_bytes;
    c->stride = sizeof(rcoll_shm_slot_t) + c->slot_bytes;
    c->hdr->magic = RCOLL_SHM_SEG_MAGIC;
    c->hdr->version = RCOLL_SHM_VERSION;
    c->hdr->nslots = c->nslots;
    c->hdr->slot_bytes = c->slot_bytes;
    c->hdr->seg_bytes = bytes;
    c->hdr->pid = (int32_t)getpid();
    shm_touch(c->slots, bytes - RCOLL_SHM_SLOTS_OFFSET, 1);
    *fd_p = fd;
    return RCOLL_OK;

err_close:
    close(fd);
    return st;
}

const char *rcoll_shm_seg_check(const rcoll_shm_seg_t *hdr, uint64_t seg_bytes,
                                uint32_t *nslots_p, uint32_t *slot_bytes_p)
{
    /* Read once; the peer could change the header later, the copies stay.  nslots is a power
     * of two so that the data path indexes slots with a mask. */
    uint32_t nslots = hdr->nslots, slot_bytes = hdr->slot_bytes;
    if (hdr->magic != RCOLL_SHM_SEG_MAGIC || hdr->version != RCOLL_SHM_VERSION)
        return "bad segment magic or version";
    if (nslots < 1 || nslots > 65536 || (nslots & (nslots - 1)) || slot_bytes < 64 ||
        slot_bytes % 64 != 0 ||
        slot_bytes > (1u << 30) || shm_seg_size(nslots, slot_bytes) > seg_bytes)
        return "segment geometry does not fit its size";
    if (atomic_load(&hdr->consumed) != 0)
        return "segment already in use";
    *nslots_p = nslots;
    *slot_bytes_p = slot_bytes;
    return NULL;
}

/* Map a segment a connector passed; NULL return = fine, else why it is unacceptable (the
 * connection is then dropped).  Local failures return an error status in *st_p. */
static const char *shm_seg_attach(shm_comm_t *c, int fd, const rcoll_shm_hello_t *h,
                                  rcoll_status_t *st_p)
{
    struct stat sb;
    struct statfs fs;
    *st_p = RCOLL_OK;
    if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        return "segment is not shared memory (memfd or tmpfs)";
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != h->seg_bytes ||
        h->seg_bytes < RCOLL_SHM_SLOTS_OFFSET || h->seg_bytes > SHM_MAX_SEG)
        return "segment size does not match the hello";
    if (h->flags & RCOLL_SHM_HELLO_SEALED) {
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_SEAL))
            return "segment is not sealed as the hello says";
    }
    void *p = mmap(NULL, (size_t)h->seg_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        if (errno != ENOMEM) /* not a mappable file: the peer's fault */
            return "its segment cannot be mapped";
        *st_p = rcoll_err_set_errno(RCOLL_ERR_NO_MEMORY, errno, "shm accept: mmap of a "
                                    "%llu-byte segment", (unsigned long long)h->seg_bytes);
        return "no memory to map its segment here";
    }
    c->seg = p;
    c->seg_bytes = (size_t)h->seg_bytes;
    c->hdr = p;
    uint32_t nslots, slot_bytes;
    const char *bad = rcoll_shm_seg_check(c->hdr, c->seg_bytes, &nslots, &slot_bytes);
    if (bad)
        return bad;
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->stride = sizeof(rcoll_shm_slot_t) + slot_bytes;
    c->slots = c->seg + RCOLL_SHM_SLOTS_OFFSET;
    shm_touch(c->slots, c->seg_bytes - RCOLL_SHM_SLOTS_OFFSET, 0);
    return NULL;
}

/* Can this process read the peer's memory?  Reads back the probe word of its hello. */
static int shm_probe_peer(int pid, const rcoll_shm_hello_t *h)
{
    uint64_t v = 0;
    if (!shm_g.vmread || pid <= 0 || h->probe_addr == 0)
        return 0;
    struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)h->probe_addr, .iov_len = sizeof(v)};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(v) &&
           v == h->probe_value;
}

/* ---------------------------------------------------------------------------------------------
 * Listen / accept
 * ------------------------------------------------------------------------------------------ */

static socklen_t shm_sun(struct sockaddr_un *a, const char *name)
{
    size_t n = strlen(name);
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path + 1, name, n); /* sun_path[0] = '\0': the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int shm_peer_pid(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return -1;
    return (int)cr.pid;
}

/* Learn who is at the other end of the comm's socket, and watch that process. */
static void shm_watch_peer(shm_comm_t *c)
{
    c->peer_pid = shm_peer_pid(c->fd);
#ifdef SYS_pidfd_open
    if (c->peer_pid > 0 && c->peer_pid != (int)getpid())
        c->pidfd = (int)syscall(SYS_pidfd_open, c->peer_pid, 0); /* close-on-exec */
#endif
}

rcoll_status_t shm_listen(int dev, void *handle, void **listen_comm)
{
    rcoll_shm_handle_t h;
    struct sockaddr_un a;
    rcoll_status_t st;
    int rc = -1;

    if (!shm_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "shm listen before init");
    if (dev != 0 || !handle || !listen_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm listen: bad device %d or NULL "
                             "handle/listen_comm", dev);
    shm_listen_t *l = calloc(1, sizeof(*l));
    if (!l)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "shm listen: out of memory");
    memset(&h, 0, sizeof(h));
    l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->fd < 0) {
        st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm listen: socket");
        goto err_free;
    }
    for (int tries = 0; tries < 8 && rc != 0; tries++) { /* a random name rarely collides */
        uint64_t rnd;
        st = rcoll_random_bytes(&rnd, sizeof(rnd));
        if (st != RCOLL_OK)
            goto err_close;
        snprintf(h.name, sizeof(h.name), "rcoll-shm-%016llx", (unsigned long long)rnd);
        rc = bind(l->fd, (struct sockaddr *)&a, shm_sun(&a, h.name));
        if (rc != 0 && errno != EADDRINUSE)
            break;
    }
    if (rc != 0 || listen(l->fd, SHM_LISTEN_BACKLOG) != 0) {
        st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm listen: bind or "
                                 "listen on abstract socket @%s", h.name);
        goto err_close;
    }
    st = rcoll_random_bytes(&l->nonce, sizeof(l->nonce));
    if (st != RCOLL_OK)
        goto err_close;

    h.magic = RCOLL_SHM_HANDLE_MAGIC;
    h.version = RCOLL_SHM_VERSION;
    h.nonce = l->nonce;
    h.host_id = shm_g.host_id;
    h.pid = (int32_t)getpid();
    snprintf(h.host, sizeof(h.host), "%s", shm_g.host);
    memset(handle, 0, RCOLL_TRANSPORT_HANDLE_BYTES);
    memcpy(handle, &h, sizeof(h));
    *listen_comm = l;
    return RCOLL_OK;

err_close:
    close(l->fd);
err_free:
    free(l);
    return st;
}

/* Close pending socket i with one WARN naming the peer process, and forget it. */
static void shm_pend_drop(shm_listen_t *l, int i, const char *why)
{
    RCOLL_WARN(SHM, "shm: dropping connection from pid %d: %s", shm_peer_pid(l->pend[i].fd),
               why);
    close(l->pend[i].fd);
    l->pend[i] = l->pend[--l->npend];
}

const char *rcoll_shm_hello_check(const rcoll_shm_hello_t *h, size_t n, uint64_t nonce)
{
    if (n != sizeof(*h) || h->magic != RCOLL_SHM_HELLO_MAGIC || h->version != RCOLL_SHM_VERSION)
        return "not an rcoll shm handshake of this version";
    if (h->nonce != nonce)
        return "wrong nonce (handshake for another listener)";
    return NULL;
}

/* Receive the hello (and segment fd) of pending socket i.  Returns 1 when the socket left
 * the pending list (dropped, or *comm_p set); 0 while its hello has not arrived. */
static int shm_pend_step(shm_listen_t *l, int i, shm_comm_t **comm_p, rcoll_status_t *st_p)
{
    rcoll_shm_hello_t h;
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    int fds[4], nfd = 0, fd = l->pend[i].fd;
    const char *bad = NULL;
    ssize_t n;

    memset(&h, 0, sizeof(h));
    do
        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int j = 0; j < k; j++) {
            int f;
            memcpy(&f, CMSG_DATA(cm) + (size_t)j * sizeof(int), sizeof(f));
            if (nfd < 4)
                fds[nfd++] = f;
            else
                close(f);
        }
    }
    if (n < 0)
        bad = "handshake failed";
    else if (n == 0)
        bad = "closed during the handshake";
    else if (mh.msg_flags & MSG_TRUNC)
        bad = "not an rcoll shm handshake of this version";
    else
        bad = rcoll_shm_hello_check(&h, (size_t)n, l->nonce);
    if (!bad && nfd == 0 && (mh.msg_flags & MSG_CTRUNC)) {
        /* A valid hello whose descriptor the kernel dropped on the way in: this process has
         * no descriptor free.  A local failure, not the peer's: the accept fails with it
         * (silently dropping the connection leaves both sides waiting for the timeout). */
        int pid = shm_peer_pid(fd);
        *st_p = rcoll_err_set(RCOLL_ERR_SYSTEM, "shm accept: the segment descriptor sent by "
                              "pid %d was dropped on receipt (MSG_CTRUNC): this process has no "
                              "file descriptor free (RLIMIT_NOFILE: raise ulimit -n)", pid);
        bad = "its segment descriptor was dropped: this process has no file descriptor free";
    }
    if (!bad && (nfd != 1 || (mh.msg_flags & MSG_CTRUNC)))
        bad = "no segment (or more than one fd) attached";

    if (!bad) {
        shm_comm_t *c = shm_comm_alloc(1);
        if (!c) {
            *st_p = rcoll_err_set(RCOLL_ERR_NO_MEMORY, "shm accept: out of memory");
            bad = "out of memory";
        } else {
            c->fd = fd;
            shm_watch_peer(c);
            bad = shm_seg_attach(c, fds[0], &h, st_p);
            if (!bad) {
                if (shm_probe_peer(c->peer_pid, &h))
                    atomic_fetch_or_explicit(&c->hdr->recv_flags, RCOLL_SHM_RECV_VMREAD,
                                             memory_order_relaxed);
                RCOLL_INFO(SHM, "shm: accepted a connection from pid %d: %u slots x %u "
                           "bytes, single-copy %s", c->peer_pid, c->nslots, c->slot_bytes,
                           (c->hdr->recv_flags & RCOLL_SHM_RECV_VMREAD) ? "on" : "off");
                *comm_p = c;
                l->pend[i] = l->pend[--l->npend];
            } else {
                c->fd = -1; /* shm_pend_drop closes the socket */
                shm_comm_free(c);
            }
        }
    }
    for (int j = 0; j < nfd; j++)
        close(fds[j]); /* a mapping keeps the segment; the fd is not needed */
    if (bad)
        shm_pend_drop(l, i, bad);
    return 1;
}

rcoll_status_t shm_accept(void *listen_comm, void **recv_comm)
{
    shm_listen_t *l = listen_comm;
    shm_comm_t *c = NULL;
    rcoll_status_t st = RCOLL_OK;

    if (!l || !recv_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm accept: NULL listen_comm/recv_comm");
    for (int i = 0; i < l->npend && !c && st == RCOLL_OK;)
        if (!shm_pend_step(l, i, &c, &st))
            i++;
    while (!c && st == RCOLL_OK) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                         "shm accept");
            break;
        }
        if (l->npend == SHM_MAX_PENDING) {
            int oldest = 0;
            for (int j = 1; j < l->npend; j++)
                if (l->pend[j].seq < l->pend[oldest].seq)
                    oldest = j;
            shm_pend_drop(l, oldest, "too many connections in their handshake (oldest "
                          "dropped)");
        }
        l->pend[l->npend++] = (shm_pend_t){.fd = fd, .seq = l->seq++};
        shm_pend_step(l, l->npend - 1, &c, &st);
    }
    if (st != RCOLL_OK) {
        if (c)
            shm_comm_free(c);
        return st;
    }
    *recv_comm = c;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Connect
 * ------------------------------------------------------------------------------------------ */

/* Send the hello with the segment's fd.  1 sent, 0 the socket is full (retry), else error. */
static int shm_send_hello(int fd, const rcoll_shm_hello_t *h, int segfd, rcoll_status_t *st_p)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)h, .iov_len = sizeof(*h)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    memset(&ctl, 0, sizeof(ctl));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &segfd, sizeof(int));
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof(*h))
            return 1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ECONNREFUSED))
            *st_p = rcoll_err_set(RCOLL_ERR_REMOTE, "shm connect: the listener closed the "
                                  "connection during the handshake");
        else
            *st_p = rcoll_err_set_errno(RCOLL_ERR_SYSTEM, n < 0 ? errno : EIO,
                                        "shm connect: sending the handshake");
        return -1;
    }
}

/* Connect holds no state between calls: when the listener's backlog or socket is full, the
 * attempt is undone and NULL returned, and the next call starts afresh. */
const char *rcoll_shm_handle_check(const rcoll_shm_handle_t *h)
{
    if (h->magic != RCOLL_SHM_HANDLE_MAGIC || h->version != RCOLL_SHM_VERSION ||
        memchr(h->name, '\0', sizeof(h->name)) == NULL || h->name[0] == '\0')
        return "not an shm handle of this version";
    return NULL;
}

rcoll_status_t shm_connect(int dev, const void *handle, void **send_comm)
{
    rcoll_shm_handle_t h;
    struct sockaddr_un a;
    rcoll_status_t st = RCOLL_OK;
    int segfd = -1;

    if (!shm_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "shm connect before init");
    if (dev != 0 || !handle || !send_comm)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm connect: bad device %d or NULL "
                             "handle/send_comm", dev);
    memcpy(&h, handle, sizeof(h));
    if (rcoll_shm_handle_check(&h))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm connect: not an shm handle of version "
                             "%u (magic 0x%08x, version %u)", RCOLL_SHM_VERSION,
                             (unsigned)h.magic, (unsigned)h.version);
    h.host[sizeof(h.host) - 1] = '\0';
    if (h.host_id != shm_g.host_id)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "shm connect: peer is on another host "
                             "(%s; this is %s%s)", h.host, shm_g.host,
                             strcmp(h.host, shm_g.host) ? "" : " in another boot or network "
                             "namespace");
    *send_comm = NULL;
    shm_comm_t *c = shm_comm_alloc(0);
    if (!c)
        return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "shm connect: out of memory");
    c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm connect: socket");
        goto err_free;
    }
    if (connect(c->fd, (struct sockaddr *)&a, shm_sun(&a, h.name)) != 0) {
        if (errno == EAGAIN || errno == EINTR || errno == EINPROGRESS)
            goto retry; /* backlog full: not yet */
        if (errno == ECONNREFUSED || errno == ENOENT)
            st = rcoll_err_set(RCOLL_ERR_REMOTE, "shm connect: no listener @%s of pid %d "
                               "(closed?)", h.name, (int)h.pid);
        else
            st = rcoll_err_set_errno(rcoll_status_from_errno(errno), errno, "shm connect to "
                                     "@%s of pid %d", h.name, (int)h.pid);
        goto err_free;
    }
    shm_watch_peer(c);
    rcoll_shm_hello_t hello = {.magic = RCOLL_SHM_HELLO_MAGIC, .version = RCOLL_SHM_VERSION,
                               .nonce = h.nonce, .pid = (int32_t)getpid(),
                               .probe_addr = shm_g.vmread && shm_g.rndv_min
                                                 ? (uint64_t)(uintptr_t)&shm_probe_word : 0,
                               .probe_value = shm_probe_word};
    st = shm_seg_create(c, &segfd, &hello.flags);
    if (st != RCOLL_OK)
        goto err_free;
    hello.seg_bytes = c->seg_bytes;
    int sent = shm_send_hello(c->fd, &hello, segfd, &st);
    close(segfd);
    if (sent < 0)
        goto err_free;
    if (sent == 0)
        goto retry;
    RCOLL_INFO(SHM, "shm: connected to pid %d: %u slots x %u bytes", c->peer_pid, c->nslots,
               c->slot_bytes);
    *send_comm = c;
    return RCOLL_OK;

retry:
    shm_comm_free(c);
    return RCOLL_OK;
err_free:
    shm_comm_free(c);
    return st;
}
