/*
 * check.c - counters, failure and skip lines, cases and the summary of the C tests
 * (check.h).  Prints only; never exits, so a test decides itself what follows a failure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "check.h"

#define CHECK_PRINT_MAX 100

long check_passed, check_failed, check_skipped;
static long case_failed0, case_skipped0;
static const char *(*check_note)(void);

void check_set_note(const char *(*note)(void)) { check_note = note; }

void check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    check_failed++;
    if (check_failed > CHECK_PRINT_MAX) {
        if (check_failed == CHECK_PRINT_MAX + 1)
            fprintf(stderr, "(more than %d failures: the rest are counted, not printed)\n",
                    CHECK_PRINT_MAX);
        return;
    }
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (check_note) fprintf(stderr, " [last error: %s]", check_note());
    fputc('\n', stderr);
    fflush(stderr);
}

void check_skip(const char *fmt, ...)
{
    va_list ap;
    check_skipped++;
    printf("SKIP ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

void check_case_begin(void)
{
    case_failed0 = check_failed;
    case_skipped0 = check_skipped;
}

int check_case_failed(void) { return check_failed > case_failed0; }

void check_case(const char *name, void (*fn)(void))
{
    check_case_begin();
    fn();
    printf("%s %s\n", check_case_failed() ? "FAIL" : check_skipped > case_skipped0 ? "skip" : "ok  ",
           name);
    fflush(stdout);
}

int check_summary(void)
{
    printf("%ld passed, %ld failed, %ld skipped\n", check_passed, check_failed, check_skipped);
    if (!check_failed && !check_passed && !check_skipped)
        printf("FAIL: no check ran\n");
    fflush(stdout);
    if (check_failed || (!check_passed && !check_skipped)) return 1;
    return check_passed ? 0 : 77;
}

double check_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void check_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
