/*
 * config.c - the knob-table parser: defaults, then environment values, into a module's own
 * struct, with one validation path per type (one for every enum).  It declares no knob
 * itself: each module has its table next to its code, and core lists them all.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

extern char **environ;

int rcoll_parse_size(const char *s, size_t *out)
{
    if (!s) return -1;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end != '\0') return -1;
    if (shift && v > (~0ull >> shift)) return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* "a, b or c": an enum's allowed values (those inside its index range). */
static void enum_list(const rcoll_knob_t *k, char *buf, size_t len)
{
    size_t o = 0, n = 0;
    buf[0] = '\0';
    for (long long i = k->min; i <= k->max && k->names[i]; i++) n++;
    for (long long i = k->min, j = 0; i <= k->max && k->names[i] && o < len; i++, j++) {
        int w = snprintf(buf + o, len - o, "%s%s", j == 0 ? "" : j + 1 == (long long)n ? " or "
                                                                                        : ", ",
                         k->names[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
}

/* Index of text in the enum's names, within its range; -1 if none.  Blanks around the
 * value are ignored, case is not significant. */
static int enum_index(const rcoll_knob_t *k, const char *text)
{
    while (*text == ' ' || *text == '\t') text++;
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t')) n--;
    for (long long i = k->min; i <= k->max && k->names[i]; i++)
        if (strlen(k->names[i]) == n && !strncasecmp(k->names[i], text, n)) return (int)i;
    return -1;
}

static rcoll_status_t parse_table(const rcoll_config_table_t *t, char *base, int from_env);

static rcoll_status_t parse_knob(const rcoll_knob_t *k, const char *text, char *base)
{
    char *field = base + k->offset;
    char *end;
    switch (k->type) {
    case RCOLL_KNOB_STRING:
        if (strlen(text) >= RCOLL_CFG_STR_MAX)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s is longer than %d characters",
                                 k->name, RCOLL_CFG_STR_MAX - 1);
        strcpy(field, text);
        return RCOLL_OK;
    case RCOLL_KNOB_INT: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end != '\0')
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s='%s' is not an integer", k->name,
                                 text);
        if (v < k->min || v > k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s=%lld is out of range [%lld, %lld]",
                                 k->name, v, k->min, k->max);
        *(int *)field = (int)v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_SIZE: {
        size_t v;
        if (rcoll_parse_size(text, &v))
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "%s='%s' is not a size (bytes, with optional K/M/G)", k->name,
                                 text);
        if ((long long)v < k->min || (long long)v > k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s=%zu is out of range [%lld, %lld]",
                                 k->name, v, k->min, k->max);
        *(size_t *)field = v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_SECONDS: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || end == text || *end != '\0' || !(v > (double)k->min) ||
            v > (double)k->max)
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG,
                                 "%s='%s' is not a number of seconds in (%lld, %lld] (more than "
                                 "%lld, at most %lld)", k->name, text, k->min, k->max, k->min,
                                 k->max);
        *(double *)field = v;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_ENUM: {
        int i = enum_index(k, text[0] ? text : k->defval);
        if (i < 0) {
            char allowed[RCOLL_CFG_STR_MAX];
            enum_list(k, allowed, sizeof(allowed));
            return rcoll_err_set(RCOLL_ERR_INVALID_ARG, "%s='%s' is not one of %s", k->name,
                                 text, allowed);
        }
        *(int *)field = i;
        return RCOLL_OK;
    }
    case RCOLL_KNOB_TABLE: break;
    }
    return rcoll_err_set(RCOLL_ERR_INTERNAL, "knob %s has an unknown type", k->name);
}

/* Defaults (from_env = 0) or environment values (1) of every knob of t, tables included. */
static rcoll_status_t parse_table(const rcoll_config_table_t *t, char *base, int from_env)
{
    for (size_t i = 0; i < t->count; i++) {
        const rcoll_knob_t *k = &t->knobs[i];
        rcoll_status_t st;
        if (k->type == RCOLL_KNOB_TABLE) {
            st = parse_table(k->table, base + k->offset, from_env);
        } else {
            const char *text = from_env ? getenv(k->name) : k->defval;
            if (!text) continue;
            st = parse_knob(k, text, base);
        }
        if (st != RCOLL_OK) return st;
    }
    return RCOLL_OK;
}

rcoll_status_t rcoll_config_parse(const rcoll_config_table_t *t, void *out)
{
    char *tmp = calloc(1, t->size);
    if (!tmp) return rcoll_err_set(RCOLL_ERR_NO_MEMORY, "no memory for the %s knobs", t->module);
    rcoll_status_t st = parse_table(t, tmp, 0); /* fails only for a bad table */
    if (st == RCOLL_OK) st = parse_table(t, tmp, 1);
    if (st == RCOLL_OK) memcpy(out, tmp, t->size);
    free(tmp);
    return st;
}

void rcoll_config_format(const void *cfg, const rcoll_knob_t *k, char *buf, size_t len)
{
    const char *field = (const char *)cfg + k->offset;
    switch (k->type) {
    case RCOLL_KNOB_STRING: snprintf(buf, len, "%s", field); break;
    case RCOLL_KNOB_INT: snprintf(buf, len, "%d", *(const int *)field); break;
    case RCOLL_KNOB_SIZE: snprintf(buf, len, "%zu", *(const size_t *)field); break;
    case RCOLL_KNOB_SECONDS: snprintf(buf, len, "%g", *(const double *)field); break;
    case RCOLL_KNOB_ENUM: snprintf(buf, len, "%s", k->names[*(const int *)field]); break;
    case RCOLL_KNOB_TABLE: snprintf(buf, len, "(%s)", k->table->module); break;
    }
}

/* Variables that start with RCOLL_ but are read by tools rather than the library: the
 * launcher's, the tests', the Python package's (RCOLL_LIBRARY, and the torch backend's
 * RCOLL_TORCH_*) and the MPI interposer's. */
static const char *const tool_vars[] = {"RCOLL_LOCAL_RANK", "RCOLL_LOCAL_SIZE", "RCOLL_RUN_",
                                        "RCOLL_TEST_", "RCOLL_LIBRARY", "RCOLL_TORCH_",
                                        "RCOLL_MPI_", NULL};

static int table_has(const rcoll_config_table_t *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->count; i++) {
        const rcoll_knob_t *k = &t->knobs[i];
        if (k->type == RCOLL_KNOB_TABLE ? table_has(k->table, name, len)
                                        : strlen(k->name) == len && !strncmp(k->name, name, len))
            return 1;
    }
    return 0;
}

int rcoll_config_known(const rcoll_config_table_t *const *tables, size_t n, const char *name,
                       size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (table_has(tables[i], name, len)) return 1;
    for (size_t i = 0; tool_vars[i]; i++)
        if (len >= strlen(tool_vars[i]) && !strncmp(name, tool_vars[i], strlen(tool_vars[i])))
            return 1;
    return 0;
}

static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static int warned;

void rcoll_config_warn_unknown(const rcoll_config_table_t *const *tables, size_t n)
{
    pthread_mutex_lock(&warn_lock);
    int first = !warned;
    warned = 1;
    pthread_mutex_unlock(&warn_lock);
    if (!first) return;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "RCOLL_", 6) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!rcoll_config_known(tables, n, *e, len))
            RCOLL_WARN(INIT, "unknown variable %.*s ignored (rcoll-info -c lists every knob)",
                       (int)len, *e);
    }
}
