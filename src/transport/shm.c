/*
 * shm.c - the data path of the shared-memory transport ("shm"): isend / irecv / test through
 * a connection's slot ring, the comms and their request pools, init, close, fini and the ops
 * table.  Setting a connection up (listen, connect, accept, the handshake, its segment) is in
 * shm_conn.c; the layouts and the internals both files share are in shm.h.
 */

/*
 * The shared-memory transport ("shm"): one-directional connections between two
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
 * default; RCOLL_PROTO=cma or rcoll_shm_test_options) messages from a size up go single-copy where the kernel
 * lets the receiver read the sender (process_vm_readv, probed per connection): one slot
 * carries the address, and the send completes when that slot is consumed.  Measured on the
 * 2-core development VM it is 2-4x slower than the ring (9-15 GB/s against 22-64 GB/s), so
 * the ring is the default; RCOLL_PROTO=cma turns single-copy on from 64 KiB.  Layouts are in
 * shm.h.
 */
#include "transport/shm.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

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
#define SHM_CMA_MIN ((uint64_t)64 << 10) /* RCOLL_PROTO=cma: single-copy from this size */
#define SHM_RNDV_PIECE ((size_t)4 << 20) /* bytes per process_vm_readv (bounds one test()) */
#define SHM_MAX_MSG ((size_t)1 << 40)
#define SHM_IDLE_CHECK 1024u /* fruitless progress calls between liveness checks ... */
#define SHM_IDLE_CLOCK 64u   /* ... or, reading the clock every 64 of them, */
#define SHM_IDLE_NS 1000000ull /* ... once a millisecond has passed */

/* ---------------------------------------------------------------------------------------------
 * Objects
 * ------------------------------------------------------------------------------------------ */

/* Process-wide settings, written once by init(). */
shm_global_t shm_g;

static const char *const proto_names[] = {"auto", "copy", "cma", NULL}; /* rcoll_shm_proto_t */

static const rcoll_knob_t shm_knobs[] = {
    RCOLL_KNOB_SUBTABLE(rcoll_shm_config_t, conn, rcoll_transport_config_table),
    RCOLL_KNOB_ENUM_OF(rcoll_shm_config_t, "RCOLL_PROTO", "auto", proto, proto_names,
                       "how shared-memory messages move: auto (= copy, the faster here), copy "
                       "(through the connection's slot ring: copy in, copy out) or cma (single "
                       "copy with process_vm_readv from 64 KiB, where the kernel allows it; else "
                       "copy); read once per process, when its first communicator starts the shm "
                       "transport"),
};
const rcoll_config_table_t rcoll_shm_config_table =
    RCOLL_CONFIG_TABLE("shm", shm_knobs, rcoll_shm_config_t);

#ifdef RCOLL_TEST_HOOKS
/* Test hooks (shm.h), applied by init(): only in the test build of this layer. */
static int shm_opt_posix;
static uint64_t shm_opt_rndv_min;
#else
static const int shm_opt_posix = 0;
static const uint64_t shm_opt_rndv_min = 0;
#endif

/* What a receiver reads back from this process to prove that single-copy works. */
volatile uint64_t shm_probe_word;

#ifdef RCOLL_TEST_HOOKS
void rcoll_shm_test_options(int force_shm_open, uint64_t single_copy_min)
{
    shm_opt_posix = force_shm_open;
    shm_opt_rndv_min = single_copy_min;
}
#endif

/* ---------------------------------------------------------------------------------------------
 * Comms, requests and errors
 * ------------------------------------------------------------------------------------------ */

shm_comm_t *shm_comm_alloc(int is_recv)
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

void shm_comm_free(shm_comm_t *c)
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
        rcoll_transport_moves++;
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

    /* The two sides disagree about this message: a usage error (transport.h). */
    if (m->tag != -1 && tag != -1 && tag != m->tag)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                         "tag mismatch from pid %d: receive posted with tag "
                                         "%d, message has tag %d", c->peer_pid, m->tag,
                                         (int)tag));
    if (len > m->cap)
        return shm_fail(c, rcoll_err_set(RCOLL_ERR_INVALID_USAGE,
                                         "message of %llu bytes from pid %d is larger than "
                                         "the posted receive buffer of %llu bytes",
                                         (unsigned long long)len, c->peer_pid,
                                         (unsigned long long)m->cap));
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
        rcoll_transport_moves++;
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

static rcoll_status_t shm_init(const void *knobs)
{
    const rcoll_shm_config_t *cfg = knobs;
    uint64_t v = 0;
    rcoll_status_t st;

    if (!cfg)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "shm init: NULL configuration");
    memset(&shm_g, 0, sizeof(shm_g));
    if (gethostname(shm_g.host, sizeof(shm_g.host) - 1) != 0)
        snprintf(shm_g.host, sizeof(shm_g.host), "unknown");
    shm_g.host_id = shm_host_id();

    /* Half of RCOLL_BUFFSIZE per direction, so a peer's two connections fit the bound. */
    size_t ring = cfg->conn.buffsize / 2;
    shm_g.nslots = SHM_NSLOTS;
    shm_g.slot_bytes = (uint32_t)((ring / SHM_NSLOTS) & ~(size_t)63);
    if (shm_g.slot_bytes < 64)
        shm_g.slot_bytes = 64;
    shm_g.rndv_min = shm_opt_rndv_min;
    if (!shm_g.rndv_min && cfg->proto == RCOLL_SHM_PROTO_CMA) shm_g.rndv_min = SHM_CMA_MIN;
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
            /* No /dev/shm at all: not possible here (said at INFO).  One too small (a
             * container's 64 MiB default, or less): it should have worked, so the fallback
             * is said at WARN (core/comm.c), once. */
            return rcoll_err_set(st == RCOLL_ERR_UNSUPPORTED ? st : RCOLL_ERR_NO_MEMORY,
                                 "shm transport unavailable: memfd_create failed (%s) and %s",
                                 strerror(memfd_err), why);
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
    .host_local = 1,
    .config = &rcoll_shm_config_table,
    .init = shm_init,
    .devices = shm_devices,
    .get_props = shm_get_props,
    .describe = rcoll_transport_stub_describe,
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
