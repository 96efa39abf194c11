/*
 * bootstrap.h - how ranks find each other and learn of failures.
 *
 * A root (a thread in the process that made the unique id, or in rank 0 for environment
 * launch) accepts one TCP connection per rank, checks the job secret, and hands every rank
 * the table of all ranks' info (host identity, pid, transport handle).  Afterwards the root
 * watches those connections: when a rank's connection drops without a goodbye, or a rank
 * reports a failure, it tells every other rank, so that all survivors fail promptly with an
 * error naming the rank at fault instead of waiting on a peer that will never answer.  After
 * a mismatched collective it also relays the ranks' call signatures (core/sig.h), and compares
 * the calls of ranks that report a long wait, so every rank can name both sides.
 */
#ifndef RCOLL_CORE_BOOTSTRAP_H
#define RCOLL_CORE_BOOTSTRAP_H

#include <stdint.h>
#include "rcoll.h"
#include "transport/transport.h"
#include "core/config.h"
#include "util/net.h"

#define RCOLL_SECRET_BYTES 64
#define RCOLL_BS_TEXT_MAX 256

#define RCOLL_CPU_WORDS 16 /* 1024 CPUs */

typedef struct {
    char hostname[64];
    uint64_t host_hash; /* hostname + boot id + network namespace (or RCOLL_HOST_ID) */
    uint64_t machine_hash; /* hostname + boot id: ranks that share CPUs */
    int32_t pid;
    /* 1 + the place of this rank's GPU in its machine's GPU chain (core/comm.c gpu_chain_pos:
     * the topology's ring order over every GPU of the host); 0 when it has no GPU or the
     * topology does not know it.  A host's ranks enter the ring in this order. */
    int32_t gpu_pos;
    /* This process's doorbell (util/bell.h: /proc/<pid>/fd/<bell_fd>; -1: none) and how the
     * rank waits (RCOLL_WAIT_*, its own setting: auto resolves alike on every rank of a
     * machine, from the CPU masks below), so that local peers know whom to ring. */
    int32_t bell_fd;
    int32_t wait_mode;
    /* The CPUs this rank may run on (its affinity mask at init): bit i of word i / 64 is CPU i.
     * Ranks of one machine whose masks together hold fewer CPUs than there are ranks share
     * CPUs, so their waits yield. */
    uint64_t cpus[RCOLL_CPU_WORDS];
    /* Listen handle per built-in transport (registry order); all zero where this rank has
     * no such transport. */
    uint8_t handles[RCOLL_MAX_TRANSPORTS][RCOLL_TRANSPORT_HANDLE_BYTES];
    /* Largest message this rank's device of each transport carries (props.max_msg_size; 0:
     * no limit given), so that both ends of a pair split a long message alike. */
    uint64_t max_msg[RCOLL_MAX_TRANSPORTS];
} rcoll_peer_info_t;

/* One rank's call after a mismatch (core/sig.h's signature, opaque here), relayed by the root
 * to every other rank so that each can name both sides. */
#define RCOLL_BS_SIG_BYTES 48
typedef struct {
    uint64_t ctx;  /* the communicator */
    int32_t rank;  /* the caller's rank in it */
    int32_t flags; /* RCOLL_BS_SIG_MEMBERS (watchdog messages) */
    uint8_t sig[RCOLL_BS_SIG_BYTES];
} rcoll_bs_sig_t;
/* The communicator's rank r is the bootstrap's member r (the communicator that joined it, or
 * a split of it that kept every rank in place): the root may then describe the ranks by
 * their waits in other communicators too. */
#define RCOLL_BS_SIG_MEMBERS 1

/* The root's answer to a rank's watchdog (rcoll_bs_send_wdog): what the ranks of that
 * communicator last reported of their waits.  A rank reports a wait (rcoll_bs_send_stall)
 * once it has waited a while in a call; the root keeps each rank's latest. */
#define RCOLL_BS_WDOG_BITS 1024 /* ranks the reached set covers */
#define RCOLL_BS_WDOG_LAST 8    /* ranks not reached whose last reported wait is given */
typedef struct {
    uint64_t ctx;  /* the communicator */
    uint64_t seq;  /* the call asked about (its number) */
    int32_t nlast;
    int32_t pad;
    uint8_t reached[RCOLL_BS_WDOG_BITS / 8]; /* bit r: rank r's latest wait is in this call,
                                               * with the asker's signature */
    struct {
        int32_t rank;
        int32_t kind; /* rcoll_op_kind_t of that call */
        uint64_t seq; /* its number on its communicator (set-up collectives included) */
        uint64_t ctx; /* its communicator: the asker's, or (RCOLL_BS_SIG_MEMBERS) another */
    } last[RCOLL_BS_WDOG_LAST]; /* other ranks whose latest wait is in another call */
} rcoll_bs_wdog_t;

/* A rank's request to shrink (rcoll_comm_shrink): the communicator, its rank there, and its
 * record for the new communicator (fresh listen handles).  A communicator of some ranks of
 * the job (RCOLL_BS_SHRINK_SUB) names them: bit b of members is the bootstrap's member b
 * (ranks of the job past RCOLL_BS_SUB_BITS cannot be named: such a shrink is refused before
 * it is asked); seq numbers the shrinks of that communicator, so that one asked too late is
 * told apart from the next. */
#define RCOLL_BS_SUB_BITS 1024
#define RCOLL_BS_SHRINK_SUB 0x100 /* in flags, beside rcoll_comm_shrink's own */
typedef struct {
    uint64_t ctx;
    int32_t rank;
    int32_t flags;
    uint32_t seq;
    int32_t pad;
    uint8_t members[RCOLL_BS_SUB_BITS / 8];
    rcoll_peer_info_t info;
} rcoll_bs_shrink_req_t;

/* A member of the shrunk communicator: its rank in the bootstrap (the job's numbering, in
 * which failures are named) and its request. */
typedef struct {
    int32_t bs_rank;
    int32_t pad;
    rcoll_bs_shrink_req_t req;
} rcoll_bs_member_t;

typedef struct rcoll_bs_root rcoll_bs_root_t;
typedef struct rcoll_bootstrap rcoll_bootstrap_t;

/* Start a root thread listening on addrs[0..naddrs) (port 0 = any, written back; reuse_port
 * for a fixed port).  The first must listen; the others are alternatives (at most
 * RCOLL_BS_ROOT_ADDRS in all; only IPv4 ones fit the id) that ranks try when the first does
 * not answer.  Writes the id ranks use.  *root_p (optional) gets a reference to wait for it;
 * pass it to rcoll_bs_root_release. */
#define RCOLL_BS_ROOT_ADDRS 4
rcoll_status_t rcoll_bs_root_start(const rcoll_config_t *cfg, rcoll_sockaddr_t *addrs,
                                   int naddrs, const char secret[RCOLL_SECRET_BYTES],
                                   int fixed_port, rcoll_unique_id_t *id,
                                   rcoll_bs_root_t **root_p);
/* The bootstrap tree (relays, bootstrap_relay.c): nodes 0..nnodes-1, node 0 the root, node
 * n > 0 a relay hosted by rank n * block and listening where the launcher says.  Rank r joins
 * through node r / block; node n's parent is (n - 1) / fanout.  So no process accepts more
 * than block + fanout connections and a message crosses at most log_fanout(nnodes) relays. */
typedef struct {
    int nranks, nnodes, block, fanout;
} rcoll_bs_tree_t;

/* The tree for nranks ranks with at most nrelays relays (fewer when the blocks would leave
 * some empty) and fanout children per node (>= 2). */
void rcoll_bs_tree_make(rcoll_bs_tree_t *t, int nranks, int nrelays, int fanout);
static inline int rcoll_bs_tree_node(const rcoll_bs_tree_t *t, int rank) { return rank / t->block; }
static inline int rcoll_bs_tree_host(const rcoll_bs_tree_t *t, int node) { return node * t->block; }
static inline int rcoll_bs_tree_parent(const rcoll_bs_tree_t *t, int node)
{
    return (node - 1) / t->fanout;
}
/* Whether node lies in the subtree below node top (top itself included). */
int rcoll_bs_tree_below(const rcoll_bs_tree_t *t, int node, int top);

/* Start relay node (1..t->nnodes-1) listening on addr (a fixed port; listen_fd >= 0: a
 * socket listening there already, taken over, as a PMIx launch publishes the address before
 * the relay can start), connecting to its
 * parent at parent (retried until RCOLL_TIMEOUT); it admits the ranks of its block and the
 * relays of its children once they prove the secret of root_id (the root's id), and carries every message between them and
 * the root.  Writes the id its block's ranks join with.  Release it as a root
 * (rcoll_bs_root_release): it ends when its parent closes (the job is over). */
rcoll_status_t rcoll_bs_relay_start(const rcoll_config_t *cfg, const rcoll_bs_tree_t *t,
                                    int node, const rcoll_sockaddr_t *addr, int listen_fd,
                                    const rcoll_sockaddr_t *parent,
                                    const rcoll_unique_id_t *root_id, rcoll_unique_id_t *id,
                                    rcoll_bs_root_t **root_p);
/* rcoll_bs_root_start for a root that is node 0 of tree (NULL or one node: no relays): it
 * admits its child relays too, and reaches the ranks below them through them. */
rcoll_status_t rcoll_bs_root_start_tree(const rcoll_config_t *cfg, rcoll_sockaddr_t *addrs,
                                        int naddrs, const char secret[RCOLL_SECRET_BYTES],
                                        int fixed_port, const rcoll_bs_tree_t *tree,
                                        rcoll_unique_id_t *id, rcoll_bs_root_t **root_p);
/* The id a rank of a relay's block joins with: the relay's address, the rank hosting it,
 * and root_id's secret and communicator id (rcoll_bs_id_ctx). */
void rcoll_bs_make_relay_id(const rcoll_sockaddr_t *addr, int host_rank,
                            const rcoll_unique_id_t *root_id, rcoll_unique_id_t *id);
/* Where the root of id listens (its first address). */
void rcoll_bs_id_root_addr(const rcoll_unique_id_t *id, rcoll_sockaddr_t *addr);
/* The communicator id that ranks joining with id share: a hash of the root's id (a relay's
 * id carries it). */
uint64_t rcoll_bs_id_ctx(const rcoll_unique_id_t *id);

/* Wait until deadline_ns for the root to finish (every rank left), then drop the reference.
 * RCOLL_ERR_TIMEOUT if it was still serving ranks. */
rcoll_status_t rcoll_bs_root_release(rcoll_bs_root_t *root, uint64_t deadline_ns);

/* The rank that hosts root failed to create its communicator (text says why): the root
 * tells the ranks that joined at once, and rejects every later hello with the text, until
 * its deadline.  Call before rcoll_bs_root_release. */
void rcoll_bs_root_abort(rcoll_bs_root_t *root, const char *text);
/* Build the id for a root at addrs[0] (the alternatives after it: IPv4 ones, up to
 * RCOLL_BS_ROOT_ADDRS - 1) with secret (environment launch: one address, no root here). */
void rcoll_bs_make_id(const rcoll_sockaddr_t *addrs, int naddrs,
                      const char secret[RCOLL_SECRET_BYTES], rcoll_unique_id_t *id);
/* Check an id's magic and version; RCOLL_ERR_INVALID_ARG with a message otherwise. */
rcoll_status_t rcoll_bs_check_id(const rcoll_unique_id_t *id);

/* Join: connect to the root, prove the secret, send mine, receive all nranks infos into
 * peers (caller allocates nranks entries).  Fails by deadline_ns at the latest. */
rcoll_status_t rcoll_bs_join(const rcoll_unique_id_t *id, int rank, int nranks,
                             const rcoll_peer_info_t *mine, rcoll_peer_info_t *peers,
                             uint64_t deadline_ns, rcoll_bootstrap_t **bs_p);
/* Non-blocking check of the control connection.  RCOLL_OK if nothing happened; otherwise the
 * failure the root announced (or the root's loss), with detail in rcoll_err_get() and the
 * culprit rank in *culprit (-1 if unknown). */
rcoll_status_t rcoll_bs_poll(rcoll_bootstrap_t *bs, int *culprit);
/* Send this rank's signature of a mismatched call; the root passes it to every other rank
 * (even after a failure was announced). */
void rcoll_bs_send_sig(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig);
/* This rank has waited a while in the call of signature sig: the root compares it with the
 * other ranks' stalled calls and announces a mismatch (RCOLL_ERR_INVALID_USAGE, with both
 * signatures) when two of the same number differ.  The signature's first 8 bytes are the
 * call's number. */
void rcoll_bs_send_stall(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig);
/* This rank's call of signature sig has made no progress for RCOLL_WATCHDOG_S: counts as a
 * stall report, and the root answers with an rcoll_bs_wdog_t (rcoll_bs_wdog_reply). */
void rcoll_bs_send_wdog(rcoll_bootstrap_t *bs, const rcoll_bs_sig_t *sig);
/* 1 when the root's answer about call seq of communicator ctx has arrived (into *out). */
int rcoll_bs_wdog_reply(rcoll_bootstrap_t *bs, uint64_t ctx, uint64_t seq, rcoll_bs_wdog_t *out);
/* The signatures received so far for communicator ctx (reads what has arrived; at most max,
 * each distinct).  Returns how many. */
int rcoll_bs_sigs(rcoll_bootstrap_t *bs, uint64_t ctx, rcoll_bs_sig_t *out, int max);
/* Tell the root this rank saw culprit fail (status st, text), so the others learn it. */
void rcoll_bs_report(rcoll_bootstrap_t *bs, int culprit, rcoll_status_t st, const char *text);
/* After a report: 1 when the root has not acknowledged this rank's data on the control
 * connection and TCP has already retransmitted it twice or more (*retransmits) - the root's
 * host (rank 0's) is unreachable from here, not merely slow to decide.  0 otherwise, also
 * when that cannot be read (no TCP_INFO). */
int rcoll_bs_root_unreachable(rcoll_bootstrap_t *bs, int *retransmits);
/* The record of the process that hosts the root: rank 0 of the communicator that joined it
 * (a split's children share their parent's connection, so for them it may be no member). */
const rcoll_peer_info_t *rcoll_bs_root_host(const rcoll_bootstrap_t *bs);
/* Shrink: send req and wait (until deadline_ns) for the root's decision, the members of the
 * new communicator in the order of their ranks in the old one (*members malloc'ed, *count of
 * them) and the round's number (*round).  Every survivor gets the same list.  Once it has
 * arrived, the failure this connection latched is cleared: failures are announced afresh.
 * A communicator of every rank of the job: the root waits for every member still connected,
 * and one that has not asked RCOLL_TIMEOUT after the first is cut off (excluded).  One of
 * some ranks (RCOLL_BS_SHRINK_SUB): the root waits for the members req names that are still
 * connected; one that has not asked by then is left out of that communicator only, and told
 * so when it asks.
 * Errors: the root is gone (RCOLL_ERR_REMOTE: it cannot decide), this rank was excluded or
 * left out (RCOLL_ERR_TIMEOUT: it asked too late), no answer by the deadline
 * (RCOLL_ERR_TIMEOUT). */
rcoll_status_t rcoll_bs_shrink(rcoll_bootstrap_t *bs, const rcoll_bs_shrink_req_t *req,
                               uint64_t deadline_ns, rcoll_bs_member_t **members, int *count,
                               uint32_t *round);
/* Ranks in the job now: nranks at the join, then the size of the last shrink. */
int rcoll_bs_members(const rcoll_bootstrap_t *bs);
/* This rank's number in the bootstrap (-1 for NULL). */
int rcoll_bs_rank(const rcoll_bootstrap_t *bs);
/* Poll the control connection for up to wait_ns (2 ms steps) for the root's verdict on a
 * failure: RCOLL_OK when none came, else its status (rcoll_err_get() its sentence, *culprit
 * the rank it names, -1 unknown).  culprit may be NULL. */
rcoll_status_t rcoll_bs_await_verdict(rcoll_bootstrap_t *bs, uint64_t wait_ns, int *culprit);
/* Revoke communicator ctx (this rank is rank of it): the root tells every other rank. */
void rcoll_bs_revoke(rcoll_bootstrap_t *bs, uint64_t ctx, int rank, const char *text);
/* 1 when another rank revoked communicator ctx (what has arrived is read first): *rank the
 * revoking rank, text its sentence. */
int rcoll_bs_revoked(rcoll_bootstrap_t *bs, uint64_t ctx, int *rank, char *text, size_t len);
/* Share the control connection with a sub-communicator (one more rcoll_bs_leave needed).
 * Communicators of one family are used from one thread at a time, like each of them. */
rcoll_bootstrap_t *rcoll_bs_ref(rcoll_bootstrap_t *bs);
/* Leave: drop a reference; the last one says goodbye (graceful=1) or just closes (abort) and
 * frees bs.  NULL is a no-op. */
void rcoll_bs_leave(rcoll_bootstrap_t *bs, int graceful);

/* This host's identity (hostname + boot id hash) and short hostname. */
void rcoll_bs_host_identity(char *hostname, size_t len, uint64_t *hash, uint64_t *machine);

#endif
