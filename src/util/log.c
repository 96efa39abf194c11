/*
 * log.c - the one place log lines are formatted and written.  Declares its knobs
 * (RCOLL_DEBUG, RCOLL_DEBUG_SUBSYS, RCOLL_DEBUG_FILE with %h = host, %p = pid); core reads
 * them at every communicator creation and calls rcoll_log_configure.  A sink set with
 * rcoll_log_set_sink (the NCCL plugin's) takes the messages instead of the file or stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "util/status.h"
#include "util/time.h"

/* Level names, indexed by rcoll_log_level_t (the RCOLL_DEBUG enum). */
static const char *const lvl_names[] = {"NONE", "WARN", "INFO", "TRACE", NULL};

static const rcoll_knob_t log_knobs[] = {
    RCOLL_KNOB_ENUM_OF(rcoll_log_config_t, "RCOLL_DEBUG", "WARN", level, lvl_names,
                       "log level: NONE, WARN, INFO or TRACE"),
    RCOLL_KNOB_STR(rcoll_log_config_t, "RCOLL_DEBUG_SUBSYS", "ALL", subsys,
                   "subsystems to log, comma list (INIT,BOOTSTRAP,TCP,ALGO,COLL,...); ^ "
                   "excludes"),
    RCOLL_KNOB_STR(rcoll_log_config_t, "RCOLL_DEBUG_FILE", "", file,
                   "write logs to this file instead of stderr; %h = host, %p = pid"),
};
const rcoll_config_table_t rcoll_log_config_table =
    RCOLL_CONFIG_TABLE("log", log_knobs, rcoll_log_config_t);

int rcoll_log_level = RCOLL_LOG_WARN;
uint32_t rcoll_log_subsys = RCOLL_SUBSYS_ALL;

static FILE *log_file;
static rcoll_log_sink_fn_t log_sink; /* NULL: log_file or stderr */
static int log_rank = -1;
static char log_host[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
    const char *name;
    rcoll_subsys_t bit;
} subsys_names[] = {
    {"INIT", RCOLL_SUBSYS_INIT},     {"BOOTSTRAP", RCOLL_SUBSYS_BOOTSTRAP},
    {"TOPO", RCOLL_SUBSYS_TOPO},     {"SHM", RCOLL_SUBSYS_SHM},
    {"TCP", RCOLL_SUBSYS_TCP},       {"VERBS", RCOLL_SUBSYS_VERBS},
    {"ALGO", RCOLL_SUBSYS_ALGO},     {"CUDA", RCOLL_SUBSYS_CUDA},
    {"PLUGIN", RCOLL_SUBSYS_PLUGIN}, {"COLL", RCOLL_SUBSYS_COLL},
    {"NET", RCOLL_SUBSYS_NET},       {"ALL", RCOLL_SUBSYS_ALL},
    {"SOCKET", RCOLL_SUBSYS_TCP}, /* the TCP transport's earlier name, still accepted */
};

static uint32_t parse_subsys(const char *s)
{
    if (!s || !*s) return RCOLL_SUBSYS_ALL;
    int negate = (s[0] == '^');
    uint32_t mask = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s + negate);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
            if (!strcasecmp(tok, subsys_names[i].name)) mask |= subsys_names[i].bit;
    }
    return negate ? (RCOLL_SUBSYS_ALL & ~mask) : mask;
}

rcoll_status_t rcoll_log_subsys_check(const char *s)
{
    if (!s || !*s) return RCOLL_OK;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s + (s[0] == '^'));
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i, n = sizeof(subsys_names) / sizeof(subsys_names[0]);
        for (i = 0; i < n && strcasecmp(tok, subsys_names[i].name); i++) {}
        if (i == n)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "RCOLL_DEBUG_SUBSYS='%s': '%s' is not a subsystem (a comma list "
                                 "of INIT, BOOTSTRAP, TOPO, SHM, TCP, VERBS, ALGO, CUDA, "
                                 "PLUGIN, COLL, NET or ALL; a leading ^ excludes them)", s, tok);
    }
    return RCOLL_OK;
}

void rcoll_expand_pattern(const char *pat, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = pat; *p && o + 1 < len; p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int n = p[1] == 'h' ? snprintf(out + o, len - o, "%s", log_host)
                                : snprintf(out + o, len - o, "%d", (int)getpid());
            if (n < 0) break;
            o += (size_t)n < len - o ? (size_t)n : len - o - 1;
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

void rcoll_log_configure(const rcoll_log_config_t *cfg)
{
    pthread_mutex_lock(&log_lock);
    if (!log_host[0]) {
        gethostname(log_host, sizeof(log_host) - 1);
        char *dot = strchr(log_host, '.');
        if (dot) *dot = '\0';
    }
    rcoll_log_level = cfg->level;
    rcoll_log_subsys = parse_subsys(cfg->subsys);
    if (cfg->file[0] && !log_file) {
        static int warned; /* once per process, not at every communicator's creation */
        char path[512];
        rcoll_expand_pattern(cfg->file, path, sizeof(path));
        log_file = fopen(path, "a");
        if (log_file) {
            setvbuf(log_file, NULL, _IOLBF, 0);
        } else if (!warned) {
            warned = 1;
            fprintf(stderr, "%s:%d rcoll WARN INIT RCOLL_DEBUG_FILE='%s': cannot open %s: %s; "
                    "logging to stderr instead\n", log_host, (int)getpid(), cfg->file, path,
                    strerror(errno));
        }
    }
    pthread_mutex_unlock(&log_lock);
}

void rcoll_log_set_rank(int rank) { log_rank = rank; }

void rcoll_log_set_sink(rcoll_log_sink_fn_t sink)
{
    __atomic_store_n(&log_sink, sink, __ATOMIC_RELEASE);
}

static const char *subsys_name(rcoll_subsys_t ss)
{
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
        if (subsys_names[i].bit == ss) return subsys_names[i].name;
    return "RCOLL";
}

void rcoll_log_write(rcoll_log_level_t level, rcoll_subsys_t subsys, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rcoll_log_sink_fn_t sink = __atomic_load_n(&log_sink, __ATOMIC_ACQUIRE);
    if (sink) {
        sink(level, subsys, msg);
        return;
    }
    if (!log_host[0]) {
        gethostname(log_host, sizeof(log_host) - 1);
        char *dot = strchr(log_host, '.');
        if (dot) *dot = '\0';
    }
    FILE *out = log_file ? log_file : stderr;
    pthread_mutex_lock(&log_lock);
    fprintf(out, "%s:%d:%ld [%d] rcoll %s %s %s\n", log_host, (int)getpid(),
            (long)syscall(SYS_gettid), log_rank, lvl_names[level], subsys_name(subsys), msg);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}

int rcoll_log_limit(rcoll_log_limit_t *l, unsigned burst, unsigned *more_p)
{
    uint64_t now = rcoll_now_ns();
    if (now - l->window_ns >= 1000000000ull) {
        l->window_ns = now;
        l->passed = 0;
    }
    if (l->passed >= burst) {
        l->suppressed++;
        return 0;
    }
    l->passed++;
    *more_p = l->suppressed;
    l->suppressed = 0;
    return 1;
}

unsigned rcoll_log_limit_take(rcoll_log_limit_t *l, int force)
{
    if (!l->suppressed || (!force && rcoll_now_ns() - l->window_ns < 1000000000ull)) return 0;
    unsigned n = l->suppressed;
    l->suppressed = 0;
    return n;
}
