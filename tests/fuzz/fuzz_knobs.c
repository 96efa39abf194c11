/*
 * fuzz_knobs.c - every RCOLL_* environment variable, with any value: the knob-table parser
 * (util/config.c: strings, integers, sizes with suffixes, seconds, enums) over each module's
 * table, the formatting of what it accepted (rcoll-info -c), and the knobs whose strings are
 * parsed again where they are used: sizes, path classes (RCOLL_TOPO_GDR_LEVEL and the like),
 * RCOLL_IB_HCA filters, RCOLL_IB_ADDR_RANGE, RCOLL_DEBUG_SUBSYS lists, RCOLL_DEBUG_FILE
 * patterns (%h, %p) and RCOLL_TUNING_FILE's text.
 * Input: two bytes that pick the knob (in the order of rcoll-info -c), then its value (up
 * to the first NUL); the whole input is also read as a tuning file.
 */
#include "fuzz.h"

#include "algo/select.h"
#include "core/config.h"
#include "rcoll_build.h"
#include "topo/topo.h"
#include "util/config.h"
#include "util/log.h"
#if RCOLL_HAVE_VERBS
#include "transport/verbs.h"
#endif

typedef struct {
    const rcoll_config_table_t *table;
    const rcoll_knob_t *knob;
} knob_ref_t;

static knob_ref_t knobs[512];
static size_t nknobs;

static void collect(void)
{
    size_t n;
    const rcoll_config_table_t *const *tables = rcoll_config_tables(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < tables[i]->count; k++)
            if (tables[i]->knobs[k].type != RCOLL_KNOB_TABLE && nknobs < 512)
                knobs[nknobs++] = (knob_ref_t){tables[i], &tables[i]->knobs[k]};
    if (!nknobs) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!nknobs) collect();
    fz_t f = {data, size};
    unsigned pick = fz_u8(&f);
    pick |= (unsigned)fz_u8(&f) << 8;
    const knob_ref_t *r = &knobs[pick % nknobs];
    size_t vlen = f.left < 1024 ? f.left : 1024;
    char *value = malloc(vlen + 1);
    memcpy(value, f.p, vlen);
    value[vlen] = '\0';

    setenv(r->knob->name, value, 1);
    void *cfg = calloc(1, r->table->size);
    if (rcoll_config_parse(r->table, cfg) == RCOLL_OK) {
        char out[RCOLL_CFG_STR_MAX + 64];
        for (size_t k = 0; k < r->table->count; k++)
            if (r->table->knobs[k].type != RCOLL_KNOB_TABLE)
                rcoll_config_format(cfg, &r->table->knobs[k], out, sizeof(out));
    }
    unsetenv(r->knob->name);
    free(cfg);

    size_t sz;
    if (rcoll_parse_size(value, &sz) == 0) FZ_ASSERT(strchr(value, '-') == NULL);
    rcoll_path_t path;
    if (rcoll_path_parse(value, &path) == 0) FZ_ASSERT(path >= RCOLL_PATH_LOC && path <= RCOLL_PATH_NET);
#if RCOLL_HAVE_VERBS
    (void)rcoll_vrb_hca_match(value, "mlx5_0", 1);
    (void)rcoll_vrb_hca_match(value, "mlx5_10", 2);
    rcoll_vrb_range_t range;
    (void)rcoll_vrb_parse_range(value, &range);
#endif
    /* Logging stays off: only the subsystem list is parsed (no file is opened). */
    rcoll_log_config_t lc = {.level = RCOLL_LOG_NONE};
    snprintf(lc.subsys, sizeof(lc.subsys), "%s", value);
    rcoll_log_configure(&lc);
    char small[16], big[512];
    rcoll_expand_pattern(value, small, sizeof(small));
    FZ_ASSERT(strlen(small) < sizeof(small));
    rcoll_expand_pattern(value, big, sizeof(big));
    FZ_ASSERT(strlen(big) < sizeof(big));
    free(value);

    /* The whole input as RCOLL_TUNING_FILE's text. */
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    rcoll_tuning_t t;
    rcoll_tuning_defaults(&t);
    (void)rcoll_tuning_parse(text, &t);
    free(text);
    return 0;
}
