/*
 * test_bs_table.c - the rank table's wire form (core/bootstrap_wire.h, BS_TABLE): tables of
 * many shapes encoded and decoded back, compared record by record with the originals; the
 * size of a table whose ranks share hosts against its records; every malformed form refused
 * (bytes missing, bytes left over, a word bit past the record, a cut at every length of a
 * small table), never a record written past the table.  Pure logic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/bootstrap_wire.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A rank as a launch makes them: ppn ranks a host, each with its pid and listen handles. */
static void fill(rcoll_peer_info_t *t, int n, int ppn, int random_bytes)
{
    memset(t, 0, (size_t)n * sizeof(*t));
    for (int k = 0; k < n; k++) {
        rcoll_peer_info_t *p = &t[k];
        int host = k / ppn;
        if (random_bytes) {
            unsigned char *b = (unsigned char *)p;
            for (size_t i = 0; i < sizeof(*p); i++) b[i] = (unsigned char)next();
            continue;
        }
        snprintf(p->hostname, sizeof(p->hostname), "node%04d", host);
        p->host_hash = 0x9e3779b97f4a7c15ull * (uint64_t)(host + 1);
        p->machine_hash = p->host_hash ^ 1;
        p->pid = 4000 + k;
        p->gpu_pos = 1 + k % ppn;
        p->bell_fd = 7;
        p->cpus[0] = 0xffffull << (16 * (k % 4));
        for (int tr = 0; tr < RCOLL_MAX_TRANSPORTS && tr < 2; tr++) {
            p->handles[tr][0] = 2;
            p->handles[tr][2] = (uint8_t)(k >> 8);
            p->handles[tr][3] = (uint8_t)k;
            p->handles[tr][4] = 10, p->handles[tr][7] = (uint8_t)host;
            p->max_msg[tr] = 1u << 30;
        }
    }
}

static int round_trip(const rcoll_peer_info_t *t, int n, size_t *bytes)
{
    char *wire = malloc(rcoll_bs_table_max(n));
    rcoll_peer_info_t *back = malloc((size_t)n * sizeof(*back));
    *bytes = rcoll_bs_table_encode(t, n, wire);
    int ok = *bytes >= rcoll_bs_table_min(n) && *bytes <= rcoll_bs_table_max(n) &&
             rcoll_bs_table_decode(wire, *bytes, back, n) == 0 &&
             memcmp(back, t, (size_t)n * sizeof(*t)) == 0;
    free(wire);
    free(back);
    return ok;
}

static void shapes(void)
{
    static const struct {
        int n, ppn, random;
    } c[] = {{1, 1, 0}, {2, 1, 0}, {8, 8, 0}, {13, 4, 0}, {1024, 8, 0}, {1, 1, 1}, {5, 1, 1},
             {64, 8, 1}};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        rcoll_peer_info_t *t = malloc((size_t)c[i].n * sizeof(*t));
        fill(t, c[i].n, c[i].ppn, c[i].random);
        size_t bytes = 0;
        CHECK(round_trip(t, c[i].n, &bytes), "%d ranks, %d a host%s: decoded as encoded (%zu "
              "bytes)", c[i].n, c[i].ppn, c[i].random ? ", random bytes" : "", bytes);
        if (c[i].n == 1024)
            CHECK(bytes * 5 < (size_t)c[i].n * sizeof(*t), "1024 ranks, 8 a host: %zu bytes, "
                  "under a fifth of the %zu bytes of the records", bytes,
                  (size_t)c[i].n * sizeof(*t));
        if (c[i].random)
            CHECK(bytes == rcoll_bs_table_max(c[i].n), "random records: %zu bytes, the most "
                  "(%zu)", bytes, rcoll_bs_table_max(c[i].n));
        free(t);
    }
    /* identical records: the map alone after the first */
    rcoll_peer_info_t same[16];
    fill(same, 1, 1, 0);
    for (int k = 1; k < 16; k++) same[k] = same[0];
    size_t bytes = 0;
    CHECK(round_trip(same, 16, &bytes) && bytes < sizeof(same[0]) + 16 * BS_REC_MAP,
          "16 identical records: %zu bytes", bytes);
}

static void malformed(void)
{
    enum { N = 6 };
    rcoll_peer_info_t t[N];
    fill(t, N, 3, 0);
    char wire[sizeof(t) + N * BS_REC_MAP + 16];
    size_t bytes = rcoll_bs_table_encode(t, N, wire);
    /* Exactly N records' room on the heap, so a write past them is caught under ASan. */
    rcoll_peer_info_t *back = malloc(sizeof(t));
    int refused = 1;
    for (size_t cut = 0; cut < bytes; cut++)
        refused &= rcoll_bs_table_decode(wire, cut, back, N) == -1;
    CHECK(refused, "every cut of a %zu-byte table refused", bytes);
    memset(wire + bytes, 0, 8);
    CHECK(rcoll_bs_table_decode(wire, bytes + 1, back, N) == -1 &&
              rcoll_bs_table_decode(wire, bytes + 8, back, N) == -1,
          "bytes left over after the last record refused");
    CHECK(rcoll_bs_table_decode(wire, bytes, back, N - 1) == -1,
          "a table of 6 records read as 5: refused (bytes left over)");
    if (BS_REC_WORDS % 8) {
        char bad[sizeof(wire)];
        memcpy(bad, wire, bytes);
        bad[BS_REC_MAP - 1] |= (char)(1u << 7);
        CHECK(rcoll_bs_table_decode(bad, bytes, back, N) == -1,
              "a word bit past the record's %zu words refused", (size_t)BS_REC_WORDS);
    }
    /* a map that says every word, with too few bytes behind it */
    char all[BS_REC_MAP + 8];
    memset(all, 0, sizeof(all));
    for (size_t w = 0; w < BS_REC_WORDS; w++) all[w / 8] |= (char)(1u << (w % 8));
    CHECK(rcoll_bs_table_decode(all, sizeof(all), back, 1) == -1,
          "a record that says all %zu words and brings one: refused", (size_t)BS_REC_WORDS);
    CHECK(rcoll_bs_table_decode(wire, bytes, back, N) == 0 && memcmp(back, t, sizeof(t)) == 0,
          "the intact table still decodes");
    free(back);
}

int main(void)
{
    shapes();
    malformed();
    return check_summary();
}
