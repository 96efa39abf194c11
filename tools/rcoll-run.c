/*
 * rcoll-run: start N local ranks of one command with the rcoll launch environment.
 *
 * It forks and execs the ranks, relays their output line by line with a "[rank] " prefix,
 * forwards terminal signals to them, and turns the first rank failure into the job's exit
 * status after a bounded clean-up. It does not link the rcoll library, uses no threads
 * (pipes + poll + a SIGCHLD self-pipe), and prints nothing of its own when every rank
 * succeeds: scripts parse the ranks' output.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* close_range, pipe2 */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_MAX_RANKS      1024
#define RUN_GRACE_DEFAULT  10.0
#define RUN_SECONDS_MAX    1e7          /* keeps second -> millisecond math in range */
#define RUN_TERM_WAIT_MS   2000         /* SIGTERM -> SIGKILL */
#define RUN_KILL_WAIT_MS   5000         /* SIGKILL -> give up waiting */
#define RUN_POLL_CAP_MS    1000         /* reap at least this often even without SIGCHLD */
#define RUN_CHUNK          (64 * 1024)  /* one read() from a rank's pipe */
#define RUN_LINE_MAX       (64 * 1024)  /* a longer line without '\n' is broken here */
#define RUN_DRAIN_CHUNKS   32           /* reads per stream after its rank exited */
#define RUN_EXIT_LAUNCHER  1            /* rcoll-run itself failed */
#define RUN_EXIT_USAGE     2
#define RUN_EXIT_TIMEOUT   124

typedef struct {
    char *data;
    size_t len, cap;
} run_buf_t;

/* One of a rank's two output pipes. */
typedef struct {
    int fd;          /* read end, non-blocking; -1 once closed */
    int out_fd;      /* where its lines go: 1 or 2 */
    int keep;        /* 0: read and dropped (-q for ranks != 0) */
    run_buf_t pend;  /* bytes after the last '\n' seen */
} run_stream_t;

typedef struct {
    pid_t pid;       /* 0: never started */
    int running;     /* started and not yet reaped */
    run_stream_t out, err;
    int join_fd;     /* our end of the rank's RCOLL_RUN_JOIN_FD socket; -1 once closed */
    int started;     /* the rank said 'S': it began to join the job (rcoll_comm_init_env) */
    int joined;      /* ... 'J': it joined */
    int exited_early;/* it exited with status 0 without having begun to join */
} run_rank_t;

typedef struct {
    int nranks;
    int quiet;
    int prefix;
    double grace_s;
    double timeout_s;
    int torch_env;   /* also set RANK, WORLD_SIZE, MASTER_ADDR/PORT (none were set) */
    char **cmd;
} run_opts_t;

/*
 * PH_RUN: all well. PH_GRACE: a rank failed, the others may still finish.
 * PH_TERM: SIGTERM (or a forwarded signal) sent. PH_KILL: SIGKILL sent.
 * Each phase after PH_RUN has a deadline that moves it to the next one.
 */
typedef enum { PH_RUN, PH_GRACE, PH_TERM, PH_KILL } run_phase_t;

static int run_sig_pipe[2] = { -1, -1 };
static int run_fd_broken[3];       /* stdout/stderr reader went away: drop output */
static run_buf_t run_outbuf;       /* lines assembled for one write() */

static void run_msg(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* Messages go straight to fd 2 so they order correctly against relayed lines. */
    if (write(2, "rcoll-run: ", 11) == 11 && write(2, line, (size_t)n) < 0)
        return;
}

static int64_t run_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void run_usage(FILE *f)
{
    fprintf(f,
        "usage: rcoll-run [options] -n N [--] CMD [ARGS...]\n"
        "\n"
        "Start N local ranks of CMD with the rcoll launch environment (RCOLL_RANK,\n"
        "RCOLL_NRANKS, RCOLL_LOCAL_RANK, RCOLL_LOCAL_SIZE, RCOLL_ROOT, RCOLL_SECRET,\n"
        "RCOLL_SOCKET_IFNAME; above 64 ranks RCOLL_BS_RELAYS too, so that the bootstrap\n"
        "runs through one relay per 32 ranks (unless RCOLL_BS_RELAYS is set: empty = none);\n"
        "and torch.distributed's RANK, LOCAL_RANK, WORLD_SIZE,\n"
        "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT unless MASTER_ADDR, MASTER_PORT, RANK\n"
        "or WORLD_SIZE is already set) and relay their output, each line prefixed with\n"
        "\"[rank] \".\n"
        "\n"
        "options:\n"
        "  -n, --nranks N   number of ranks, 1..%d (required)\n"
        "  -q, --quiet      show only rank 0's stdout (every rank's stderr is kept)\n"
        "      --no-prefix  print output lines without the \"[rank] \" prefix\n"
        "      --grace S    after a rank fails, let the others run S more seconds\n"
        "                   before SIGTERM (default %g, or $RCOLL_RUN_GRACE)\n"
        "      --timeout S  kill the job after S seconds of wall time (0 = none)\n"
        "  -h, --help       show this help\n"
        "\n"
        "SIGINT, SIGTERM and SIGHUP are forwarded to every rank; a second one sends\n"
        "SIGKILL. RCOLL_SECRET and RCOLL_SOCKET_IFNAME (default lo) are kept if set.\n"
        "\n"
        "exit status: 0 when every rank succeeds; else the first failing rank's exit\n"
        "code, or 128+signal if it was killed; 124 on --timeout; 2 on bad usage;\n"
        "1 when rcoll-run itself fails.\n",
        RUN_MAX_RANKS, RUN_GRACE_DEFAULT);
}

/* Seconds as a non-negative decimal number (fractions allowed). */
static int run_parse_seconds(const char *s, double *out_p)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    /* NaN fails both comparisons; inf fails the upper bound. */
    if (errno || end == s || *end != '\0' || !(v >= 0.0 && v <= RUN_SECONDS_MAX))
        return -1;
    *out_p = v;
    return 0;
}

/*
 * Value of option `name` at argv[*i]: "--name=V", "--name V", or for short options
 * "-nV" / "-n V". Returns NULL (after a message) when the value is missing.
 */
static const char *run_opt_value(int argc, char **argv, int *i, const char *name)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);

    if (arg[len] == '=' && name[1] == '-')
        return arg + len + 1;
    if (arg[len] != '\0' && name[1] != '-')
        return arg + len;
    if (*i + 1 >= argc) {
        run_msg("option %s needs a value; see rcoll-run --help", name);
        return NULL;
    }
    return argv[++*i];
}

/* True when arg is option `name`, alone or with its value attached. */
static int run_opt_is(const char *arg, const char *name)
{
    size_t len = strlen(name);

    if (strncmp(arg, name, len) != 0)
        return 0;
    if (arg[len] == '\0')
        return 1;
    /* "--grace=1"; short options take an attached value: "-n4". */
    return name[1] == '-' ? arg[len] == '=' : 1;
}

/* Returns 0 to run, 1 for --help, -1 on bad usage (message printed). */
static int run_parse_args(int argc, char **argv, run_opts_t *o)
{
    const char *env = getenv("RCOLL_RUN_GRACE");
    int i;

    o->nranks = 0;
    /* torch's env:// variables, unless the caller set its own rendezvous */
    o->torch_env = !getenv("MASTER_ADDR") && !getenv("MASTER_PORT") && !getenv("RANK") &&
                   !getenv("WORLD_SIZE");
    o->quiet = 0;
    o->prefix = 1;
    o->grace_s = RUN_GRACE_DEFAULT;
    o->timeout_s = 0.0;
    o->cmd = NULL;
    if (env && *env && run_parse_seconds(env, &o->grace_s) != 0) {
        run_msg("RCOLL_RUN_GRACE='%s' is not a number of seconds", env);
        return -1;
    }

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;

        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0')
            break;                              /* first word of the command */
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return 1;
        if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(arg, "--no-prefix") == 0) {
            o->prefix = 0;
        } else if (run_opt_is(arg, "-n") || run_opt_is(arg, "--nranks")) {
            const char *name = arg[1] == '-' ? "--nranks" : "-n";
            char *end;
            long n;

            if (!(val = run_opt_value(argc, argv, &i, name)))
                return -1;
            errno = 0;
            n = strtol(val, &end, 10);
            if (errno || end == val || *end != '\0' || n < 1 || n > RUN_MAX_RANKS) {
                run_msg("-n needs a rank count between 1 and %d, got '%s'", RUN_MAX_RANKS,
                        val);
                return -1;
            }
            o->nranks = (int)n;
        } else if (run_opt_is(arg, "--grace") || run_opt_is(arg, "--timeout")) {
            const char *name = arg[2] == 'g' ? "--grace" : "--timeout";

            if (!(val = run_opt_value(argc, argv, &i, name)))
                return -1;
            if (run_parse_seconds(val, name[2] == 'g' ? &o->grace_s : &o->timeout_s) != 0) {
                run_msg("%s needs a number of seconds >= 0, got '%s'", name, val);
                return -1;
            }
        } else {
            run_msg("unknown option '%s'; see rcoll-run --help", arg);
            return -1;
        }
    }

    if (o->nranks == 0) {
        run_msg("missing -n N (the number of ranks); see rcoll-run --help");
        return -1;
    }
    if (i >= argc) {
        run_msg("no command given; see rcoll-run --help");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

/* A TCP port free right now on 127.0.0.1; rank 0's library binds it a moment later. */
/* 1 when port p on 127.0.0.1 can be bound now. */
static int run_port_free(int p)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)p);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* A free port on 127.0.0.1 for a listener a rank opens later (the root, torch's store).
 * Below the kernel's ephemeral range when it has room there: no connect() is given such a
 * port, so nothing takes it before the rank binds it, which a port from the range (what
 * binding port 0 gives) may lose to any outgoing connection meanwhile (CI saw torch's
 * store fail with "Address already in use").  Else what binding port 0 gives. */
/* Ports handed out so far in this job (the root's, torch's store's, the relays'): never
 * handed out twice, whatever the random draws. */
static int run_given[2];
static int run_given_relays[2]; /* first, count */

static int run_port_given(int p)
{
    return p == run_given[0] || p == run_given[1] ||
           (run_given_relays[1] && p >= run_given_relays[0] &&
            p < run_given_relays[0] + run_given_relays[1]);
}

static int run_find_port(int *port_p)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    int base = lo - 16384 < 10000 ? 10000 : lo - 16384;
    /* One sequence per process: successive calls draw different ports. */
    static unsigned seed;
    if (!seed)
        seed = ((unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL)) | 1u;
    for (int t = 0; lo - base >= 1000 && t < 64; t++) {
        int p = base + (int)(rand_r(&seed) % (unsigned)(lo - base));
        if (!run_port_given(p) && run_port_free(p)) {
            *port_p = p;
            return 0;
        }
    }
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    close(fd);
    *port_p = ntohs(sa.sin_port);
    return 0;
}

/* 32 random bytes as 64 lowercase hex characters. */
static int run_make_secret(char hex_p[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[32];
    size_t got = 0;

    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++) {
        hex_p[2 * i] = digits[raw[i] >> 4];
        hex_p[2 * i + 1] = digits[raw[i] & 15];
    }
    hex_p[64] = '\0';
    return 0;
}

/* Self-pipe: the handler only records which signal came; the poll loop acts on it. */
static void run_on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;

    if (write(run_sig_pipe[1], &b, 1) < 0) {
        /* Pipe full: the loop is already awake and reaps on every pass anyway. */
    }
    errno = saved;
}

static int run_buf_reserve(run_buf_t *b, size_t extra)
{
    size_t need = b->len + extra, cap = b->cap ? b->cap : 256;
    char *p;

    if (need <= b->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    if (!(p = realloc(b->data, cap)))
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static void run_buf_append(run_buf_t *b, const void *src, size_t n)
{
    if (n == 0 || run_buf_reserve(b, n) != 0)
        return;                      /* out of memory: the line is dropped */
    memcpy(b->data + b->len, src, n);
    b->len += n;
}

/* Writes everything unless the reader is gone; a lost reader only loses output. */
static void run_write_all(int fd, const char *p, size_t n)
{
    while (n > 0 && !run_fd_broken[fd]) {
        ssize_t w = write(fd, p, n);

        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            /* We inherited a non-blocking stdout: wait a bounded time for room. */
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            if (poll(&pfd, 1, RUN_POLL_CAP_MS) <= 0)
                run_fd_broken[fd] = 1;
        } else {
            run_fd_broken[fd] = 1;
        }
    }
}

/*
 * Relays every complete line held in s->pend (and, at EOF or past RUN_LINE_MAX, the
 * incomplete rest) as prefix + line + '\n', in one write.
 */
static void run_stream_relay(run_stream_t *s, int rank, const run_opts_t *o, int at_eof)
{
    char prefix[24];
    size_t start = 0, plen = 0;

    if (o->prefix)
        plen = (size_t)snprintf(prefix, sizeof(prefix), "[%d] ", rank);
    run_outbuf.len = 0;
    while (start < s->pend.len) {
        char *nl = memchr(s->pend.data + start, '\n', s->pend.len - start);
        size_t end, rest = s->pend.len - start;

        if (nl)
            end = (size_t)(nl - s->pend.data);
        else if (at_eof || rest >= RUN_LINE_MAX)
            end = s->pend.len;
        else
            break;
        if (s->keep) {
            run_buf_append(&run_outbuf, prefix, plen);
            run_buf_append(&run_outbuf, s->pend.data + start, end - start);
            run_buf_append(&run_outbuf, "\n", 1);
        }
        start = nl ? end + 1 : end;
    }
    if (start > 0) {
        memmove(s->pend.data, s->pend.data + start, s->pend.len - start);
        s->pend.len -= start;
    }
    if (run_outbuf.len > 0)
        run_write_all(s->out_fd, run_outbuf.data, run_outbuf.len);
}

static void run_stream_close(run_stream_t *s, int rank, const run_opts_t *o)
{
    if (s->fd < 0)
        return;
    run_stream_relay(s, rank, o, 1);
    close(s->fd);
    s->fd = -1;
    free(s->pend.data);
    s->pend.data = NULL;
    s->pend.len = s->pend.cap = 0;
}

/*
 * Reads up to max_chunks chunks (stops early when the pipe is empty) and relays the
 * complete lines. Closes the stream at EOF or on a read error.
 */
static void run_stream_read(run_stream_t *s, int rank, const run_opts_t *o, int max_chunks)
{
    for (int c = 0; c < max_chunks && s->fd >= 0; c++) {
        ssize_t n;

        if (run_buf_reserve(&s->pend, RUN_CHUNK) != 0) {
            run_msg("out of memory buffering rank %d's output", rank);
            run_stream_close(s, rank, o);
            return;
        }
        n = read(s->fd, s->pend.data + s->pend.len, RUN_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            run_stream_close(s, rank, o);
            return;
        }
        s->pend.len += (size_t)n;
        run_stream_relay(s, rank, o, 0);
        /* Our reader left (`rcoll-run ... | head`): let the rank see EPIPE too. */
        if (run_fd_broken[s->out_fd])
            run_stream_close(s, rank, o);
    }
}

/*
 * In the child after fork(): becomes rank `rank` and execs the command; never returns.
 * Only stdin, the two pipe ends and nothing else survive into the command.
 */
#define RUN_JOIN_FD 3 /* where a rank finds its end of the join socket (RCOLL_RUN_JOIN_FD) */

static void run_exec_rank(const run_opts_t *o, int rank, int out_w, int err_w, int join_w,
                          const struct rlimit *nofile)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD };
    char num[16];
    sigset_t none;
    int e;

    /*
     * Default dispositions: a shell that started us in the background leaves SIGINT
     * ignored, and an ignored signal can be neither trapped by a shell rank nor
     * delivered by our forwarding.
     */
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Own process group: a terminal's Ctrl-C reaches only rcoll-run, which forwards it. */
    setpgid(0, 0);

    /* Only rank 0 reads our stdin, and never a terminal (it would stop on SIGTTIN). */
    if (rank != 0 || isatty(0)) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && fd != 0) {
            dup2(fd, 0);
            close(fd);
        }
    }
    if (dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        _exit(127);
    /* The join socket on a fixed number, inherited across exec (dup2 clears FD_CLOEXEC). */
    if (join_w == RUN_JOIN_FD ? fcntl(join_w, F_SETFD, 0) < 0 : dup2(join_w, RUN_JOIN_FD) < 0)
        _exit(127);
    /* Also closes anything our own parent leaked to us without O_CLOEXEC. */
    if (close_range(RUN_JOIN_FD + 1, ~0U, 0) != 0) {
        for (int fd = RUN_JOIN_FD + 1; fd < 65536 && (rlim_t)fd < nofile->rlim_cur; fd++)
            close(fd);
    }
    setrlimit(RLIMIT_NOFILE, nofile);

    snprintf(num, sizeof(num), "%d", rank);
    setenv("RCOLL_RANK", num, 1);
    setenv("RCOLL_LOCAL_RANK", num, 1);
    if (o->torch_env) { /* torch.distributed's env:// variables, for any backend */
        setenv("RANK", num, 1);
        setenv("LOCAL_RANK", num, 1);
    }
    snprintf(num, sizeof(num), "%d", RUN_JOIN_FD);
    setenv("RCOLL_RUN_JOIN_FD", num, 1);
    execvp(o->cmd[0], o->cmd);
    e = errno;
    dprintf(2, "rcoll-run: cannot execute '%s': %s\n", o->cmd[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
}

/* count consecutive free ports from *port_p (run_find_port's kind); -1 when none found. */
static int run_find_ports(int count, int *port_p)
{
    for (int t = 0; t < 32; t++) {
        int p, ok = 1;
        if (run_find_port(&p) != 0)
            return -1;
        for (int i = 1; i < count && ok; i++)
            ok = p + i < 65536 && !run_port_given(p + i) && run_port_free(p + i);
        if (ok) {
            *port_p = p;
            run_given_relays[0] = p;
            run_given_relays[1] = count;
            return 0;
        }
    }
    errno = EADDRINUSE;
    return -1;
}

/* Ranks per relay of the bootstrap tree that rcoll-run sets up for jobs above
 * RUN_RELAYS_FROM ranks (RCOLL_BS_RELAYS, unless the caller set that variable). */
#define RUN_RELAY_BLOCK 32
#define RUN_RELAYS_FROM 64

/* Sets the environment every rank shares; per-rank values are set in the child. */
static int run_setup_env(const run_opts_t *o)
{
    char val[80];
    const char *s;
    int port;

    if (run_find_port(&port) != 0) {
        run_msg("cannot find a free TCP port on 127.0.0.1: %s", strerror(errno));
        return -1;
    }
    run_given[0] = port;
    snprintf(val, sizeof(val), "127.0.0.1:%d", port);
    setenv("RCOLL_ROOT", val, 1);
    snprintf(val, sizeof(val), "%d", o->nranks);
    setenv("RCOLL_NRANKS", val, 1);
    setenv("RCOLL_LOCAL_SIZE", val, 1);
    if (!(s = getenv("RCOLL_SECRET")) || !*s) {
        if (run_make_secret(val) != 0) {
            run_msg("getrandom failed: %s", strerror(errno));
            return -1;
        }
        setenv("RCOLL_SECRET", val, 1);
    }
    if (!(s = getenv("RCOLL_SOCKET_IFNAME")) || !*s)
        setenv("RCOLL_SOCKET_IFNAME", "lo", 1);
    /* A large job bootstraps through a tree of relays (docs/scale.md): the root then accepts
     * RUN_RELAY_BLOCK ranks and a few relays instead of every rank. */
    if (o->nranks > RUN_RELAYS_FROM && !getenv("RCOLL_BS_RELAYS")) {
        int nrelays = (o->nranks + RUN_RELAY_BLOCK - 1) / RUN_RELAY_BLOCK - 1;
        if (run_find_ports(nrelays, &port) != 0) {
            run_msg("cannot find %d free consecutive TCP ports on 127.0.0.1 for the bootstrap "
                    "relays (set RCOLL_BS_RELAYS= to go without): %s", nrelays, strerror(errno));
            return -1;
        }
        snprintf(val, sizeof(val), "%d@127.0.0.1:%d", nrelays, port);
        setenv("RCOLL_BS_RELAYS", val, 1);
    }
    /* torch.distributed's env:// rendezvous (its TCPStore on rank 0): set unless the caller
     * launched with its own, so torch programs run under rcoll-run with any backend */
    if (o->torch_env) {
        if (run_find_port(&port) != 0) {
            run_msg("cannot find a free TCP port on 127.0.0.1: %s", strerror(errno));
            return -1;
        }
        run_given[1] = port;
        snprintf(val, sizeof(val), "%d", port);
        setenv("MASTER_PORT", val, 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        snprintf(val, sizeof(val), "%d", o->nranks);
        setenv("WORLD_SIZE", val, 1);
        setenv("LOCAL_WORLD_SIZE", val, 1);
    }
    return 0;
}

/* Starts one rank; on failure prints why and returns -1 (nothing is left open). */
static int run_spawn(const run_opts_t *o, run_rank_t *r, int rank, const struct rlimit *nofile)
{
    int po[2], pe[2], pj[2];
    pid_t pid;

    if (pipe2(po, O_CLOEXEC) != 0)
        goto err;
    if (pipe2(pe, O_CLOEXEC) != 0)
        goto err_close_out;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pj) != 0)
        goto err_close_err;
    pid = fork();
    if (pid < 0)
        goto err_close_join;
    if (pid == 0)
        run_exec_rank(o, rank, po[1], pe[1], pj[1], nofile);

    /* Also here, so the group exists before we might signal it. */
    setpgid(pid, pid);
    close(po[1]);
    close(pe[1]);
    close(pj[1]);
    fcntl(pj[0], F_SETFL, O_NONBLOCK);
    r->join_fd = pj[0];
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    r->pid = pid;
    r->running = 1;
    r->out.fd = po[0];
    r->out.out_fd = 1;
    r->out.keep = !o->quiet || rank == 0;
    r->err.fd = pe[0];
    r->err.out_fd = 2;
    r->err.keep = 1;
    return 0;

err_close_join:
    close(pj[0]);
    close(pj[1]);
err_close_err:
    close(pe[0]);
    close(pe[1]);
err_close_out:
    close(po[0]);
    close(po[1]);
err:
    run_msg("cannot start rank %d: %s", rank, strerror(errno));
    return -1;
}

/* What the rank told us over its join socket ('S' began to join, 'J' joined, 'F' failed). */
static void run_join_read(run_rank_t *r)
{
    char buf[16];
    ssize_t n;

    while (r->join_fd >= 0 && (n = read(r->join_fd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            n = 0;
        }
        for (ssize_t k = 0; k < n; k++) {
            r->started |= buf[k] == 'S' || buf[k] == 'J' || buf[k] == 'F';
            r->joined |= buf[k] == 'J';
        }
        if (n == 0)
            break;
    }
    if (r->join_fd >= 0) { /* end of stream (or an error): nothing more will come */
        close(r->join_fd);
        r->join_fd = -1;
    }
}

static void run_signal_ranks(run_rank_t *ranks, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (ranks[i].running)
            kill(-ranks[i].pid, sig);
}

/* Running ranks as "0-3,7" into buf. */
static void run_list_running(const run_rank_t *ranks, int n, char *buf, size_t size)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && off + 24 < size; i++) {
        int j = i;

        if (!ranks[i].running)
            continue;
        while (j + 1 < n && ranks[j + 1].running)
            j++;
        if (j == i)
            off += (size_t)snprintf(buf + off, size - off, "%s%d", off ? "," : "", i);
        else
            off += (size_t)snprintf(buf + off, size - off, "%s%d-%d", off ? "," : "", i, j);
        i = j;
    }
}

static int run_status_failed(int st)
{
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int run_status_code(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run_report_failure(int rank, pid_t pid, int st)
{
    if (WIFEXITED(st))
        run_msg("rank %d (pid %d) exited with status %d", rank, (int)pid, WEXITSTATUS(st));
    else
        run_msg("rank %d (pid %d) killed by signal %d (%s)%s", rank, (int)pid, WTERMSIG(st),
                strsignal(WTERMSIG(st)), WCOREDUMP(st) ? " (core dumped)" : "");
}

/* Makes sure fds 0-2 exist, so that no pipe we create lands on them. */
static void run_fix_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (nfd >= 0 && nfd != fd) {
                dup2(nfd, fd);
                close(nfd);
            }
        }
    }
}

int main(int argc, char **argv)
{
    static const int fwd_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGCHLD };
    static char list[8192];
    run_opts_t o;
    run_rank_t *ranks;
    struct rlimit nofile, raised;
    struct sigaction sa;
    sigset_t block, orig_mask;
    run_phase_t phase = PH_RUN;
    int64_t deadline = 0, job_deadline = 0, grace_ms;
    int nstarted = 0, nrunning = 0, nsignals = 0, first_fail = -1, first_status = 0;
    int timed_out = 0, launch_failed = 0, gave_up = 0, rc;

    run_fix_std_fds();
    rc = run_parse_args(argc, argv, &o);
    if (rc > 0) {
        run_usage(stdout);
        return 0;
    }
    if (rc < 0)
        return RUN_EXIT_USAGE;
    grace_ms = (int64_t)(o.grace_s * 1000.0);

    /* Three fds per rank: raise the soft fd limit if needed; ranks get the old one back. */
    getrlimit(RLIMIT_NOFILE, &nofile);
    raised = nofile;
    if (raised.rlim_cur != RLIM_INFINITY && raised.rlim_cur < (rlim_t)(3 * o.nranks + 32)) {
        raised.rlim_cur = raised.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) != 0 ||
            raised.rlim_cur < (rlim_t)(3 * o.nranks + 32)) {
            run_msg("%d ranks need %d open files, the limit is %llu (ulimit -n)", o.nranks,
                    3 * o.nranks + 32, (unsigned long long)nofile.rlim_max);
            return RUN_EXIT_LAUNCHER;
        }
    }

    if (run_setup_env(&o) != 0)
        return RUN_EXIT_LAUNCHER;
    if (pipe2(run_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        run_msg("pipe2: %s", strerror(errno));
        return RUN_EXIT_LAUNCHER;
    }
    if (!(ranks = calloc((size_t)o.nranks, sizeof(*ranks)))) {
        run_msg("out of memory");
        return RUN_EXIT_LAUNCHER;
    }

    /* Signals stay blocked while forking so a child never runs our handler. */
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        sigaddset(&block, fwd_sigs[i]);
    sigprocmask(SIG_BLOCK, &block, &orig_mask);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = run_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        sigaction(fwd_sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    for (int i = 0; i < o.nranks; i++) {
        if (run_spawn(&o, &ranks[i], i, &nofile) != 0) {
            launch_failed = 1;
            break;
        }
        nstarted++;
        nrunning++;
    }
    if (launch_failed) {
        run_signal_ranks(ranks, nstarted, SIGKILL);
        phase = PH_KILL;
        deadline = run_now_ms() + RUN_KILL_WAIT_MS;
    }
    if (o.timeout_s > 0)
        job_deadline = run_now_ms() + (int64_t)(o.timeout_s * 1000.0);
    sigprocmask(SIG_SETMASK, &orig_mask, NULL);

    while (nrunning > 0) {
        struct pollfd pfds[1 + 3 * RUN_MAX_RANKS];
        run_stream_t *pstreams[1 + 3 * RUN_MAX_RANKS];
        int prank[1 + 3 * RUN_MAX_RANKS];
        int npfd = 0, wait_ms = RUN_POLL_CAP_MS, st, ready;
        int64_t now = run_now_ms();
        pid_t pid;

        /* Deadlines first: each moves the job one step closer to the end. */
        if (job_deadline && now >= job_deadline && phase < PH_TERM) {
            run_list_running(ranks, nstarted, list, sizeof(list));
            run_msg("timeout after %g s, killing ranks still running: %s", o.timeout_s, list);
            timed_out = first_fail < 0;
            run_signal_ranks(ranks, nstarted, SIGTERM);
            phase = PH_TERM;
            deadline = now + RUN_TERM_WAIT_MS;
        } else if (phase == PH_GRACE && now >= deadline) {
            run_list_running(ranks, nstarted, list, sizeof(list));
            run_msg("grace period of %g s over, terminating ranks still running: %s",
                    o.grace_s, list);
            run_signal_ranks(ranks, nstarted, SIGTERM);
            phase = PH_TERM;
            deadline = now + RUN_TERM_WAIT_MS;
        } else if (phase == PH_TERM && now >= deadline) {
            run_list_running(ranks, nstarted, list, sizeof(list));
            run_msg("sending SIGKILL to ranks still running: %s", list);
            run_signal_ranks(ranks, nstarted, SIGKILL);
            phase = PH_KILL;
            deadline = now + RUN_KILL_WAIT_MS;
        } else if (phase == PH_KILL && now >= deadline) {
            run_list_running(ranks, nstarted, list, sizeof(list));
            run_msg("ranks %s did not exit after SIGKILL, giving up", list);
            gave_up = 1;
            break;
        }
        if (phase != PH_RUN && deadline - now < wait_ms)
            wait_ms = deadline - now < 0 ? 0 : (int)(deadline - now);
        if (job_deadline && phase < PH_TERM && job_deadline - now < wait_ms)
            wait_ms = job_deadline - now < 0 ? 0 : (int)(job_deadline - now);

        pfds[npfd].fd = run_sig_pipe[0];
        pfds[npfd].events = POLLIN;
        pfds[npfd].revents = 0;
        prank[npfd] = -1;
        pstreams[npfd++] = NULL;
        for (int i = 0; i < nstarted; i++) {
            if (ranks[i].join_fd >= 0) {
                pfds[npfd].fd = ranks[i].join_fd;
                pfds[npfd].events = POLLIN;
                pfds[npfd].revents = 0;
                prank[npfd] = i;
                pstreams[npfd++] = NULL;
            }
            run_stream_t *ss[2] = { &ranks[i].out, &ranks[i].err };
            for (int k = 0; k < 2; k++) {
                if (ss[k]->fd < 0)
                    continue;
                pfds[npfd].fd = ss[k]->fd;
                pfds[npfd].events = POLLIN;
                pfds[npfd].revents = 0;
                prank[npfd] = i;
                pstreams[npfd++] = ss[k];
            }
        }
        ready = poll(pfds, (nfds_t)npfd, wait_ms);
        if (ready < 0 && errno != EINTR) {
            run_msg("poll: %s", strerror(errno));
            run_signal_ranks(ranks, nstarted, SIGKILL);
            launch_failed = 1;
            break;
        }

        /* Output before reaping, so that a rank's last lines precede our report. */
        for (int p = 1; ready > 0 && p < npfd; p++) {
            if (!(pfds[p].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (pstreams[p])
                run_stream_read(pstreams[p], prank[p], &o, 1);
            else
                run_join_read(&ranks[prank[p]]);
        }

        /* Read the self-pipe on every pass (it is non-blocking): EINTR also means a signal. */
        {
            unsigned char sigs[64];
            ssize_t n;

            while ((n = read(run_sig_pipe[0], sigs, sizeof(sigs))) > 0) {
                for (ssize_t k = 0; k < n; k++) {
                    if (sigs[k] == SIGCHLD)
                        continue;                    /* reaped below regardless */
                    now = run_now_ms();
                    if (++nsignals == 1 && phase < PH_TERM) {
                        run_signal_ranks(ranks, nstarted, sigs[k]);
                        phase = PH_TERM;
                        deadline = now + (grace_ms > RUN_TERM_WAIT_MS ? grace_ms
                                                                      : RUN_TERM_WAIT_MS);
                    } else if (phase != PH_KILL) {
                        run_msg("second signal: sending SIGKILL to every rank");
                        run_signal_ranks(ranks, nstarted, SIGKILL);
                        phase = PH_KILL;
                        deadline = now + RUN_KILL_WAIT_MS;
                    }
                }
            }
        }

        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            int i;

            for (i = 0; i < nstarted && ranks[i].pid != pid; i++)
                ;
            if (i == nstarted || !ranks[i].running)
                continue;
            ranks[i].running = 0;
            nrunning--;
            run_join_read(&ranks[i]);
            if (ranks[i].join_fd >= 0) {
                close(ranks[i].join_fd);
                ranks[i].join_fd = -1;
            }
            ranks[i].exited_early = !run_status_failed(st) && !ranks[i].started;
            /*
             * The rank is gone, so what it wrote is already in the pipes. Take that and
             * close: a background grandchild may hold the pipe open for much longer.
             */
            run_stream_read(&ranks[i].out, i, &o, RUN_DRAIN_CHUNKS);
            run_stream_read(&ranks[i].err, i, &o, RUN_DRAIN_CHUNKS);
            run_stream_close(&ranks[i].out, i, &o);
            run_stream_close(&ranks[i].err, i, &o);
            if (!run_status_failed(st) || first_fail >= 0 || timed_out || launch_failed)
                continue;
            first_fail = i;
            first_status = st;
            run_report_failure(i, pid, st);
            if (phase == PH_RUN) {
                phase = PH_GRACE;
                deadline = run_now_ms() + grace_ms;
            }
        }

        /* A rank that exited (status 0) without beginning to join, while others are joining:
         * they would wait for it until RCOLL_TIMEOUT.  End the job now, naming it. */
        if (phase == PH_RUN && first_fail < 0 && !timed_out && !launch_failed) {
            int early = -1, waiting = 0;
            for (int i = 0; i < nstarted; i++) {
                if (ranks[i].exited_early && early < 0)
                    early = i;
                waiting += ranks[i].started && !ranks[i].joined && ranks[i].running;
            }
            if (early >= 0 && waiting) {
                run_list_running(ranks, nstarted, list, sizeof(list));
                run_msg("rank %d (pid %d) exited with status 0 before it began to join the job "
                        "(rcoll_comm_init_env); ranks %s would wait for it until RCOLL_TIMEOUT: "
                        "terminating them", early, (int)ranks[early].pid, list);
                first_fail = early;
                first_status = 1 << 8; /* reported as exit status 1 */
                run_signal_ranks(ranks, nstarted, SIGTERM);
                phase = PH_TERM;
                deadline = run_now_ms() + RUN_TERM_WAIT_MS;
            }
        }
    }

    for (int i = 0; i < nstarted; i++) {
        run_stream_close(&ranks[i].out, i, &o);
        run_stream_close(&ranks[i].err, i, &o);
        if (ranks[i].join_fd >= 0)
            close(ranks[i].join_fd);
    }
    /* After an abnormal end, also kill what the ranks left behind in their groups. */
    if (phase != PH_RUN)
        for (int i = 0; i < nstarted; i++)
            kill(-ranks[i].pid, SIGKILL);
    free(ranks);
    free(run_outbuf.data);

    if (launch_failed)
        return RUN_EXIT_LAUNCHER;
    if (timed_out)
        return RUN_EXIT_TIMEOUT;
    if (first_fail >= 0)
        return run_status_code(first_status);
    return gave_up ? RUN_EXIT_LAUNCHER : 0;
}
