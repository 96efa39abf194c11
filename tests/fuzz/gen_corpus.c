/*
 * gen_corpus.c - writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>):
 * one valid message of each kind, laid out by the same structs the library sends, in the
 * input format of each target (fuzz_<target>.c).  The topology seeds are copies of
 * tests/fixtures (gen_corpus.sh).  Usage: fuzz_gen_corpus DIR
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#include "core/bootstrap_wire.h"
#include "core/config.h"
#include "core/sig.h"
#include "rcoll_build.h"
#include "transport/shm.h"
#include "transport/tcp.h"
#if RCOLL_HAVE_VERBS
#include "transport/verbs.h"
#endif

static const char *root;

/* A growing input: a selector byte and the parts of one case. */
typedef struct {
    unsigned char b[8192];
    size_t n;
} seed_t;

static void put(seed_t *s, const void *p, size_t n)
{
    if (s->n + n > sizeof(s->b)) abort();
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

static void put8(seed_t *s, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(s, &c, 1);
}

static void save(const char *target, const char *name, const seed_t *s)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) abort();
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) abort();
}

static bs_hdr_t bs_hdr(int type, size_t len)
{
    return (bs_hdr_t){.magic = BS_MAGIC, .version = BS_VERSION, .type = (uint16_t)type,
                      .len = (uint32_t)len};
}

static rcoll_peer_info_t peer(int k)
{
    rcoll_peer_info_t p;
    memset(&p, 0, sizeof(p));
    snprintf(p.hostname, sizeof(p.hostname), "node%d", k);
    p.host_hash = p.machine_hash = 0x1234;
    p.pid = 1000 + k;
    p.cpus[0] = 0xffu << (8 * k);
    return p;
}

static rcoll_bs_sig_t bs_sig(void)
{
    rcoll_sig_t s = {.seq = 7, .count = 1024, .kind = 0, .dt = 7, .op = 0, .root = -1,
                     .alg = 1};
    rcoll_bs_sig_t g = {.ctx = 0, .rank = 1};
    memcpy(g.sig, &s, sizeof(s));
    return g;
}

static bs_note_t bs_note(int culprit, int status, const char *text)
{
    bs_note_t n;
    memset(&n, 0, sizeof(n));
    n.culprit = culprit;
    n.status = status;
    snprintf(n.text, sizeof(n.text), "%s", text);
    return n;
}

static void gen_bootstrap(void)
{
    seed_t s = {.n = 0};
    bs_hello_t h;
    memset(&h, 0, sizeof(h));
    h.rank = 1;
    h.nranks = 2;
    h.info = peer(1);
    bs_hdr_t hd = bs_hdr(BS_HELLO, sizeof(h));
    put8(&s, 0), put(&s, &hd, sizeof(hd)), put(&s, &h, sizeof(h));
    save("bootstrap", "hello", &s);

    rcoll_bs_sig_t g = bs_sig();
    int kinds[] = {BS_SIG, BS_STALL};
    const char *names[] = {"to_root_sig", "to_root_stall"};
    for (int i = 0; i < 2; i++) {
        s.n = 0;
        hd = bs_hdr(kinds[i], sizeof(g));
        put8(&s, 1), put(&s, &hd, sizeof(hd)), put(&s, &g, sizeof(g));
        save("bootstrap", names[i], &s);
    }
    s.n = 0;
    hd = bs_hdr(BS_BYE, 0);
    put8(&s, 1), put(&s, &hd, sizeof(hd));
    save("bootstrap", "to_root_bye", &s);
    bs_note_t n = bs_note(1, RCOLL_ERR_TIMEOUT, "rank 0 waited 30 s for rank 1");
    s.n = 0;
    hd = bs_hdr(BS_ABORT, sizeof(n));
    put8(&s, 1), put(&s, &hd, sizeof(hd)), put(&s, &n, sizeof(n));
    save("bootstrap", "to_root_abort", &s);
    s.n = 0;
    hd = bs_hdr(BS_FAIL, sizeof(n));
    put8(&s, 2), put(&s, &hd, sizeof(hd)), put(&s, &n, sizeof(n));
    save("bootstrap", "to_rank_fail", &s);
    s.n = 0;
    hd = bs_hdr(BS_SIG, sizeof(g));
    put8(&s, 2), put(&s, &hd, sizeof(hd)), put(&s, &g, sizeof(g));
    save("bootstrap", "to_rank_sig", &s);

    char area[2 * RCOLL_SIG_ANNOUNCE_BYTES];
    memset(area, 0, sizeof(area));
    rcoll_sig_t sig;
    memcpy(&sig, g.sig, sizeof(sig));
    rcoll_sig_announce(area, 0, &sig);
    s.n = 0;
    put8(&s, 3), put(&s, area, sizeof(area));
    save("bootstrap", "announce", &s);
    /* the rank table's wire form: 4 ranks, 2 a host */
    rcoll_peer_info_t recs[4];
    for (int k = 0; k < 4; k++) recs[k] = peer(k / 2);
    for (int k = 0; k < 4; k++) recs[k].pid = 2000 + k;
    char table[4 * (BS_REC_MAP + sizeof(rcoll_peer_info_t))];
    size_t bytes = rcoll_bs_table_encode(recs, 4, table);
    s.n = 0;
    put8(&s, 4), put8(&s, 3), put(&s, table, bytes);
    save("bootstrap", "table4", &s);
}

static void gen_bs_join(void)
{
    seed_t s = {.n = 0};
    for (int nranks = 1; nranks <= 2; nranks++) {
        s.n = 0;
        put8(&s, (unsigned)nranks - 1);
        rcoll_peer_info_t recs[2];
        char table[2 * (BS_REC_MAP + sizeof(rcoll_peer_info_t))];
        for (int k = 0; k < nranks; k++) recs[k] = peer(k);
        size_t bytes = rcoll_bs_table_encode(recs, nranks, table);
        bs_hdr_t hd = bs_hdr(BS_TABLE, bytes);
        put(&s, &hd, sizeof(hd));
        put(&s, table, bytes);
        if (nranks == 2) { /* then a relayed signature and a failure */
            rcoll_bs_sig_t g = bs_sig();
            hd = bs_hdr(BS_SIG, sizeof(g));
            put(&s, &hd, sizeof(hd)), put(&s, &g, sizeof(g));
            bs_note_t n = bs_note(1, RCOLL_ERR_REMOTE, "rank 1 (node1 pid 1001) exited");
            hd = bs_hdr(BS_FAIL, sizeof(n));
            put(&s, &hd, sizeof(hd)), put(&s, &n, sizeof(n));
        }
        save("bs_join", nranks == 1 ? "table1" : "table2_sig_fail", &s);
    }
    /* Host names that fill their field with no terminator (rank code must end them). */
    {
        rcoll_peer_info_t recs[2] = {peer(0), peer(1)};
        for (int k = 0; k < 2; k++) memset(recs[k].hostname, 'h', sizeof(recs[k].hostname));
        char table[2 * (BS_REC_MAP + sizeof(rcoll_peer_info_t))];
        size_t bytes = rcoll_bs_table_encode(recs, 2, table);
        bs_hdr_t hd = bs_hdr(BS_TABLE, bytes);
        s.n = 0;
        put8(&s, 1), put(&s, &hd, sizeof(hd)), put(&s, table, bytes);
        save("bs_join", "regress-hostname-unterminated", &s);
    }
    bs_note_t n = bs_note(-1, RCOLL_ERR_AUTH, "wrong job secret");
    bs_hdr_t hd = bs_hdr(BS_NACK, sizeof(n));
    s.n = 0;
    put8(&s, 1), put(&s, &hd, sizeof(hd)), put(&s, &n, sizeof(n));
    save("bs_join", "nack", &s);
    n = bs_note(3, RCOLL_ERR_TIMEOUT, "rank 3 never joined the bootstrap within 30 s");
    hd = bs_hdr(BS_FAIL, sizeof(n));
    s.n = 0;
    put8(&s, 3), put(&s, &hd, sizeof(hd)), put(&s, &n, sizeof(n));
    save("bs_join", "fail", &s);
}

static rcoll_tcp_handle_t tcp_handle(void)
{
    rcoll_tcp_handle_t h;
    memset(&h, 0, sizeof(h));
    h.magic = RCOLL_TCP_HANDLE_MAGIC;
    h.version = RCOLL_TCP_VERSION;
    h.nonce = FZ_NONCE;
    h.stripe_min = 1 << 20;
    h.nsocks = 4;
    h.addr.sin.sin_family = AF_INET;
    h.addr.sin.sin_port = htons(5000);
    h.addr.sin.sin_addr.s_addr = htonl(0x0a000001);
    return h;
}

static void gen_tcp(void)
{
    seed_t s = {.n = 0};
    rcoll_tcp_hello_t m = {RCOLL_TCP_HELLO_MAGIC, RCOLL_TCP_VERSION, FZ_NONCE, 42, 2, 4, 0, 0};
    put8(&s, 0), put8(&s, 3), put(&s, &m, sizeof(m));
    save("tcp", "hello", &s);
    rcoll_tcp_frame_t fr = {RCOLL_TCP_FRAME_MAGIC, 5, 4096};
    uint64_t tag = 5, cap = 1 << 20;
    s.n = 0;
    put8(&s, 1), put(&s, &fr, sizeof(fr)), put(&s, &tag, sizeof(tag)), put(&s, &cap, sizeof(cap));
    save("tcp", "frame", &s);
    rcoll_tcp_handle_t h = tcp_handle();
    uint64_t len = (3 << 20) + 5;
    s.n = 0;
    put8(&s, 2), put(&s, &h, sizeof(h)), put(&s, &len, sizeof(len));
    save("tcp", "split", &s);
}

static void gen_shm(void)
{
    seed_t s = {.n = 0};
    rcoll_shm_hello_t h = {.magic = RCOLL_SHM_HELLO_MAGIC, .version = RCOLL_SHM_VERSION,
                           .nonce = FZ_NONCE, .seg_bytes = shm_seg_size(64, 65536)};
    put8(&s, 0), put8(&s, sizeof(h)), put(&s, &h, sizeof(h));
    save("shm", "hello", &s);
    rcoll_shm_seg_t *seg = calloc(1, sizeof(*seg));
    seg->magic = RCOLL_SHM_SEG_MAGIC;
    seg->version = RCOLL_SHM_VERSION;
    seg->nslots = 64;
    seg->slot_bytes = 65536;
    uint64_t bytes = shm_seg_size(64, 65536);
    seg->seg_bytes = bytes;
    s.n = 0;
    put8(&s, 1), put(&s, &bytes, sizeof(bytes)), put(&s, seg, sizeof(*seg));
    save("shm", "segment", &s);
    free(seg);
}

static void gen_handle(void)
{
    seed_t s = {.n = 0};
    unsigned char hb[RCOLL_TRANSPORT_HANDLE_BYTES];
    memset(hb, 0, sizeof(hb));
    rcoll_tcp_handle_t t = tcp_handle();
    memcpy(hb, &t, sizeof(t));
    put8(&s, 0), put(&s, hb, sizeof(hb));
    save("handle", "tcp", &s);
    memset(hb, 0, sizeof(hb));
    rcoll_shm_handle_t h;
    memset(&h, 0, sizeof(h));
    h.magic = RCOLL_SHM_HANDLE_MAGIC;
    h.version = RCOLL_SHM_VERSION;
    h.nonce = FZ_NONCE;
    snprintf(h.name, sizeof(h.name), "rcoll-shm-1234-1");
    snprintf(h.host, sizeof(h.host), "node0");
    memcpy(hb, &h, sizeof(h));
    s.n = 0;
    put8(&s, 1), put(&s, hb, sizeof(hb));
    save("handle", "shm", &s);
#if RCOLL_HAVE_VERBS
    memset(hb, 0, sizeof(hb));
    rcoll_vrb_handle_t v = {.magic = RCOLL_VRB_HANDLE_MAGIC, .version = RCOLL_VRB_VERSION,
                            .nonce = FZ_NONCE, .addr = t.addr};
    memcpy(hb, &v, sizeof(v));
    s.n = 0;
    put8(&s, 2), put(&s, hb, sizeof(hb));
    save("handle", "verbs", &s);
#endif
}

#if RCOLL_HAVE_VERBS
static void gen_verbs(void)
{
    seed_t s = {.n = 0};
    rcoll_vrb_meta_t m;
    memset(&m, 0, sizeof(m));
    m.magic = RCOLL_VRB_META_MAGIC;
    m.version = RCOLL_VRB_VERSION;
    m.nonce = FZ_NONCE;
    m.nqps = 2;
    m.psn = 0x1234;
    m.qpn[0] = 0x11;
    m.qpn[1] = 0x12;
    m.gid[10] = m.gid[11] = 0xff;
    m.gid[12] = 10;
    m.gid[15] = 1;
    m.mtu = IBV_MTU_1024;
    m.link_layer = IBV_LINK_LAYER_ETHERNET;
    m.gid_type = 1;
    snprintf(m.dev, sizeof(m.dev), "rxe0");
    put(&s, &m, sizeof(m)), put8(&s, 2);
    save("verbs", "record", &s);
}
#endif

static void gen_knobs(void)
{
    size_t nt, idx = 0;
    const rcoll_config_table_t *const *tables = rcoll_config_tables(&nt);
    seed_t s = {.n = 0};
    char name[96];
    for (size_t i = 0; i < nt; i++) {
        for (size_t k = 0; k < tables[i]->count; k++) {
            const rcoll_knob_t *kb = &tables[i]->knobs[k];
            if (kb->type == RCOLL_KNOB_TABLE) continue;
            const char *v = kb->defval;
            /* a value of each form, where the default is empty */
            if (!v[0]) v = kb->type == RCOLL_KNOB_STRING ? "=mlx5_0:1,^eth" : "1";
            s.n = 0;
            put8(&s, idx & 0xff), put8(&s, idx >> 8), put(&s, v, strlen(v));
            snprintf(name, sizeof(name), "%s", kb->name);
            save("knobs", name, &s);
            idx++;
        }
    }
    const char *extra[][2] = {{"size_suffix", "64K"}, {"size_big", "2TB"},
                              {"range", "10.1.0.0/16"}, {"path", " pxb "},
                              {"tuning", "shm_alpha_us = 1.5\nnet_beta_gbps=12 # x\n"}};
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        s.n = 0;
        put8(&s, 0), put8(&s, 0), put(&s, extra[i][1], strlen(extra[i][1]));
        save("knobs", extra[i][0], &s);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    gen_bootstrap();
    gen_bs_join();
    gen_tcp();
    gen_shm();
    gen_handle();
#if RCOLL_HAVE_VERBS
    gen_verbs();
#endif
    gen_knobs();
    return 0;
}
