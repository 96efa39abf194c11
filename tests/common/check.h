/*
 * check.h - the one check library of the C tests.  CHECK(cond, fmt, ...) counts a passed or
 * a failed check (a failed one is printed with its file, line, condition and message);
 * check_skip counts and names a check that could not run here; check_summary prints
 * "N passed, M failed, K skipped" and returns the exit code: 1 when a check failed or none
 * ran at all, 77 (meson's SKIP) when nothing but skips happened, 0 otherwise.  Cases
 * (check_case) group checks under one verdict line.  Counters are per process: a forked
 * rank reports through its exit code or shared memory, not through these.
 */
#ifndef RCOLL_TESTS_CHECK_H
#define RCOLL_TESTS_CHECK_H

#include <stdio.h>

extern long check_passed, check_failed, check_skipped;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond)                                                              \
            check_passed++;                                                    \
        else                                                                   \
            check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                \
    } while (0)

/* Count one failed check and print it (the first 100 of a process; later ones are counted). */
void check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Count one check that could not run here, and print "SKIP <why>". */
void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note appended to every failure line from now on (e.g. the library's last error text);
 * NULL for none. */
void check_set_note(const char *(*note)(void));

/* Run fn as one case: prints "ok   NAME", "FAIL NAME" or "skip NAME" (no failure, a skip). */
void check_case(const char *name, void (*fn)(void));
/* Restart the current case's failure count (a forked child that reports through its exit
 * code), and whether a check failed in the current case since then. */
void check_case_begin(void);
int check_case_failed(void);

/* Print "N passed, M failed, K skipped"; the exit code (0, 1 or 77, see above). */
int check_summary(void);

/* Seconds on CLOCK_MONOTONIC, and a sleep of ms milliseconds: what the timing checks of the
 * failure tests measure with. */
double check_now_s(void);
void check_sleep_ms(long ms);

#endif
