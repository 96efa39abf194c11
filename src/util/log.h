/*
 * log.h - leveled, per-subsystem logging (RCOLL_DEBUG, RCOLL_DEBUG_SUBSYS, RCOLL_DEBUG_FILE).
 * Lines look like "host:pid:tid [rank] rcoll WARN TCP message".  The level check is an
 * inline compare of one global, so disabled logging costs a load and a branch.
 */
#ifndef RCOLL_UTIL_LOG_H
#define RCOLL_UTIL_LOG_H

#include <stdint.h>
#include "util/config.h"

typedef enum {
    RCOLL_LOG_NONE = 0,
    RCOLL_LOG_WARN = 1,
    RCOLL_LOG_INFO = 2,
    RCOLL_LOG_TRACE = 3
} rcoll_log_level_t;

typedef enum {
    RCOLL_SUBSYS_INIT = 1u << 0,
    RCOLL_SUBSYS_BOOTSTRAP = 1u << 1,
    RCOLL_SUBSYS_TOPO = 1u << 2,
    RCOLL_SUBSYS_SHM = 1u << 3,
    RCOLL_SUBSYS_TCP = 1u << 4,
    RCOLL_SUBSYS_VERBS = 1u << 5,
    RCOLL_SUBSYS_ALGO = 1u << 6,
    RCOLL_SUBSYS_CUDA = 1u << 7,
    RCOLL_SUBSYS_PLUGIN = 1u << 8,
    RCOLL_SUBSYS_COLL = 1u << 9,
    RCOLL_SUBSYS_NET = 1u << 10, /* an external NCCL net plugin under rcoll (transport "plugin") */
    RCOLL_SUBSYS_ALL = 0x7ffu
} rcoll_subsys_t;

extern int rcoll_log_level;         /* current level; WARN until configured */
extern uint32_t rcoll_log_subsys;   /* enabled subsystems mask */

/* The logging knobs (log.c): RCOLL_DEBUG, RCOLL_DEBUG_SUBSYS, RCOLL_DEBUG_FILE. */
typedef struct {
    int level;                      /* rcoll_log_level_t */
    char subsys[RCOLL_CFG_STR_MAX]; /* comma list, ^ excludes */
    char file[RCOLL_CFG_STR_MAX];   /* "" = stderr; %h host, %p pid */
} rcoll_log_config_t;
extern const rcoll_config_table_t rcoll_log_config_table;

/* RCOLL_DEBUG_SUBSYS's value s checked: RCOLL_OK, or RCOLL_ERR_INVALID_ARG with a sentence
 * (rcoll_err_set) naming the first name that is not a subsystem. */
rcoll_status_t rcoll_log_subsys_check(const char *s);
/* Configure logging from its knobs (the first file given stays open). */
void rcoll_log_configure(const rcoll_log_config_t *cfg);
/* Set the rank shown in log lines (-1 = unknown). */
void rcoll_log_set_rank(int rank);
void rcoll_log_write(rcoll_log_level_t level, rcoll_subsys_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where formatted messages go instead of the log file or stderr (NULL, the default: there).
 * The NCCL net plugin (src/plugin) hands rcoll's lines to NCCL's logger this way.  The sink
 * gets the level, subsystem and message (without the "host:pid:tid [rank] rcoll" prefix);
 * it is called outside the log lock, from any thread that logs. */
typedef void (*rcoll_log_sink_fn_t)(rcoll_log_level_t level, rcoll_subsys_t subsys,
                                    const char *msg);
void rcoll_log_set_sink(rcoll_log_sink_fn_t sink);
/* Expand %h (host) and %p (pid) in a file name pattern (RCOLL_DEBUG_FILE, dump files). */
void rcoll_expand_pattern(const char *pat, char *out, size_t len);

#define RCOLL_LOG_ENABLED(lvl, ss) \
    ((lvl) <= rcoll_log_level && (rcoll_log_subsys & (uint32_t)(ss)))
#define RCOLL_LOG(lvl, ss, ...)                                   \
    do {                                                          \
        if (RCOLL_LOG_ENABLED(lvl, ss))                           \
            rcoll_log_write((lvl), (ss), __VA_ARGS__);            \
    } while (0)
#define RCOLL_WARN(ss, ...) RCOLL_LOG(RCOLL_LOG_WARN, RCOLL_SUBSYS_##ss, __VA_ARGS__)
#define RCOLL_INFO(ss, ...) RCOLL_LOG(RCOLL_LOG_INFO, RCOLL_SUBSYS_##ss, __VA_ARGS__)
#define RCOLL_TRACE(ss, ...) RCOLL_LOG(RCOLL_LOG_TRACE, RCOLL_SUBSYS_##ss, __VA_ARGS__)

/* A repeated warning, rate limited: at most `burst` pass per second; the rest are counted.
 * rcoll_log_limit returns 1 when this one should be logged, and then *more_p gets the
 * number suppressed since the last one that passed (append "(N more like this)"). */
typedef struct {
    uint64_t window_ns; /* start of the current one-second window */
    unsigned passed;    /* passed in this window */
    unsigned suppressed;
} rcoll_log_limit_t;
int rcoll_log_limit(rcoll_log_limit_t *l, unsigned burst, unsigned *more_p);
/* The number suppressed and not yet reported, reset to 0: for a closing "... N more like
 * this" line when no further message will pass (force = 1), or once their second is over
 * (force = 0; 0 before then). */
unsigned rcoll_log_limit_take(rcoll_log_limit_t *l, int force);

#endif
