/*
 * bootstrap_msg.c - what the bootstrap's two sides share: the root (bootstrap_root.c) and the
 * ranks (bootstrap.c) send, read and decode control messages here (bootstrap_wire.h), a rank
 * learns its host's identity here, and the unique id (where the root listens, the job secret)
 * is written and read here.  It calls neither side.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bootstrap.h"
#include "core/bootstrap_int.h"
#include "core/bootstrap_wire.h"
#include "util/cpath.h"
#include "util/status.h"

_Static_assert(sizeof(rcoll_bs_sig_t) <= sizeof(bs_note_t), "signature message too big");

/* ------------------------------------------------------------------------------------------
 * Message helpers
 * ---------------------------------------------------------------------------------------- */

rcoll_status_t rcoll_bs_send_msg(int fd, int type, const void *payload, uint32_t len,
                                 uint64_t deadline_ns)
{
    bs_hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = (uint16_t)type,
                  .len = len, .path = rcoll_cpath_stamp()};
    rcoll_status_t st = rcoll_net_send_all(fd, &h, sizeof(h), deadline_ns);
    if (st == RCOLL_OK && len) st = rcoll_net_send_all(fd, payload, len, deadline_ns);
    return st;
}

_Static_assert(sizeof(rcoll_peer_info_t) % 8 == 0, "a rank record is whole 8-byte words");

size_t rcoll_bs_table_max(int n) { return (size_t)n * (BS_REC_MAP + sizeof(rcoll_peer_info_t)); }
size_t rcoll_bs_table_min(int n) { return (size_t)n * BS_REC_MAP; }

size_t rcoll_bs_table_encode(const rcoll_peer_info_t *t, int n, void *out)
{
    static const uint64_t zeros[BS_REC_WORDS];
    unsigned char *o = out;
    const char *prev = (const char *)zeros;
    for (int k = 0; k < n; k++) {
        const char *rec = (const char *)&t[k];
        unsigned char *map = o;
        memset(map, 0, BS_REC_MAP);
        o += BS_REC_MAP;
        for (size_t w = 0; w < BS_REC_WORDS; w++) {
            if (memcmp(rec + 8 * w, prev + 8 * w, 8) == 0) continue;
            map[w / 8] |= (unsigned char)(1u << (w % 8));
            memcpy(o, rec + 8 * w, 8);
            o += 8;
        }
        prev = rec;
    }
    return (size_t)(o - (unsigned char *)out);
}

int rcoll_bs_table_decode(const void *in, size_t len, rcoll_peer_info_t *t, int n)
{
    const unsigned char *p = in, *end = p + len;
    for (int k = 0; k < n; k++) {
        if ((size_t)(end - p) < BS_REC_MAP) return -1;
        const unsigned char *map = p;
        p += BS_REC_MAP;
        if (BS_REC_WORDS % 8 && map[BS_REC_MAP - 1] >> (BS_REC_WORDS % 8)) return -1;
        char *rec = (char *)&t[k];
        const char *prev = k ? (const char *)&t[k - 1] : NULL;
        for (size_t w = 0; w < BS_REC_WORDS; w++) {
            if (map[w / 8] >> (w % 8) & 1) {
                if (end - p < 8) return -1;
                memcpy(rec + 8 * w, p, 8);
                p += 8;
            } else if (prev) {
                memcpy(rec + 8 * w, prev + 8 * w, 8);
            } else {
                memset(rec + 8 * w, 0, 8);
            }
        }
    }
    return p == end ? 0 : -1;
}

int rcoll_bs_hdr_valid(const bs_hdr_t *h, uint32_t max_len)
{
    return h->magic == BS_MAGIC && h->version == BS_VERSION && h->len <= max_len;
}

int rcoll_bs_hello_scan(const void *buf, size_t got)
{
    bs_hdr_t h;
    if (got < sizeof(h)) return 0;
    memcpy(&h, buf, sizeof(h));
    if (!rcoll_bs_hdr_valid(&h, sizeof(bs_hello_t)) || h.type != BS_HELLO ||
        h.len != sizeof(bs_hello_t))
        return -1;
    return got >= sizeof(h) + sizeof(bs_hello_t);
}

void rcoll_bs_ctl_decode(const void *msg, int to_root, rcoll_bs_event_t *ev)
{
    bs_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    const char *payload = (const char *)msg + sizeof(h);
    memset(ev, 0, sizeof(*ev));
    int sig_sized = h.len == sizeof(rcoll_bs_sig_t);
    if (h.type == BS_REVOKE) {
        if (h.len != sizeof(bs_revoke_t)) return;
        ev->kind = RCOLL_BS_EV_REVOKE;
        memcpy(&ev->revoke, payload, sizeof(ev->revoke));
        ev->revoke.text[sizeof(ev->revoke.text) - 1] = '\0';
    } else if (h.type == BS_SIG) {
        if (!sig_sized) return;
        ev->kind = RCOLL_BS_EV_SIG;
        memcpy(&ev->sig, payload, sizeof(ev->sig));
    } else if (to_root) {
        if ((h.type == BS_STALL || h.type == BS_WDOG) && sig_sized) {
            ev->kind = h.type == BS_STALL ? RCOLL_BS_EV_STALL : RCOLL_BS_EV_WDOG;
            memcpy(&ev->sig, payload, sizeof(ev->sig));
        } else if (h.type == BS_BYE) {
            ev->kind = RCOLL_BS_EV_BYE;
        } else if (h.type == BS_ABORT && h.len == sizeof(bs_note_t)) {
            ev->kind = RCOLL_BS_EV_NOTE;
            memcpy(&ev->note, payload, sizeof(ev->note));
            ev->note.text[sizeof(ev->note.text) - 1] = '\0';
        } else if (h.type == BS_SHRINK && h.len == sizeof(rcoll_bs_shrink_req_t)) {
            ev->kind = RCOLL_BS_EV_SHRINK;
            memcpy(&ev->shrink, payload, sizeof(ev->shrink));
            ev->shrink.info.hostname[sizeof(ev->shrink.info.hostname) - 1] = '\0';
        }
    } else if (h.type == BS_SHRUNK) {
        if (h.len != sizeof(bs_shrunk_t)) return;
        ev->kind = RCOLL_BS_EV_SHRUNK;
        memcpy(&ev->shrunk, payload, sizeof(ev->shrunk));
        ev->shrunk.member.req.info.hostname[sizeof(ev->shrunk.member.req.info.hostname) - 1] =
            '\0';
    } else if (h.type == BS_WDOG_REPLY) {
        if (h.len != sizeof(rcoll_bs_wdog_t)) return;
        ev->kind = RCOLL_BS_EV_WDOG_REPLY;
        memcpy(&ev->wdog, payload, sizeof(ev->wdog));
    } else if (h.type == BS_LATE) {
        ev->kind = RCOLL_BS_EV_LATE;
        memcpy(&ev->note, payload, sizeof(ev->note));
        ev->note.text[sizeof(ev->note.text) - 1] = '\0';
    } else {
        /* FAIL, EXCLUDED (and anything else): a failure note, whatever its length says */
        ev->kind = h.type == BS_EXCLUDED ? RCOLL_BS_EV_EXCLUDED : RCOLL_BS_EV_NOTE;
        memcpy(&ev->note, payload, sizeof(ev->note));
        ev->note.text[sizeof(ev->note.text) - 1] = '\0';
    }
}

rcoll_status_t rcoll_bs_rx_read(int fd, bs_rx_t *rx, int *complete)
{
    *complete = 0;
    rcoll_status_t st = rcoll_net_recv_some(fd, rx->buf.raw, sizeof(bs_hdr_t), &rx->got);
    if (st != RCOLL_OK || rx->got < sizeof(bs_hdr_t)) return st;
    const bs_hdr_t *h = &rx->buf.m.hdr;
    if (!rcoll_bs_hdr_valid(h, sizeof(bs_payload_t))) return RCOLL_ERR_PROTOCOL;
    st = rcoll_net_recv_some(fd, rx->buf.raw, sizeof(bs_hdr_t) + h->len, &rx->got);
    *complete = st == RCOLL_OK && rx->got == sizeof(bs_hdr_t) + h->len;
    if (*complete) rcoll_cpath_merge(h->path);
    return st;
}

/* Whether f holds a whole frame at its offset: -1 malformed, 0 not yet, 1 whole (*need: its
 * bytes, or those its header says it needs). */
static int frame_check(const bs_frx_t *f, uint32_t max_len, size_t *need)
{
    const char *at = f->buf + f->off;
    size_t have = f->got - f->off;
    *need = sizeof(bs_hdr_t);
    if (have < sizeof(bs_hdr_t)) return 0;
    bs_hdr_t h;
    memcpy(&h, at, sizeof(h));
    if (!rcoll_bs_hdr_valid(&h, max_len)) return -1;
    if (h.type == BS_FWD && h.len < sizeof(bs_fwd_t) + sizeof(bs_hdr_t)) return -1;
    if (h.type == BS_HELLOS &&
        (h.len == 0 || h.len % sizeof(bs_up_hello_t) || h.len > RCOLL_BS_FRAME_UP_MAX))
        return -1;
    *need = sizeof(bs_hdr_t) + h.len;
    if (have < *need) return 0;
    if (h.type == BS_FWD) { /* the message inside must fill the frame exactly */
        bs_hdr_t in;
        memcpy(&in, at + sizeof(bs_hdr_t) + sizeof(bs_fwd_t), sizeof(in));
        if (!rcoll_bs_hdr_valid(&in, h.len) ||
            sizeof(bs_fwd_t) + sizeof(bs_hdr_t) + in.len != h.len)
            return -1;
    }
    if (h.type == BS_HELLOS) /* each a whole hello in its frame */
        for (size_t o = sizeof(bs_hdr_t); o < *need; o += sizeof(bs_up_hello_t)) {
            bs_hdr_t out, in;
            memcpy(&out, at + o, sizeof(out));
            memcpy(&in, at + o + sizeof(bs_hdr_t) + sizeof(bs_fwd_t), sizeof(in));
            if (!rcoll_bs_hdr_valid(&out, RCOLL_BS_FWD_MAX) || out.type != BS_FWD ||
                out.len != sizeof(bs_up_hello_t) - sizeof(bs_hdr_t) ||
                !rcoll_bs_hdr_valid(&in, sizeof(bs_hello_t)) || in.type != BS_HELLO ||
                in.len != sizeof(bs_hello_t))
                return -1;
        }
    return 1;
}

static rcoll_status_t frame_grow(bs_frx_t *f, size_t cap)
{
    if (f->cap >= cap) return RCOLL_OK;
    char *b = realloc(f->buf, cap);
    if (!b) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "bootstrap frame buffer");
    f->buf = b;
    f->cap = cap;
    return RCOLL_OK;
}

rcoll_status_t rcoll_bs_frame_read(int fd, bs_frx_t *f, uint32_t max_len, int *complete)
{
    *complete = 0;
    f->msg = NULL;
    size_t need;
    int c = frame_check(f, max_len, &need);
    if (c == 0) {
        /* The part of a message left at the end moves to the start; then read what has
         * arrived, up to the buffer (at least the message): messages that came together (a
         * relay's hellos) cost one call, not two each. */
        if (f->off) {
            memmove(f->buf, f->buf + f->off, f->got - f->off);
            f->got -= f->off;
            f->off = 0;
        }
        rcoll_status_t st = frame_grow(f, BS_FRAME_READ_BYTES);
        if (st == RCOLL_OK) st = frame_grow(f, need);
        if (st == RCOLL_OK) st = rcoll_net_recv_some(fd, f->buf, f->cap, &f->got);
        c = frame_check(f, max_len, &need);
        if (c == 0 && need > f->cap && st == RCOLL_OK) { /* a frame larger than the buffer */
            st = frame_grow(f, need);
            if (st == RCOLL_OK) st = rcoll_net_recv_some(fd, f->buf, f->cap, &f->got);
            c = frame_check(f, max_len, &need);
        }
        /* A whole frame is handed over before the error that followed it (a closed link's
         * last messages); the next call meets the error again. */
        if (c == 0) return st;
    }
    if (c < 0) return RCOLL_ERR_PROTOCOL;
    bs_hdr_t h;
    f->msg = f->buf + f->off;
    memcpy(&h, f->msg, sizeof(h)); /* as every header here is read: no alignment assumed */
    rcoll_cpath_merge(h.path);
    *complete = 1;
    return RCOLL_OK;
}

void rcoll_bs_frame_consume(bs_frx_t *f)
{
    bs_hdr_t h;
    memcpy(&h, f->buf + f->off, sizeof(h));
    size_t used = sizeof(h) + h.len;
    if (used > f->got - f->off) used = f->got - f->off;
    f->off += used;
    if (f->off == f->got) f->off = f->got = 0;
    f->msg = NULL;
}

void rcoll_bs_frame_free(bs_frx_t *f)
{
    free(f->buf);
    memset(f, 0, sizeof(*f));
}

rcoll_status_t rcoll_bs_send_fwd(int fd, int rank, int except, int type, const void *payload,
                                 uint32_t len, uint64_t deadline_ns)
{
    struct {
        bs_hdr_t outer;
        bs_fwd_t fwd;
        bs_hdr_t inner;
    } head = {
        .outer = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_FWD,
                  .len = (uint32_t)(sizeof(bs_fwd_t) + sizeof(bs_hdr_t)) + len},
        .fwd = {.rank = rank, .except = except},
        .inner = {.magic = BS_MAGIC, .version = BS_VERSION, .type = (uint16_t)type, .len = len},
    };
    head.outer.path = head.inner.path = rcoll_cpath_stamp();
    _Static_assert(sizeof(head) == 2 * sizeof(bs_hdr_t) + sizeof(bs_fwd_t), "packed frame head");
    rcoll_status_t st = rcoll_net_send_all(fd, &head, sizeof(head), deadline_ns);
    if (st == RCOLL_OK && len) st = rcoll_net_send_all(fd, payload, len, deadline_ns);
    return st;
}

void rcoll_bs_restamp(void *msg)
{
    bs_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    h.path = rcoll_cpath_stamp();
    memcpy(msg, &h, sizeof(h));
    if (h.type != BS_FWD) return;
    char *inner = (char *)msg + sizeof(h) + sizeof(bs_fwd_t);
    memcpy(&h, inner, sizeof(h));
    h.path = rcoll_cpath_stamp();
    memcpy(inner, &h, sizeof(h));
}

void rcoll_bs_note_fill(bs_note_t *n, int culprit, rcoll_status_t st, const char *text)
{
    memset(n, 0, sizeof(*n));
    n->culprit = culprit;
    n->status = st;
    snprintf(n->text, sizeof(n->text), "%s", text);
}

int rcoll_bs_secret_equal(const char *a, const char *b)
{
    unsigned char diff = 0;
    for (int i = 0; i < RCOLL_SECRET_BYTES; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

void rcoll_bs_host_identity(char *hostname, size_t len, uint64_t *hash, uint64_t *machine)
{
    char host[256] = "unknown";
    gethostname(host, sizeof(host) - 1);
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
        fclose(f);
    }
    /* The network namespace too: host-local transports (abstract sockets) do not cross it,
     * so ranks in different namespaces of one machine count as different hosts. */
    char netns[64] = "";
    ssize_t nl = readlink("/proc/self/ns/net", netns, sizeof(netns) - 1);
    netns[nl > 0 ? nl : 0] = '\0';
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = host; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = boot; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    *machine = h;
    for (const char *p = netns; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    *hash = h;
    char *dot = strchr(host, '.');
    if (dot) *dot = '\0';
    snprintf(hostname, len, "%s", host);
}

/* ------------------------------------------------------------------------------------------
 * The unique id
 * ---------------------------------------------------------------------------------------- */

void rcoll_bs_make_id(const rcoll_sockaddr_t *addrs, int naddrs,
                      const char secret[RCOLL_SECRET_BYTES], rcoll_unique_id_t *id)
{
    bs_id_t b;
    memset(&b, 0, sizeof(b));
    b.magic = BS_MAGIC;
    b.version = BS_VERSION;
    b.root = addrs[0];
    memcpy(b.secret, secret, RCOLL_SECRET_BYTES);
    for (int i = 1; i < naddrs && b.nalt < RCOLL_BS_ROOT_ADDRS - 1; i++) {
        if (addrs[i].sa.sa_family != AF_INET) continue; /* no room for IPv6 alternatives */
        memcpy(b.alt[b.nalt], &addrs[i].sin.sin_addr.s_addr, 4);
        memcpy(b.alt[b.nalt] + 4, &addrs[i].sin.sin_port, 2);
        b.nalt++;
    }
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &b, sizeof(b));
}

rcoll_status_t rcoll_bs_check_id(const rcoll_unique_id_t *id)
{
    bs_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    if (b.magic != BS_MAGIC || b.version != BS_VERSION)
        return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                             "the unique id is not a valid rcoll id of version %d (was it made "
                             "by rcoll_get_unique_id and copied whole?)", BS_VERSION);
    return RCOLL_OK;
}

int rcoll_bs_id_addrs(const bs_id_t *b, rcoll_sockaddr_t *out)
{
    int n = 0;
    out[n++] = b->root;
    for (int i = 0; i < b->nalt && i < RCOLL_BS_ROOT_ADDRS - 1; i++) {
        memset(&out[n], 0, sizeof(out[n]));
        out[n].sin.sin_family = AF_INET;
        memcpy(&out[n].sin.sin_addr.s_addr, b->alt[i], 4);
        memcpy(&out[n].sin.sin_port, b->alt[i] + 4, 2);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------
 * The tree of relays
 * ---------------------------------------------------------------------------------------- */

void rcoll_bs_tree_make(rcoll_bs_tree_t *t, int nranks, int nrelays, int fanout)
{
    t->nranks = nranks;
    t->fanout = fanout < 2 ? 2 : fanout;
    if (nranks < 2 || nrelays < 1) {
        t->nnodes = 1;
        t->block = nranks > 0 ? nranks : 1;
        return;
    }
    if (nrelays > nranks - 1) nrelays = nranks - 1;
    int want = nrelays + 1;
    t->block = (nranks + want - 1) / want;
    t->nnodes = (nranks + t->block - 1) / t->block; /* no empty block */
}

int rcoll_bs_tree_below(const rcoll_bs_tree_t *t, int node, int top)
{
    if (node < 0 || node >= t->nnodes) return 0;
    while (node > top) node = rcoll_bs_tree_parent(t, node);
    return node == top;
}

void rcoll_bs_make_relay_id(const rcoll_sockaddr_t *addr, int host_rank,
                            const rcoll_unique_id_t *root_id, rcoll_unique_id_t *id)
{
    bs_id_t b;
    memcpy(&b, root_id->internal, sizeof(b));
    uint64_t ctx = rcoll_bs_id_ctx(root_id);
    rcoll_bs_make_id(addr, 1, b.secret, id);
    memcpy(&b, id->internal, sizeof(b));
    b.via_host = host_rank + 1;
    memcpy(b.alt, &ctx, sizeof(ctx)); /* a relay's id has no alternative addresses */
    memcpy(id->internal, &b, sizeof(b));
}

void rcoll_bs_id_root_addr(const rcoll_unique_id_t *id, rcoll_sockaddr_t *addr)
{
    bs_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    *addr = b.root;
}

uint64_t rcoll_bs_id_ctx(const rcoll_unique_id_t *id)
{
    bs_id_t b;
    memcpy(&b, id->internal, sizeof(b));
    uint64_t ctx = 1469598103934665603ull; /* FNV-1a of the id: the same on every rank */
    if (b.magic == BS_MAGIC && b.via_host > 0) {
        memcpy(&ctx, b.alt, sizeof(ctx)); /* the root's id's */
        return ctx;
    }
    for (size_t i = 0; i < sizeof(id->internal); i++)
        ctx = (ctx ^ (unsigned char)id->internal[i]) * 1099511628211ull;
    return ctx;
}
