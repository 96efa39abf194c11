/*
 * fuzz_bootstrap.c - the bootstrap's messages, decoded as the root and the ranks decode
 * them (core/bootstrap_wire.h): the hello a connection sends the root, the control messages
 * ranks send the root (signatures, stalled calls, goodbye, failure reports) and those the
 * root sends ranks (failures, relayed signatures).  A relayed signature is another rank's
 * call, which the receiver prints next to its own (core/sig.h); the rank table's wire form.
 * Input: a selector byte, then the message bytes.
 */
#include "fuzz.h"

#include "core/bootstrap_wire.h"
#include "core/sig.h"

static void hello_case(const uint8_t *p, size_t n)
{
    /* The root scans every prefix as it arrives: once refused, always refused. */
    size_t max = sizeof(bs_hdr_t) + sizeof(bs_hello_t);
    char *buf = malloc(max);
    size_t k = n < max ? n : max;
    memcpy(buf, p, k);
    int refused = 0;
    for (size_t got = 0; got <= k; got++) {
        int r = rcoll_bs_hello_scan(buf, got);
        FZ_ASSERT(r >= -1 && r <= 1);
        FZ_ASSERT(!refused || r < 0);
        FZ_ASSERT(r != 1 || got == max);
        refused = r < 0;
    }
    free(buf);
}

static void sig_print(const rcoll_bs_sig_t *g)
{
    rcoll_sig_t theirs, mine;
    memcpy(&theirs, g->sig, sizeof(theirs));
    memset(&mine, 0, sizeof(mine));
    char buf[512];
    rcoll_sig_format(&theirs, 1, buf, sizeof(buf));
    rcoll_opnum_t t;
    memset(&t, 0, sizeof(t));
    t.seq0 = 3;
    rcoll_sig_sentence(&theirs, g->rank, &mine, -1, &t, buf, sizeof(buf));
    rcoll_sig_sentence(&mine, 0, &theirs, g->rank, NULL, buf, sizeof(buf));
}

static void ctl_case(const uint8_t *p, size_t n, int to_root)
{
    /* As bs_rx_read leaves it: a valid header, its payload, stale bytes after it. */
    char *msg = malloc(RCOLL_BS_CTL_BYTES);
    size_t k = n < RCOLL_BS_CTL_BYTES ? n : RCOLL_BS_CTL_BYTES;
    memset(msg, 0, RCOLL_BS_CTL_BYTES);
    memcpy(msg, p, k);
    bs_hdr_t h;
    memcpy(&h, msg, sizeof(h));
    if (rcoll_bs_hdr_valid(&h, sizeof(bs_note_t))) {
        rcoll_bs_event_t ev;
        rcoll_bs_ctl_decode(msg, to_root, &ev);
        if (ev.kind == RCOLL_BS_EV_SIG || ev.kind == RCOLL_BS_EV_STALL) {
            FZ_ASSERT(h.len == sizeof(rcoll_bs_sig_t));
            sig_print(&ev.sig);
        } else if (ev.kind == RCOLL_BS_EV_NOTE) {
            FZ_ASSERT(strlen(ev.note.text) < sizeof(ev.note.text));
        }
        if (!to_root) FZ_ASSERT(ev.kind != RCOLL_BS_EV_STALL && ev.kind != RCOLL_BS_EV_BYE);
    }
    free(msg);
}

/* The host segment's announcements: another rank's call, read from shared memory. */
static void announce_case(const uint8_t *p, size_t n)
{
    char *area = malloc(2 * RCOLL_SIG_ANNOUNCE_BYTES);
    size_t k = n < 2 * RCOLL_SIG_ANNOUNCE_BYTES ? n : 2 * RCOLL_SIG_ANNOUNCE_BYTES;
    memset(area, 0, 2 * RCOLL_SIG_ANNOUNCE_BYTES);
    memcpy(area, p, k);
    uint64_t seq;
    memcpy(&seq, area, sizeof(seq));
    rcoll_sig_t s;
    if (rcoll_sig_announced(area, 0, seq - 1, &s)) {
        char buf[256];
        rcoll_sig_format(&s, 0, buf, sizeof(buf));
        (void)rcoll_sig_tag(&s);
    }
    free(area);
}

/* The rank table as a rank decodes it (BS_TABLE): a size byte (1..8 records), then the wire
 * bytes.  Decoded into exactly that many records on the heap (a write past them is caught); a
 * table that decodes encodes back to bytes that decode to the same records. */
static void table_case(const uint8_t *p, size_t n)
{
    if (n < 1) return;
    int nrec = 1 + p[0] % 8;
    rcoll_peer_info_t *t = malloc((size_t)nrec * sizeof(*t));
    if (rcoll_bs_table_decode(p + 1, n - 1, t, nrec) == 0) {
        FZ_ASSERT(n - 1 >= rcoll_bs_table_min(nrec) && n - 1 <= rcoll_bs_table_max(nrec));
        char *wire = malloc(rcoll_bs_table_max(nrec));
        rcoll_peer_info_t *back = malloc((size_t)nrec * sizeof(*back));
        size_t bytes = rcoll_bs_table_encode(t, nrec, wire);
        FZ_ASSERT(bytes <= n - 1); /* the encoder sends only the words that change */
        FZ_ASSERT(rcoll_bs_table_decode(wire, bytes, back, nrec) == 0);
        FZ_ASSERT(memcmp(back, t, (size_t)nrec * sizeof(*t)) == 0);
        free(wire);
        free(back);
    }
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 5) {
    case 0: hello_case(p, n); break;
    case 1: ctl_case(p, n, 1); break;
    case 2: ctl_case(p, n, 0); break;
    case 3: announce_case(p, n); break;
    default: table_case(p, n); break;
    }
    return 0;
}
