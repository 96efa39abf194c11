/*
 * test_bs_frames.c - the bootstrap's frame reader (rcoll_bs_frame_read / _consume, the root's
 * and the relays' links) over a real socket pair: messages of many sizes written in pieces
 * that cut them anywhere (a header, a forwarded hello, a table larger than the read buffer)
 * come out whole, in order, byte for byte as written; a malformed message after good ones is
 * refused only once those were handed over, and a closed link likewise.  A block of hellos
 * (BS_HELLOS, a relay's subtree going up) is handed over whole when every hello in it is
 * whole in its frame, refused otherwise.  Pure logic plus one socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "core/bootstrap_int.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t draw(uint32_t n)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 33) % n;
}

/* Message i of the stream: a forwarded hello (the common case), a bare control message, or
 * every 50th a table of up to 200 KiB; its payload bytes are a function of i and offset. */
static size_t make_msg(int i, char *out)
{
    bs_hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION};
    size_t body;
    if (i % 50 == 49) {
        h.type = BS_TABLE;
        body = 70000 + draw(130000);
    } else if (i % 3) {
        h.type = BS_FWD;
        bs_fwd_t f = {.rank = i, .except = 0};
        bs_hdr_t in = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLO,
                       .len = sizeof(bs_hello_t)};
        h.len = (uint32_t)(sizeof(f) + sizeof(in) + sizeof(bs_hello_t));
        memcpy(out, &h, sizeof(h));
        memcpy(out + sizeof(h), &f, sizeof(f));
        memcpy(out + sizeof(h) + sizeof(f), &in, sizeof(in));
        char *b = out + sizeof(h) + sizeof(f) + sizeof(in);
        for (size_t k = 0; k < sizeof(bs_hello_t); k++) b[k] = (char)(i * 7 + k);
        return sizeof(h) + h.len;
    } else {
        h.type = BS_SIG;
        body = 1 + draw(sizeof(bs_payload_t));
    }
    h.len = (uint32_t)body;
    memcpy(out, &h, sizeof(h));
    for (size_t k = 0; k < body; k++) out[sizeof(h) + k] = (char)(i * 13 + k);
    return sizeof(h) + body;
}

/* Read every whole message there is; returns how many matched the expected stream (from
 * *next on), and the status that stopped the reading. */
static rcoll_status_t drain(int fd, bs_frx_t *rx, const char *want, const size_t *off,
                            const size_t *len, int n, int *next, int *wrong)
{
    for (;;) {
        int complete;
        rcoll_status_t st = rcoll_bs_frame_read(fd, rx, 262144, &complete);
        if (st != RCOLL_OK || !complete) return st;
        if (*next >= n || memcmp(rx->msg, want + off[*next], len[*next]) != 0) (*wrong)++;
        (*next)++;
        rcoll_bs_frame_consume(rx);
    }
}

static void pieces(void)
{
    enum { N = 600 };
    static size_t off[N], len[N];
    size_t total = 0;
    char *stream = malloc((size_t)N * 210000);
    for (int i = 0; i < N; i++) {
        off[i] = total;
        len[i] = make_msg(i, stream + total);
        total += len[i];
    }
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %s", strerror(errno));
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    int sz = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    bs_frx_t rx = {0};
    int next = 0, wrong = 0, cuts = 0;
    size_t sent = 0;
    while (sent < total) {
        /* a piece of 1 byte to 96 KiB: cuts headers, hellos and tables anywhere */
        size_t piece = draw(4) == 0 ? 1 + draw(40) : 1 + draw(98304);
        if (piece > total - sent) piece = total - sent;
        size_t w = 0;
        while (w < piece) {
            ssize_t k = write(sv[1], stream + sent + w, piece - w);
            if (k <= 0) break;
            w += (size_t)k;
            /* the writer may fill the socket: the reader takes what is whole meanwhile */
            if (w < piece) drain(sv[0], &rx, stream, off, len, N, &next, &wrong);
        }
        sent += w;
        rcoll_status_t st = drain(sv[0], &rx, stream, off, len, N, &next, &wrong);
        CHECK(st == RCOLL_OK, "reading after %zu bytes: %s", sent, rcoll_err_get());
        if (rx.got > rx.off) cuts++; /* a message was cut at this piece's end */
    }
    CHECK(next == N && wrong == 0, "%d of %d messages handed over, %d differing from those "
          "written", next, N, wrong);
    CHECK(cuts > 30, "the stream was cut inside a message %d times", cuts);
    CHECK(rx.off == 0 && rx.got == 0, "nothing left once every message was taken (off %zu, "
          "got %zu)", rx.off, rx.got);
    /* good messages, then a malformed header: the good ones first, then the refusal */
    size_t a = make_msg(1, stream), b = make_msg(2, stream + a);
    bs_hdr_t bad = {.magic = 0xdeadbeef, .version = BS_VERSION, .type = BS_SIG, .len = 4};
    memcpy(stream + a + b, &bad, sizeof(bad));
    size_t all = a + b + sizeof(bad) + 4;
    CHECK(write(sv[1], stream, all) == (ssize_t)all, "write");
    static size_t off2[2], len2[2];
    off2[1] = a;
    len2[0] = a;
    len2[1] = b;
    next = wrong = 0;
    rcoll_status_t st = drain(sv[0], &rx, stream, off2, len2, 2, &next, &wrong);
    CHECK(next == 2 && wrong == 0 && st == RCOLL_ERR_PROTOCOL, "two messages, then the "
          "malformed one refused (%d handed over, %d differing, status %d)", next, wrong, st);
    rcoll_bs_frame_free(&rx);
    /* a closed link: the whole message before the close first, then the close */
    CHECK(write(sv[1], stream, a) == (ssize_t)a && write(sv[1], stream, 10) == 10, "write");
    close(sv[1]);
    next = wrong = 0;
    st = drain(sv[0], &rx, stream, off2, len2, 1, &next, &wrong);
    CHECK(next == 1 && wrong == 0 && st == RCOLL_ERR_REMOTE, "the message before a close "
          "handed over, then the close (%d, %d differing, status %d)", next, wrong, st);
    rcoll_bs_frame_free(&rx);
    close(sv[0]);
    free(stream);
}


/* A block of n hellos (ranks 100..), each in the frame a relay puts around it. */
static size_t make_block(int n, char *out)
{
    bs_hdr_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLOS,
                  .len = (uint32_t)(n * sizeof(bs_up_hello_t))};
    memcpy(out, &h, sizeof(h));
    for (int i = 0; i < n; i++) {
        bs_up_hello_t e = {
            .outer = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_FWD,
                      .len = (uint32_t)(sizeof(e) - sizeof(bs_hdr_t))},
            .fwd = {.rank = 100 + i},
            .inner = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLO,
                      .len = sizeof(bs_hello_t)},
            .hello = {.rank = 100 + i, .nranks = 1000}};
        memcpy(out + sizeof(h) + (size_t)i * sizeof(e), &e, sizeof(e));
    }
    return sizeof(h) + h.len;
}

/* Write len bytes at buf, then read: the status of the first read, whether a whole message
 * was handed over, and the reader emptied for the next case. */
static rcoll_status_t one(const char *buf, size_t len, int *complete)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    int sz = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    CHECK(write(sv[1], buf, len) == (ssize_t)len, "write %zu", len);
    bs_frx_t rx = {0};
    rcoll_status_t st = rcoll_bs_frame_read(sv[0], &rx, RCOLL_BS_FRAME_UP_MAX, complete);
    if (*complete) CHECK(memcmp(rx.msg, buf, len) == 0, "the block handed over as written");
    rcoll_bs_frame_free(&rx);
    close(sv[0]);
    close(sv[1]);
    return st;
}

static void blocks(void)
{
    size_t cap = sizeof(bs_hdr_t) + (BS_HELLOS_MAX + 1) * sizeof(bs_up_hello_t);
    char *b = malloc(cap);
    int complete;
    int sizes[] = {1, 2, 31, BS_HELLOS_MAX};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = make_block(sizes[i], b);
        rcoll_status_t st = one(b, len, &complete);
        CHECK(st == RCOLL_OK && complete, "a block of %d hellos (%zu bytes) handed over whole "
              "(status %d, complete %d)", sizes[i], len, st, complete);
    }
    /* malformed: each refused as a protocol error, never handed over */
    struct {
        const char *what;
        size_t at;   /* byte to change (from the block's start) */
        int delta;   /* added to the 32-bit word there */
    } bad[] = {
        {"the block's length one byte short of a whole hello", offsetof(bs_hdr_t, len), -1},
        {"a hello's frame of another type", sizeof(bs_hdr_t) + offsetof(bs_hdr_t, type), 1},
        {"a hello's frame a byte longer", sizeof(bs_hdr_t) + offsetof(bs_hdr_t, len), 1},
        {"the second hello of another type (a note)",
         sizeof(bs_hdr_t) + sizeof(bs_up_hello_t) + offsetof(bs_up_hello_t, inner.type), 1},
        {"the last hello's magic",
         sizeof(bs_hdr_t) + 2 * sizeof(bs_up_hello_t) + offsetof(bs_up_hello_t, inner.magic), 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = make_block(3, b);
        uint32_t w;
        memcpy(&w, b + bad[i].at, sizeof(w));
        w += (uint32_t)bad[i].delta;
        memcpy(b + bad[i].at, &w, sizeof(w));
        rcoll_status_t st = one(b, len, &complete);
        CHECK(st == RCOLL_ERR_PROTOCOL && !complete, "%s: refused (status %d, complete %d)",
              bad[i].what, st, complete);
    }
    size_t len = make_block(BS_HELLOS_MAX + 1, b);
    rcoll_status_t st = one(b, len, &complete);
    CHECK(st == RCOLL_ERR_PROTOCOL && !complete, "a block of %d hellos, one more than the "
          "most: refused (status %d)", BS_HELLOS_MAX + 1, st);
    bs_hdr_t empty = {.magic = BS_MAGIC, .version = BS_VERSION, .type = BS_HELLOS, .len = 0};
    st = one((const char *)&empty, sizeof(empty), &complete);
    CHECK(st == RCOLL_ERR_PROTOCOL && !complete, "an empty block refused (status %d)", st);
    free(b);
}

int main(void)
{
    check_case("frames cut anywhere come out whole and in order", pieces);
    check_case("blocks of hellos: whole ones handed over, malformed ones refused", blocks);
    return check_summary();
}
