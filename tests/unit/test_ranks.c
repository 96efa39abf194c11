/*
 * test_ranks.c - sets of ranks written as ranges (src/util/ranks.h): every output parsed back
 * and compared with the set it came from; a cut list's "and N more" equal to the ranks it
 * left out, never a silently short list.  Pure logic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/ranks.h"

/* Parse "a-b,c,..." (optionally followed by " and N more", or "N ranks" alone) into got;
 * returns the N of the tail (0 without one), -1 on a malformed text. */
static int parse(const char *s, uint8_t *got, int n)
{
    memset(got, 0, (size_t)n);
    int more = 0, k = 0;
    if (sscanf(s, "%d rank%*[s]%n", &more, &k) >= 1 && k && s[k] == '\0') return more;
    if (sscanf(s, "%d rank%n", &more, &k) >= 1 && k && s[k] == '\0') return more;
    const char *p = s;
    while (*p) {
        char *e;
        long a = strtol(p, &e, 10), b = a;
        if (e == p) return -1;
        p = e;
        if (*p == '-') {
            b = strtol(p + 1, &e, 10);
            if (e == p + 1 || b < a) return -1;
            p = e;
        }
        if (a < 0 || b >= n) return -1;
        for (long r = a; r <= b; r++) {
            if (got[r]) return -1; /* listed twice */
            got[r] = 1;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '\0') return 0;
        if (sscanf(p, " and %d more%n", &more, &k) == 1 && p[k] == '\0') return more;
        return -1;
    }
    return 0;
}

static void one(const uint8_t *in, int n, size_t len, size_t prefix)
{
    char buf[4096];
    uint8_t got[2048];
    memset(buf, 'x', sizeof(buf));
    memcpy(buf, "HEAD: ", 6);
    size_t o = rcoll_ranks_format(buf, len, prefix, in, n);
    CHECK(o < len && buf[o] == '\0' && strlen(buf) == o, "terminated at its length (len %zu)",
          len);
    CHECK(prefix == 0 || !memcmp(buf, "HEAD: ", prefix < 6 ? prefix : 6), "prefix kept");
    int more = parse(buf + prefix, got, n);
    CHECK(more >= 0, "well formed: '%s'", buf + prefix);
    if (more < 0) return;
    int listed = 0, want = 0;
    for (int p = 0; p < n; p++) {
        listed += got[p];
        want += in[p] != 0;
        if (got[p] && !in[p]) {
            CHECK(0, "rank %d listed but not in the set: '%s'", p, buf + prefix);
            return;
        }
    }
    CHECK(listed + more == want, "%d listed + %d more = %d in the set: '%s'", listed, more, want,
          buf + prefix);
    /* a cut list keeps whole ranges, in order: every listed rank precedes every one left out */
    int seen_out = 0, order_ok = 1;
    for (int p = 0; p < n; p++) {
        if (in[p] && !got[p]) seen_out = 1;
        if (got[p] && seen_out) order_ok = 0;
    }
    CHECK(order_ok, "the ranks left out are the last ones: '%s'", buf + prefix);
    if (len >= 4096 && prefix == 0)
        CHECK(more == 0, "a large buffer lists everything: '%s'", buf);
}

static void test_fixed(void)
{
    uint8_t in[16] = {1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 1};
    char buf[64];
    rcoll_ranks_format(buf, sizeof(buf), 0, in, 16);
    CHECK(!strcmp(buf, "0-3,7,9-12,15"), "ranges: '%s'", buf);
    rcoll_ranks_format(buf, 32, 0, in, 16);
    CHECK(!strcmp(buf, "0-3,7 and 5 more") || !strcmp(buf, "0-3,7,9-12,15"), "cut: '%s'", buf);
    rcoll_ranks_format(buf, 12, 0, in, 16);
    CHECK(!strcmp(buf, "10 ranks"), "nothing fits but the count: '%s'", buf);
    uint8_t none[4] = {0};
    rcoll_ranks_format(buf, sizeof(buf), 0, none, 4);
    CHECK(!strcmp(buf, ""), "empty set: '%s'", buf);
    CHECK(rcoll_ranks_count(in, 16) == 10, "count");
    /* the probe's case: 199 missing ranks of 200, every other one, in a 256-byte note */
    static uint8_t odd[400];
    for (int p = 0; p < 400; p++) odd[p] = p % 2;
    char note[256];
    size_t o = (size_t)snprintf(note, sizeof(note), "199 ranks never joined: ");
    rcoll_ranks_format(note, sizeof(note), o, odd, 400);
    CHECK(strstr(note, " more") != NULL && strlen(note) < sizeof(note), "cut and said: '%s'",
          note);
}

static void test_random(void)
{
    static uint8_t in[2048];
    unsigned seed = 12345;
    for (int t = 0; t < 3000; t++) {
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)((seed >> 8) % 2000);
        int density = (int)((seed >> 4) % 100);
        for (int p = 0; p < n; p++) {
            seed = seed * 1103515245u + 12345u;
            in[p] = (int)((seed >> 16) % 100) < density;
        }
        size_t lens[] = {24, 30, 40, 100, 256, 4096};
        size_t len = lens[t % 6];
        size_t prefix = (t % 3 == 0 && len > 10) ? 6 : 0;
        one(in, n, len, prefix);
    }
}

int main(void)
{
    check_case("fixed sets", test_fixed);
    check_case("3000 random sets and buffer sizes", test_random);
    return check_summary();
}
