/*
 * tp_harness.h - what the transport conformance suites share: the transport under test (T,
 * defined by each suite), connected pairs in one thread, waits with deadlines, patterned
 * buffers, raw-socket checks and the shared cases.  Checks and cases: tests/common/check.h
 * (each suite's main sets rcoll_err_get as the note of failure lines).
 * Every wait has a deadline, so a broken transport fails a case instead of hanging it.
 */
#ifndef RCOLL_TESTS_TP_HARNESS_H
#define RCOLL_TESTS_TP_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "transport/transport.h"
#include "util/status.h"

#define DEADLINE_NS (10ull * 1000000000ull)
#define GUARD 64

extern const rcoll_transport_ops_t *T; /* defined by the suite */
extern int pair_listen_dev, pair_connect_dev; /* devices pair_open uses (default 0) */

typedef struct {
    char handle[RCOLL_TRANSPORT_HANDLE_BYTES];
    void *lc, *sc, *rc;
} pair_t;

/* Listen, then connect and accept in turns until both ends exist (10 s deadline), on
 * pair_listen_dev and pair_connect_dev. */
rcoll_status_t pair_open(pair_t *p);
void pair_close(pair_t *p);
/* Test requests (either may be NULL or already done) until both are done or one fails. */
rcoll_status_t wait2(void **a, void **b, size_t *sizes_b);
/* Test one request until it is done, fails, or ns pass (yielding between tests). */
rcoll_status_t wait1(void *req, size_t *sizes, uint64_t ns);
/* Call accept until it yields a comm or seconds pass; *comm NULL on timeout. */
rcoll_status_t accept_wait(void *lc, void **comm, double seconds);
int accept_wait_ok(void *lc, void **comm);
/* After the listener has dropped a raw socket fd, reading it gives EOF (or a reset), and the
 * listener accepted nothing meanwhile. */
int raw_sees_close(int fd, void *lc);
/* A reproducible pattern per seed; whether n bytes all equal v. */
void fill(unsigned char *buf, size_t n, unsigned seed);
int guard_ok(const unsigned char *p, size_t n, unsigned char v);
/* isend until the transport hands out a request (10 s deadline). */
rcoll_status_t isend_retry(void *sc, void *buf, size_t n, int tag, void **req);
/* One message of n bytes (source soff, destination doff bytes past an allocation) into a
 * posted buffer of cap >= n bytes: size, data and guards on both sides checked. */
void tp_transfer(pair_t *p, size_t n, size_t cap, size_t soff, size_t doff, unsigned seed);
/* Shared case: three messages (10 B, 0 B tagged 4, 300 KB) into one grouped irecv. */
void tp_case_grouped(void);
/* Shared case: n messages of len_of(i) bytes on one pair, posted before any is tested
 * (receives at most window ahead of the completed ones: a receiver-driven transport
 * advertises that many), then tested in reverse order and checked.  bound 1: all n are
 * taken at once and one more isend gives no request; 2: the same for irecv too. */
void tp_case_pipeline(int n, size_t (*len_of)(int), int window, int bound);
/* Shared case: the two ends in two threads (sender in a new one), nmsgs messages of random
 * sizes up to 3 MiB, 8 in flight each way, every one checked. */
void tp_case_threads(int nmsgs);
/* Shared case: nc connections all connected before any accept, then one len-byte message on
 * each, all in flight together; every message arrives whole on its own connection. */
void tp_case_burst(int nc, size_t len);
/* Shared case: a tag mismatch fails the receive (INVALID_USAGE, message names the tag), the
 * receive queued behind it, and later receives on that comm. */
void tp_case_tag_mismatch(void);
/* On a listening pair (p->lc) that has just dropped bad connectors (after: what they were):
 * a valid connect and accept still succeed (10 s deadline) and carry a 4-byte message. */
void tp_connect_after_bad(pair_t *p, const char *after);

/* A loopback address nothing answers: a listener whose accept queue is full drops every new
 * SYN (connects stay in progress, as towards a host that is gone).  Fills *addr; the sockets
 * to close afterwards go to s (tp_silent_close).  0 when the queue would not fill. */
typedef struct {
    int lfd, nfill;
    int fillers[8];
} tp_silent_t;
int tp_silent_listener(void *addr /* rcoll_sockaddr_t */, tp_silent_t *s);
void tp_silent_close(tp_silent_t *s);

#endif
