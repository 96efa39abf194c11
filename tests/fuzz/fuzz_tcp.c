/*
 * fuzz_tcp.c - what a TCP transport peer sends: the hello on every socket of a connection
 * (checked as its bytes arrive), the frame header of every message, and the stripe split
 * that both ends compute from a handle's socket count and striping threshold.
 * Input: a selector byte, then the case's bytes.
 */
#include "fuzz.h"

#include "transport/tcp.h"
#include "transport/tcp_int.h"

static void hello_case(fz_t *f)
{
    uint32_t nsocks = 1 + fz_u8(f) % RCOLL_TCP_MAX_NSOCKS;
    rcoll_tcp_hello_t *m = malloc(sizeof(*m));
    fz_take(f, m, sizeof(*m));
    /* The listener checks every prefix as it arrives; once bad, always bad. */
    int was_bad = 0;
    for (size_t got = 0; got <= sizeof(*m); got++) {
        const char *bad = rcoll_tcp_hello_check(m, got, FZ_NONCE, nsocks);
        FZ_ASSERT(!was_bad || bad);
        was_bad = bad != NULL;
    }
    if (!was_bad) {
        FZ_ASSERT(m->index < nsocks && m->nonce == FZ_NONCE);
    }
    free(m);
}

static void frame_case(fz_t *f)
{
    rcoll_tcp_frame_t h;
    fz_take(f, &h, sizeof(h));
    int tag = (int)(int32_t)fz_u64(f);
    uint64_t cap = fz_u64(f);
    rcoll_tcp_frame_verdict_t v = rcoll_tcp_frame_check(&h, tag, cap);
    if (v == RCOLL_TCP_FRAME_OK) FZ_ASSERT(h.length <= cap && h.magic == RCOLL_TCP_FRAME_MAGIC);
}

/* The parts of a message over the sockets: in bounds, in order, covering it exactly. */
static void split_case(fz_t *f)
{
    rcoll_tcp_handle_t h;
    fz_take(f, &h, sizeof(h));
    h.magic = RCOLL_TCP_HANDLE_MAGIC;
    h.version = RCOLL_TCP_VERSION;
    if (rcoll_tcp_handle_check(&h)) return;
    uint64_t len = fz_u64(f) % (SOCK_MAX_MSG + 1);
    uint64_t next = 0;
    for (int s = 0; s < (int)h.nsocks; s++) {
        uint64_t off, plen;
        rcoll_tcp_part((int)h.nsocks, h.stripe_min, len, s, &off, &plen);
        FZ_ASSERT(off <= len && plen <= len - off);
        if (plen) {
            FZ_ASSERT(off == next);
            next = off + plen;
        }
    }
    FZ_ASSERT(next == len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = {data, size};
    switch (fz_u8(&f) % 3) {
    case 0: hello_case(&f); break;
    case 1: frame_case(&f); break;
    default: split_case(&f); break;
    }
    return 0;
}
