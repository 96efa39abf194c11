/*
 * test_handles.c - invalid communicator handles are refused, never dereferenced: a handle
 * used after rcoll_comm_destroy, destroyed twice, or never made by rcoll gets
 * RCOLL_ERR_INVALID_ARG from every call that takes a communicator, and the live ones keep
 * working.  Hundreds of singleton communicators (rcoll_comm_split with color = rank) are
 * created and destroyed in a mixed order so the table of live handles grows and reuses its
 * slots.  Under ASan a dereference of a freed communicator fails the test by itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mp.h"

#define NSINGLE 300

static int refused(rcoll_comm_t c, int rank, const char *what)
{
    float buf[4] = {1, 2, 3, 4};
    int v = -1, bad = 0;
    size_t mem = 0;
    rcoll_request_t req = NULL;
    rcoll_comm_t child = NULL;
    rcoll_status_t aerr = RCOLL_ERR_INTERNAL;
    rcoll_status_t st[] = {
        rcoll_allreduce(RCOLL_IN_PLACE, buf, 4, RCOLL_FLOAT32, RCOLL_SUM, c),
        rcoll_iallreduce(RCOLL_IN_PLACE, buf, 4, RCOLL_FLOAT32, RCOLL_SUM, c, &req),
        rcoll_bcast(buf, 4, RCOLL_FLOAT32, 0, c),
        rcoll_barrier(c),
        rcoll_send(buf, 4, RCOLL_FLOAT32, 0, c),
        rcoll_comm_rank(c, &v),
        rcoll_comm_size(c, &v),
        rcoll_comm_mem_usage(c, &mem),
        rcoll_comm_get_async_error(c, &aerr),
        rcoll_comm_dup(c, &child),
        rcoll_comm_destroy(c),
        rcoll_comm_abort(c),
    };
    for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++)
        if (st[i] != RCOLL_ERR_INVALID_ARG) {
            fprintf(stderr, "rank %d: %s: call %zu returned %s\n", rank, what, i,
                    rcoll_status_string(st[i]));
            bad++;
        }
    if (aerr != RCOLL_OK) {
        fprintf(stderr, "rank %d: %s: rcoll_comm_get_async_error left %d\n", rank, what,
                (int)aerr);
        bad++;
    }
    if (v != -1 || req || child || buf[0] != 1) {
        fprintf(stderr, "rank %d: %s: an output was written\n", rank, what);
        bad++;
    }
    if (!strstr(rcoll_comm_last_error(c), "not a live communicator")) {
        fprintf(stderr, "rank %d: %s: last_error '%s'\n", rank, what, rcoll_comm_last_error(c));
        bad++;
    }
    return bad;
}

static int body(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    int bad = 0;
    /* A duplicate, used, destroyed, then used again and destroyed again. */
    rcoll_comm_t dup = NULL;
    if (rcoll_comm_dup(comm, &dup) != RCOLL_OK) return 1;
    int32_t x = rank + 1;
    bad += rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, dup) != RCOLL_OK ||
           x != n * (n + 1) / 2;
    rcoll_status_t aerr = RCOLL_ERR_INTERNAL;
    bad += rcoll_comm_get_async_error(dup, &aerr) != RCOLL_OK || aerr != RCOLL_OK;
    bad += rcoll_comm_get_async_error(dup, NULL) != RCOLL_ERR_INVALID_ARG;
    bad += rcoll_comm_destroy(dup) != RCOLL_OK;
    bad += refused(dup, rank, "after destroy");
    /* Something that never was a communicator. */
    static char junk[4096];
    memset(junk, 0x7f, sizeof(junk));
    bad += refused((rcoll_comm_t)(void *)junk, rank, "never created");
    /* Many live handles, destroyed in a mixed order. */
    static rcoll_comm_t single[NSINGLE];
    for (int i = 0; i < NSINGLE; i++)
        if (rcoll_comm_split(comm, rank, 0, &single[i]) != RCOLL_OK) {
            fprintf(stderr, "rank %d: split %d failed: %s\n", rank, i,
                    rcoll_comm_last_error(comm));
            return 1;
        }
    for (int i = 0; i < NSINGLE; i += 2) bad += rcoll_comm_destroy(single[i]) != RCOLL_OK;
    for (int i = 0; i < NSINGLE; i++) {
        int size = 0;
        rcoll_status_t st = rcoll_comm_size(single[i], &size);
        if (i % 2 == 0 ? st != RCOLL_ERR_INVALID_ARG : (st != RCOLL_OK || size != 1)) {
            fprintf(stderr, "rank %d: singleton %d: %s, size %d\n", rank, i,
                    rcoll_status_string(st), size);
            bad++;
        }
    }
    for (int i = 1; i < NSINGLE; i += 2) bad += rcoll_comm_destroy(single[i]) != RCOLL_OK;
    bad += refused(single[NSINGLE - 1], rank, "the last singleton after destroy");
    /* The parent is untouched by all of it. */
    x = 1;
    bad += rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_INT32, RCOLL_SUM, comm) != RCOLL_OK ||
           x != n;
    return bad != 0;
}

int main(void)
{
    mp_result_t res;
    int failed = mp_run(3, body, NULL, 120, &res);
    CHECK(failed == 0, "invalid handles refused on every rank: %d ranks failed", failed);
    return check_summary();
}
