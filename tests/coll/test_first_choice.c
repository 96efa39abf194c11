/*
 * test_first_choice.c - the all-reduce algorithm is chosen with the communicator's final
 * shape in view: the set-up's own 4-byte all-reduces run before the host segment exists
 * (and cache their choice, rd or tree), so a user's first all-reduce of the same 4 bytes must
 * be chosen afresh (one-shot on one host), not taken from that cache.  Read from the INFO
 * line each rank logs at the choice (RCOLL_DEBUG_FILE, one file per rank).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "mp.h"

static int first_call(rcoll_comm_t comm, int rank, int n, void *arg)
{
    (void)arg;
    float x = (float)rank;
    rcoll_status_t st = rcoll_allreduce(RCOLL_IN_PLACE, &x, 1, RCOLL_FLOAT32, RCOLL_SUM, comm);
    return st != RCOLL_OK || x != (float)(n * (n - 1) / 2);
}

int main(void)
{
    char dir[] = "/tmp/rcoll-first-XXXXXX", pattern[64];
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    snprintf(pattern, sizeof(pattern), "%s/log.%%p", dir);
    setenv("RCOLL_DEBUG", "INFO", 1);
    setenv("RCOLL_DEBUG_SUBSYS", "ALGO", 1);
    setenv("RCOLL_DEBUG_FILE", pattern, 1);
    setenv("RCOLL_TUNING_PROBE", "0", 1); /* the probe would reset the cache by itself */
    unsetenv("RCOLL_ALGO");
    mp_result_t res;
    CHECK(mp_run(2, first_call, NULL, 60, &res) == 0, "2 ranks, one 4-byte all-reduce");
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "for f in %s/log.*; do grep 'all-reduce of 4 B on 2 ranks' \"$f\" "
             "| tail -n 1; done", dir);
    FILE *p = popen(cmd, "r");
    char line[512];
    int files = 0, oneshot = 0;
    while (p && fgets(line, sizeof(line), p)) {
        files++;
        oneshot += strstr(line, ": oneshot (") != NULL;
        if (!strstr(line, ": oneshot (")) fprintf(stderr, "last choice: %s", line);
    }
    if (p) pclose(p);
    CHECK(files == 2 && oneshot == 2, "both ranks' first user all-reduce of 4 B chose one-shot "
          "(%d of %d logs)", oneshot, files);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
