/*
 * config.h - the knob-table parser (UCX style).  Each module declares its own knobs, next to
 * its code, as a table of {name, default as text, type, range, help, offset into the
 * module's own struct}; rcoll_config_parse() fills that struct from the defaults, then the
 * environment.  Nothing in the library calls getenv for RCOLL_* outside this parser.
 * This file knows no module: the list of every table lives in core (core/config.c).
 */
#ifndef RCOLL_UTIL_CONFIG_H
#define RCOLL_UTIL_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include "rcoll.h"

#define RCOLL_CFG_STR_MAX 256

typedef enum {
    RCOLL_KNOB_STRING,  /* char[RCOLL_CFG_STR_MAX] */
    RCOLL_KNOB_INT,     /* int in [min, max] */
    RCOLL_KNOB_SIZE,    /* size_t in [min, max]; K/M/G/T suffixes (powers of 1024) */
    RCOLL_KNOB_SECONDS, /* double in (min, max]: a duration is never zero */
    RCOLL_KNOB_ENUM,    /* int: index of the value in names (case-insensitive), within
                         * [min, max]; an empty value means the default */
    RCOLL_KNOB_TABLE    /* another module's table whose struct is embedded at offset: its
                         * knobs are declared (and listed) there, parsed here too */
} rcoll_knob_type_t;

typedef struct rcoll_config_table rcoll_config_table_t;

typedef struct {
    const char *name;   /* environment variable ("" for TABLE) */
    const char *defval; /* default as a string */
    rcoll_knob_type_t type;
    size_t offset;      /* into the module's struct */
    long long min, max; /* valid range: INT/SIZE values, SECONDS (whole seconds), ENUM index */
    const char *const *names;          /* ENUM: allowed values, NULL-terminated */
    const rcoll_config_table_t *table; /* TABLE: the embedded module's table */
    const char *help;   /* one line */
} rcoll_knob_t;

/* One module's knobs and the size of the struct they are parsed into. */
struct rcoll_config_table {
    const char *module; /* "log", "core", "tcp", ... (rcoll-info -c groups by it) */
    const rcoll_knob_t *knobs;
    size_t count;
    size_t size;
};

/* Declaring knobs: st is the module's struct type, field its member. */
#define RCOLL_KNOB_STR(st, name, def, field, help) \
    {name, def, RCOLL_KNOB_STRING, offsetof(st, field), 0, 0, NULL, NULL, help}
#define RCOLL_KNOB_NUM(st, name, def, kind, field, lo, hi, help) \
    {name, def, RCOLL_KNOB_##kind, offsetof(st, field), lo, hi, NULL, NULL, help}
#define RCOLL_KNOB_ENUM_OF(st, name, def, field, values, help) \
    {name, def, RCOLL_KNOB_ENUM, offsetof(st, field), 0, INT_MAX, values, NULL, help}
#define RCOLL_KNOB_ENUM_RANGE(st, name, def, field, values, lo, hi, help) \
    {name, def, RCOLL_KNOB_ENUM, offsetof(st, field), lo, hi, values, NULL, help}
#define RCOLL_KNOB_SUBTABLE(st, field, tbl) \
    {"", "", RCOLL_KNOB_TABLE, offsetof(st, field), 0, 0, NULL, &(tbl), ""}
#define RCOLL_CONFIG_TABLE(mod, knobs, st) \
    {mod, knobs, sizeof(knobs) / sizeof((knobs)[0]), sizeof(st)}

/* Fill out (t->size bytes) with t's defaults, then the environment's values.  Invalid values
 * fail with RCOLL_ERR_INVALID_ARG and a message naming the variable and what it accepts (the
 * range, or an enum's allowed values); out is written only on success. */
rcoll_status_t rcoll_config_parse(const rcoll_config_table_t *t, void *out);

/* Format knob k's value in cfg (the struct of k's table) into buf. */
void rcoll_config_format(const void *cfg, const rcoll_knob_t *k, char *buf, size_t len);

/* Is the variable name[0..len) a knob of one of the n tables (or read by rcoll's tools)? */
int rcoll_config_known(const rcoll_config_table_t *const *tables, size_t n, const char *name,
                       size_t len);
/* Warn once per process about each RCOLL_* variable that no table declares. */
void rcoll_config_warn_unknown(const rcoll_config_table_t *const *tables, size_t n);

/* Parse "123", "4K", "8M", "1G" (case-insensitive, powers of 1024).  Returns 0 on success. */
int rcoll_parse_size(const char *s, size_t *out);

#endif
