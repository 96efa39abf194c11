/*
 * launch_pmix.h - environment launch through a PMIx server (launch_pmix.c): the job's
 * shape from PMIx, and the bootstrap unique id passed from rank 0 to the others through
 * PMIx's key-value store.  Built without PMIx, every call but rcoll_pmix_built and
 * rcoll_pmix_started fails with RCOLL_ERR_UNSUPPORTED and a sentence saying so.
 */
#ifndef RCOLL_CORE_LAUNCH_PMIX_H
#define RCOLL_CORE_LAUNCH_PMIX_H

#include "rcoll.h"
#include "util/net.h"

/* What PMIx says about this process's job. */
typedef struct {
    char nspace[256];  /* the job's namespace (PMIX_NAMESPACE) */
    int rank, nranks;  /* PMIx rank and PMIX_JOB_SIZE */
    int local_rank;    /* PMIX_LOCAL_RANK; -1 when the server does not say */
    int local_size;    /* PMIX_LOCAL_SIZE; -1 when the server does not say */
} rcoll_pmix_job_t;

/* 1 when this library was built with PMIx. */
int rcoll_pmix_built(void);
/* 1 when a PMIx server started this process (PMIX_NAMESPACE and PMIX_RANK are set). */
int rcoll_pmix_started(void);

/* PMIx_Init, then the job's size and this process's local rank and size.  Writes *job on
 * success; pair with rcoll_pmix_fini (also after a failed exchange).  Errors name the PMIx
 * call and its status (PMIx_Error_string). */
rcoll_status_t rcoll_pmix_init(rcoll_pmix_job_t *job);
/* The relays of the bootstrap tree through PMIx (NULL: none).  A rank hosting a relay
 * publishes where it listens (mine; mine_fail not NULL: that sentence instead, and those who
 * get it fail with it); a rank that needs a relay's address (its block's, or its own relay's
 * parent) gets it from the rank hosting that relay (from >= 0) into *got. */
typedef struct {
    const rcoll_sockaddr_t *mine;
    const char *mine_fail;
    int from;
    rcoll_sockaddr_t *got;
} rcoll_pmix_relay_t;

/* Pass the unique id from rank 0 to every rank: rank 0 puts *id (or, when fail_text is not
 * NULL, that sentence: the others then fail with it at once) under a key numbered per launch
 * in this process, commits, and every rank fences over the whole namespace, collecting the
 * data; the others then get the id from rank 0.  timeout_s > 0 bounds the fence and the get
 * (PMIX_TIMEOUT).  Ranks other than 0 write *id on success; relay (optional) passes the
 * relays' addresses in the same fence. */
rcoll_status_t rcoll_pmix_exchange_id(const rcoll_pmix_job_t *job, rcoll_unique_id_t *id,
                                      const char *fail_text, double timeout_s,
                                      const rcoll_pmix_relay_t *relay);
/* PMIx_Finalize (PMIx counts PMIx_Init calls: an MPI library's own use goes on). */
void rcoll_pmix_fini(rcoll_pmix_job_t *job);

#endif
