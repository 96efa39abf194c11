/*
 * verbs_api.c - loads libibverbs at run time and fills the verbs function table.  Symbols are
 * bound by version node (the library exports 1.0 compatibility versions under the same
 * names); the header's inline verbs are wrapped here and nowhere else.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport/verbs_api.h"
#include "util/log.h"
#include "util/status.h"

const rcoll_ibv_api_t *rcoll_ibv;

static rcoll_ibv_api_t loaded;
static void *lib;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_status_t load_status = RCOLL_ERR_UNSUPPORTED;
static char load_text[RCOLL_ERR_TEXT_MAX];
static int load_done;

/* The compatibility query_port of the library, used when the provider has no extended one. */
static int (*compat_query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
static ssize_t (*gid_table_sym)(struct ibv_context *, struct ibv_gid_entry *, size_t, uint32_t,
                                size_t);

static int wrap_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
    if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
    memset(attr, 0, sizeof(*attr));
    return compat_query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
}

static ssize_t wrap_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
                                    size_t max_entries, uint32_t flags)
{
    return gid_table_sym(ctx, entries, max_entries, flags, sizeof(*entries));
}

static int wrap_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    return ibv_post_send(qp, wr, bad);
}

static int wrap_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    return ibv_post_recv(qp, wr, bad);
}

static int wrap_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
    return ibv_poll_cq(cq, num, wc);
}

/* Bind one symbol of version ver; records the first missing one. */
static void *bind(const char *name, const char *ver, const char **missing)
{
    void *p = dlvsym(lib, name, ver);
    if (!p && !*missing) *missing = name;
    return p;
}

#define BIND(field, sym)                                           \
    do {                                                           \
        void *p_ = bind(sym, "IBVERBS_1.1", &missing);             \
        memcpy(&loaded.field, &p_, sizeof(p_));                    \
    } while (0)

static rcoll_status_t load_locked(const char *path)
{
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "cannot load %s (%s): no verbs devices",
                             path, dlerror());
    const char *missing = NULL;
    BIND(get_device_list, "ibv_get_device_list");
    BIND(free_device_list, "ibv_free_device_list");
    BIND(get_device_name, "ibv_get_device_name");
    BIND(get_device_guid, "ibv_get_device_guid");
    BIND(open_device, "ibv_open_device");
    BIND(close_device, "ibv_close_device");
    BIND(query_device, "ibv_query_device");
    BIND(query_gid, "ibv_query_gid");
    BIND(alloc_pd, "ibv_alloc_pd");
    BIND(dealloc_pd, "ibv_dealloc_pd");
    BIND(reg_mr, "ibv_reg_mr");
    BIND(dereg_mr, "ibv_dereg_mr");
    BIND(create_cq, "ibv_create_cq");
    BIND(destroy_cq, "ibv_destroy_cq");
    BIND(create_qp, "ibv_create_qp");
    BIND(modify_qp, "ibv_modify_qp");
    BIND(destroy_qp, "ibv_destroy_qp");
    BIND(get_async_event, "ibv_get_async_event");
    BIND(ack_async_event, "ibv_ack_async_event");
    BIND(wc_status_str, "ibv_wc_status_str");
    BIND(event_type_str, "ibv_event_type_str");
    void *qp = bind("ibv_query_port", "IBVERBS_1.1", &missing);
    memcpy(&compat_query_port, &qp, sizeof(qp));
    if (missing) {
        rcoll_status_t st = rcoll_err_set(RCOLL_ERR_UNSUPPORTED,
                                          "%s lacks %s@IBVERBS_1.1: not a usable libibverbs",
                                          path, missing);
        dlclose(lib);
        lib = NULL;
        return st;
    }
    const char *none = NULL;
    void *gt = bind("_ibv_query_gid_table", "IBVERBS_1.11", &none);
    memcpy(&gid_table_sym, &gt, sizeof(gt));
    void *dm = bind("ibv_reg_dmabuf_mr", "IBVERBS_1.12", &none);
    memcpy(&loaded.reg_dmabuf_mr, &dm, sizeof(dm));
    loaded.query_port = wrap_query_port;
    loaded.query_gid_table = gid_table_sym ? wrap_query_gid_table : NULL;
    loaded.post_send = wrap_post_send;
    loaded.post_recv = wrap_post_recv;
    loaded.poll_cq = wrap_poll_cq;
    RCOLL_INFO(VERBS, "loaded %s%s", path,
               gid_table_sym ? "" : " (no GID table query: GID types read from sysfs)");
    return RCOLL_OK;
}

rcoll_status_t rcoll_ibv_load(const char *path)
{
    pthread_mutex_lock(&load_lock);
    if (!load_done) {
        load_status = load_locked(path);
        snprintf(load_text, sizeof(load_text), "%s", rcoll_err_get());
        load_done = 1;
        if (load_status == RCOLL_OK && !rcoll_ibv) rcoll_ibv = &loaded;
    }
    rcoll_status_t st = load_status;
    pthread_mutex_unlock(&load_lock);
    if (st != RCOLL_OK) return rcoll_err_set(st, "%s", load_text);
    return RCOLL_OK;
}

void rcoll_ibv_set_api(const rcoll_ibv_api_t *api)
{
    pthread_mutex_lock(&load_lock);
    if (api) {
        rcoll_ibv = api;
        load_done = 1; /* a scripted table stands in for the library */
        load_status = RCOLL_OK;
    } else {
        rcoll_ibv = lib ? &loaded : NULL;
        load_done = lib != NULL;
    }
    pthread_mutex_unlock(&load_lock);
}
