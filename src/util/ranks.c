/*
 * ranks.c - sets of ranks written as ranges (ranks.h).
 */
#include <stdio.h>
#include <string.h>

#include "util/ranks.h"

int rcoll_ranks_count(const uint8_t *in, int n)
{
    int c = 0;
    for (int p = 0; p < n; p++) c += in[p] != 0;
    return c;
}

size_t rcoll_ranks_format(char *buf, size_t len, size_t o, const uint8_t *in, int n)
{
    if (!buf || len == 0 || o >= len) return len ? len - 1 : 0;
    buf[o] = '\0';
    const size_t reserve = 24; /* " and 2147483647 more" */
    int first = 1, left = rcoll_ranks_count(in, n);
    for (int p = 0; p < n; p++) {
        if (!in[p] || (p > 0 && in[p - 1])) continue;
        int q = p;
        while (q + 1 < n && in[q + 1]) q++;
        char r[32];
        int w = q == p ? snprintf(r, sizeof(r), "%s%d", first ? "" : ",", p)
                       : snprintf(r, sizeof(r), "%s%d-%d", first ? "" : ",", p, q);
        int last = left == q - p + 1;
        /* the last range needs no room for the tail; the others keep room for it */
        if (o + (size_t)w + (last ? 0 : reserve) >= len) {
            int k = first ? snprintf(buf + o, len - o, "%d rank%s", left, left > 1 ? "s" : "")
                          : snprintf(buf + o, len - o, " and %d more", left);
            o += k > 0 ? (size_t)k : 0;
            return o < len ? o : len - 1;
        }
        memcpy(buf + o, r, (size_t)w + 1);
        o += (size_t)w;
        left -= q - p + 1;
        first = 0;
    }
    return o;
}
