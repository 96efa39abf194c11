/*
 * net_perf_report.c - rcoll_net_perf's output: latency statistics, perftest's table rows and
 * header, and the JSON file.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_json.h"
#include "net_perf.h"
#include "util/status.h"

/* ---------------------------------------------------------------------------------------------
 * Results: perftest's rows, and JSON
 * ------------------------------------------------------------------------------------------ */

int np_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples. */
static double np_percentile(const double *s, uint64_t n, double p)
{
    uint64_t r = (uint64_t)ceil(p * (double)n);
    return s[r > 0 ? r - 1 : 0];
}

void np_lat_stats(double *us, uint64_t n, np_result_t *r)
{
    double sum = 0, sq = 0;
    qsort(us, (size_t)n, sizeof(*us), np_cmp_double);
    for (uint64_t i = 0; i < n; i++)
        sum += us[i];
    double avg = sum / (double)n;
    for (uint64_t i = 0; i < n; i++)
        sq += (us[i] - avg) * (us[i] - avg);
    r->v[0] = us[0];
    r->v[1] = us[n - 1];
    r->v[2] = us[n / 2]; /* typical: the median, as perftest */
    r->v[3] = avg;
    r->v[4] = sqrt(sq / (double)n);
    r->v[5] = np_percentile(us, n, 0.99);
    r->v[6] = np_percentile(us, n, 0.999);
}

void np_print_row(np_mode_t mode, const np_result_t *r)
{
    if (mode == NP_MODE_BW)
        printf(" %-7zu    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n",
               r->size, r->iters, r->v[0], r->v[1], r->v[2]);
    else
        printf(" %-7zu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f"
               "     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n", r->size, r->iters, r->v[0], r->v[1],
               r->v[2], r->v[3], r->v[4], r->v[5], r->v[6]);
    fflush(stdout);
}

/* All results as a JSON array, one object per size; closes f. */
rcoll_status_t np_json_write(const np_end_t *e, FILE *f, const np_result_t *res, size_t n)
{
    static const char *const bw_keys[] = {"bw_peak_gbps", "bw_avg_gbps", "msg_rate_mpps"};
    static const char *const lat_keys[] = {"t_min_us", "t_max_us", "t_typical_us", "t_avg_us",
                                           "t_stdev_us", "p99_us", "p99_9_us"};
    int bw = e->o->mode == NP_MODE_BW;
    fputs("[\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs("  {\"transport\": ", f);
        bench_json_str(f, e->tp->name);
        fputs(", \"device\": ", f);
        bench_json_str(f, e->props.name);
        fprintf(f, ", \"mode\": \"%s\", \"bytes\": %zu, \"iterations\": %" PRIu64,
                bw ? "bw" : "lat", res[i].size, res[i].iters);
        for (size_t k = 0; k < (bw ? 3u : 7u); k++)
            fprintf(f, ", \"%s\": %.9g", bw ? bw_keys[k] : lat_keys[k], res[i].v[k]);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fputs("]\n", f);
    if (ferror(f) | fclose(f))
        return rcoll_err_set_errno(RCOLL_ERR_SYSTEM, errno, "writing %s", e->o->json_path);
    return RCOLL_OK;
}

void np_print_header(const np_end_t *e)
{
    const np_opts_t *o = e->o;
    printf("# rcoll_net_perf: transport %s, device %s (dev %d), mode %s (%s format), ",
           e->tp->name, e->props.name, e->dev, o->mode == NP_MODE_BW ? "bw" : "lat",
           o->mode == NP_MODE_BW ? "ib_write_bw" : "ib_write_lat");
    if (o->mode == NP_MODE_BW)
        printf("depth %d, ", o->depth);
    printf("data check: %s", o->check_all ? "every message" : "first and last of each size");
    if (!strcmp(e->tp->name, "verbs"))
        printf("; note: verbs on Soft-RoCE (rxe) under QEMU is emulated in software, "
               "so these numbers are not performance");
    printf("\n" NP_RESULT_LINE "%s\n", o->mode == NP_MODE_BW ? NP_HEADER_BW : NP_HEADER_LAT);
    fflush(stdout);
}
