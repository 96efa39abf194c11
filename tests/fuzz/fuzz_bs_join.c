/*
 * fuzz_bs_join.c - a rank joining through a bootstrap root that answers anything: the
 * reply to the hello (the rank table, a rejection, a failure), then the control messages
 * that follow on the connection (failures, relayed signatures), read by rcoll_bs_poll and
 * rcoll_bs_sigs.  The real rank code over a real loopback socket: a thread plays the root,
 * accepting each connection and sending it the input.
 * Input: a byte for the job size (1..4 ranks), then the root's bytes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"

#include "core/bootstrap.h"
#include "core/sig.h"
#include "util/net.h"
#include "util/time.h"

static int listen_fd = -1;
static rcoll_sockaddr_t root_addr;

typedef struct {
    const uint8_t *p;
    size_t n;
    int stop[2]; /* pipe: the harness tells the root to finish */
} root_job_t;

static void write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* Every connection gets the whole input, then end of stream; sockets stay open (unread
 * hellos would otherwise turn the close into a reset) until the harness is done. */
static void *root_main(void *arg)
{
    root_job_t *j = arg;
    int fds[16], nfds = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = listen_fd, .events = POLLIN},
                                {.fd = j->stop[0], .events = POLLIN}};
        if (poll(pfd, 2, 1000) < 0 && errno != EINTR) break;
        if (pfd[1].revents) break;
        if (!pfd[0].revents) continue;
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) continue;
        write_all(fd, j->p, j->n);
        shutdown(fd, SHUT_WR);
        if (nfds < 16)
            fds[nfds++] = fd;
        else
            close(fd);
    }
    for (int i = 0; i < nfds; i++) close(fds[i]);
    return NULL;
}

static void setup(void)
{
    setenv("RCOLL_DEBUG", "NONE", 0);
    memset(&root_addr, 0, sizeof(root_addr));
    root_addr.sin.sin_family = AF_INET;
    root_addr.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (rcoll_net_listen(&root_addr, 64, 0, &listen_fd) != RCOLL_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (listen_fd < 0) setup();
    if (size < 1) return 0;
    int nranks = 1 + data[0] % 4;
    root_job_t job = {.p = data + 1, .n = size - 1};
    if (pipe(job.stop) != 0) abort();
    pthread_t th;
    if (pthread_create(&th, NULL, root_main, &job) != 0) abort();

    char secret[RCOLL_SECRET_BYTES] = {0};
    rcoll_unique_id_t id;
    rcoll_bs_make_id(&root_addr, 1, secret, &id);
    rcoll_peer_info_t mine;
    memset(&mine, 0, sizeof(mine));
    snprintf(mine.hostname, sizeof(mine.hostname), "fuzz");
    /* Exactly the table's size on the heap, so a read past it is caught. */
    rcoll_peer_info_t *peers = malloc((size_t)nranks * sizeof(*peers));
    rcoll_bootstrap_t *bs = NULL;
    /* Short: a reply is in the socket within microseconds; this bounds the retry loop. */
    rcoll_status_t st = rcoll_bs_join(&id, 0, nranks, &mine, peers, rcoll_now_ns() + 10000000ull,
                                      &bs);
    if (st == RCOLL_OK) {
        /* The table's records are printed as they are ("rank 2 (host pid 7)"). */
        char buf[160];
        for (int k = 0; k < nranks; k++) {
            FZ_ASSERT(memchr(peers[k].hostname, '\0', sizeof(peers[k].hostname)));
            snprintf(buf, sizeof(buf), "rank %d (%s pid %d)", k, peers[k].hostname,
                     (int)peers[k].pid);
        }
        const rcoll_peer_info_t *host = rcoll_bs_root_host(bs);
        FZ_ASSERT(memchr(host->hostname, '\0', sizeof(host->hostname)));
        int culprit = -1;
        for (int i = 0; i < 4; i++)
            if (rcoll_bs_poll(bs, &culprit) != RCOLL_OK) break;
        rcoll_bs_sig_t sigs[8];
        int n = rcoll_bs_sigs(bs, 0, sigs, 8);
        for (int i = 0; i < n; i++) {
            rcoll_sig_t s;
            memcpy(&s, sigs[i].sig, sizeof(s));
            rcoll_sig_format(&s, 1, buf, sizeof(buf));
        }
        rcoll_bs_leave(bs, 0);
    }
    if (write(job.stop[1], "x", 1) != 1) abort();
    pthread_join(th, NULL);
    close(job.stop[0]);
    close(job.stop[1]);
    free(peers);
    return 0;
}
