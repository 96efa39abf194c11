/*
 * test_sig.c - how collectives are named in sentences (core/sig.h): the operation numbers a
 * user sees, counted independently here from the calls a scripted program makes (set-up
 * collectives, user operations, rcoll's own steps inside a call, a peer ahead, numbers older
 * than the table), and the mismatch sentence built on them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sig.h"
#include "check.h"

static rcoll_opnum_t t;
static uint64_t seq; /* the communicator's collective counter, as coll_seq */

static uint64_t start(int internal)
{
    t.internal = internal;
    rcoll_opnum_record(&t, seq);
    t.internal = 0;
    return seq++;
}

static void expect(uint64_t s, const char *want)
{
    char buf[160];
    rcoll_sig_op_number(&t, s, buf, sizeof(buf));
    CHECK(!strcmp(buf, want), "collective %llu: \"%s\", expected \"%s\"",
          (unsigned long long)s, buf, want);
}

int main(void)
{
    memset(&t, 0, sizeof(t));
    t.seq0 = UINT64_MAX;
    /* creation: three set-up collectives */
    uint64_t s0 = start(0), s1 = start(0), s2 = start(0);
    t.seq0 = seq;
    expect(s0, "set-up operation #1");
    expect(s2, "set-up operation #3");
    (void)s1;
    /* operation #1, a plain collective */
    uint64_t op1 = start(0);
    /* operation #2, a call made of rcoll's own steps (CUDA IPC: set-up, then barriers) */
    uint64_t st2[5];
    for (int i = 0; i < 5; i++) st2[i] = start(1);
    rcoll_opnum_count(&t);
    /* operation #3: steps, then staged after all: the host collective is the operation */
    uint64_t st3 = start(1), op3 = start(0);
    /* operation #4: a one-kernel all-reduce numbered in the middle of its call's steps */
    uint64_t st4a = start(1), op4 = start(0), st4b = start(1);
    (void)st4b;
    expect(op1, "operation #1");
    expect(st2[0], "a step of operation #2");
    expect(st2[4], "a step of operation #2");
    expect(st3, "a step of operation #3");
    expect(op3, "operation #3");
    expect(st4a, "a step of operation #4");
    expect(op4, "operation #4");
    /* a peer ahead of this rank: its next calls */
    expect(seq, "operation #5");
    expect(seq + 2, "operation #7");
    /* numbers older than the table: by collective number, said so */
    for (int i = 0; i < RCOLL_OPNUM_RING; i++) start(0);
    expect(op1, "collective #4 (set-up and rcoll's own steps included)");
    expect(seq - 1, "operation #260");
    /* no table: collective numbers */
    char buf[160];
    rcoll_sig_op_number(NULL, 41, buf, sizeof(buf));
    CHECK(!strcmp(buf, "collective #42"), "without a table: \"%s\"", buf);

    /* the sentence: the same number once; different numbers both */
    rcoll_sig_t a, b;
    memset(&a, 0, sizeof(a));
    a.kind = 0; /* allreduce */
    a.count = 16;
    a.dt = 0;
    a.op = 0;
    a.root = a.alg = -1;
    b = a;
    b.count = 8;
    a.seq = b.seq = seq - 1;
    rcoll_sig_sentence(&a, 1, &b, -1, &t, buf, sizeof(buf));
    printf("%s\n", buf);
    CHECK(strstr(buf, "rank 1 called allreduce(count=16") && strstr(buf, "as operation #260 "
          "while this rank called allreduce(count=8") && buf[strlen(buf) - 1] == ')',
          "sentence (one number, at the end this rank's call): \"%s\"", buf);
    b.seq = seq; /* this rank one call ahead */
    rcoll_sig_sentence(&a, 1, &b, 0, &t, buf, sizeof(buf));
    printf("%s\n", buf);
    CHECK(strstr(buf, "as operation #260 while rank 0 called") &&
          strstr(buf, " as operation #261"), "sentence: \"%s\"", buf);
    return check_summary();
}
