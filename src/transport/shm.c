/*
 * shm.c - the shared-memory transport ("shm"): one-directional connections between two
 * processes on one host.  The connector creates the connection's segment (a sealed memfd, so
 * nothing is ever left in /dev/shm, even after a crash) and passes it over an abstract Unix
 * socket; from then on bytes move through a ring of slots with no locks and no syscalls, and
 * the socket (with a pidfd of the peer) only tells, when a wait stalls, that the peer is
 * gone.  Knows nothing of ranks or collectives.  It must never write past a posted buffer,
 * touch a page that is not backed (no SIGBUS), or hand out a connection that did not prove
 * the listener's nonce.
 *
 *   sender (connect)                 segment (memfd)                  receiver (accept)
 *   isend: queue       -- test --> [hdr][consumed][slot0][slot1]...   <-- test --  irecv
 *   copy a piece into slot k, release seq=k+1     acquire seq==k+1, copy out, consumed=k+1
 *
 * Large messages pipeline through the ring (copy in on one core, copy out on the other);
 * those too big for the cache are copied out with streaming stores.  Optionally (off by
 * default, rcoll_shm_test_options) messages from a size up go single-copy where the kernel
 * lets the receiver read the sender (process_vm_readv, probed per connection): one slot
 * carries the address, and the send completes when that slot is consumed.  Measured on the
 * 2-core development VM it is 2-4x slower than the ring (9-15 GB/s against 22-64 GB/s), so
 * the ring is the default.  Layouts are in shm.h.
 */
#include "transport/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "util/log.h"
#include "util/net.h"
#include "util/status.h"
#include "util/time.h"

#ifndef SHM_NSLOTS
#define SHM_NSLOTS 8u /* slots per ring; slot size = (RCOLL_BUFFSIZE / 2) / SHM_NSLOTS */
#endif
_Static_assert((SHM_NSLOTS & (SHM_NSLOTS - 1)) == 0, "slots are indexed with a mask");
#define SHM_STREAM_MIN ((uint64_t)16 << 20) /* streaming copy-out when L3 size unknown, */
#define SHM_STREAM_LO ((uint64_t)4 << 20)   /* else half of L3 within these bounds */
#define SHM_STREAM_HI ((uint64_t)32 << 20)
#define SHM_RNDV_PIECE ((size_t)4 << 20) /* bytes per process_vm_readv (bounds one test()) */
#define SHM_MAX_MSG ((size_t)1 << 40)
#define SHM_MAX_SEG ((uint64_t)1 << 34)  /* largest segment a receiver maps */
#define SHM_LISTEN_BACKLOG 512
#define SHM_MAX_PENDING 256 /* accepted sockets whose hello has not arrived, per listener */
#define SHM_IDLE_CHECK 1024u /* fruitless progress calls between liveness checks ... */
#define SHM_IDLE_CLOCK 64u   /* ... or, reading the clock every 64 of them, */
#define SHM_IDLE_NS 1000000ull /* ... once a millisecond has passed */
#define SHM_DEVSHM "/dev/shm"

/* ---------------------------------------------------------------------------------------------
 * Objects
 * ------------------------------------------------------------------------------------------ */

/* Process-wide settings, written once by init(). */
static struct {
    int inited;
    int have_memfd;    /* memfd_create works here */
    int vmread;        /* process_vm_readv works on ourselves */
    uint32_t nslots, slot_bytes;
    uint64_t rndv_min;
    uint64_t stream_min;
    uint64_t host_id;
    char host[RCOLL_SHM_HOST_BYTES];
} shm_g;

/* Test hooks (shm.h), applied by init(). */
static int shm_opt_posix;
static uint64_t shm_opt_rndv_min;

/* What a receiver reads back from this process to prove that single-copy works. */
static volatile uint64_t shm_probe_word;

typedef struct shm_comm shm_comm_t;

/* One message: a whole isend, or one buffer of a grouped irecv. */
typedef struct {
    char *data;
    uint64_t cap;    /* send: message length; recv: posted buffer size */
    uint64_t length; /* message length (recv: valid once its first slot was read) */
    int tag;
} shm_msg_t;

typedef struct {
    shm_comm_t *comm;
    int in_use;            /* handed out and not yet freed by test() */
    int done;              /* complete and retired (requests retire in posting order) */
    int nmsgs;
    uint64_t release_slot; /* send: complete once consumed >= this (single-copy); else 0 */
    shm_msg_t msgs[RCOLL_TRANSPORT_MAX_RECVS];
} shm_req_t;

/* A send or recv comm.  ring[] holds posted requests in order: head..cur-1 are fully
 * written/read but maybe not retired, cur is under the cursor, cur..tail-1 wait. */
struct shm_comm {
    int is_recv;
    rcoll_status_t failed; /* first error; sticky */
    int fd;                /* the Unix socket: liveness only after the handshake */
    int pidfd;             /* the peer process (pidfd_open), -1 where unavailable */
    int peer_pid;
    unsigned char *seg;
    size_t seg_bytes;
    rcoll_shm_seg_t *hdr;
    unsigned char *slots;
    uint32_t nslots, slot_bytes;
    size_t stride;
    uint64_t next;     /* stream slot to fill (send) or read (recv) next */
    uint64_t consumed; /* send: last value seen of hdr->consumed */
    uint64_t head, cur, tail;
    int cur_mi;        /* message of ring[cur] under the cursor */
    uint64_t cur_off;  /* bytes of it written (send) or read (recv) */
    int cur_started;   /* recv: its first slot has been read */
    int cur_rndv;      /* recv: it is a single-copy message */
    uint64_t rndv_addr;
    uint64_t rndv_min;   /* send: single-copy from this size up (copied from shm_g) */
    uint64_t stream_min; /* recv: messages this long are copied out with streaming stores */
    uint32_t idle;     /* fruitless progress calls since progress or the last check */
    uint64_t stall_ns; /* when the clock first saw the current fruitless wait */
    int nfree;
    shm_req_t *free_reqs[RCOLL_SHM_MAX_REQS];
    shm_req_t *ring[RCOLL_SHM_MAX_REQS];
    shm_req_t reqs[RCOLL_SHM_MAX_REQS];
    char errtext[RCOLL_ERR_TEXT_MAX]; /* detail of `failed`, repeated by later calls */
};

/* An accepted socket whose hello has not arrived yet. */
typedef struct {
    int fd;
    uint64_t seq; /* arrival order, to drop the oldest when full */
} shm_pend_t;

typedef struct {
    int fd;
    uint64_t nonce;
    uint64_t seq;
    int npend;
    shm_pend_t pend[SHM_MAX_PENDING];
} shm_listen_t;

void rcoll_shm_test_options(int force_shm_open, uint64_t single_copy_min)
{
    shm_opt_posix = force_shm_open;
    shm_opt_rndv_min = single_copy_min;
}

/* ---------------------------------------------------------------------------------------------
 * Comms, requests and errors
 * ------------------------------------------------------------------------------------------ */

static shm_comm_t *shm_comm_alloc(int is_recv)
{
    shm_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->is_recv = is_recv;
    c->fd = -1;
    c->pidfd = -1;
    for (int i = 0; i < RCOLL_SHM_MAX_REQS; i++) {
        c->reqs[i].comm = c;
        c->free_reqs[i] = &c->reqs[RCOLL_SHM_MAX_REQS - 1 - i];
    }
    c->nfree = RCOLL_SHM_MAX_REQS;
    c->rndv_min = shm_g.rndv_min;
    c->stream_min = shm_g.stream_min;
    return c;
}

static void shm_comm_free(shm_comm_t *c)
{
    if (c->seg)
        munmap(c->seg, c->seg_bytes);
    if (c->fd >= 0)
        close(c->fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    free(c);
}

/* Mark the comm failed with st, whose detail rcoll_err_set() has just recorded. */
static rcoll_status_t shm_fail(shm_comm_t *c, rcoll_status_t st)
{
    c->failed = st;
    snprintf(c->errtext, sizeof(c->errtext), "%s", rcoll_err_get());
    return st;
}

/* Report the comm's earlier failure again (later calls fail with the same status). */
static rcoll_status_t shm_failed(const shm_comm_t *c)
{
    return rcoll_err_set(c->failed, "%s", c->errtext);
}

static shm_req_t *shm_req_get(shm_comm_t *c)
{
    if (c->nfree == 0)
        return NULL;
    shm_req_t *r = c->free_reqs[--c->nfree];
    r->in_use = 1;
    r->done = 0;
    r->release_slot = 0;
    return r;
}

static void shm_req_put(shm_comm_t *c, shm_req_t *r)
{
    r->in_use = 0;
    c->free_reqs[c->nfree++] = r;
}

static inline rcoll_shm_slot_t *shm_slot(const shm_comm_t *c, uint64_t k)
{
    return (rcoll_shm_slot_t *)(c->slots + (size_t)(k & (c->nslots - 1)) * c->stride);
}

static inline unsigned char *shm_payload(rcoll_shm_slot_t *s)
{
    return (unsigned char *)(s + 1);
}

/* ---------------------------------------------------------------------------------------------
 * Data path
 * ------------------------------------------------------------------------------------------ */

/* Whether a send of len bytes should go single-copy on this connection. */
static inline int shm_use_rndv(const shm_comm_t *c, uint64_t len)
{
    return c->rndv_min && len >= c->rndv_min &&
           (atomic_load_explicit(&c->hdr->recv_flags, memory_order_relaxed) &
            RCOLL_SHM_RECV_VMREAD);
}

/* Fill free slots from the queued sends.  *moved set when a slot was published. */
static void shm_send_progress(shm_comm_t *c, int *moved)
{
    while (c->cur < c->tail) {
        shm_req_t *r = c->ring[c->cur % RCOLL_SHM_MAX_REQS];
        shm_msg_t *m = &r->msgs[0];
        if (c->next - c->consumed >= c->nslots) {
            c->consumed = atomic_load_explicit(&c->hdr->consumed, memory_order_acquire);
            if (c->next - c->consumed >= c->nslots)
                return;
        }
        rcoll_shm_slot_t *s = shm_slot(c, c->next);
        if (c->cur_off == 0) {
            s->length = m->length;
            s->tag = m->tag;
            s->flags = 0;
            if (m->length <= RCOLL_SHM_INLINE_BYTES) {
                if (m->length)
                    memcpy(s->inline_data, m->data, m->length);
                c->cur_off = m->length;
            } else if (shm_use_rndv(c, m->length)) {
                s->flags = RCOLL_SHM_SLOT_RNDV;
                s->addr = (uint64_t)(uintptr_t)m->data;
                r->release_slot = c->next + 1;
                c->cur_off = m->length;
            }
        }
        if (c->cur_off < m->length) {
            uint64_t n = m->length - c->cur_off;
            n = n < c->slot_bytes ? n : c->slot_bytes;
            memcpy(shm_payload(s), m->data + c->cur_off, n);
            c->cur_off += n;
        }
        atomic_store_explicit(&s->seq, c->next + 1, memory_order_release);
        c->next++;
        *moved = 1;
        if (c->cur_off == m->length) {
            c->cur_off = 0;
            c->cur++;
        }
    }
}

/* The first slot of a message says how long it is: check it against the posted buffer. */
static rcoll_status_t shm_recv_first(shm_comm_t *c, shm_msg_t *m, rcoll_shm_slot_t *s)
{
    uint64_t len = s->length; /* read once: the peer's memory, validated here */
    int32_t tag = s->tag;
    uint32_t flags = s->flags;

    if (len > m->cap)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                         "message of %llu bytes from pid %d is larger than "
                                         "the posted receive buffer of %llu bytes",
                                         (unsigned long long)len, c->peer_pid,
                                         (unsigned long long)m->cap));
    if (m->tag != -1 && tag != -1 && tag != m->tag)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                         "tag mismatch from pid %d: receive posted with tag "
                                         "%d, message has tag %d", c->peer_pid, m->tag,
                                         (int)tag));
    if ((flags & RCOLL_SHM_SLOT_RNDV) &&
        (len <= RCOLL_SHM_INLINE_BYTES ||
         !(atomic_load_explicit(&c->hdr->recv_flags, memory_order_relaxed) &
           RCOLL_SHM_RECV_VMREAD)))
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                         "pid %d sent a single-copy message that this "
                                         "connection does not allow", c->peer_pid));
    m->length = len;
    c->cur_started = 1;
    c->cur_rndv = (flags & RCOLL_SHM_SLOT_RNDV) != 0;
    c->rndv_addr = s->addr;
    return RCOLL_OK;
}

/* One process_vm_readv of the current single-copy message. */
static rcoll_status_t shm_recv_rndv(shm_comm_t *c, shm_msg_t *m)
{
    size_t n = (size_t)(m->length - c->cur_off);
    n = n < SHM_RNDV_PIECE ? n : SHM_RNDV_PIECE;
    struct iovec local = {.iov_base = m->data + c->cur_off, .iov_len = n};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)(c->rndv_addr + c->cur_off),
                           .iov_len = n};
    ssize_t got = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
    if (got > 0) {
        c->cur_off += (uint64_t)got;
        return RCOLL_OK;
    }
    if (got < 0 && errno == ESRCH)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_REMOTE, "peer pid %d died",
                                         c->peer_pid));
    if (got == 0 || errno == EFAULT)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_PROTOCOL,
                                         "pid %d published a message at an address it "
                                         "cannot read", c->peer_pid));
    return shm_fail(c, rcoll_err_set_errno(rcoll_status_from_errno(errno), errno,
                                           "process_vm_readv from pid %d", c->peer_pid));
}

/* Copy out with streaming (non-temporal) stores: for messages too big to stay in the cache,
 * it saves reading each destination line before writing it (about twice the throughput at
 * 64 MiB here; glibc's memcpy does the same above its own threshold). */
static void shm_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    head = head < n ? head : n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; d += 64, s += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i f = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), e);
        _mm_stream_si128((__m128i *)(d + 48), f);
    }
    memcpy(d, s, n);
    _mm_sfence(); /* order the streamed stores before completion is reported */
#else
    memcpy(dst, src, n);
#endif
}

/* Drain published slots into the posted receives.  *moved set when anything moved. */
static rcoll_status_t shm_recv_progress(shm_comm_t *c, int *moved)
{
    rcoll_status_t st;

    while (c->cur < c->tail) {
        shm_req_t *r = c->ring[c->cur % RCOLL_SHM_MAX_REQS];
        shm_msg_t *m = &r->msgs[c->cur_mi];
        rcoll_shm_slot_t *s = shm_slot(c, c->next);

        if (!c->cur_rndv) {
            if (atomic_load_explicit(&s->seq, memory_order_acquire) != c->next + 1)
                return RCOLL_OK;
            if (!c->cur_started) {
                st = shm_recv_first(c, m, s);
                if (st != RCOLL_OK)
                    return st;
                if (m->length <= RCOLL_SHM_INLINE_BYTES) {
                    if (m->length)
                        memcpy(m->data, s->inline_data, m->length);
                    c->cur_off = m->length;
                }
            }
        }
        *moved = 1;
        if (c->cur_rndv) {
            st = shm_recv_rndv(c, m);
            if (st != RCOLL_OK)
                return st;
            if (c->cur_off < m->length)
                return RCOLL_OK; /* the rest on the next test() */
        } else if (c->cur_off < m->length) {
            uint64_t n = m->length - c->cur_off;
            n = n < c->slot_bytes ? n : c->slot_bytes;
            if (m->length >= c->stream_min)
                shm_copy_stream(m->data + c->cur_off, shm_payload(s), n);
            else
                memcpy(m->data + c->cur_off, shm_payload(s), n);
            c->cur_off += n;
        }
        c->next++;
        atomic_store_explicit(&c->hdr->consumed, c->next, memory_order_release);
        if (c->cur_off == m->length) {
            c->cur_off = 0;
            c->cur_started = 0;
            c->cur_rndv = 0;
            if (++c->cur_mi == r->nmsgs) {
                c->cur_mi = 0;
                c->cur++;
            }
        }
    }
    return RCOLL_OK;
}

/* Mark finished requests done, in posting order.  *moved set when one was retired. */
static void shm_retire(shm_comm_t *c, int *moved)
{
    while (c->head < c->cur) {
        shm_req_t *r = c->ring[c->head % RCOLL_SHM_MAX_REQS];
        if (r->release_slot > c->consumed) { /* single-copy send: wait for the reader */
            c->consumed = atomic_load_explicit(&c->hdr->consumed, memory_order_acquire);
            if (r->release_slot > c->consumed)
                return;
        }
        r->done = 1;
        c->head++;
        *moved = 1;
    }
}

/* Is the peer still there?  RCOLL_OK when its end of the socket is open. */
static rcoll_status_t shm_peer_alive(shm_comm_t *c)
{
    char b[64];
    for (;;) {
        ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
        if (n > 0)
            continue; /* nothing is expected here; discard */
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n == 0 || errno == ECONNRESET || errno == EPIPE)
            return rcoll_err_set(RCOLL_ERR_REMOTE, "peer pid %d closed the connection or "
                                 "died", c->peer_pid);
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "shm liveness check of pid %d",
                                   c->peer_pid);
    }
    /* The socket stays open while any process holds it (a child the peer forked): the
     * pidfd tells when the peer itself has exited. */
    struct pollfd pfd = {.fd = c->pidfd, .events = POLLIN};
    if (c->pidfd >= 0 && poll(&pfd, 1, 0) > 0)
        return rcoll_err_set(RCOLL_ERR_REMOTE, "peer pid %d died", c->peer_pid);
    return RCOLL_OK;
}

static rcoll_status_t shm_progress_once(shm_comm_t *c, int *moved)
{
    rcoll_status_t st = RCOLL_OK;
    if (c->is_recv)
        st = shm_recv_progress(c, moved);
    else
        shm_send_progress(c, moved);
    shm_retire(c, moved);
    return st;
}

/* Move what the ring allows now.  Only when a wait keeps making no progress is the socket
 * looked at: after SHM_IDLE_CHECK fruitless calls in a row, or a millisecond of them (the
 * clock is read every SHM_IDLE_CLOCK calls), so a dead peer is noticed within about a
 * millisecond of polling and a live one costs no syscall per message. */
static rcoll_status_t shm_progress(shm_comm_t *c)
{
    int moved = 0;
    rcoll_status_t st = shm_progress_once(c, &moved);
    if (st != RCOLL_OK || moved || c->head == c->tail) {
        c->idle = 0;
        return st;
    }
    if (++c->idle % SHM_IDLE_CLOCK != 0)
        return RCOLL_OK;
    uint64_t now = rcoll_now_ns();
    if (c->idle == SHM_IDLE_CLOCK)
        c->stall_ns = now; /* this wait has been fruitless for a while: from now on */
    if (c->idle < SHM_IDLE_CHECK && now - c->stall_ns < SHM_IDLE_NS)
        return RCOLL_OK;
    c->idle = 0;
    st = shm_peer_alive(c);
    if (st == RCOLL_OK)
        return RCOLL_OK;
    if (st == RCOLL_ERR_REMOTE) {
        /* Whatever the peer published before it closed is still delivered. */
        char why[RCOLL_ERR_TEXT_MAX]; /* copied: err_set must not read its own buffer */
        snprintf(why, sizeof(why), "%s", rcoll_err_get());
        rcoll_status_t st2 = shm_progress_once(c, &moved);
        if (st2 != RCOLL_OK || moved)
            return st2;
        rcoll_err_set(RCOLL_ERR_REMOTE, "%s", why);
    }
    return shm_fail(c, st);
}

static rcoll_status_t shm_isend(void *send_comm, void *data, size_t size, int tag,
                                void *mhandle, void **request)
{
    shm_comm_t *c = send_comm;
    (void)mhandle; /* host memory needs no registration */

    if (!c || c->is_recv || !request || (size > 0 && !data))
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm isend: bad comm, data or request");
    if (size > SHM_MAX_MSG)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm isend: %zu bytes exceed the %zu-byte "
                             "message limit", size, SHM_MAX_MSG);
    if (c->failed)
        return shm_failed(c);
    shm_req_t *r = shm_req_get(c);
    if (!r) {
        *request = NULL;
        return RCOLL_OK;
    }
    r->msgs[0] = (shm_msg_t){.data = data, .cap = size, .length = size, .tag = tag};
    r->nmsgs = 1;
    c->ring[c->tail++ % RCOLL_SHM_MAX_REQS] = r;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t shm_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                void **mhandles, void **request)
{
    shm_comm_t *c = recv_comm;
    (void)mhandles;

    if (!c || !c->is_recv || !request || n < 1 || n > RCOLL_TRANSPORT_MAX_RECVS || !data ||
        !sizes)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm irecv: bad comm, buffer count (%d, "
                             "at most %d), buffers or request", n, RCOLL_TRANSPORT_MAX_RECVS);
    for (int i = 0; i < n; i++)
        if (sizes[i] > 0 && !data[i])
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm irecv: buffer %d is NULL", i);
    if (c->failed)
        return shm_failed(c);
    shm_req_t *r = shm_req_get(c);
    if (!r) {
        *request = NULL;
        return RCOLL_OK;
    }
    for (int i = 0; i < n; i++)
        r->msgs[i] = (shm_msg_t){.data = data[i], .cap = sizes[i], .length = 0,
                                 .tag = tags ? tags[i] : -1};
    r->nmsgs = n;
    c->ring[c->tail++ % RCOLL_SHM_MAX_REQS] = r;
    *request = r;
    return RCOLL_OK;
}

static rcoll_status_t shm_test(void *request, int *done, size_t *sizes)
{
    shm_req_t *r = request;
    rcoll_status_t st = RCOLL_OK;

    if (!r || !done)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm test: NULL request or done");
    if (!r->in_use)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "shm test: request already completed");
    shm_comm_t *c = r->comm;
    if (!r->done && !c->failed)
        st = shm_progress(c);
    if (r->done) {
        if (sizes)
            for (int i = 0; i < r->nmsgs; i++)
                sizes[i] = r->msgs[i].length;
        shm_req_put(c, r);
        *done = 1;
        return RCOLL_OK;
    }
    if (c->failed) {
        shm_req_put(c, r);
        /* a failure detected just now already carries its text; an older one is repeated */
        return st != RCOLL_OK ? st : shm_failed(c);
    }
    *done = 0;
    return RCOLL_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Segments
 * ------------------------------------------------------------------------------------------ */

static size_t shm_seg_size(uint32_t nslots, uint32_t slot_bytes)
{
    size_t b = RCOLL_SHM_SLOTS_OFFSET + (size_t)nslots * (sizeof(rcoll_shm_slot_t) + slot_bytes);
    return (b + 4095) & ~(size_t)4095;
}

/* Bytes free in /dev/shm, or an error when it is missing. */
static rcoll_status_t shm_devshm_free(uint64_t *free_p)
{
    struct statvfs sv;
    if (statvfs(SHM_DEVSHM, &sv) != 0)
        return rcoll_err_set_errno(RCOLL_ERR_UNSUPPORTED, errno, "no %s (needed where "
                                   "memfd_create is missing)", SHM_DEVSHM);
    *free_p = (uint64_t)sv.f_bavail * sv.f_frsize;
    return RCOLL_OK;
}

static rcoll_status_t shm_devshm_too_small(uint64_t avail, size_t need)
{
    return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "%s too small: %llu bytes free, a shared-memory "
                         "connection needs %zu: run the container with --shm-size=1g (or "
                         "more), or lower RCOLL_BUFFSIZE", SHM_DEVSHM,
                         (unsigned long long)avail, need);
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
    *fd_p = fd;
    return RCOLL_OK;

err_close:
    close(fd);
    return st;
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
    /* Read once; the peer could change the header later, the copies stay.  nslots is a power
     * of two so that the data path indexes slots with a mask. */
    uint32_t nslots = c->hdr->nslots, slot_bytes = c->hdr->slot_bytes;
    if (c->hdr->magic != RCOLL_SHM_SEG_MAGIC || c->hdr->version != RCOLL_SHM_VERSION)
        return "bad segment magic or version";
    if (nslots < 1 || nslots > 65536 || (nslots & (nslots - 1)) || slot_bytes < 64 ||
        slot_bytes % 64 != 0 ||
        slot_bytes > (1u << 30) || shm_seg_size(nslots, slot_bytes) > c->seg_bytes)
        return "segment geometry does not fit its size";
    if (atomic_load(&c->hdr->consumed) != 0)
        return "segment already in use";
    c->nslots = nslots;
    c->slot_bytes = slot_bytes;
    c->stride = sizeof(rcoll_shm_slot_t) + slot_bytes;
    c->slots = c->seg + RCOLL_SHM_SLOTS_OFFSET;
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
 * Init, device, memory registration
 * ------------------------------------------------------------------------------------------ */

static uint64_t shm_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* This host as peers must see it: host name, boot id (a reboot or another machine with the
 * same name differs) and network namespace (the abstract socket lives there). */
static uint64_t shm_host_id(void)
{
    char boot[64] = "";
    struct stat sb;
    uint64_t h = shm_fnv(0xcbf29ce484222325ull, shm_g.host, strlen(shm_g.host));
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f))
            boot[0] = '\0';
        fclose(f);
    }
    h = shm_fnv(h, boot, strlen(boot));
    if (stat("/proc/self/ns/net", &sb) == 0) {
        uint64_t ns[2] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino};
        h = shm_fnv(h, ns, sizeof(ns));
    }
    return h;
}

/* Messages from this size up are copied out with streaming stores: those whose source and
 * destination together overflow one last-level cache (sysfs gives its size per instance;
 * sysconf may report the sum of all of them). */
static uint64_t shm_stream_min(void)
{
    unsigned long long kib = 0;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        if (fscanf(f, "%lluK", &kib) != 1)
            kib = 0;
        fclose(f);
    }
    uint64_t half = (uint64_t)kib * 512;
    if (half == 0)
        return SHM_STREAM_MIN;
    return half < SHM_STREAM_LO ? SHM_STREAM_LO : half > SHM_STREAM_HI ? SHM_STREAM_HI : half;
}

static rcoll_status_t shm_init(const rcoll_config_t *cfg)
{
    uint64_t v = 0;
    rcoll_status_t st;

    if (!cfg)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm init: NULL configuration");
    memset(&shm_g, 0, sizeof(shm_g));
    if (gethostname(shm_g.host, sizeof(shm_g.host) - 1) != 0)
        snprintf(shm_g.host, sizeof(shm_g.host), "unknown");
    shm_g.host_id = shm_host_id();

    /* Half of RCOLL_BUFFSIZE per direction, so a peer's two connections fit the bound. */
    size_t ring = cfg->buffsize / 2;
    shm_g.nslots = SHM_NSLOTS;
    shm_g.slot_bytes = (uint32_t)((ring / SHM_NSLOTS) & ~(size_t)63);
    if (shm_g.slot_bytes < 64)
        shm_g.slot_bytes = 64;
    shm_g.rndv_min = shm_opt_rndv_min;
    shm_g.stream_min = shm_stream_min();

    int fd = shm_opt_posix ? -1 : memfd_create("rcoll-probe", MFD_CLOEXEC);
    if (shm_opt_posix)
        errno = ENOSYS;
    if (fd >= 0) {
        shm_g.have_memfd = 1;
        close(fd);
    } else {
        int memfd_err = errno;
        uint64_t avail = 0;
        size_t need = shm_seg_size(shm_g.nslots, shm_g.slot_bytes);
        st = shm_devshm_free(&avail);
        if (st == RCOLL_OK && avail < need)
            st = shm_devshm_too_small(avail, need);
        if (st != RCOLL_OK) {
            char why[RCOLL_ERR_TEXT_MAX]; /* copied: err_set must not read its own buffer */
            snprintf(why, sizeof(why), "%s", rcoll_err_get());
            return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "shm transport unavailable: "
                                 "memfd_create failed (%s) and %s", strerror(memfd_err), why);
        }
    }

    st = rcoll_random_bytes((void *)&v, sizeof(v));
    if (st != RCOLL_OK)
        return st;
    shm_probe_word = v | 1;
    uint64_t back = 0;
    struct iovec local = {.iov_base = &back, .iov_len = sizeof(back)};
    struct iovec remote = {.iov_base = (void *)&shm_probe_word, .iov_len = sizeof(back)};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    shm_g.vmread = n == (ssize_t)sizeof(back) && back == shm_probe_word;
    if (!shm_g.vmread)
        RCOLL_INFO(SHM, "shm: single-copy (process_vm_readv) unavailable: %s",
                   n < 0 ? strerror(errno) : "probe read back wrong data");
    shm_g.inited = 1;
    RCOLL_INFO(SHM, "shm: host %s, %u slots x %u bytes per connection, segments by %s, "
               "streaming copy-out from %llu bytes, single-copy %s from %llu bytes",
               shm_g.host, shm_g.nslots, shm_g.slot_bytes,
               shm_g.have_memfd ? "memfd" : "/dev/shm", (unsigned long long)shm_g.stream_min,
               shm_g.vmread && shm_g.rndv_min ? "on" : "off",
               (unsigned long long)shm_g.rndv_min);
    return RCOLL_OK;
}

static rcoll_status_t shm_devices(int *ndev)
{
    if (!ndev)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm devices: NULL ndev");
    *ndev = 1;
    return RCOLL_OK;
}

static rcoll_status_t shm_get_props(int dev, rcoll_transport_props_t *props)
{
    if (!shm_g.inited)
        return rcoll_err_set(RCOLL_ERR_INVALID_USAGE, "shm get_props before init");
    if (dev != 0 || !props)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm get_props: bad device %d or NULL "
                             "props", dev);
    memset(props, 0, sizeof(*props));
    snprintf(props->name, sizeof(props->name), "shm");
    props->ptr_support = RCOLL_PTR_HOST;
    props->speed_mbps = 200000;
    props->latency_us = 0.2f;
    props->max_comms = 65536;
    props->max_recvs = RCOLL_TRANSPORT_MAX_RECVS;
    props->max_msg_size = SHM_MAX_MSG;
    props->host_local = 1;
    return RCOLL_OK;
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

static rcoll_status_t shm_listen(int dev, void *handle, void **listen_comm)
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
    else if ((size_t)n != sizeof(h) || (mh.msg_flags & MSG_TRUNC) ||
             h.magic != RCOLL_SHM_HELLO_MAGIC || h.version != RCOLL_SHM_VERSION)
        bad = "not an rcoll shm handshake of this version";
    else if (h.nonce != l->nonce)
        bad = "wrong nonce (handshake for another listener)";
    else if (nfd != 1 || (mh.msg_flags & MSG_CTRUNC))
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

static rcoll_status_t shm_accept(void *listen_comm, void **recv_comm)
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
static rcoll_status_t shm_connect(int dev, const void *handle, void **send_comm)
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
    if (h.magic != RCOLL_SHM_HANDLE_MAGIC || h.version != RCOLL_SHM_VERSION ||
        memchr(h.name, '\0', sizeof(h.name)) == NULL || h.name[0] == '\0')
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

/* ---------------------------------------------------------------------------------------------
 * Close, fini, ops table
 * ------------------------------------------------------------------------------------------ */

static rcoll_status_t shm_close_comm(void *comm, int is_recv)
{
    shm_comm_t *c = comm;
    if (!c || c->is_recv != is_recv)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm close: NULL or wrong kind of comm");
    shm_comm_free(c); /* outstanding requests live inside the comm */
    return RCOLL_OK;
}

static rcoll_status_t shm_close_send(void *send_comm) { return shm_close_comm(send_comm, 0); }

static rcoll_status_t shm_close_recv(void *recv_comm) { return shm_close_comm(recv_comm, 1); }

static rcoll_status_t shm_close_listen(void *listen_comm)
{
    shm_listen_t *l = listen_comm;
    if (!l)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm close_listen: NULL listen_comm");
    for (int i = 0; i < l->npend; i++)
        close(l->pend[i].fd);
    close(l->fd);
    free(l);
    return RCOLL_OK;
}

static void shm_fini(void) { memset(&shm_g, 0, sizeof(shm_g)); }

const rcoll_transport_ops_t rcoll_transport_shm = {
    .name = "shm",
    .init = shm_init,
    .devices = shm_devices,
    .get_props = shm_get_props,
    .listen = shm_listen,
    .connect = shm_connect,
    .accept = shm_accept,
    .reg_mr = rcoll_transport_stub_reg_mr,
    .dereg_mr = rcoll_transport_stub_dereg_mr,
    .isend = shm_isend,
    .irecv = shm_irecv,
    .iflush = rcoll_transport_stub_iflush,
    .test = shm_test,
    .close_send = shm_close_send,
    .close_recv = shm_close_recv,
    .close_listen = shm_close_listen,
    .fini = shm_fini,
};
