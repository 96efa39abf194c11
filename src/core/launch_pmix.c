/*
 * launch_pmix.c - environment launch through a PMIx server (Open MPI's mpirun, srun
 * --mpi=pmix): rank, size and local rank/size from PMIx, and the bootstrap unique id from
 * rank 0 to the others through PMIx_Put / PMIx_Fence / PMIx_Get.  It only talks to PMIx:
 * the root, the id and the communicator are api_init.c's.  PMIx is held from
 * rcoll_pmix_init to rcoll_pmix_fini only (api_init.c finalizes before
 * rcoll_comm_init_env returns), so nothing needs PMIx at destroy or exit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/launch_pmix.h"
#include "rcoll_build.h"
#include "util/log.h"
#include "util/status.h"

#if RCOLL_HAVE_PMIX
#include <pmix.h>
#endif

int rcoll_pmix_built(void) { return RCOLL_HAVE_PMIX; }

int rcoll_pmix_started(void)
{
    const char *ns = getenv("PMIX_NAMESPACE"), *rank = getenv("PMIX_RANK");
    return ns && *ns && rank && *rank;
}

#if RCOLL_HAVE_PMIX

/* The job's shape from the first launch of this process: a PMIx client initialized again
 * after PMIx_Finalize may no longer find PMIX_LOCAL_RANK (Open MPI 4.1's server, PMIx 4.2). */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static rcoll_pmix_job_t cache;
static int cached;

/* Launches through PMIx in this process, for the key of each one's id. */
static atomic_uint launches;

static rcoll_status_t pmix_failed(rcoll_status_t st, const char *call, pmix_status_t rc,
                                  const char *what)
{
    return rcoll_err_set(st, "rcoll_comm_init_env through PMIx: %s%s%s failed: %s (%d)", call,
                         what ? " " : "", what ? what : "", PMIx_Error_string(rc), (int)rc);
}

/* A job-level (wildcard rank) or process-level unsigned value; -1 when not found. */
static long get_uint(const pmix_proc_t *proc, const char *key, pmix_status_t *rc_p)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
    long x = -1;
    if (rc == PMIX_SUCCESS && v) {
        switch (v->type) {
        case PMIX_UINT16: x = v->data.uint16; break;
        case PMIX_UINT32: x = v->data.uint32; break;
        case PMIX_UINT64: x = (long)v->data.uint64; break;
        case PMIX_INT: x = v->data.integer; break;
        case PMIX_UINT: x = v->data.uint; break;
        case PMIX_PROC_RANK: x = v->data.rank; break;
        default: rc = PMIX_ERR_TYPE_MISMATCH; break;
        }
    }
    if (v) PMIX_VALUE_RELEASE(v);
    *rc_p = rc;
    return rc == PMIX_SUCCESS ? x : -1;
}

rcoll_status_t rcoll_pmix_init(rcoll_pmix_job_t *job_p)
{
    pmix_proc_t me, wild;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return pmix_failed(RCOLL_ERR_SYSTEM, "PMIx_Init", rc,
                           "(PMIX_NAMESPACE and PMIX_RANK are set, but the PMIx server did not "
                           "answer; RCOLL_PMIX=off uses RCOLL_ROOT or MASTER_ADDR instead)");
    rcoll_pmix_job_t job;
    memset(&job, 0, sizeof(job));
    snprintf(job.nspace, sizeof(job.nspace), "%s", me.nspace);
    job.rank = (int)me.rank;
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);

    pthread_mutex_lock(&cache_lock);
    int have_cache = cached && !strcmp(cache.nspace, job.nspace) && cache.rank == job.rank;
    rcoll_pmix_job_t old = cache;
    pthread_mutex_unlock(&cache_lock);

    long size = get_uint(&wild, PMIX_JOB_SIZE, &rc);
    if (size < 1 && have_cache) size = old.nranks;
    if (size < 1 || size > (1 << 24) || job.rank >= size) {
        if (rc == PMIX_SUCCESS)
            rcoll_err_set(RCOLL_ERR_INVALID_ARG, "rcoll_comm_init_env through PMIx: PMIx "
                          "rank %d with PMIX_JOB_SIZE %ld of namespace %s", job.rank, size,
                          job.nspace);
        else
            pmix_failed(RCOLL_ERR_SYSTEM, "PMIx_Get", rc, "of PMIX_JOB_SIZE");
        PMIx_Finalize(NULL, 0);
        return RCOLL_ERR_SYSTEM;
    }
    job.nranks = (int)size;
    long lr = get_uint(&me, PMIX_LOCAL_RANK, &rc);
    long ls = get_uint(&wild, PMIX_LOCAL_SIZE, &rc);
    job.local_rank = lr >= 0 ? (int)lr : have_cache ? old.local_rank : -1;
    job.local_size = ls >= 1 ? (int)ls : have_cache ? old.local_size : -1;

    pthread_mutex_lock(&cache_lock);
    cache = job;
    cached = 1;
    pthread_mutex_unlock(&cache_lock);
    *job_p = job;
    return RCOLL_OK;
}

/* Put one value: bytes (len) or, when text is not NULL, that sentence. */
static rcoll_status_t put_value(const char *key, const void *bytes, size_t len, const char *text)
{
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    if (text) {
        val.type = PMIX_STRING;
        val.data.string = (char *)text;
    } else {
        val.type = PMIX_BYTE_OBJECT;
        val.data.bo.bytes = (char *)bytes;
        val.data.bo.size = len;
    }
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    if (rc != PMIX_SUCCESS) return pmix_failed(RCOLL_ERR_SYSTEM, "PMIx_Put", rc, key);
    return RCOLL_OK;
}

/* Get rank from's value of key into out (len bytes); a sentence there is its failure
 * (what: whose value it is, for the messages). */
static rcoll_status_t get_value(const rcoll_pmix_job_t *job, int from, const char *key,
                                const pmix_info_t *info, size_t ninfo, void *out, size_t len,
                                const char *what)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, job->nspace, (pmix_rank_t)from);
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(&proc, key, info, ninfo, &v);
    rcoll_status_t st = RCOLL_OK;
    if (rc != PMIX_SUCCESS || !v) {
        char where[300];
        snprintf(where, sizeof(where), "of %s from rank %d of namespace %.100s", key, from,
                 job->nspace);
        st = pmix_failed(RCOLL_ERR_SYSTEM, "PMIx_Get", rc != PMIX_SUCCESS ? rc : PMIX_ERR_NOT_FOUND,
                         where);
    } else if (v->type == PMIX_STRING && v->data.string) {
        st = rcoll_err_set(RCOLL_ERR_REMOTE, "rcoll_comm_init_env through PMIx: rank %d could "
                           "not start the job: %s", from, v->data.string);
    } else if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != len) {
        st = rcoll_err_set(RCOLL_ERR_PROTOCOL, "rcoll_comm_init_env through PMIx: %s from "
                           "rank %d is not %s (PMIx type %d, %zu bytes; expected %zu)", key,
                           from, what, (int)v->type,
                           v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : (size_t)0, len);
    } else {
        memcpy(out, v->data.bo.bytes, len);
    }
    if (v) PMIX_VALUE_RELEASE(v);
    return st;
}

rcoll_status_t rcoll_pmix_exchange_id(const rcoll_pmix_job_t *job, rcoll_unique_id_t *id,
                                      const char *fail_text, double timeout_s,
                                      const rcoll_pmix_relay_t *relay)
{
    unsigned launch = atomic_fetch_add(&launches, 1);
    char key[32], rkey[32]; /* well under PMIX_MAX_KEYLEN */
    snprintf(key, sizeof(key), "rcoll.uid.%u", launch);
    snprintf(rkey, sizeof(rkey), "rcoll.relay.%u", launch);
    rcoll_status_t st = RCOLL_OK;
    if (job->rank == 0) st = put_value(key, id->internal, sizeof(id->internal), fail_text);
    if (st == RCOLL_OK && relay && relay->mine)
        st = put_value(rkey, relay->mine, sizeof(*relay->mine), relay->mine_fail);
    if (st != RCOLL_OK) return st;
    if (job->rank == 0 || (relay && relay->mine)) {
        pmix_status_t rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) return pmix_failed(RCOLL_ERR_SYSTEM, "PMIx_Commit", rc, NULL);
    }

    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, job->nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info[2];
    bool collect = true;
    int tmo = timeout_s > 0 ? (timeout_s < 1 ? 1 : (int)(timeout_s + 0.999)) : 0;
    size_t ninfo = tmo > 0 ? 2 : 1;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if (tmo > 0) PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
    RCOLL_TRACE(INIT, "PMIx: rank %d fences over the %d ranks of %s for %s", job->rank,
                job->nranks, job->nspace, key);
    pmix_status_t rc = PMIx_Fence(&wild, 1, info, ninfo);
    if (rc != PMIX_SUCCESS) {
        char what[400];
        snprintf(what, sizeof(what), "over the %d ranks of namespace %.100s (rank %d, key %s; %s)",
                 job->nranks, job->nspace, job->rank, key,
                 rc == PMIX_ERR_TIMEOUT
                     ? "a rank did not reach rcoll_comm_init_env within RCOLL_TIMEOUT"
                     : rc == PMIX_ERR_PARTIAL_SUCCESS
                           ? "a rank of the job ended or left PMIx before reaching "
                             "rcoll_comm_init_env"
                           : "the PMIx server could not collect every rank");
        for (size_t i = 0; i < ninfo; i++) PMIX_INFO_DESTRUCT(&info[i]);
        return pmix_failed(rc == PMIX_ERR_TIMEOUT ? RCOLL_ERR_TIMEOUT : RCOLL_ERR_REMOTE,
                           "PMIx_Fence", rc, what);
    }
    if (job->rank == 0) {
        st = fail_text ? rcoll_err_set(RCOLL_ERR_SYSTEM, "%s", fail_text) : RCOLL_OK;
    } else {
        st = get_value(job, 0, key, info + 1, ninfo - 1, id->internal, sizeof(id->internal),
                       "a unique id");
    }
    if (st == RCOLL_OK && relay && relay->from >= 0)
        st = get_value(job, relay->from, rkey, info + 1, ninfo - 1, relay->got,
                       sizeof(*relay->got), "a bootstrap relay's address");
    for (size_t i = 0; i < ninfo; i++) PMIX_INFO_DESTRUCT(&info[i]);
    return st;
}

void rcoll_pmix_fini(rcoll_pmix_job_t *job)
{
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS)
        RCOLL_WARN(INIT, "PMIx_Finalize (rank %d of %s) failed: %s", job->rank, job->nspace,
                   PMIx_Error_string(rc));
}

#else /* built without PMIx */

static rcoll_status_t not_built(void)
{
    return rcoll_err_set(RCOLL_ERR_UNSUPPORTED, "rcoll_comm_init_env through PMIx: this "
                         "librcoll was built without PMIx (apt-get install libpmix-dev, then "
                         "meson setup -Dpmix=enabled); set RCOLL_PMIX=auto or off and give "
                         "RCOLL_ROOT or MASTER_ADDR/MASTER_PORT");
}

rcoll_status_t rcoll_pmix_init(rcoll_pmix_job_t *job)
{
    (void)job;
    return not_built();
}

rcoll_status_t rcoll_pmix_exchange_id(const rcoll_pmix_job_t *job, rcoll_unique_id_t *id,
                                      const char *fail_text, double timeout_s,
                                      const rcoll_pmix_relay_t *relay)
{
    (void)job, (void)id, (void)fail_text, (void)timeout_s, (void)relay;
    return not_built();
}

void rcoll_pmix_fini(rcoll_pmix_job_t *job) { (void)job; }

#endif
